"""One link to an MCP server, in the reactor: open it, keep its tool list current, call tools.

A :class:`Link` is one attempt's live handle. :func:`run_link` is the actor's wait: it starts
(or reaches) the server, initialises an SDK ``ClientSession``, lists the tools, reports them,
and then re-lists them on each ``notifications/tools/list_changed`` until the link breaks. Tool
calls (:func:`call_tool`) run in the calling session's wait and use the link's session
directly: both live in the reactor thread.

Invariant: once a link is broken (its server exited, a call timed out on a stdio server, the
transport failed, the actor ended it), every call on it ends at once with
``[error] MCP server <name> is restarting``, and its wait ends, so the actor opens the next.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import trio
from mcp import ClientSession, McpError, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.context import RequestContext
from mcp.shared.session import ProgressFnT
from mcp.types import CONNECTION_CLOSED
from pydantic import AnyUrl

from actors import HermesError
from actors.agent import ToolContext, ToolOutput
from protocols import McpLinkUp, McpToolInfo, McpToolKind, McpToolsListed, Message, ToolProgress

from ._results import result_text
from ._sampling import Sampler
from ._settings import McpSettings
from ._stdio import Streams, open_stdio
from ._utilities import prompt_text, prompts_text, resource_text, resources_text, utilities

log = logging.getLogger(__name__)

NOTIFY_TIMEOUT = 1.0
"""Seconds a ``notifications/cancelled`` may take to send."""
CLOSE_GRACE = 2.0
"""Seconds a call that saw its connection close waits for the link to say why (the exit status)."""
CLIENT = types.Implementation(name="hermes-actors", version="0.1.0")


class McpLinkBroken(HermesError):
    """The link to an MCP server broke, or never came up; the message says why."""


class Link:
    """One attempt's connection: its SDK session once initialised, and why it broke once broken."""

    def __init__(self, server: str, attempt: int) -> None:
        self.server = server
        self.attempt = attempt
        self.session: ClientSession | None = None
        self.capabilities: types.ServerCapabilities | None = None
        self.down = ""
        """Why the link broke; empty while it is opening or up."""
        self.broken = trio.Event()
        self._scope: trio.CancelScope | None = None
        self._calls: set[trio.CancelScope] = set()

    @property
    def usable(self) -> bool:
        return self.session is not None and not self.down

    def break_link(self, reason: str) -> None:
        """Mark the link broken: calls on it end at once, and its wait ends (the server is stopped)."""
        if self.down:
            return
        self.down = reason
        self.session = None
        self.broken.set()
        for scope in self._calls:
            scope.cancel()
        if self._scope is not None:
            self._scope.cancel()


def restarting(server: str, reason: str = "") -> ToolOutput:
    why = f" ({reason})" if reason else ""
    return ToolOutput(content=f"[error] MCP server {server} is restarting{why}; try again in a moment", ok=False)


