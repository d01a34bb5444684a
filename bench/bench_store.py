"""Session store: append rate through the writer actor (group commit, FTS5) and search latency.

Measured, in one invocation, on fresh files in a temporary directory:

- ``append_rate``: messages per second appended through :class:`actors.store.StoreWriter`,
  a child of a ``supervisor.Runtime``, with group commit and the FTS5 triggers on. The
  caller tells ``AppendMessages`` back-to-back (``per_command`` messages each, 1 and 16)
  and the clock stops at the last ``MessagesPersisted`` (every row committed). Baseline,
  in the same invocation and interleaved round by round: a plain apsw loop inserting the
  same rows into the same schema (triggers included) in one transaction: no actor, no
  savepoints, no replies. Goal: >= 20,000 messages/s through the writer. Reported: median
  over rounds, ratio writer / baseline, transactions the writer committed.
- ``search``: :meth:`actors.store.StoreReader.search` latency (median, p99, ms) over a store
  of 100,000 messages (10,000 with ``--quick``) in 1,000 sessions of 100 messages, written
  as conversations are: 20 sessions at a time, their messages interleaved. Message words
  follow a Zipf law over a 5,000-word vocabulary. Kinds: ``rare_word`` (a word drawn
  uniformly from the vocabulary), ``common_word`` (drawn by frequency: the top words are in
  most messages, so bm25 ranks tens of thousands of matches, the worst case), ``two_words``
  (by frequency), ``prefix`` (``abc*``) and ``in_one_session`` (a word by frequency within
  one session).

Run from the repository root: ``python bench/bench_store.py [--quick] [--json]``.
Bounded run time: well under a minute (a few seconds with ``--quick``).
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import apsw
from _common import parse_options, percentile, print_header, print_json, versions

from actors.store import StoreReader, StoreWriter, open_writer
from protocols import ChatMessage
from protocols._store import (
    AppendMessages,
    CreateSession,
    GetStoreStatistics,
    StoreFailed,
)
from supervisor import ChildSpec, Runtime

APPEND_GOAL_PER_S = 20_000
DEADLINE = 120.0


# -- data ---------------------------------------------------------------------------------


def vocabulary(rng: random.Random, size: int = 5_000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


def contents(rng: random.Random, words: list[str], count: int) -> list[str]:
    """``count`` message texts of 8-40 words, Zipf-like word frequencies."""
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    return [" ".join(rng.choices(words, weights, k=rng.randint(8, 40))) for _ in range(count)]


# -- append: the writer actor vs a plain apsw loop ----------------------------------------------


class Sink:
    """Counts replies (told from the writer's thread) and signals when all have arrived."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.failures: list[StoreFailed] = []
        self.done = threading.Event()

    def tell(self, message: Any) -> None:
        if isinstance(message, StoreFailed):
            self.failures.append(message)
        self.count += 1
        if self.count >= self.expected:
            self.done.set()


def run_writer(path: Path, texts: list[str], per_command: int) -> tuple[float, dict[str, Any]]:
    """Seconds to append ``texts`` through the writer actor, and its statistics."""
    runtime = Runtime([ChildSpec(id="store", actor=StoreWriter, args=(path,))]).start()
    try:
        store = runtime.lookup("/store")
        ready = Sink(1)
        store.tell(CreateSession(session_id="bench", source="bench", reply_to=ready))
        if not ready.done.wait(DEADLINE) or ready.failures:
            raise SystemExit(f"the writer did not create the session: {ready.failures}")
        messages = [ChatMessage(role="user", content=text) for text in texts]
        chunks = [tuple(messages[i : i + per_command]) for i in range(0, len(messages), per_command)]
        sink = Sink(len(chunks))
        started = time.perf_counter()
        for i, chunk in enumerate(chunks):
            store.tell(AppendMessages(session_id="bench", messages=chunk, token=str(i), reply_to=sink))
        if not sink.done.wait(DEADLINE):
            raise SystemExit(f"only {sink.count} of {len(chunks)} appends were acknowledged in {DEADLINE} s")
        elapsed = time.perf_counter() - started
        if sink.failures:
            raise SystemExit(f"{len(sink.failures)} appends failed, first: {sink.failures[0].error}")
        stats = store.ask(GetStoreStatistics(), timeout=DEADLINE)
        return elapsed, {"transactions": stats.transactions - 1, "largest_batch": stats.largest_batch}
    finally:
        runtime.stop(timeout=DEADLINE)


def run_baseline(path: Path, texts: list[str]) -> float:
    """Seconds for a plain apsw loop to insert the same rows in one transaction."""
    db = open_writer(path)
    try:
        db.execute("INSERT INTO sessions (id, source, started_at) VALUES ('bench', 'bench', ?)", (time.time(),))
        insert = (
            "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, "
            "token_count, finish_reason, reasoning) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        started = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        now = time.time()
        for text in texts:
            db.execute(insert, ("bench", "user", text, None, None, None, now, None, None, None))
        db.execute("UPDATE sessions SET message_count = message_count + ? WHERE id = 'bench'", (len(texts),))
        db.execute("COMMIT")
        return time.perf_counter() - started
    finally:
        db.close()


# -- search ----------------------------------------------------------------------------------------


def build_search_store(path: Path, texts: list[str], sessions: int) -> None:
    db = open_writer(path)
    try:
        with db:
            db.executemany(
                "INSERT INTO sessions (id, source, started_at) VALUES (?, 'bench', ?)",
                [(f"s{i}", float(i)) for i in range(sessions)],
            )
            db.executemany(
                "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', ?, ?)",
                [(session_of(i, len(texts), sessions), text, float(i)) for i, text in enumerate(texts)],
            )
        db.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
    finally:
        db.close()


def session_of(index: int, total: int, sessions: int, concurrent: int = 20) -> str:
    """Session of message ``index``: ``concurrent`` sessions at a time, messages interleaved."""
    per_session = max(1, total // sessions)
    group = index // (per_session * concurrent)
    return f"s{min(sessions - 1, group * concurrent + index % concurrent)}"


def time_searches(path: Path, queries: list[tuple[str, str | None]]) -> tuple[list[float], int]:
    """Milliseconds per search, and the total number of hits."""
    timings, hits = [], 0
    with StoreReader(path) as reader:
        reader.search(queries[0][0])  # warm the page cache
        for query, session_id in queries:
            started = time.perf_counter()
            found = reader.search(query, session_id=session_id)
            timings.append((time.perf_counter() - started) * 1000)
            hits += len(found)
    return timings, hits


# -- output ----------------------------------------------------------------------------------------


def emit(row: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json([row])
    elif row["metric"] == "append_rate":
        print(
            f"append_rate  per_command={row['per_command']:<3} writer {row['median_per_s']:>9,.0f} msg/s   "
            f"baseline {row['baseline_median_per_s']:>9,.0f} msg/s   ratio {row['ratio']:.2f}   "
            f"goal {row['goal_per_s']:,} {'met' if row['meets_goal'] else 'MISSED'}   "
            f"transactions {row['transactions']} (largest batch {row['largest_batch']}) for {row['messages']:,} messages",
            flush=True,
        )
    else:
        print(
            f"search       {row['kind']:<14} median {row['median_ms']:>7.3f} ms   p99 {row['p99_ms']:>7.3f} ms   "
            f"over {row['store_messages']:,} messages, {row['n']} queries, {row['mean_hits']:.1f} hits/query",
            flush=True,
        )


def main() -> int:
    options = parse_options(__doc__)

    rounds = 2 if options.quick else 3
    append_count = 10_000 if options.quick else 30_000
    search_count = 10_000 if options.quick else 100_000
    query_count = 100 if options.quick else 300

    info = versions(("sqlite", apsw.sqlite_lib_version()), ("apsw", apsw.apsw_version()), "pykka", "msgspec")
    text = f"rounds {rounds}, messages/round {append_count:,}, search store {search_count:,} messages\n"
    print_header("store", info, options.json, text)

    rng = random.Random(1234)
    words = vocabulary(rng)
    texts = contents(rng, words, max(append_count, search_count))
    with tempfile.TemporaryDirectory(prefix="bench_store_") as tmp:
        directory = Path(tmp)
        for per_command in (1, 16):
            writer_rates, baseline_rates, stats = [], [], {}
            for r in range(rounds):
                elapsed, stats = run_writer(directory / f"w{per_command}_{r}.db", texts[:append_count], per_command)
                writer_rates.append(append_count / elapsed)
                baseline_rates.append(append_count / run_baseline(directory / f"b{per_command}_{r}.db", texts[:append_count]))
            median, base = statistics.median(writer_rates), statistics.median(baseline_rates)
            emit(
                {
                    "bench": "store",
                    "metric": "append_rate",
                    "per_command": per_command,
                    "messages": append_count,
                    "rounds": rounds,
                    "median_per_s": round(median),
                    "baseline_median_per_s": round(base),
                    "ratio": round(median / base, 3),
                    "goal_per_s": APPEND_GOAL_PER_S,
                    "meets_goal": median >= APPEND_GOAL_PER_S,
                    **stats,
                },
                options.json,
            )

        path = directory / "search.db"
        sessions = 1_000
        build_search_store(path, texts[:search_count], sessions)
        qrng = random.Random(99)
        weights = [1.0 / (rank + 1) for rank in range(len(words))]
        kinds: dict[str, list[tuple[str, str | None]]] = {
            "rare_word": [(qrng.choice(words), None) for _ in range(query_count)],
            "common_word": [(qrng.choices(words, weights)[0], None) for _ in range(query_count)],
            "two_words": [(" ".join(qrng.choices(words, weights, k=2)), None) for _ in range(query_count)],
            "prefix": [(qrng.choice(words)[:3] + "*", None) for _ in range(query_count)],
            "in_one_session": [(qrng.choices(words, weights)[0], f"s{qrng.randrange(sessions)}") for _ in range(query_count)],
        }
        for kind, queries in kinds.items():
            timings, hits = time_searches(path, queries)
            emit(
                {
                    "bench": "store",
                    "metric": "search",
                    "kind": kind,
                    "store_messages": search_count,
                    "n": len(timings),
                    "median_ms": round(statistics.median(timings), 3),
                    "p99_ms": round(percentile(timings, 99), 3),
                    "mean_hits": round(hits / len(timings), 2),
                },
                options.json,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
