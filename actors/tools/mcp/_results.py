"""An MCP ``tools/call`` result as the text the model reads. Pure."""

from __future__ import annotations

import json

from mcp import types


def result_text(result: types.CallToolResult) -> tuple[str, bool]:
    """The result's content blocks as text, and whether the call succeeded (``isError`` false)."""
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
    return text, True
