"""The API server under load: C concurrent streaming chat completions, each a two-round-trip tool turn.

Three processes, all on 127.0.0.1:

- **model**: the test model server (``actors.chaos.ModelServer``) in its own process
  (this file with ``--model-server``). It prints its base URL, then takes commands on
  stdin: ``script PREFIX COUNT TURNS`` scripts sessions ``PREFIX0 .. PREFIX<COUNT-1>``
  (``X-Hermes-Session-Id``) with TURNS x [``ToolCallsReply`` calling ``noop``,
  ``TextReply``], each reply with ``latency=0.2`` s, so every turn costs the model 400 ms;
  ``stats [PREFIX]`` counts the requests (and TCP connections) of those sessions.
- **server** (the system under test): this file with ``--sut DIR MODEL_URL``, a fresh
  process per concurrency level. It builds the tree as ``tests/platforms/server_kit.py``
  does (``agent_specs`` + ``/platforms/api`` = ``ApiServer`` under a ``Supervisor``): the
  store on a real SQLite file in a temporary directory, one registered tool ``noop`` (an
  ``async def`` returning at once), ``idle_timeout=0``, ``max_concurrent=1_000_000``,
  ``max_attempts=1`` (a failed model call fails the turn instead of being retried out of
  sight); everything else (hypercorn config, ``ModelClients``, ``gc.freeze()`` once it
  listens) as ``hermes serve`` has it. The model process freezes its start-up objects too,
  so its full collections (~50-120 ms over ~110k objects) do not stall the model's answers.
  On stdin, ``stats`` returns the CPU time of its threads by name and the reactor's worst
  heartbeat lag since the previous ``stats``; ``stop`` stops the runtime.
- **clients** (this process, one ``trio.run`` per level): C tasks sharing one keep-alive
  pool of the runtime's own HTTP/1.1 client (``actors/agent/_http1.py``: O(1) per request,
  ~1.3 ms of client CPU a turn against ~2.6 ms for httpx; the load generator shares the two
  cores with the server). ``--client httpx`` gives each task its own small
  ``httpx.AsyncClient`` instead (one connection each: one httpx pool of C connections costs
  O(C) per pool event in httpcore 1.0.9). Client i owns session ``s<C>-<i>`` and does its turns one after another:
  ``POST /v1/chat/completions``, ``stream: true``, the conversation so far (its user and
  assistant texts, as an OpenAI client sends it) and ``X-Hermes-Session-Id``, which the
  server forwards to the model as the session id. A turn is complete when the status is
  200 and the stream carries a ``: hermes.tool.progress`` "completed" comment with ``ok: true``
  (asked for with ``X-Hermes-Tool-Progress: true``),
  the scripted text, a ``finish_reason: "stop"`` chunk and ``data: [DONE]``, and ends;
  anything else (another status, an error event, a cut stream, an exception, a turn still
  running at the round deadline) is an error.

Baseline, same invocation, same concurrency: the agent loop without our runtime. C tasks
share one ``openai.AsyncOpenAI`` (default limits, ``max_retries=0``: the server's own
model client is the same) and call the model process directly as session ``b<C>-<i>``:
per turn a streamed completion with the ``noop`` tool schema (the model calls ``noop``),
the tool "runs" in place, then a second streamed completion with the call and its result
appended (the model answers text). The loop keeps the transcript, as a session does.

Per level: a fresh server; one warm-up turn per client on both sides (it creates the
sessions: reported as ``first_turn_*``, not in the timed figures); then ``rounds`` timed
rounds per side, alternating which side goes first. In a round each of the C clients does
K turns back to back (closed loop); client i starts i/C x 0.4 s after the first, so the C
requests do not all land in the same instant (``--burst``: all at once). Measured:

- per turn, wall time (request sent -> stream ended) and the time **added** over the
  model's own 2 x 200 ms (wall - 0.4 s): p50 / p99;
- throughput: complete turns / round wall time, median of the rounds; ``throughput_ratio``
  = server / baseline;
- CPU time per turn of the server process, of the model process and of this process
  (``/proc/<pid>/stat`` utime+stime; ``process_time``), deltas over that side's timed
  rounds only; the server's CPU split by thread name (``hermes-reactor``,
  ``SessionActor``, ``StoreWriter``...);
- the server's peak RSS (``VmHWM``, the process is fresh per level) and thread count;
  its reactor's worst heartbeat lag during the timed rounds;
- errors by kind, and whether every turn completed; requests and TCP connections the
  model server saw per side; the host's TCP ``ListenOverflows`` delta (``/proc/net/netstat``).

A session's transcript grows by 4 messages a turn (``turns_per_session`` = 1 + rounds x K),
and the OpenAI SDK's request cost grows with it, so CPU per turn is comparable across
levels only at equal ``turns_per_session``.

Goals: at C = 100, p99 added <= 100 ms; at C = 1,000, 0 errors, every turn completes and
throughput >= 80 % of the baseline's.

Diagnostics (not part of a normal run): ``--server-backlog N`` sets hypercorn's
``Config.backlog`` in the server process (hypercorn calls ``listen(100)`` again on the
socket ``ApiServer`` bound with ``listen(1024)``); ``--profile-reactor PREFIX`` runs
cProfile in the server's reactor thread and writes ``PREFIX-c<C>.prof``.

Run from the repository root: ``python bench/bench_server.py [--quick] [--json]``
(full: C = 1, 10, 100, 1,000, 3-4 minutes; ``--quick``: C = 10 and 100, about 25 s).
Exits 1 if any turn failed or did not complete, on either side.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import ssl
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx
import msgspec
import openai
import trio
from _common import bench_parser, print_header, print_json, versions
from _server_procs import (
    KEY,
    MODEL_LATENCY,
    NOOP_SCHEMA,
    TEXT,
    Child,
    listen_overflows,
    model_main,
    proc_cpu,
    proc_status,
    raise_nofile,
    sut_main,
)
from _server_report import MODEL_TIME, Level, Side, goal_rows, level_row, print_table

from actors.agent._http1 import Endpoint, Pool

SESSION_HEADER = "X-Hermes-Session-Id"
PROGRESS_HEADER = "X-Hermes-Tool-Progress"
PROGRESS = ": hermes.tool.progress "
TURN_TIMEOUT = 120.0
TOOLS = [{"type": "function", "function": {"name": "noop", "description": "Do nothing and answer ok.", "parameters": NOOP_SCHEMA}}]


# -- one turn on each side ---------------------------------------------------------------------


def user_message(history: list[dict[str, Any]]) -> dict[str, str]:
    number = sum(1 for message in history if message["role"] == "user")
    return {"role": "user", "content": f"Bench turn {number}: call the noop tool, then say ok."}


def judge_stream(lines: list[str]) -> tuple[str, str | None]:
    """The answer a turn's SSE lines carry, and what is wrong with the turn (None: complete)."""
    text, tool_ok, finished, done = [], False, False, False
    for line in lines:
        if line.startswith(PROGRESS):
            item = msgspec.json.decode(line[len(PROGRESS) :])
            tool_ok = tool_ok or (item.get("status") == "completed" and item.get("ok") is True)
        elif line.startswith("data: "):
            data = line[6:]
            if data == "[DONE]":
                done = True
                continue
            item = msgspec.json.decode(data)
            if "error" in item:
                return "".join(text), f"error event {item['error'].get('code')}"
            for choice in item.get("choices") or ():  # none in a usage-only chunk
                text.append(choice["delta"].get("content") or "")
                finished = finished or choice.get("finish_reason") == "stop"
    answer = "".join(text)
    if not (done and finished):
        return answer, "incomplete stream"
    if not tool_ok:
        return answer, "no successful tool call"
    return answer, None if answer == TEXT else "wrong text"


