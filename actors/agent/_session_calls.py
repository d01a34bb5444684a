"""How a session actor starts its turn's waits: model calls and tool calls, as reactor waits.

A model call offers the session's tool schemas (following a live tool table: MCP servers'
tools have a version), checks the cluster lease first (``LeaseLapsed``), and goes out through
the layers the session has: a memory provider's recall (or its pre-compress texts for a
summary) and the plugin hooks around the call. A tool call is handed its ``ToolContext`` and
runs through the tool hooks. Which layers wrap a call is decided by
``_session_core.model_call_layers``; :class:`SessionCalls` builds and starts the waits.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from actors import WaitHandle
from protocols import KeyLeased

from ._auxiliary import auxiliary_model
from ._hooked import TurnHooks, hooked_model, hooked_tool
from ._machine import CallModel, RunTool
from ._memory_turn import TurnMemory, with_memory, with_pre_compress
from ._model import ModelSettings, call_model
from ._session_core import model_call_layers, offered_tools
from ._tools import ToolContext

if TYPE_CHECKING:
    from ._session import SessionActor


class SessionCalls:
    """One incarnation's model and tool calls: what each is sent with, and the wait it runs as."""

    def __init__(self, actor: SessionActor) -> None:
        self.actor = actor
        tools = actor.deps.tools
        self.tools_schema = [tool.schema() for tool in tools.values()]
        self.tools_version: object = getattr(tools, "version", None)
        """A live tool table (MCP servers' tools) has a version; the schemas follow it."""
        self.turn_hooks = TurnHooks()
        self.turn_memory = TurnMemory()

    def settings(self) -> ModelSettings:
        """The runtime's model settings with this session's own model choice."""
        deps, model = self.actor.deps, self.actor.host.model
        return deps.model if model == deps.model.model else dataclasses.replace(deps.model, model=model)

    def start_model(self, effect: CallModel, model: str, key: KeyLeased) -> WaitHandle:
        actor = self.actor
        deps, sid = actor.deps, actor.session_id
        version = getattr(deps.tools, "version", None)
        if version != self.tools_version:  # an MCP server's tools changed since the last call
            self.tools_schema, self.tools_version = [tool.schema() for tool in deps.tools.values()], version
        tools = offered_tools(self.tools_schema, effect)
        settings = actor.providers.settings(effect.provider, model, key.api_key)
        ownership, hub = actor.ownership, actor.hub

        async def request(sent: Any) -> Any:
            ownership.check_model_call(sid)
            return await call_model(deps.clients, settings, sent, tools, hub=hub, turn_id=effect.turn_id, session_id=sid, options=effect.options)

        send: Any = request
        memory, hooked = model_call_layers(effect.token.step, provider=bool(deps.memory.provider), hooks=deps.hooks is not None)
        if memory is not None:  # the built-in provider recalls nothing per turn
            where = {"turn_id": effect.turn_id, "registry": actor.registry, "options": deps.memory, "session_id": sid, "publish": hub.publish}
            recall = functools.partial(with_memory, memo=self.turn_memory) if memory == "recall" else with_pre_compress
            send = functools.partial(recall, request, **where)
        if hooked and deps.hooks is not None:
            seen: dict[str, Any] = {"session_id": sid, "turn_id": effect.turn_id, "model": model, "platform": deps.source, "publish": hub.publish}
            around = functools.partial(hooked_model, deps.hooks, send, effect.messages, self.turn_hooks, **seen)
            return actor.start_wait(around, tag="model", timeout=effect.timeout)
        return actor.start_wait(send, effect.messages, tag="model", timeout=effect.timeout)

    def start_tool(self, effect: RunTool, turn_id: str) -> WaitHandle:
        actor = self.actor
        deps, delegation = actor.deps, actor.delegation
        context = ToolContext(
            session_id=actor.session_id,
            turn_id=turn_id,
            call_id=effect.call_id,
            home=deps.home,
            workspace=actor.workspace,
            publish=actor.hub.publish,
            store_file=deps.store_file,
            delegation=delegation if delegation.allowed else None,
            tools=deps.tools,
            settings=deps.tool_settings,
            hooks=deps.hooks,
            auxiliary=auxiliary_model(deps.clients, self.settings(), actor.session_id, summary_model=deps.config.summary_model),
            registry=actor.registry,
        )
        run = deps.tools[effect.name].run
        if deps.hooks is not None:
            return actor.start_wait(hooked_tool, deps.hooks, run, effect.name, effect.arguments, context, tag="tool", timeout=effect.timeout)
        return actor.start_wait(run, effect.arguments, context, tag="tool", timeout=effect.timeout)