def describe(exc: BaseException) -> str:
    """A failure of a link as one line for people."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(describe(e) for e in exc.exceptions))
    if isinstance(exc, McpLinkBroken):
        return str(exc)
    if isinstance(exc, McpError):
        return f"the server answered with an error: {exc.error.message}"
    if isinstance(exc, FileNotFoundError):
        return f"cannot start {exc.filename or 'the command'}: not found (check command: and PATH)"
    if isinstance(exc, PermissionError):
        return f"cannot start {exc.filename or 'the command'}: not executable"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect: {exc}"
    if isinstance(exc, httpx.HTTPStatusError):
        return f"the server answered HTTP {exc.response.status_code}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def tool_info(tool: types.Tool) -> McpToolInfo:
    read_only = bool(tool.annotations is not None and tool.annotations.readOnlyHint)
    output = dict(tool.outputSchema) if tool.outputSchema is not None else None
    return McpToolInfo(name=tool.name, description=tool.description or "", input_schema=dict(tool.inputSchema), read_only=read_only, output_schema=output)


async def list_tools(session: ClientSession) -> tuple[McpToolInfo, ...]:
    """Every tool of the server, page after page."""
    found: list[McpToolInfo] = []
    cursor: str | None = None
    while True:
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        found.extend(tool_info(t) for t in page.tools)
        cursor = page.nextCursor
        if not cursor:
            return tuple(found)


@contextlib.asynccontextmanager
async def _transport(settings: McpSettings, link: Link) -> AsyncIterator[Streams]:
    if settings.transport == "stdio":
        async with open_stdio(settings, link.break_link) as streams:
            yield streams
        return
    timeout = httpx.Timeout(settings.connect_timeout, read=max(settings.timeout, 300.0))
    async with (
        create_mcp_http_client(headers=dict(settings.headers), timeout=timeout) as client,
        streamable_http_client(settings.url, http_client=client) as (read, write, _session_id),
    ):
        yield read, write


async def run_link(settings: McpSettings, link: Link, report: Callable[[Message], object], sampler: Sampler | None = None) -> None:
    """Open the link, report its tools, re-list them when they change, until it breaks.

    Raises:
        McpLinkBroken: always, in the end (a link has no normal end), with the reason.
    """
    changed_send, changed_receive = trio.open_memory_channel[None](1)

    async def on_sampling(
        context: RequestContext[ClientSession, Any], params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        assert sampler is not None
        return await sampler(params)

    async def on_message(message: Any) -> None:  # called by the SDK's reader: must not wait
        if isinstance(message, types.ServerNotification) and isinstance(message.root, types.ToolListChangedNotification):
            with contextlib.suppress(trio.WouldBlock):
                changed_send.send_nowait(None)
        elif isinstance(message, Exception):
            log.warning("MCP server %s: %s", settings.name, describe(message))

    try:
        with trio.CancelScope() as scope:
            link._scope = scope
            async with (
                _transport(settings, link) as (read, write),
                ClientSession(
                    read, write, message_handler=on_message, client_info=CLIENT, sampling_callback=on_sampling if sampler is not None else None
                ) as session,
            ):
                try:
                    with trio.fail_after(settings.connect_timeout):
                        init = await session.initialize()
                        tools = await list_tools(session)
                except trio.TooSlowError:
                    raise McpLinkBroken(f"no answer to initialize and tools/list within connect_timeout ({settings.connect_timeout:g} s)") from None
                except McpError as exc:
                    if exc.error.code == CONNECTION_CLOSED:  # the transport saw the end first: its reason is better
                        with trio.move_on_after(CLOSE_GRACE):
                            await link.broken.wait()
                    raise
                tools += utilities(init.capabilities, settings, tools)
                link.session = session
                link.capabilities = init.capabilities
                server = f"{init.serverInfo.name} {init.serverInfo.version}".strip()
                report(McpLinkUp(attempt=link.attempt, server=server, tools=tools))
                async for _ in changed_receive:
                    try:
                        with trio.fail_after(settings.connect_timeout):
                            tools = await list_tools(session)
                    except trio.TooSlowError:
                        raise McpLinkBroken(f"no answer to tools/list within {settings.connect_timeout:g} s") from None
                    tools += utilities(init.capabilities, settings, tools)
                    report(McpToolsListed(attempt=link.attempt, tools=tools))
    except Exception as exc:
        link.break_link(describe(exc))
    finally:
        link.break_link("the link was closed")
    raise McpLinkBroken(link.down)


async def _notify_cancelled(session: ClientSession, request_id: int, reason: str) -> None:
    """Tell the server a request is abandoned (``notifications/cancelled``), within a second."""
    notification = types.ClientNotification(types.CancelledNotification(params=types.CancelledNotificationParams(requestId=request_id, reason=reason)))
    with trio.CancelScope(shield=True), trio.move_on_after(NOTIFY_TIMEOUT):
        try:
            await session.send_notification(notification)
        except Exception as exc:
            log.debug("could not send notifications/cancelled: %s", describe(exc))


async def _call(
    session: ClientSession, kind: McpToolKind, tool: str, arguments: dict[str, Any], on_progress: ProgressFnT, output_schema: dict[str, Any] | None
) -> tuple[str, bool]:
    """One call of the server: its own tool, or one of ours over its resources or prompts."""
    match kind:
        case "tool":
            # Not ``session.call_tool``: it checks the result against the tool's outputSchema with
            # jsonschema, whose patterns run in ``re`` (a server's ``(a|aa)+$`` held the GIL for
            # hours). ``result_text`` checks it in bounded time.
            request = types.ClientRequest(types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments)))
            result = await session.send_request(request, types.CallToolResult, progress_callback=on_progress)
            return result_text(result, output_schema, tool)
        case "list_resources":
            return resources_text(await session.list_resources()), True
        case "read_resource":
            return resource_text(await session.read_resource(AnyUrl(str(arguments.get("uri", ""))))), True
        case "list_prompts":
            return prompts_text(await session.list_prompts()), True
        case "get_prompt":
            values = arguments.get("arguments") or {}
            return prompt_text(await session.get_prompt(str(arguments.get("name", "")), {str(k): str(v) for k, v in dict(values).items()})), True


async def call_tool(
    link: Link | None,
    settings: McpSettings,
    tool: str,
    exposed: str,
    arguments: dict[str, Any],
    context: ToolContext,
    kind: McpToolKind = "tool",
    output_schema: dict[str, Any] | None = None,
) -> ToolOutput:
    """Call ``tool`` on the server: per-call timeout, progress as events, cancel told to the server."""
    session = link.session if link is not None else None
    if link is None or session is None or link.down:
        return restarting(settings.name, link.down if link is not None else "")

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        context.publish(
            ToolProgress(
                session_id=context.session_id,
                turn_id=context.turn_id,
                call_id=context.call_id,
                name=exposed,
                progress=progress,
                total=total,
                message=message or "",
            )
        )

    # The id the request below takes: the SDK assigns it before the call's first await.
    request_id: int = session._request_id
    broken = trio.CancelScope()
    link._calls.add(broken)
    try:
        with trio.move_on_after(settings.timeout):
            with broken:
                content, ok = await _call(session, kind, tool, arguments, on_progress, output_schema)
                return ToolOutput(content=content, ok=ok)
    except McpError as exc:
        if exc.error.code == CONNECTION_CLOSED:  # the transport saw the end first: the link says why
            with trio.move_on_after(CLOSE_GRACE):
                await link.broken.wait()
            return restarting(settings.name, link.down or "the connection closed")
        if link.down:
            return restarting(settings.name, link.down)
        return ToolOutput(content=f"[error] {exposed}: {exc.error.message}", ok=False)
    except trio.Cancelled:
        await _notify_cancelled(session, request_id, "the call was cancelled by the client")
        raise
    except Exception as exc:
        if link.down:
            return restarting(settings.name, link.down)
        return ToolOutput(content=f"[error] {exposed} failed: {describe(exc)}", ok=False)
    finally:
        link._calls.discard(broken)
    if link.down:
        return restarting(settings.name, link.down)
    # The timeout fired.
    await _notify_cancelled(session, request_id, f"no answer within {settings.timeout:g} s")
    if settings.transport == "stdio":  # a hung server is stopped with its process group and started again
        link.break_link(f"{exposed} did not answer within {settings.timeout:g} s")
        return ToolOutput(content=f"[error] {exposed} did not answer within {settings.timeout:g} s; MCP server {settings.name} is being restarted", ok=False)
    return ToolOutput(content=f"[error] {exposed} did not answer within {settings.timeout:g} s (the call was cancelled)", ok=False)