async def stack_turn(client: httpx.AsyncClient, session: str, history: list[dict[str, Any]]) -> str | None:
    """One streamed turn through the API server (httpx client); None when complete, else what went wrong."""
    history.append(user_message(history))
    body = {"model": "hermes-bench", "stream": True, "messages": history}
    async with client.stream("POST", "/v1/chat/completions", json=body, headers={SESSION_HEADER: session, PROGRESS_HEADER: "true"}) as response:
        if response.status_code != 200:
            await response.aread()
            return f"status {response.status_code}"
        lines = [line async for line in response.aiter_lines()]
    answer, problem = judge_stream(lines)
    history.append({"role": "assistant", "content": answer})
    return problem


async def stack_turn_h11(conn: tuple[Pool, Endpoint], session: str, history: list[dict[str, Any]]) -> str | None:
    """The same turn through the runtime's own HTTP/1.1 client (``--client h11``, the default)."""
    pool, endpoint = conn
    history.append(user_message(history))
    body = msgspec.json.encode({"model": "hermes-bench", "stream": True, "messages": history})
    headers = [("authorization", f"Bearer {KEY}"), ("content-type", "application/json"), (SESSION_HEADER, session), (PROGRESS_HEADER, "true")]
    async with pool.post(endpoint, headers, body) as response:
        data = await response.read(1 << 24)
        if response.status != 200:
            return f"status {response.status}"
    answer, problem = judge_stream(data.decode().splitlines())
    history.append({"role": "assistant", "content": answer})
    return problem


