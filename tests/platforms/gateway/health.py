"""``/health/detailed`` of a running ``hermes serve``, read until the adapters' counters say what a test waits for."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.conftest import DEADLINE


def adapter_health_when(base: str, key: str, done: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    """The first adapter's entry once ``done(entry)`` holds (asked again after each answer, up to
    the test deadline): a reply reaches the platform before the adapter counts it."""
    end = time.monotonic() + DEADLINE
    with httpx.Client(headers={"authorization": f"Bearer {key}"}, timeout=DEADLINE) as client:
        while True:
            entry: dict[str, Any] = client.get(f"{base}/health/detailed").json()["platforms"][0]
            if done(entry):
                return entry
            assert time.monotonic() < end, f"{what} not seen within {DEADLINE} s: {entry}"
