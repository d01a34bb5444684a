"""The built-in provider (``/memory/builtin``): MEMORY.md and USER.md, through one :class:`MemoryStore`.

Its system-prompt block is the frozen memory snapshot (:func:`memory_snapshot`); it recalls
nothing per turn (the whole files are in the prompt already). It answers the ``memory`` tool:
add / replace / remove an entry, and says what the file holds now.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._errors import KnowledgeError
from ._prompt import memory_snapshot
from ._provider import MemoryProvider, ProviderEnv, ProviderError
from ._store import MemoryChange, MemoryTarget


class BuiltinProvider(MemoryProvider):
    name = "builtin"

    def __init__(self, env: ProviderEnv) -> None:
        super().__init__(env)
        self.store = env.settings.store(env.home)

    def system_prompt_block(self) -> str:
        return memory_snapshot(self.env.home, self.env.settings)

    def tool_names(self) -> tuple[str, ...]:
        return ("memory",)

    def handle_tool_call(self, name: str, args: Mapping[str, Any], session_id: str) -> str:
        if name != "memory":
            raise ProviderError(f"the built-in memory has no tool {name!r}")
        return render_change(memory_write(self.env, args))


def memory_write(env: ProviderEnv, args: Mapping[str, Any]) -> MemoryChange:
    """One ``memory`` tool call (``action``, ``target``, ``content``, ``old_text``) on the files; raises
    :class:`ProviderError` saying what to send instead."""
    action, target = args.get("action"), args.get("target")
    if target not in ("memory", "user"):
        raise ProviderError("target must be 'memory' (your notes) or 'user' (about the user)")
    checked: MemoryTarget = "memory" if target == "memory" else "user"
    if not env.settings.enabled(checked):
        key = "memory.memory_enabled" if checked == "memory" else "memory.user_profile_enabled"
        raise ProviderError(f"the {checked} file is turned off ({key}: false in config.yaml); nothing was saved")
    content, old_text = args.get("content"), args.get("old_text")
    store = env.settings.store(env.home)
    try:
        if action == "add":
            if content is None:
                raise ProviderError("add needs 'content': the text of the new entry")
            return store.add(checked, str(content))
        if action == "replace":
            if old_text is None or content is None:
                raise ProviderError("replace needs 'old_text' (a unique part of the entry) and 'content' (its new text)")
            return store.replace(checked, str(old_text), str(content))
        if action == "remove":
            if old_text is None:
                raise ProviderError("remove needs 'old_text': a unique part of the entry to remove")
            return store.remove(checked, str(old_text))
    except KnowledgeError as exc:
        raise ProviderError(str(exc)) from None
    raise ProviderError(f"unknown action {action!r}: use add, replace or remove")


def render_change(change: MemoryChange) -> str:
    """What the model reads back: what happened, the usage, and every entry of the file now."""
    when = " It shows in the system prompt from the next session on." if change.changed else ""
    head = (
        f"{change.note[:1].upper()}{change.note[1:]}.{when} {change.file_name}: {len(change.entries)} "
        f"{'entry' if len(change.entries) == 1 else 'entries'}, {change.used:,}/{change.limit:,} characters."
    )
    if not change.entries:
        return head
    return head + "\n\n" + "\n§\n".join(change.entries)
