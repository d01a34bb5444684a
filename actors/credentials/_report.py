"""The pools as people read them: lines for the TUI's ``/tree`` (never a secret)."""

from __future__ import annotations

from collections.abc import Iterable

from protocols import KeyStatus, PoolStatus


def pool_lines(pools: Iterable[PoolStatus], now: float) -> list[str]:
    """``credentials:`` then, per provider, its keys: available, or benched until when and why."""
    lines = ["credentials:"]
    for pool in pools:
        count = len(pool.keys)
        lines.append(f"  {pool.provider} ({pool.strategy}): {pool.available} of {count} key{'s' if count != 1 else ''} available, {pool.in_flight} in flight")
        lines.extend(f"    {_key(key, now)}" for key in pool.keys)
    if len(lines) == 1:
        lines.append("  (no pool answered)")
    return lines


def _key(key: KeyStatus, now: float) -> str:
    usage = f"granted {key.granted}, ok {key.successes}, failed {key.failures}"
    if key.condition == "cooling":
        left = max(0.0, key.cooling_until - now)
        return f"{key.shown}: benched {_duration(left)} more ({key.why}); {usage}"
    if key.condition == "available":
        return f"{key.shown}: available; {usage}"
    return f"{key.shown}: {key.condition}{f' ({key.why})' if key.why else ''}; {usage}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
