"""Digests of what compression decides, for seeded sessions: to check that a speed-up of the
planner changed no decision.

For each case (the bench's 2,000-message sessions, typical and heavy, and seeded sessions of
other sizes and shapes: earlier summaries, a focus, orphaned and missing results, long
arguments, images, reasoning, non-ASCII and whitespace-heavy results, call ids reused from turn
to turn, tiny stub limits, small windows) it runs ``prune`` (with and without the estimates at hand), ``plan`` and ``assemble``
and prints one SHA-256 of their outputs, msgspec-encoded (the pruned transcript and its counts,
the plan with the summary request, the assembled segment).

    python bench/compression_identity.py > before.json    # on the old code
    python bench/compression_identity.py --check before.json   # on the new one: exit 1 on any difference
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import msgspec
from bench_compression import SUMMARY, agent_session, session_of

from actors.agent._compress import DEFAULT_SETTINGS, SUMMARY_PREFIX, CompressionSettings, assemble, fit_to_window, plan, prune
from actors.agent._tokens import TokenRatio, token_estimator
from protocols import ChatMessage, ToolCall


def varied(seed: int, exchanges: int, *, broken: bool = True) -> tuple[ChatMessage, ...]:
    """An agent session with the rarer shapes mixed in, seeded; ``broken``: with missing and orphaned results."""
    rng = random.Random(seed)
    base = list(agent_session(exchanges, "heavy" if seed % 2 else "typical", seed=seed))
    out: list[ChatMessage] = []
    for i, m in enumerate(base):
        roll = rng.random()
        if m.role == "tool" and roll < 0.04 and broken:
            continue  # a missing result: sanitize adds one
        if m.role == "tool" and roll < 0.08:
            m = msgspec.structs.replace(m, content=" \n\t " * rng.randint(1, 200) + "spaced   out\n\n\n  words " * rng.randint(1, 40))
        elif m.role == "tool" and roll < 0.10:
            m = msgspec.structs.replace(m, content="日志 错误 缓存\n" * rng.randint(10, 400))
        elif m.role == "tool" and roll < 0.12:
            m = msgspec.structs.replace(m, name=None)
        elif m.role == "tool" and roll < 0.13:
            m = msgspec.structs.replace(m, content="")
        elif m.role == "assistant" and m.tool_calls and roll < 0.05 and broken:
            long = ToolCall(id=f"long_{i}", name="patch", arguments=json.dumps({"diff": "y" * rng.randint(400, 3000)}))
            out.append(msgspec.structs.replace(m, tool_calls=(*m.tool_calls, long)))
            continue  # its result is missing: repaired
        elif m.role == "assistant" and not m.tool_calls and roll < 0.1:
            m = msgspec.structs.replace(m, reasoning="thinking " * rng.randint(1, 300))
        elif m.role == "user" and roll < 0.05:
            m = msgspec.structs.replace(m, images=("data:image/png;base64,AAAA",) * rng.randint(1, 3))
        elif m.role == "user" and roll < 0.07 and i > 10:
            m = ChatMessage(role="user", content=f"{SUMMARY_PREFIX}\n\n## Goal\nearlier notes {i}")
        out.append(m)
        if m.role == "tool" and rng.random() < 0.01 and broken:
            out.append(ChatMessage(role="tool", tool_call_id=f"orphan_{i}", name="terminal", content="x" * rng.randint(1, 900)))
    return tuple(out)


def reused_ids(messages: tuple[ChatMessage, ...]) -> tuple[ChatMessage, ...]:
    """The same session with call ids reused from turn to turn (``call_0``, ``call_1``...), as some providers do."""
    out: list[ChatMessage] = []
    for m in messages:
        if m.tool_calls:
            m = msgspec.structs.replace(m, tool_calls=tuple(msgspec.structs.replace(c, id=f"call_{j}") for j, c in enumerate(m.tool_calls)))
        elif m.role == "tool" and m.tool_call_id and m.tool_call_id.startswith("call_"):
            m = msgspec.structs.replace(m, tool_call_id=f"call_{m.tool_call_id.rsplit('_', 1)[1]}")
        out.append(m)
    return tuple(out)


def cases() -> list[tuple[str, tuple[ChatMessage, ...], CompressionSettings, float, str | None, str | None]]:
    big = fit_to_window(DEFAULT_SETTINGS, 200_000)
    out = [
        ("bench_typical_2000", session_of(2_000, "typical"), big, 3.7, None, None),
        ("bench_heavy_2000", session_of(2_000, "heavy"), big, 3.7, None, None),
        ("bench_typical_2000_focus", session_of(2_000, "typical"), big, 4.0, "the deploy", "## Goal\nold notes"),
    ]
    for seed in range(1, 9):
        for exchanges, window in ((15, 4_096), (120, 32_000), (700, 200_000)):
            settings = fit_to_window(DEFAULT_SETTINGS, window)
            if seed % 3 == 0:
                settings = msgspec.structs.replace(settings, result_stub_chars=40 + seed * 7, argument_limit_chars=120, argument_keep_chars=30)
            ratio = (1.3, 2.9, 4.0, 6.5)[seed % 4]
            focus = "caching" if seed % 4 == 1 else None
            out.append((f"varied_{seed}_{exchanges}", varied(seed, exchanges), settings, ratio, focus, None))
            out.append((f"paired_{seed}_{exchanges}", varied(seed, exchanges, broken=False), settings, ratio, focus, "notes" if seed == 2 else None))
        out.append((f"reused_ids_{seed}", reused_ids(varied(seed, 200, broken=seed % 2 == 0)), fit_to_window(DEFAULT_SETTINGS, 32_000), 3.1, None, None))
    return out


def digest(messages: tuple[ChatMessage, ...], settings: CompressionSettings, ratio: float, focus: str | None, previous: str | None) -> str:
    estimate = token_estimator(TokenRatio(chars_per_token=ratio, samples=3))
    given = [estimate(m) for m in messages]
    h = hashlib.sha256()
    for tokens in (given, None):
        pruned = prune(messages, estimate=estimate, settings=settings, tokens=tokens)
        h.update(msgspec.json.encode(pruned))
        for reuse in (pruned.tokens, None):
            found = plan(pruned.messages, estimate=estimate, settings=settings, focus=focus, previous_summary=previous, tokens=reuse)
            h.update(msgspec.json.encode(found))
            if found is not None:
                h.update(msgspec.json.encode(assemble(found, SUMMARY)))
        again = prune(pruned.messages, estimate=estimate, settings=settings)
        h.update(msgspec.json.encode(again))
    raw = plan(messages, estimate=estimate, settings=settings, focus=focus, previous_summary=previous)
    h.update(msgspec.json.encode(raw))
    return h.hexdigest()


def main() -> None:
    digests = {name: digest(messages, settings, ratio, focus, previous) for name, messages, settings, ratio, focus, previous in cases()}
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        expected = json.loads(Path(sys.argv[2]).read_text())
        differ = sorted(name for name in expected if digests.get(name) != expected[name])
        print(f"{len(expected) - len(differ)} of {len(expected)} cases identical" + (f"; differ: {', '.join(differ)}" if differ else ""))
        sys.exit(1 if differ or set(digests) != set(expected) else 0)
    print(json.dumps(digests, indent=1))


if __name__ == "__main__":
    main()
