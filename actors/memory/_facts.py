"""The ``store`` provider (``memory.provider: store``): facts in the session store, recalled by relevance.

Facts are rows of ``memory_facts`` in ``state.db`` with an FTS5 index (schema 9). Writes go to
the store writer (``SaveFact`` / ``DeleteFact``, rule 4); reads use this provider's own
read-only connection. Before each turn it recalls the facts most relevant to the user's text
(FTS5 ``bm25``, any word matching, at most ``prefetch_limit``). Before a compression it names
the facts saved in the session, so the summary keeps them.

What it records: only what the model saves with its ``fact_store`` tool (add / search /
remove). It does not extract facts from turns by itself: ``sync_turn`` records nothing,
because an extraction would need a model call whose quality no test here can judge.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ._provider import MemoryProvider, ProviderEnv, ProviderError, StoreWrite
from ._threats import scan_text

MAX_FACT_CHARS = 500
MAX_KEPT = 20
"""Facts of a session named to the summariser at most (``on_pre_compress``)."""


class StoreFactsProvider(MemoryProvider):
    name = "store"

    def __init__(self, env: ProviderEnv) -> None:
        super().__init__(env)
        if env.store_file is None:
            raise ProviderError("the store memory provider needs the session store (state.db)")
        self._db: Any = None

    def _reader(self) -> Any:
        from actors.store._backend import open_store_reader

        if self._db is None:
            self._db = open_store_reader(str(self.env.store_file))  # a file, or a postgresql:// URL
        return self._db

    def system_prompt_block(self) -> str:
        from actors.store import count_facts

        count = count_facts(self._reader())
        return (
            f"## Fact store\nYou keep {count} fact(s) in a searchable store; the ones relevant to a message are recalled "
            "with it. Save a durable fact with fact_store(action='add', content=...), look one up with action='search'."
        )

    def prefetch(self, query: str, session_id: str) -> str:
        from actors.store import search_facts

        hits = search_facts(self._reader(), query, self.env.prefetch_limit)
        return "\n".join(f"- {hit.content} (fact {hit.fact_id})" for hit in hits)

    def on_pre_compress(self, session_id: str) -> str:
        """The facts saved in this session: the summary of its turns keeps them."""
        rows = self._reader().execute("SELECT content FROM memory_facts WHERE session_id = ? ORDER BY id LIMIT ?", (session_id, MAX_KEPT)).fetchall()
        return "\n".join(f"- {row[0]}" for row in rows)

    def tool_names(self) -> tuple[str, ...]:
        return ("fact_store",)

    def handle_tool_call(self, name: str, args: Mapping[str, Any], session_id: str) -> str | StoreWrite:
        from actors.store import search_facts
        from protocols._memory import DeleteFact, FactDeleted, FactSaved, SaveFact

        if name != "fact_store":
            raise ProviderError(f"the store provider has no tool {name!r}")
        action = args.get("action")
        if action == "add":
            content = " ".join(str(args.get("content") or "").split())
            if not content:
                raise ProviderError("add needs 'content': the fact, one sentence")
            if len(content) > MAX_FACT_CHARS:
                raise ProviderError(f"a fact holds at most {MAX_FACT_CHARS} characters ({len(content)} given): save a shorter one")
            threat = scan_text(content)
            if threat is not None:
                raise ProviderError(f"refused to save the fact: {threat.reason}")
            command = SaveFact(content=content, category=str(args.get("category") or "general"), session_id=session_id, saved_at=time.time())

            def saved(reply: FactSaved) -> str:
                return f"Fact {reply.fact_id} {'saved' if reply.created else 'was stored already'}."

            return StoreWrite(command=command, render=saved)
        if action == "search":
            hits = search_facts(self._reader(), str(args.get("query") or ""), int(args.get("limit") or 5))
            if not hits:
                return "No fact matches."
            return "\n".join(f"{hit.fact_id}: {hit.content}" for hit in hits)
        if action == "remove":
            fact_id = args.get("fact_id")
            if not isinstance(fact_id, int):
                raise ProviderError("remove needs 'fact_id' (a number from search)")

            def deleted(reply: FactDeleted) -> str:
                return f"Fact {reply.fact_id} removed." if reply.found else f"No fact {reply.fact_id}; nothing removed."

            return StoreWrite(command=DeleteFact(fact_id=fact_id), render=deleted)
        raise ProviderError(f"unknown action {action!r}: use add, search or remove")

    def shutdown(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
