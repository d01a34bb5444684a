"""Resources and prompts as tools: what a server offers besides tools, made callable. Pure.

Where the server has resources (and ``tools.resources`` is on) the agent gets
``mcp_<server>_list_resources`` and ``mcp_<server>_read_resource``; where it has prompts (and
``tools.prompts`` is on), ``mcp_<server>_list_prompts`` and ``mcp_<server>_get_prompt``. All
four are read-only. A server tool of the same name wins.
"""

from __future__ import annotations

from mcp import types

from protocols import McpToolInfo

from ._settings import McpSettings

_RESOURCES = (
    McpToolInfo(
        name="list_resources",
        description="List the server's resources (URI, name, description).",
        input_schema={"type": "object", "properties": {}},
        read_only=True,
        kind="list_resources",
    ),
    McpToolInfo(
        name="read_resource",
        description="Read one of the server's resources by its URI.",
        input_schema={"type": "object", "properties": {"uri": {"type": "string", "description": "The resource's URI"}}, "required": ["uri"]},
        read_only=True,
        kind="read_resource",
    ),
)
_PROMPTS = (
    McpToolInfo(
        name="list_prompts",
        description="List the server's prompts and their arguments.",
        input_schema={"type": "object", "properties": {}},
        read_only=True,
        kind="list_prompts",
    ),
    McpToolInfo(
        name="get_prompt",
        description="Get one of the server's prompts, filled in with its arguments.",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}, "arguments": {"type": "object", "additionalProperties": {"type": "string"}}},
            "required": ["name"],
        },
        read_only=True,
        kind="get_prompt",
    ),
)


def utilities(capabilities: types.ServerCapabilities, settings: McpSettings, tools: tuple[McpToolInfo, ...]) -> tuple[McpToolInfo, ...]:
    """The resource and prompt tools this server gets, leaving out names its own tools take."""
    offered = (
        *(_RESOURCES if capabilities.resources is not None and settings.resources else ()),
        *(_PROMPTS if capabilities.prompts is not None and settings.prompts else ()),
    )
    taken = {t.name for t in tools}
    return tuple(u for u in offered if u.name not in taken)


def resources_text(result: types.ListResourcesResult) -> str:
    lines = [f"{r.uri} — {r.name}" + (f": {r.description}" if r.description else "") for r in result.resources]
    return "\n".join(lines) or "(no resources)"


def resource_text(result: types.ReadResourceResult) -> str:
    parts = []
    for content in result.contents:
        if isinstance(content, types.TextResourceContents):
            parts.append(content.text)
        else:
            parts.append(f"[{content.uri}: binary, {content.mimeType or 'unknown type'}]")
    return "\n".join(parts)


def prompts_text(result: types.ListPromptsResult) -> str:
    lines = []
    for prompt in result.prompts:
        arguments = ", ".join(a.name + ("" if a.required else "?") for a in prompt.arguments or ())
        lines.append(f"{prompt.name}({arguments})" + (f": {prompt.description}" if prompt.description else ""))
    return "\n".join(lines) or "(no prompts)"


def prompt_text(result: types.GetPromptResult) -> str:
    lines = []
    for message in result.messages:
        content = message.content
        text = content.text if isinstance(content, types.TextContent) else f"[{content.type}]"
        lines.append(f"{message.role}: {text}")
    return "\n".join(lines)
