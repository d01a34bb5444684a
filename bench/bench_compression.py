"""Context compression (issue 15): what planning one pass costs, and how far the token estimate is off.

Measured, in one invocation:

- ``plan_2000``: one compression of a 2,000-message agent session, model call excluded: what the
  turn machine runs for a pass that preflight started (``_machine_compress.start`` and
  ``on_summary``): ``prune`` given preflight's per-message estimates, ``plan`` (sanitize, head / middle / tail, the summary request with the
  middle serialized) and ``assemble`` with a fixed summary. The session is a seeded mix of 500
  exchanges: a user message (40-600 chars), an assistant message calling one to three tools,
  their results (one in eight a repeat of an earlier one), an answer. ``plan_2000``: results of
  30 chars to 4 KB, arguments up to 300 chars: about 1 MB, what a 200K-token window holds near
  its threshold. ``plan_2000_heavy``: results up to 24 KB, arguments up to 900 chars: about
  4 MB, only possible in a 1M-token window. Settings for a 200K window (``fit_to_window``).
  Goal: median <= 5 ms.
  Baseline, interleaved round by round: encoding the same transcript as a request body the way
  ``_model.call_model`` does (``to_openai`` per message, ``msgspec.json.encode``), the work every
  model call of that session pays anyway; the ratio says how many model calls' worth of encoding
  one compression costs. ``plan_2000_cold``: the same pass with no estimates at hand (after a
  context overflow, or ``/compress``): ``prune`` estimates every message first. ``estimate_2000``:
  the preflight check alone (every message estimated once and summed, as
  ``_machine_compress.preflight``), paid before every fresh model call, against the same baseline.
- ``estimate_error``: the token estimate the machine compares with the threshold
  (the size of the messages and of the tool schemas, ``MachineConfig.tools_size``, at the
  session's ratio, as ``_machine_compress.preflight``) against a reported count, for 7 sessions of different
  shapes (plain English chat, Python source read by a tool, JSON results, numbers and logs,
  Chinese text, Markdown docs, a mixed agent session), 12 requests each, each request the
  previous transcript plus one exchange. ``uncalibrated``: with the starting ratio (4 chars a
  token). ``calibrated``: request k estimated with the ratio learned from that session's replies
  1..k-1 (``calibrate`` over the same size, schemas included, as ``_machine_compress.learn``), requests 2-12.
  Median and p90 of |estimate - reported| / reported. References:
  ``server``: the test model server's ``usage.prompt_tokens`` over real HTTP (its count is
  ceil(chars / 4) + 4 per message: a rule, not a tokenizer, so this only checks the plumbing);
  ``cl100k_base`` (tiktoken, GPT-4 / GPT-3.5) and ``deepseek-v3`` (its ``tokenizer.json`` through
  ``tokenizers``) from the files litellm ships, a test dependency, when present (nothing is
  downloaded; a missing one is reported as not available). For those two the chat framing is
  OpenAI's documented count (3 tokens a message, 1 for a name, 3 to prime the reply) and the
  tool schemas are their compact JSON tokenized: real providers render schemas their own way, so
  the tools' share is an approximation.

Run from the repository root: ``python bench/bench_compression.py [--quick] [--json]``
(about 20 s on the shared 2-vCPU VM; --quick about 8 s, most of it imports).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx
import msgspec
from _common import parse_options, percentile, print_header, print_json, versions

from actors.agent._compress import DEFAULT_SETTINGS, assemble, fit_to_window, plan, prune
from actors.agent._tokens import RequestSize, TokenRatio, calibrate, request_size, token_estimator, tools_size
from actors.chaos import ModelServer
from protocols import ChatMessage, ToolCall

SUMMARY = "## Goal\nKeep the service running.\n## Progress\n" + "- step done with its result\n" * 40
TOOL_NAMES = ("read_file", "terminal", "search_files", "write_file", "patch", "web_extract")


# -- (a) planning cost ---------------------------------------------------------------------------


RESULT_SIZES = {"typical": (60, 200, 500, 1_500, 4_000), "heavy": (80, 300, 1_200, 4_000, 24_000)}
ARGUMENT_SIZES = {"typical": (10, 300), "heavy": (10, 880)}


def agent_session(exchanges: int, kind: str, seed: int = 15) -> tuple[ChatMessage, ...]:
    """A seeded agent transcript: per exchange a user message, a call of 1-3 tools, their results, an answer."""
    rng = random.Random(seed)
    words = [
        "the",
        "of",
        "service",
        "config",
        "deploy",
        "error",
        "retry",
        "cache",
        "path",
        "value",
        "line",
        "test",
        "build",
        "user",
        "request",
        "token",
        "file",
    ]
    earlier: list[str] = []
    messages: list[ChatMessage] = [ChatMessage(role="user", content="Keep the build green and the service up. " * 3)]
    for i in range(exchanges):
        if i:
            messages.append(ChatMessage(role="user", content=" ".join(rng.choices(words, k=rng.randint(8, 100)))))
        calls = tuple(
            ToolCall(
                id=f"call_{i}_{j}",
                name=rng.choice(TOOL_NAMES),
                arguments=json.dumps({"path": f"/src/m{i}.py", "note": "x" * rng.randint(*ARGUMENT_SIZES[kind])}),
            )
            for j in range(rng.choice((1, 1, 1, 2, 3)))
        )
        messages.append(ChatMessage(role="assistant", content=None if rng.random() < 0.7 else "Looking.", tool_calls=calls))
        for c in calls:
            if earlier and rng.random() < 0.125:
                text = rng.choice(earlier)
            else:
                size = int(rng.choice(RESULT_SIZES[kind]) * rng.uniform(0.5, 1.0))
                text = "\n".join(f"{n:>6}|" + " ".join(rng.choices(words, k=8)) for n in range(size // 50 + 1))[:size]
                earlier.append(text)
            messages.append(ChatMessage(role="tool", tool_call_id=c.id, name=c.name, content=text))
        messages.append(ChatMessage(role="assistant", content=" ".join(rng.choices(words, k=rng.randint(5, 60)))))
    return tuple(messages)


def session_of(count: int, kind: str) -> tuple[ChatMessage, ...]:
    """The seeded session of about ``count`` messages, cut at an exchange's end."""
    messages = agent_session(count // 3, kind)
    cut = count
    while messages[cut - 1].role != "assistant" or messages[cut - 1].tool_calls:
        cut -= 1
    return messages[:cut] if cut >= count - 8 else messages[:count]


SETTINGS_200K = fit_to_window(DEFAULT_SETTINGS, 200_000)


def preflight_estimates(transcript: tuple[ChatMessage, ...], estimate: Callable[[ChatMessage], int]) -> list[int]:
    """What ``_machine_compress.preflight`` computes before every fresh call (and hands to a pass)."""
    return [estimate(m) for m in transcript]


def one_pass(transcript: tuple[ChatMessage, ...], estimate: Callable[[ChatMessage], int], tokens: list[int] | None = None) -> int:
    settings = SETTINGS_200K
    pruned = prune(transcript, estimate=estimate, settings=settings, tokens=tokens)
    found = plan(pruned.messages, estimate=estimate, settings=settings, tokens=pruned.tokens)  # as _machine_compress.start
    assert found is not None, "a 2,000-message session always has a middle to summarise"
    return len(assemble(found, SUMMARY))


def encode_request(transcript: tuple[ChatMessage, ...]) -> int:
    body = {"model": "test-model", "messages": [m.to_openai() for m in transcript], "stream": True}
    return len(msgspec.json.encode(body))


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e6


def planning_rows(rounds: int, kind: str) -> list[dict[str, Any]]:
    transcript = session_of(2_000, kind)
    ratio = TokenRatio(chars_per_token=3.7, samples=6)
    estimate = token_estimator(ratio)  # as _machine_compress.start
    sides: dict[str, list[float]] = {"plan": [], "cold": [], "estimate": [], "encode": []}
    given = preflight_estimates(transcript, estimate)
    for _ in range(3):  # warm-up
        one_pass(transcript, estimate, given), one_pass(transcript, estimate), encode_request(transcript)
    for _ in range(rounds):
        sides["encode"].append(timed(lambda: encode_request(transcript)))
        sides["plan"].append(timed(lambda: one_pass(transcript, estimate, given)))
        sides["cold"].append(timed(lambda: one_pass(transcript, estimate)))
        sides["estimate"].append(timed(lambda: sum(preflight_estimates(transcript, estimate))))
    chars = sum(len(m.content or "") + sum(len(c.arguments) for c in m.tool_calls) for m in transcript)
    base = statistics.median(sides["encode"])
    rows = []
    suffix = "" if kind == "typical" else f"_{kind}"
    metrics = ((f"plan_2000{suffix}", "plan", 5_000.0), (f"plan_2000{suffix}_cold", "cold", None), (f"estimate_2000{suffix}", "estimate", None))
    for metric, side, target in metrics:
        median = statistics.median(sides[side])
        row: dict[str, Any] = {
            "bench": "compression",
            "metric": metric,
            "messages": len(transcript),
            "chars": chars,
            "median_us": round(median, 1),
            "p90_us": round(percentile(sides[side], 90), 1),
            "baseline": "encode the request body (to_openai + msgspec)",
            "baseline_median_us": round(base, 1),
            "ratio": round(median / base, 2),
            "n": rounds,
        }
        if target is not None:
            row["target_median_us"] = target
            row["meets_target"] = median <= target
        rows.append(row)
    return rows


# -- (b) the estimate's error ----------------------------------------------------------------------


def tool_schemas() -> list[dict[str, Any]]:
    import actors.tools as tools_package

    names = tools_package.resolve_toolsets(["hermes-api-server"])
    return [spec.schema() for spec in tools_package.REGISTRY.specs(names).values()]


def shape_sessions(rng: random.Random, exchanges: int) -> dict[str, list[ChatMessage]]:
    """Seven transcripts of ``exchanges`` exchanges each, one shape of content each."""
    sources = sorted((ROOT / "actors" / "agent").glob("_*.py"))
    docs = (ROOT / "ARCHITECTURE.md").read_text().split("\n\n")
    english = [
        "The",
        "harbour",
        "master",
        "checks",
        "the",
        "tide",
        "tables",
        "each",
        "morning",
        "and",
        "writes",
        "the",
        "expected",
        "high",
        "water",
        "times",
        "on",
        "the",
        "board",
        "by",
        "the",
        "quay.",
    ]
    chinese = "今天上午我们检查了服务器的日志，发现缓存配置有一个错误，需要重新部署。用户希望明天之前完成测试并提交报告。"
    out: dict[str, list[ChatMessage]] = {name: [] for name in ("chat_en", "code", "json", "numbers", "chinese", "markdown", "agent_mixed")}
    system = ChatMessage(role="system", content="You are a careful engineering agent. Use the tools; answer briefly. " * 4)
    for messages in out.values():
        messages.append(system)

    def exchange(into: list[ChatMessage], i: int, result: str, name: str) -> None:
        into.append(ChatMessage(role="user", content=" ".join(rng.choices(english, k=rng.randint(6, 30)))))
        call = ToolCall(id=f"call_{name}_{i}", name=name, arguments=json.dumps({"path": f"/srv/app/part_{i}.txt", "limit": 200}))
        into += [ChatMessage(role="assistant", tool_calls=(call,)), ChatMessage(role="tool", tool_call_id=call.id, name=name, content=result)]
        into.append(ChatMessage(role="assistant", content=" ".join(rng.choices(english, k=rng.randint(10, 60)))))

    for i in range(exchanges):
        out["chat_en"] += [
            ChatMessage(role="user", content=" ".join(rng.choices(english, k=rng.randint(20, 200)))),
            ChatMessage(role="assistant", content=" ".join(rng.choices(english, k=rng.randint(40, 300)))),
        ]
        source = rng.choice(sources).read_text().splitlines()
        start = rng.randrange(max(1, len(source) - 120))
        exchange(out["code"], i, "\n".join(f"{n + 1:>6}|{line}" for n, line in enumerate(source[start : start + rng.randint(30, 120)], start)), "read_file")
        records = [
            {"id": rng.randrange(10**6), "name": rng.choice(english), "ok": rng.random() < 0.5, "score": round(rng.random(), 4)}
            for _ in range(rng.randint(10, 80))
        ]
        exchange(out["json"], i, json.dumps({"items": records}, indent=1), "web_extract")
        lines = [
            f"2026-11-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} pid={rng.randint(100, 99999)} took={rng.random() * 900:.1f}ms"
            for _ in range(rng.randint(20, 120))
        ]
        exchange(out["numbers"], i, "\n".join(lines), "terminal")
        text = "".join(rng.choice((chinese[: rng.randint(10, len(chinese))], chinese[rng.randint(0, 20) :])) for _ in range(rng.randint(8, 40)))
        out["chinese"] += [ChatMessage(role="user", content=text[: len(text) // 3]), ChatMessage(role="assistant", content=text)]
        exchange(out["markdown"], i, "\n\n".join(rng.sample(docs, 4)), "read_file")
        kind = rng.choice(("code", "json", "numbers", "markdown"))
        donor = out[kind]
        exchange(out["agent_mixed"], i, donor[-2].content or "", "terminal")
    return out


def cl100k_counter() -> Callable[[str], int] | None:
    """tiktoken's cl100k_base from the encoding file litellm ships, or None (never downloads)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None or importlib.util.find_spec("tiktoken") is None:
        return None
    folder = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    if not (folder / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4").exists():  # tiktoken's cache name for cl100k_base
        return None
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base")
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def deepseek_counter() -> Callable[[str], int] | None:
    """DeepSeek V3's tokenizer from the tokenizer.json litellm ships, or None."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None or importlib.util.find_spec("tokenizers") is None:
        return None
    path = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers" / "deepseek_tokenizer.json"
    if not path.exists():
        return None
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def framed_count(count: Callable[[str], int], messages: Sequence[ChatMessage], tools_json: str) -> int:
    """A tokenizer's prompt count with OpenAI's documented chat framing (an approximation for tools)."""
    total = 3 + (count(tools_json) if tools_json else 0)
    for m in messages:
        total += 3 + count(m.role) + (count(m.content) if m.content else 0) + (1 + count(m.name) if m.name else 0)
        for c in m.tool_calls:
            total += 3 + count(c.name) + count(c.arguments)
    return total


def server_count(http: httpx.Client, server: ModelServer, messages: Sequence[ChatMessage], tools: list[dict[str, Any]]) -> int:
    body: dict[str, Any] = {"model": "test-model", "messages": [m.to_openai() for m in messages]}
    if tools:
        body["tools"] = tools
    reply = http.post(f"{server.base_url}/chat/completions", json=body)
    reply.raise_for_status()
    reported: int = reply.json()["usage"]["prompt_tokens"]
    return reported


def error_rows(requests: int) -> tuple[list[dict[str, Any]], list[str]]:
    tools = tool_schemas()
    tools_json = json.dumps(tools, separators=(",", ":"), ensure_ascii=False)
    schemas = tools_size(tools)  # as hermes serve computes MachineConfig.tools_size
    sessions = shape_sessions(random.Random(7), requests)
    counters: dict[str, Callable[[str], int] | None] = {"cl100k_base": cl100k_counter(), "deepseek-v3": deepseek_counter()}
    missing = [name for name, counter in counters.items() if counter is None]
    errors: dict[tuple[str, str, str], list[float]] = {}
    with ModelServer(context_window=10**9) as server, httpx.Client(timeout=30) as http:
        for shape, transcript in sessions.items():
            with_tools = shape not in ("chat_en", "chinese")
            step = 2 if shape in ("chat_en", "chinese") else 4
            sent_tools = tools if with_tools else []
            sent_schemas = schemas if with_tools else RequestSize(chars=0, fixed=0)
            references: dict[str, Callable[[Sequence[ChatMessage]], int]] = {"server": functools.partial(server_count, http, server, tools=sent_tools)}
            for name, counter in counters.items():
                if counter is not None:
                    references[name] = functools.partial(framed_count, counter, tools_json=tools_json if with_tools else "")
            for reference, count in references.items():
                ratio = TokenRatio()
                for k in range(1, requests + 1):
                    messages = transcript[: 1 + k * step]
                    reported = count(messages)
                    messages_size = request_size(messages)  # the schemas as fixed tokens at 4 chars a token, as _machine_compress does
                    size = RequestSize(chars=messages_size.chars, fixed=messages_size.fixed + sent_schemas.tokens(TokenRatio()))
                    for phase, used in (("uncalibrated", TokenRatio()), ("calibrated", ratio)):
                        if phase == "calibrated" and k == 1:
                            continue
                        estimated = size.tokens(used)
                        errors.setdefault((reference, phase, shape), []).append(abs(estimated - reported) / reported)
                    ratio = calibrate(ratio, size, reported)
    rows: list[dict[str, Any]] = []
    for reference in ("server", *counters):
        for phase in ("uncalibrated", "calibrated"):
            pooled = [e for (r, p, _), values in errors.items() if (r, p) == (reference, phase) for e in values]
            if not pooled:
                continue
            by_shape = {s: round(statistics.median(v) * 100, 1) for (r, p, s), v in errors.items() if (r, p) == (reference, phase)}
            rows.append(
                {
                    "bench": "compression",
                    "metric": "estimate_error",
                    "reference": reference,
                    "phase": phase,
                    "median_pct": round(statistics.median(pooled) * 100, 1),
                    "p90_pct": round(percentile(pooled, 90) * 100, 1),
                    "median_pct_by_shape": by_shape,
                    "n": len(pooled),
                }
            )
    return rows, missing


def main() -> None:
    options = parse_options(__doc__)
    rounds, requests = (10, 4) if options.quick else (60, 12)
    packages: list[str | tuple[str, str]] = ["msgspec"]
    for optional in ("tiktoken", "tokenizers", "litellm"):
        if importlib.util.find_spec(optional) is not None:
            packages.append(optional)
    info = versions(*packages)
    print_header("compression", info, options.json, f"planning: {rounds} interleaved rounds; estimate error: 7 sessions x {requests} requests")
    plan_rows = planning_rows(rounds, "typical") + planning_rows(max(3, rounds // 3), "heavy")
    rows, missing = error_rows(requests)
    if options.json:
        print_json(plan_rows + rows)
        if missing:
            print_json([{"bench": "compression", "metric": "not_available", "references": missing}])
        return
    for row in plan_rows:
        target = f"  goal <= {row['target_median_us'] / 1000:g} ms: {'met' if row['meets_target'] else 'MISSED'}" if "target_median_us" in row else ""
        print(
            f"{row['metric']:<25} {row['messages']} msgs {row['chars']:,} chars  median {row['median_us'] / 1000:7.2f} ms  p90 {row['p90_us'] / 1000:7.2f} ms  "
            f"encode baseline {row['baseline_median_us'] / 1000:6.2f} ms  ratio {row['ratio']:.2f}{target}"
        )
    for row in rows:
        shapes = ", ".join(f"{s} {v}" for s, v in row["median_pct_by_shape"].items())
        print(
            f"error vs {row['reference']:<11} {row['phase']:<12}  median {row['median_pct']:5.1f} %  p90 {row['p90_pct']:5.1f} %  (n {row['n']}; medians: {shapes})"
        )
    if missing:
        print("not available offline: " + ", ".join(missing))


if __name__ == "__main__":
    main()
