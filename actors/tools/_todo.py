"""The ``todo`` tool (toolset "todo"): the session's task list, for multi-step work.

The list lives in ``context.workspace.extras["todo"]``: per session, in memory, touched only by
tool coroutines in the reactor thread (no lock, no await between read and write). Every
call answers with the whole list, so the model never acts on a stale picture of it. Ids
count up for the whole session and are never reused, not even after ``clear``.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Literal

import msgspec

from actors.agent import ToolContext, ToolOutput, Workspace

from ._registry import tool

Status = Literal["pending", "in_progress", "done", "cancelled"]

EXTRAS_KEY = "todo"
MAX_ITEMS = 100
MAX_ITEM_CHARS = 500

_MARKS: dict[str, str] = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]", "cancelled": "[-]"}

DESCRIPTION = """\
Keep a task list for this session: plan multi-step work (3 steps or more), then work
through it. Actions: 'add' (items: one or more task descriptions, each starts 'pending'),
'update' (id, and status 'pending' / 'in_progress' / 'done' / 'cancelled', and/or new
content), 'list', 'clear' (empties the list). Keep one item 'in_progress' at a time and
mark items done as soon as they are. Every call answers with the whole list."""


@dataclasses.dataclass
class TodoItem:
    id: int
    content: str
    status: Status = "pending"


@dataclasses.dataclass
class TodoList:
    """One session's list."""

    items: list[TodoItem] = dataclasses.field(default_factory=list)
    next_id: int = 1

    def render(self) -> str:
        if not self.items:
            return "The todo list is empty."
        done = sum(item.status == "done" for item in self.items)
        lines = [f"Todo ({done}/{len(self.items)} done):"]
        lines += [f"{_MARKS[item.status]} {item.id}. {item.content} ({item.status})" for item in self.items]
        return "\n".join(lines)


def todo_list(workspace: Workspace) -> TodoList:
    """The session's list, created on first use."""
    found = workspace.extras.get(EXTRAS_KEY)
    if not isinstance(found, TodoList):
        found = TodoList()
        workspace.extras[EXTRAS_KEY] = found
    return found


class TodoArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    action: Annotated[Literal["add", "update", "list", "clear"], msgspec.Meta(description="What to do.")]
    items: Annotated[list[str] | None, msgspec.Meta(description="add: the new tasks, in order.")] = None
    id: Annotated[int | None, msgspec.Meta(description="update: the item's id.")] = None
    status: Annotated[Status | None, msgspec.Meta(description="update: the item's new status.")] = None
    content: Annotated[str | None, msgspec.Meta(description="update: new wording for the item.")] = None


@tool(name="todo", toolset="todo", description=DESCRIPTION)
async def todo(context: ToolContext, args: TodoArgs) -> ToolOutput:
    todos = todo_list(context.workspace)
    error = _apply(todos, args)
    if error is not None:
        return ToolOutput(content=f"[error] todo: {error}\n\n{todos.render()}", ok=False)
    return ToolOutput(content=todos.render())


def _apply(todos: TodoList, args: TodoArgs) -> str | None:
    """Change ``todos`` as ``args`` says; the reason when refused (then nothing changed)."""
    if args.action == "list":
        return None
    if args.action == "clear":
        todos.items.clear()
        return None
    if args.action == "add":
        texts = [" ".join(text.split()) for text in args.items or []]
        if not texts or not all(texts):
            return "add needs 'items': one or more non-empty task descriptions"
        if too_long := [text for text in texts if len(text) > MAX_ITEM_CHARS]:
            return f"an item is {len(too_long[0]):,} characters long; at most {MAX_ITEM_CHARS} (split it)"
        if len(todos.items) + len(texts) > MAX_ITEMS:
            return f"the list would hold {len(todos.items) + len(texts)} items; at most {MAX_ITEMS} (clear or finish some first)"
        for text in texts:
            todos.items.append(TodoItem(id=todos.next_id, content=text))
            todos.next_id += 1
        return None
    # update
    if args.id is None or (args.status is None and args.content is None):
        return "update needs 'id' and a new 'status' and/or 'content'"
    item = next((item for item in todos.items if item.id == args.id), None)
    if item is None:
        known = ", ".join(str(item.id) for item in todos.items) or "none"
        return f"there is no item {args.id} (ids: {known})"
    if args.content is not None:
        text = " ".join(args.content.split())
        if not text or len(text) > MAX_ITEM_CHARS:
            return f"the new content must be 1 to {MAX_ITEM_CHARS} characters"
        item.content = text
    if args.status is not None:
        item.status = args.status
    return None
