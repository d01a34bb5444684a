"""``delegate_task``: hand up to three tasks to child sessions and get their final answers back.

Only each child's final answer returns to the parent, never its transcript. Children have
their own iteration budget and no delegate / clarify / memory / execute_code tools.
Cancelling the parent's turn cancels the children (see ``actors.agent._delegation``).
"""

from __future__ import annotations

from typing import Annotated

import msgspec
import trio

from actors.agent import ToolContext, ToolOutput, ToolTraits
from actors.agent._delegation import MAX_CHILDREN

from ._registry import tool

CHILD_TIMEOUT = 900.0


class Task(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    goal: Annotated[str, msgspec.Meta(min_length=1, description="What the child should achieve, self-contained.")]
    context: Annotated[str | None, msgspec.Meta(description="Facts from this conversation the child needs.")] = None


class DelegateArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    tasks: Annotated[list[Task], msgspec.Meta(min_length=1, max_length=MAX_CHILDREN, description="One to three independent tasks, run in parallel.")]


@tool(
    name="delegate_task",
    toolset="delegation",
    description=(
        "Run one to three independent sub-tasks in child agents, in parallel, and get back each child's final answer. "
        "Children start with no memory of this conversation: put everything they need in goal and context."
    ),
    traits=ToolTraits(exclusive=True),
)
async def delegate_task(context: ToolContext, args: DelegateArgs) -> ToolOutput:
    delegation = context.delegation
    if delegation is None:
        return ToolOutput(content="[error] delegation is not available here (child sessions cannot delegate further)", ok=False)
    results: list[tuple[bool, str]] = [(False, "")] * len(args.tasks)
    child_ids = [delegation.next_child_id() for _ in args.tasks]

    async def one(index: int, task: Task) -> None:
        results[index] = await delegation.run_child(child_ids[index], task.goal, task.context, timeout=CHILD_TIMEOUT)

    async with trio.open_nursery() as nursery:
        for index, task in enumerate(args.tasks):
            nursery.start_soon(one, index, task)
    parts = []
    for index, (task, (ok, answer)) in enumerate(zip(args.tasks, results, strict=True), start=1):
        status = "done" if ok else "failed"
        parts.append(f"## Task {index} ({status}): {task.goal}\n{answer}")
    return ToolOutput(content="\n\n".join(parts), ok=all(ok for ok, _ in results))
