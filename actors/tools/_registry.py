"""The tool registry: tools register themselves at import, with a typed argument schema.

A tool is an async handler ``(context, args) -> str | ToolOutput`` whose ``args`` is a msgspec
Struct. The Struct yields the JSON schema sent to the model, and arguments from the model
are validated and coerced into it (``"42"`` becomes ``42`` where the schema says integer).
Invalid arguments, exceptions and oversized results become short ``[error]`` results for
the model, never exceptions for the session.
"""

from __future__ import annotations

import dataclasses
import logging
import typing
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from actors import UsageError
from actors.agent import ToolContext, ToolOutput, ToolSpec, ToolTraits

log = logging.getLogger(__name__)

DEFAULT_MAX_RESULT = 100_000
"""Characters of a result the model sees; the rest is cut with a note."""
ERROR_CHARS = 2_000

Handler = Callable[[ToolContext, Any], Awaitable["str | ToolOutput"]]


@dataclasses.dataclass(frozen=True)
class Tool:
    """One registered tool."""

    name: str
    toolset: str
    description: str
    args: type[msgspec.Struct]
    handler: Handler
    traits: ToolTraits = ToolTraits()
    available: Callable[[], bool] = lambda: True
    """False when the tool cannot work here (a missing binary, no credentials)."""
    max_result_chars: int = DEFAULT_MAX_RESULT

    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments object, inlined (no ``$ref``) for the model."""
        (_,), components = msgspec.json.schema_components([self.args])
        schema = dict(components[self.args.__name__])
        schema.pop("title", None)
        inlined: dict[str, Any] = _inline(schema, components)
        return inlined

    def parse(self, arguments: dict[str, Any]) -> Any:
        """Validate and coerce the model's arguments.

        Raises:
            msgspec.ValidationError: with the path of the bad field.
        """
        return msgspec.convert(arguments, self.args, strict=False)

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """Run once for the model: every failure becomes an ``[error]`` result."""
        try:
            parsed = self.parse(arguments)
        except msgspec.ValidationError as exc:
            return ToolOutput(content=_cap(f"[error] invalid arguments for {self.name}: {exc}", ERROR_CHARS), ok=False)
        try:
            result = await self.handler(context, parsed)
        except Exception as exc:  # a tool's bug is a result for the model, not a crash
            log.warning("tool %s failed: %s: %s", self.name, type(exc).__name__, exc, exc_info=exc)
            text = str(exc) or type(exc).__name__
            return ToolOutput(content=_cap(f"[error] {self.name} failed: {text}", ERROR_CHARS), ok=False)
        output = result if isinstance(result, ToolOutput) else ToolOutput(content=result)
        if len(output.content) > self.max_result_chars:
            output = ToolOutput(content=_cap(output.content, self.max_result_chars), ok=output.ok)
        return output

    def spec(self) -> ToolSpec:
        """What a session needs: schema, traits, and ``run``."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters(), run=self.run, traits=self.traits)


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    note = f"\n[... {len(text) - limit} more characters cut; narrow the request to see them]"
    return text[: max(0, limit - len(note))] + note


def _inline(node: Any, components: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = dict(components[ref.removeprefix("#/$defs/")])
            target.pop("title", None)
            return _inline(target, components)
        return {k: _inline(v, components) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, components) for v in node]
    return node


class Registry:
    """Tools by name."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            msg = f"a tool named {tool.name!r} is registered already (toolset {self._tools[tool.name].toolset!r})"
            raise UsageError(msg)
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            msg = f"no tool named {name!r}; registered: {', '.join(sorted(self._tools)) or 'none'}"
            raise UsageError(msg) from None

    def names(self) -> list[str]:
        return sorted(self._tools)

    def in_toolset(self, toolset: str) -> list[Tool]:
        return [t for t in self._tools.values() if t.toolset == toolset]

    def specs(self, names: list[str]) -> dict[str, ToolSpec]:
        """Specs of the named tools that are available here (unavailable ones are left out)."""
        return {n: self._tools[n].spec() for n in names if n in self._tools and self._tools[n].available()}


REGISTRY = Registry()
"""The process-wide registry; tool modules register into it when imported."""


def tool(
    *,
    name: str,
    toolset: str,
    description: str,
    traits: ToolTraits = ToolTraits(),
    available: Callable[[], bool] | None = None,
    max_result_chars: int = DEFAULT_MAX_RESULT,
    registry: Registry = REGISTRY,
) -> Callable[[Handler], Handler]:
    """Register an async handler ``(context: ToolContext, args: SomeArgsStruct)`` as a tool."""

    def register(handler: Handler) -> Handler:
        hints = typing.get_type_hints(handler)
        params = [p for p in hints if p != "return"]
        if len(params) != 2 or not (isinstance(hints[params[1]], type) and issubclass(hints[params[1]], msgspec.Struct)):
            msg = f"tool {name!r}: the handler must be async (context: ToolContext, args: <msgspec.Struct>)"
            raise UsageError(msg)
        registry.register(
            Tool(
                name=name,
                toolset=toolset,
                description=description,
                args=hints[params[1]],
                handler=handler,
                traits=traits,
                available=available or (lambda: True),
                max_result_chars=max_result_chars,
            )
        )
        return handler

    return register
