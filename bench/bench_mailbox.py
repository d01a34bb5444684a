"""Mailbox cost of a stable :class:`actors.Address` against a raw ``pykka.ActorRef``.

Measured, both sides in the same invocation, over several rounds with fresh actors each:

- ``tell_rate``: messages per second told to one actor, counted as delivered when the
  actor answers an ``ask`` sent after the last ``tell`` (the inbox is FIFO, so the answer
  means every message was handled). Address side: ``runtime.lookup("/sink").tell`` to an
  ``actors.Actor`` child of a ``supervisor.Runtime``; baseline: ``ref.tell`` to a plain
  ``pykka.ThreadingActor`` doing the same counting. ``tell_call`` is the caller's own
  time per ``tell`` in the same rounds (the actor drains concurrently, so it includes
  GIL contention).
- ``ask_rtt``: one ``ask`` round trip to an actor that returns the message, the two sides
  alternating call by call. Address side: ``address.ask(msg)``; baseline: ``ref.ask(msg)``
  to a plain ``pykka.ThreadingActor``. Acceptance target: address median <= 2x the raw
  pykka median. ``ask_rtt_1cpu`` repeats it with the caller and both actor threads pinned
  to one CPU, which removes the scheduler's thread placement from the comparison.

Run from the repository root: ``python bench/bench_mailbox.py [--quick] [--json]``.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec
import pykka
from _common import (
    can_pin,
    parse_options,
    percentile,
    pinned,
    print_header,
    print_json,
    versions,
)

from actors import Actor
from supervisor import ChildSpec, Runtime

ASK_TARGET_RATIO = 2.0


class Ping(msgspec.Struct, frozen=True, kw_only=True):
    """A small typed message, like the runtime's own."""

    n: int


class Done(msgspec.Struct, frozen=True, kw_only=True):
    """Asked after the last ``Ping`` of a tell round: the answer is the count seen."""


class WhichThread(msgspec.Struct, frozen=True, kw_only=True):
    """Asked to learn the actor's native thread id (to pin it to a CPU)."""


# -- the actors under test --------------------------------------------------------------


class Sink(Actor):
    """Counts ``Ping``s; answers ``Done`` with the count and resets it."""

    def started(self) -> None:
        self.count = 0

    def receive(self, message: Any) -> Any:
        if type(message) is Ping:
            self.count += 1
            return None
        if type(message) is Done:
            count, self.count = self.count, 0
            return count
        return super().receive(message)


class Echo(Actor):
    """Returns every message it is asked."""

    def receive(self, message: Any) -> Any:
        if type(message) is WhichThread:
            return threading.get_native_id()
        return message


class RawSink(pykka.ThreadingActor):
    """Baseline: the same counting on a plain pykka actor."""

    use_daemon_thread = True

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def on_receive(self, message: Any) -> Any:
        if type(message) is Ping:
            self.count += 1
            return None
        if type(message) is Done:
            count, self.count = self.count, 0
            return count
        return None


class RawEcho(pykka.ThreadingActor):
    """Baseline: returns every message it is asked."""

    use_daemon_thread = True

    def on_receive(self, message: Any) -> Any:
        if type(message) is WhichThread:
            return threading.get_native_id()
        return message


# -- measurement ----------------------------------------------------------------------------


def tell_round(send: Any, ask: Any, n: int) -> tuple[float, float]:
    """Tell ``n`` Pings through ``send``, then ask Done through ``ask``.

    Returns (messages/s until the actor answered Done, caller's microseconds per tell).
    """
    messages = [Ping(n=i) for i in range(n)]
    done = Done()
    start = time.perf_counter()
    for message in messages:
        send(message)
    told = time.perf_counter()
    seen = ask(done)
    elapsed = time.perf_counter() - start
    if seen != n:
        msg = f"the sink counted {seen} messages, expected {n}"
        raise AssertionError(msg)
    return n / elapsed, (told - start) / n * 1e6


def paired_ask_samples(ask: Any, raw_ask: Any, n: int) -> tuple[list[float], list[float]]:
    """``n`` ask round trips on each side, alternating call by call; microseconds."""
    samples: list[float] = []
    raw_samples: list[float] = []
    clock = time.perf_counter_ns
    message = Ping(n=0)
    for index in range(2 * n):
        address_turn = index % 2 == 0
        start = clock()
        reply = ask(message) if address_turn else raw_ask(message)
        (samples if address_turn else raw_samples).append((clock() - start) / 1000)
        if reply is not message:
            msg = f"echo returned {reply!r}"
            raise AssertionError(msg)
    return samples, raw_samples


# -- output -----------------------------------------------------------------------------------


