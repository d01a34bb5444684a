"""The ``fact_store`` tool (toolset "fact_store"): the ``store`` memory provider's facts.

Offered when config.yaml sets ``memory.provider: store``. Each call is a message to the
provider's actor ``/memory/store`` (answered within ``REPLY_TIMEOUT``); its writes reach the
store through the store writer. Facts relevant to a user's message are recalled with it
before each turn, so the model rarely needs ``search``.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from actors.agent import ToolContext, ToolOutput
from actors.memory import MEMORY_PATH, ask_provider

from ._registry import tool

REPLY_TIMEOUT = 15.0
PATH = f"{MEMORY_PATH}/store"

DESCRIPTION = """\
A searchable store of durable facts (about the user, their projects, their environment).
Facts relevant to each new message are recalled for you with it. 'add' (content: one short
self-contained sentence; optional category), 'search' (query: words to look for; optional
limit), 'remove' (fact_id from a search). Never save secrets or temporary task state."""


class FactStoreArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    action: Annotated[Literal["add", "search", "remove"], msgspec.Meta(description="What to do.")]
    content: Annotated[str | None, msgspec.Meta(description="add: the fact.")] = None
    category: Annotated[str | None, msgspec.Meta(description="add: a one-word category (preference, project, environment...).")] = None
    query: Annotated[str | None, msgspec.Meta(description="search: the words to look for.")] = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=50, description="search: how many facts at most (5).")] | None = None
    fact_id: Annotated[int | None, msgspec.Meta(description="remove: the fact's number.")] = None


@tool(name="fact_store", toolset="fact_store", description=DESCRIPTION)
async def fact_store(context: ToolContext, args: FactStoreArgs) -> ToolOutput:
    registry = context.registry
    if registry is None:
        return ToolOutput(content="[error] fact_store: no memory provider runs here (it needs a runtime with memory.provider: store)", ok=False)
    fields = {k: v for k, v in msgspec.structs.asdict(args).items() if v is not None}
    arguments = {"name": "fact_store", "args": fields, "session_id": context.session_id}
    try:
        registry.lookup(PATH)
    except LookupError:
        return ToolOutput(content="[error] fact_store: the store memory provider is not running (set memory.provider: store in config.yaml)", ok=False)
    reply = await ask_provider(registry, PATH, "tool", arguments, REPLY_TIMEOUT)
    if reply is None:
        return ToolOutput(content=f"[error] fact_store: the store provider did not answer within {REPLY_TIMEOUT:g} s; try again", ok=False)
    return ToolOutput(content=reply.text if reply.ok else f"[error] fact_store: {reply.text}", ok=reply.ok)
