"""chaos: fault injection: the test model server, fault plans, the simulator, the chaos runner.

The deterministic simulator (``simulate``, ``sweep``, ``replay``, ``shrink``) runs the real
turn machine against a simulated model, tools, store and clock and checks the invariants
(``Invariants``) after every step; ``run_chaos`` does the same against the real runtime.
``hermes chaos`` is their command line.

The test model server: tests, benchmarks and ``hermes chaos`` point the OpenAI SDK, or our own model
client, at :class:`ModelServer` on 127.0.0.1 instead of a real provider. It serves
``GET /v1/models`` and ``POST /v1/chat/completions`` (JSON or server-sent events) and
answers each completion with the next scripted reply: text (with reasoning as
``reasoning_content`` or ``<think>``, cut by the token limit or not), tool calls
(arguments sent verbatim, malformed or not), or an HTTP error: in OpenAI's shape, or one of
the failures real providers send (``HttpError.rate_limited`` in each spelling of the reset
hint, ``insufficient_credits``, ``invalid_api_key``, ``overloaded``, ``context_overflow``
in five servers' wording, ...). Any reply can add latency, stall mid-stream, cut the
connection mid-stream or go silent; it is built on trio + h11 so those faults are exact at
the byte level. Scripts are per API key (the ``Authorization: Bearer`` header), per session
(the ``X-Hermes-Session-Id`` header) and a default queue, and a key can carry a standing
fault (``fail_key``: a revoked key); with no script at all it echoes the last user message,
a 0 ms model for benchmarks.

Example::

    with ModelServer(seed=1) as server:
        server.script([TextReply(content="hi", latency=0.05), HttpError(status=429, message="slow down", retry_after=2)])
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        ...
        assert server.requests[0].body["messages"][-1]["content"] == "hello"
"""

from ._faults import PRESETS as PRESETS
from ._faults import default_plan as default_plan
from ._faults import dump_plan as dump_plan
from ._faults import load_plan as load_plan
from ._faults import parse_plan as parse_plan
from ._invariants import Invariants as Invariants
from ._invariants import Violation as Violation
from ._runner import RunOptions as RunOptions
from ._runner import RunReport as RunReport
from ._runner import format_report as format_report
from ._runner import run_chaos as run_chaos
from ._script import ClockHeader as ClockHeader
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
from ._sim import SimOptions as SimOptions
from ._sim import SimResult as SimResult
from ._sim import SweepResult as SweepResult
from ._sim import format_result as format_result
from ._sim import replay as replay
from ._sim import shrink as shrink
from ._sim import simulate as simulate
from ._sim import sweep as sweep

__all__ = [
    "ClockHeader",
    "HttpError",
    "Invariants",
    "ModelServer",
    "PRESETS",
    "RecordedRequest",
    "Reply",
    "RunOptions",
    "RunReport",
    "SESSION_HEADER",
    "ScriptedCall",
    "ScriptedReply",
    "SimOptions",
    "SimResult",
    "SweepResult",
    "TextReply",
    "ToolCallsReply",
    "Violation",
    "default_plan",
    "dump_plan",
    "format_report",
    "format_result",
    "load_plan",
    "open_model_server",
    "parse_plan",
    "replay",
    "run_chaos",
    "shrink",
    "simulate",
    "sweep",
]