def emit(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(rows)
        return
    print(f"{'metric':<12} {'unit':<8} {'address':>12} {'raw pykka':>12} {'ratio':>7} {'n':>8}  note")
    for row in rows:
        if row["metric"] == "tell_rate":
            unit, value, base = "msg/s", f"{row['median_per_s']:,.0f}", f"{row['baseline_median_per_s']:,.0f}"
        elif row["metric"] == "tell_call":
            unit, value, base = "median us", f"{row['median_us']:.2f}", f"{row['baseline_median_us']:.2f}"
        else:
            unit, value, base = "median us", f"{row['median_us']:.1f}", f"{row['baseline_median_us']:.1f}"
        print(f"{row['metric']:<12} {unit:<8} {value:>12} {base:>12} {row['ratio']:>7.2f} {row['n']:>8}  {row['note']}")
        if row["metric"].startswith("ask_rtt"):
            print(
                f"{'':<12} {'p90 us':<8} {row['p90_us']:>12.1f} {row['baseline_p90_us']:>12.1f}"
                f"\n{'':<12} {'p99 us':<8} {row['p99_us']:>12.1f} {row['baseline_p99_us']:>12.1f}"
            )


def ask_row(metric: str, rtts: list[float], raw_rtts: list[float], note: str) -> dict[str, Any]:
    median, raw_median = statistics.median(rtts), statistics.median(raw_rtts)
    ratio = median / raw_median
    return {
        "bench": "mailbox",
        "metric": metric,
        "median_us": round(median, 2),
        "p90_us": round(percentile(rtts, 90), 2),
        "p99_us": round(percentile(rtts, 99), 2),
        "baseline_median_us": round(raw_median, 2),
        "baseline_p90_us": round(percentile(raw_rtts, 90), 2),
        "baseline_p99_us": round(percentile(raw_rtts, 99), 2),
        "ratio": round(ratio, 3),
        "target_ratio": ASK_TARGET_RATIO,
        "meets_target": ratio <= ASK_TARGET_RATIO,
        "n": len(rtts),
        "note": note,
    }


def main() -> int:
    options = parse_options(__doc__)

    rounds = 3 if options.quick else 9
    tells = 5_000 if options.quick else 30_000
    asks = 200 if options.quick else 1_000

    text = f"rounds {rounds} (fresh actors each), tells/round {tells}, asks/round {asks} per side\n"
    print_header("mailbox", versions("pykka", "trio", "msgspec"), options.json, text)

    tell_rates: list[tuple[float, float]] = []
    raw_tell_rates: list[tuple[float, float]] = []
    rtts: list[float] = []
    raw_rtts: list[float] = []
    pinned_rtts: list[float] = []
    pinned_raw_rtts: list[float] = []
    # Fresh threads every round: where the scheduler puts an actor thread relative to the
    # caller moves a round trip between ~25 and ~60 us on a 2-vCPU VM, and a thread keeps
    # its place for a whole round, so one placement must not decide the comparison.
    for index in range(rounds):
        runtime = Runtime([ChildSpec(id="sink", actor=Sink), ChildSpec(id="echo", actor=Echo)]).start()
        raw_sink = RawSink.start()
        raw_echo = RawEcho.start()
        try:
            sink = runtime.lookup("/sink")
            echo = runtime.lookup("/echo")
            # Warm up both paths (this also waits until the runtime's children are bound).
            tell_round(sink.tell, sink.ask, 500)
            tell_round(raw_sink.tell, raw_sink.ask, 500)
            paired_ask_samples(echo.ask, raw_echo.ask, 50)

            # Alternate which side goes first so drift (frequency, caches) hits both alike.
            sides: list[tuple[Any, list[tuple[float, float]]]] = [(sink, tell_rates), (raw_sink, raw_tell_rates)]
            for ref, results in sides if index % 2 == 0 else reversed(sides):
                results.append(tell_round(ref.tell, ref.ask, tells))
            address_rtts, pykka_rtts = paired_ask_samples(echo.ask, raw_echo.ask, asks)
            rtts.extend(address_rtts)
            raw_rtts.extend(pykka_rtts)

            if can_pin():
                thread_ids = [echo.ask(WhichThread()), raw_echo.ask(WhichThread())]
                with pinned(thread_ids):
                    address_rtts, pykka_rtts = paired_ask_samples(echo.ask, raw_echo.ask, asks // 2)
                pinned_rtts.extend(address_rtts)
                pinned_raw_rtts.extend(pykka_rtts)
        finally:
            raw_sink.stop()
            raw_echo.stop()
            runtime.stop()

    tell_median = statistics.median(rate for rate, _ in tell_rates)
    raw_tell_median = statistics.median(rate for rate, _ in raw_tell_rates)
    call_median = statistics.median(call for _, call in tell_rates)
    raw_call_median = statistics.median(call for _, call in raw_tell_rates)
    rows = [
        {
            "bench": "mailbox",
            "metric": "tell_rate",
            "median_per_s": round(tell_median),
            "baseline_median_per_s": round(raw_tell_median),
            "median_us": round(1e6 / tell_median, 3),
            "baseline_median_us": round(1e6 / raw_tell_median, 3),
            "ratio": round(tell_median / raw_tell_median, 3),
            "n": tells,
            "rounds": rounds,
            "note": "messages/s, address / raw pykka (higher is better)",
        },
        {
            "bench": "mailbox",
            "metric": "tell_call",
            "median_us": round(call_median, 3),
            "baseline_median_us": round(raw_call_median, 3),
            "ratio": round(call_median / raw_call_median, 3),
            "n": tells,
            "rounds": rounds,
            "note": "caller's time per tell() while the actor drains concurrently",
        },
        ask_row("ask_rtt", rtts, raw_rtts, f"address.ask / pykka ref.ask (target <= {ASK_TARGET_RATIO:g}x)"),
    ]
    if pinned_rtts:
        rows.append(ask_row("ask_rtt_1cpu", pinned_rtts, pinned_raw_rtts, "same, caller and actors pinned to one CPU"))
    emit(rows, options.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
