"""Cost of the API server's request-body door (``decode_body``) against a bare msgspec decode.

Measured, both sides in the same invocation, in interleaved rounds (the median of each
round's best-of-5 is reported, with the ratio door / baseline):

- ``normal``: a 2 KB chat completion (a system prompt, user and assistant turns, one tool
  call and its result) - the body of most requests.
- ``agent``: a 150 KB chat completion with 180 messages and 30 tool schemas (an agent
  client deep in a conversation).

Baseline: ``msgspec.json.decode`` and the top-level ``isinstance(value, dict)`` check, which
is all the door did before it refused bad UTF-8, lone surrogates and nesting past
``MAX_DEPTH``. The door's extra work on a valid body is the depth check: a walk of the
decoded containers, one C call per level. End to end (hypercorn, routing, the answer) a
request costs hundreds of microseconds; the difference here is a microsecond or two.

Run from the repository root: ``python bench/bench_body.py [--quick] [--json]`` (about 3 s; --quick under 1 s).
"""

from __future__ import annotations

import functools
import statistics
import sys
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec
from _common import parse_options, print_header, print_json, versions

from actors.platforms._asgi import decode_body


def baseline(raw: bytes) -> dict[str, Any]:
    value = msgspec.json.decode(raw)
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


def bodies() -> dict[str, bytes]:
    user = {"role": "user", "content": 'Explain the difference between [a] and {b} in "json", please.\n' * 3}
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls -la"}'}}],
    }
    result = {"role": "tool", "tool_call_id": "c1", "content": "x" * 100}
    system = {"role": "system", "content": "You are helpful. " * 40}
    normal = {"model": "hermes", "messages": [system, user, user, user, user, call, result, {"role": "assistant", "content": "ok"}, user], "stream": False}
    schema = {"type": "object", "properties": {"path": {"type": "string"}, "lines": {"type": "array", "items": {"type": "integer"}}}}
    tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": "d" * 80, "parameters": schema}} for i in range(30)]
    agent = {"model": "hermes", "messages": [user, call, {**result, "content": "y" * 2000}] * 60, "tools": tools}
    return {"normal": msgspec.json.encode(normal), "agent": msgspec.json.encode(agent)}


def main() -> None:
    options = parse_options(__doc__)
    rounds = 2 if options.quick else 5
    print_header("body", versions("msgspec"), options.json, f"{rounds} interleaved rounds, best of 5 each; microseconds per body")
    for name, raw in bodies().items():
        number = max(1, 40_000 // (len(raw) // 1000 + 1)) // (5 if options.quick else 1)
        runs: dict[str, list[float]] = {"baseline": [], "door": []}
        for _ in range(rounds):
            for side, decode in (("baseline", baseline), ("door", decode_body)):
                runs[side].append(min(timeit.repeat(functools.partial(decode, raw), number=number, repeat=5)) / number * 1e6)
        base, door = statistics.median(runs["baseline"]), statistics.median(runs["door"])
        row = {"bench": "body", "metric": name, "bytes": len(raw), "baseline_us": round(base, 2), "door_us": round(door, 2), "ratio": round(door / base, 2)}
        if options.json:
            print_json([row])
        else:
            print(f"{name:<7} {len(raw):>7} bytes  baseline {base:8.2f} us  door {door:8.2f} us  ratio {door / base:.2f}", flush=True)


if __name__ == "__main__":
    main()
