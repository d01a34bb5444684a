"""chaos: the test model server, an OpenAI-compatible endpoint that answers from a script.

Tests, benchmarks and (later) ``hermes chaos`` point the OpenAI SDK, or our own model
client, at :class:`ModelServer` on 127.0.0.1 instead of a real provider. It serves
``GET /v1/models`` and ``POST /v1/chat/completions`` (JSON or server-sent events) and
answers each completion with the next scripted reply: text (with reasoning as
``reasoning_content`` or ``<think>``), tool calls (arguments sent verbatim, malformed or
not), or an HTTP error in OpenAI's shape. Any reply can add latency, stall mid-stream or
cut the connection mid-stream; it is built on trio + h11 so those faults are exact at the
byte level. Scripts are per session (the ``X-Hermes-Session-Id`` header) with a default
queue; with no script at all it echoes the last user message, a 0 ms model for benchmarks.

Example::

    with ModelServer(seed=1) as server:
        server.script([TextReply(content="hi", latency=0.05), HttpError(status=429, message="slow down", retry_after=2)])
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        ...
        assert server.requests[0].body["messages"][-1]["content"] == "hello"
"""

from ._script import HttpError as HttpError
from ._script import RecordedRequest as RecordedRequest
from ._script import Reply as Reply
from ._script import ScriptedCall as ScriptedCall
from ._script import ScriptedReply as ScriptedReply
from ._script import TextReply as TextReply
from ._script import ToolCallsReply as ToolCallsReply
from ._server import SESSION_HEADER as SESSION_HEADER
from ._server import ModelServer as ModelServer
from ._server import open_model_server as open_model_server

__all__ = [
    "HttpError",
    "ModelServer",
    "RecordedRequest",
    "Reply",
    "SESSION_HEADER",
    "ScriptedCall",
    "ScriptedReply",
    "TextReply",
    "ToolCallsReply",
    "open_model_server",
]
