"""An MCP ``tools/call`` result as the text the model reads, checked against the tool's
``outputSchema`` as the SDK would check it, but in bounded time. Pure."""

from __future__ import annotations

import json
from typing import Any

from mcp import types

from actors.agent._json_schema import SchemaUnusable, check, out_of_recursion
from actors.agent._json_text import TOO_DEEP


def result_text(result: types.CallToolResult, output_schema: dict[str, Any] | None = None, tool: str = "") -> tuple[str, bool]:
    """The result's content blocks as text, and whether the call succeeded (``isError`` false, and
    its structured content what ``output_schema`` describes)."""
    parts: list[str] = []
    for block in result.content:
        match block:
            case types.TextContent(text=text):
                parts.append(text)
            case types.ImageContent(mimeType=mime, data=data):
                parts.append(f"[image: {mime}, {len(data) * 3 // 4} bytes]")
            case types.AudioContent(mimeType=mime, data=data):
                parts.append(f"[audio: {mime}, {len(data) * 3 // 4} bytes]")
            case types.EmbeddedResource(resource=types.TextResourceContents(uri=uri, text=text)):
                parts.append(f"[resource {uri}]\n{text}")
            case types.EmbeddedResource(resource=resource):
                parts.append(f"[resource {resource.uri}: binary, {resource.mimeType or 'unknown type'}]")
            case types.ResourceLink(uri=uri, name=name):
                parts.append(f"[resource link {name}: {uri}]")
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    text = "\n".join(parts)
    if result.isError:
        return f"[error] {text or 'the tool failed without saying why'}", False
    problem = output_problem(result.structuredContent, output_schema, tool)
    if problem is not None:
        return f"[error] {problem}", False
    return text, True


def output_problem(structured: dict[str, Any] | None, output_schema: dict[str, Any] | None, tool: str) -> str | None:
    """Why a successful result breaks the tool's own ``outputSchema``; None when it keeps to it."""
    if output_schema is None:
        return None
    if structured is None:
        return f"the MCP tool {tool} declares an outputSchema but returned no structured content"
    subject = f"the outputSchema of the MCP tool {tool}"
    try:
        error = check(output_schema, structured, subject)
    except SchemaUnusable as exc:
        return str(exc)
    except RecursionError:
        return out_of_recursion(structured, subject, f"the MCP tool {tool} returned structured content {TOO_DEEP}")
    if error is None:
        return None
    return f"the MCP tool {tool} returned structured content its own outputSchema refuses: {error.message}"