class Sticky:
    """``--workers``: one user's own connection (a pool of one), replaced when the worker it
    reached refuses the session (409 / ``session_owned_elsewhere``: another worker holds it)."""

    moves = 0
    """Turns sent again on a new connection, over all users (forwarding is not built yet)."""

    def __init__(self, endpoint: Endpoint, tls: ssl.SSLContext) -> None:
        self.endpoint, self.tls = endpoint, tls
        self.pool = Pool(lambda: tls)


async def sticky_turn(user: Sticky, session: str, history: list[dict[str, Any]]) -> str | None:
    """``stack_turn_h11`` on the user's connection; refused by a worker that does not hold the
    session, the same turn goes on a new connection (the kernel picks the worker), 20 times at most."""
    kept = len(history)
    problem: str | None = "not sent"
    for _ in range(20):
        problem = await stack_turn_h11((user.pool, user.endpoint), session, history)
        if problem is None or not ("409" in problem or "session_owned_elsewhere" in problem):
            return problem
        del history[kept:]
        await user.pool.aclose()
        user.pool = Pool(lambda: user.tls)
        Sticky.moves += 1
    return problem


async def baseline_turn(sdk: openai.AsyncOpenAI, session: str, history: list[dict[str, Any]]) -> str | None:
    """The same turn as an agent loop on the bare SDK: tool-call round, tool, text round."""
    history.append(user_message(history))
    create: Any = sdk.chat.completions.create  # the plain dicts are what an agent loop has
    for round_trip in range(2):
        stream = await create(
            model="test-model",
            messages=history,
            tools=TOOLS,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={SESSION_HEADER: session},
        )
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish = None
        async for chunk in stream:
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            finish = choice.finish_reason or finish
            if choice.delta.content:
                text.append(choice.delta.content)
            for part in choice.delta.tool_calls or ():
                slot = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] = part.id or slot["id"]
                if part.function is not None:
                    slot["name"] += part.function.name or ""
                    slot["arguments"] += part.function.arguments or ""
        await stream.close()
        if round_trip == 0:
            if finish != "tool_calls" or [c["name"] for c in calls.values()] != ["noop"]:
                return "no tool call"
            history.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls.values()],
                }
            )
            history.extend({"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls.values())
        else:
            history.append({"role": "assistant", "content": "".join(text)})
            if finish != "stop":
                return "incomplete stream"
            return None if "".join(text) == TEXT else "wrong text"
    return "unreachable"


# -- rounds ----------------------------------------------------------------------------------------


class Probes:
    """CPU so far of the three processes (and of the server's threads, asked over its stdin)."""

    def __init__(self, server: Child, model: Child) -> None:
        self.server = server
        self.model = model

    def cpu(self) -> dict[str, Any]:
        """Also the server reactor's worst heartbeat lag since the previous call."""
        stats = json.loads(self.server.command("stats"))
        return {
            "server": proc_cpu(self.server.pid),
            "model": proc_cpu(self.model.pid),
            "client": time.process_time(),
            "threads": stats["threads"],
            "lag_max_ms": stats["lag_max_ms"],
        }


async def run_round(
    side: Side,
    turn: Any,
    conns: list[Any],
    prefixes: list[str],
    histories: list[list[dict[str, Any]]],
    turns: int,
    *,
    warmup: bool,
    probes: Probes,
    deadline: float,
    stagger: bool,
) -> None:
    """All clients do ``turns`` turns each, one after another; record them unless ``warmup``.

    With ``stagger``, client i starts i/C of a model turn (0.4 s) after the first, so
    arrivals spread over one turn instead of all C requests landing in the same instant.
    """
    concurrency = len(prefixes)
    walls: list[float] = []
    errors: Counter[str] = Counter()
    completed = 0

    async def one_client(index: int) -> None:
        nonlocal completed
        if stagger:
            await trio.sleep(index * MODEL_TIME / concurrency)
        for _ in range(turns):
            start = time.perf_counter()
            try:
                with trio.fail_after(TURN_TIMEOUT):
                    problem = await turn(conns[index], prefixes[index], histories[index])
            except Exception as exc:
                problem = f"{type(exc).__name__}: {str(exc)[:60]}"
            wall = time.perf_counter() - start
            completed += 1
            if problem is None:
                walls.append(wall)
            else:
                errors[problem] += 1

    before = probes.cpu()
    start = time.perf_counter()
    with trio.move_on_after(deadline):
        async with trio.open_nursery() as nursery:
            for index in range(concurrency):
                nursery.start_soon(one_client, index)
    elapsed = time.perf_counter() - start
    after = probes.cpu()
    missing = concurrency * turns - completed
    if missing:
        errors["not finished by the round deadline"] += missing
    if warmup:
        side.warmup_errors.update(errors)
        side.first_walls.extend(walls)
        return
    side.walls.extend(walls)
    side.errors.update(errors)
    side.expected += concurrency * turns
    side.rates.append(len(walls) / elapsed)
    for key in side.cpu:
        side.cpu[key] += after[key] - before[key]
    side.lag_max_ms = max(side.lag_max_ms, after["lag_max_ms"])
    for name, seconds in after["threads"].items():
        side.server_threads[name] = side.server_threads.get(name, 0.0) + seconds - before["threads"].get(name, 0.0)


async def drive_level(level: Level, port: int, model_url: str, probes: Probes) -> None:
    c, k = level.concurrency, level.turns
    deadline = 60.0 + c * k / 10  # generous: a round gives up only below ~10 turns/s
    stack_names = [f"s{c}-{i}" for i in range(c)]
    base_names = [f"b{c}-{i}" for i in range(c)]
    stack_histories: list[list[dict[str, Any]]] = [[] for _ in range(c)]
    base_histories: list[list[dict[str, Any]]] = [[] for _ in range(c)]
    # One small client per simulated user (as C separate users would have): a shared pool
    # of C connections costs the *load generator* O(C) per pool event in httpcore 1.0.
    # The baseline keeps one shared AsyncOpenAI, as the server's own model client does.
    tls = ssl.create_default_context()  # unused (plain http), but built once, not C times
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with contextlib.AsyncExitStack() as stack:
        if level.client == "h11":
            pool = Pool(lambda: tls)
            stack.push_async_callback(pool.aclose)
            endpoint = Endpoint.parse(f"http://127.0.0.1:{port}/v1", "chat/completions")
            clients: list[Any] = [(pool, endpoint)] * c
        elif level.client == "h11-each":  # --workers: one connection per user, so its session stays with one worker
            endpoint = Endpoint.parse(f"http://127.0.0.1:{port}/v1", "chat/completions")
            clients = [Sticky(endpoint, tls) for _ in range(c)]
            for each in clients:
                stack.push_async_callback(lambda user=each: user.pool.aclose())
        else:
            clients = [
                await stack.enter_async_context(
                    httpx.AsyncClient(
                        base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {KEY}"}, limits=limits, timeout=TURN_TIMEOUT, verify=tls
                    )
                )
                for _ in range(c)
            ]
        sdk = openai.AsyncOpenAI(base_url=model_url, api_key="bench-key", max_retries=0, timeout=TURN_TIMEOUT)
        stack.push_async_callback(sdk.close)
        sides: dict[str, tuple[Side, Any, list[Any], list[str], list[list[dict[str, Any]]]]] = {
            "stack": (level.stack, {"h11": stack_turn_h11, "h11-each": sticky_turn}.get(level.client, stack_turn), clients, stack_names, stack_histories),
            "base": (level.base, baseline_turn, [sdk] * c, base_names, base_histories),
        }
        for name in ("stack", "base"):
            side, turn, conns, names, histories = sides[name]
            await run_round(side, turn, conns, names, histories, 1, warmup=True, probes=probes, deadline=deadline, stagger=level.stagger)
        for index in range(level.rounds):
            for name in ("stack", "base") if index % 2 == 0 else ("base", "stack"):
                side, turn, conns, names, histories = sides[name]
                await run_round(side, turn, conns, names, histories, k, warmup=False, probes=probes, deadline=deadline, stagger=level.stagger)
        level.reactor_lag_max_ms = round(level.stack.lag_max_ms, 1)


def run_level(level: Level, model: Child, model_url: str, workdir: Path, backlog: int | None = None, profile: str | None = None) -> None:
    c = level.concurrency
    started = time.perf_counter()
    turns_per_session = 1 + level.rounds * level.turns
    for prefix in (f"s{c}-", f"b{c}-"):
        reply = model.command(f"script {prefix} {c} {turns_per_session}")
        assert reply == "ok", reply
    state = workdir / f"server-c{c}"
    state.mkdir()
    extra = [] if backlog is None else ["--server-backlog", str(backlog)]
    extra += [] if profile is None else ["--profile-reactor", f"{Path(profile).resolve()}-c{c}.prof"]
    server = Child(["--sut", str(state), model_url, *extra], workdir / f"server-c{c}.log")
    try:
        port = int(server.readline().split()[1])
        overflows = listen_overflows()
        trio.run(drive_level, level, port, model_url, Probes(server, model))
        level.listen_overflows = listen_overflows() - overflows
        status = proc_status(server.pid)
        for name, prefix in (("stack", f"s{c}-"), ("baseline", f"b{c}-")):
            stats = json.loads(model.command(f"stats {prefix}"))
            level.model_requests[name] = {"requests": stats["requests"], "connections": stats["connections"]}
        level.peak_rss_kib = int(status["VmHWM"].split()[0])
        level.rss_kib = int(status["VmRSS"].split()[0])
        level.threads = int(status["Threads"])
    finally:
        level.stopped_cleanly = server.close(stop_line="stop", timeout=90)
        level.server_errors_logged = server.errors_logged()
        level.seconds = time.perf_counter() - started


# -- output -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def model_process(workdir: Path) -> Iterator[tuple[Child, str]]:
    model = Child(["--model-server"], workdir / "model.log")
    try:
        yield model, model.readline()
    finally:
        model.close()


def main() -> int:
    parser = bench_parser(__doc__, quick_help="C = 10 and 100, fewer turns (about 25 s)")
    parser.add_argument(
        "--client",
        choices=("h11", "httpx"),
        default="h11",
        help="the stack side's HTTP client (default: h11, the runtime's own; httpx: one AsyncClient per user)",
    )
    parser.add_argument("--burst", action="store_true", help="start all C clients of a round at once (default: spread over 0.4 s)")
    parser.add_argument("--levels", type=lambda text: [int(x) for x in text.split(",")], help="concurrency levels, e.g. 10,100,1000")
    parser.add_argument("--model-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--server-backlog", type=int, help="diagnostic: patch hypercorn's Config.backlog (100) in the server process")
    parser.add_argument("--profile-reactor", metavar="PREFIX", help="diagnostic: cProfile the server's reactor thread, stats to PREFIX-c<C>.prof")
    parser.add_argument("--sut", nargs=2, metavar=("DIR", "MODEL_URL"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--workers",
        type=lambda text: [int(x) for x in text.split(",")],
        help="the workers axis instead: real 'hermes serve --workers N' for each N (e.g. 1,2,4) at C = 100 and 1,000 (or --levels)",
    )
    options = parser.parse_args()
    if options.model_server:
        return model_main()
    if options.sut:
        workdir, model_url = options.sut
        return sut_main(workdir, model_url, options.server_backlog, options.profile_reactor)

    raise_nofile()
    if options.workers:
        from _server_workers import workers_main

        return workers_main(
            options.workers, options.levels or [100, 1000], json_output=options.json, quick=options.quick, drive=drive_level, moves=lambda: Sticky.moves
        )
    # (turns per client per round, rounds) by concurrency level
    plan = {10: (2, 2), 100: (1, 2)} if options.quick else {1: (10, 2), 10: (5, 4), 100: (2, 3), 1000: (1, 3)}
    levels = options.levels or list(plan)
    info = versions("pykka", "trio", "msgspec", "hypercorn", "h11", "httpx", "httpcore", "openai")
    text = f"levels {levels}; each turn = 2 model round trips of {MODEL_LATENCY * 1000:.0f} ms; server and model in their own processes\n"
    print_header("server", info, options.json, text)

    rows: dict[int, dict[str, Any]] = {}
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp, model_process(Path(tmp)) as (model, model_url):
        for c in levels:
            turns, rounds = plan.get(c, (2, 2))
            level = Level(c, turns, rounds, Side("stack"), Side("baseline"), stagger=not options.burst, client=options.client)
            run_level(level, model, model_url, Path(tmp), options.server_backlog, options.profile_reactor)
            row = rows[c] = level_row(level)
            failed = failed or bool(row["stack"]["errors"] or row["baseline"]["errors"] or row["stack"]["warmup_errors"] or row["baseline"]["warmup_errors"])
            if options.json:
                print_json([row])
            else:
                print_table([row])
                for line in level.server_errors_logged[:5]:
                    print(f"      server log: {line[:300]}")
        stats = json.loads(model.command("stats"))
        model_errors = model.errors_logged()
    goals = goal_rows(rows)
    summary = {"bench": "server", "model_server": stats, "model_errors_logged": len(model_errors)}
    if options.json:
        print_json([*goals, summary])
    else:
        print()
        for goal in goals:
            measured = goal.get("measured_ms", goal.get("measured"))
            context = f" (baseline {goal['baseline_ms']} ms)" if "baseline_ms" in goal else ""
            print(f"goal {goal['goal']:<40} measured {measured!s:<12} {'met' if goal['met'] else 'MISSED'}{context}")
        print(f"model server: {stats['requests']} requests, {stats['internal_errors']} internal errors, {len(model_errors)} errors logged")
    return 1 if failed or stats["internal_errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
