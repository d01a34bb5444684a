"""The ``danger_check`` subject of ``bench_tools.py``: ``check_command`` over the whole danger corpus.

Imported as a sibling (``from _danger_measure import ...``); the corpus comes from the tests
package (``tests/tools/danger_corpus.py``), with the repository root on ``sys.path``.
"""

from __future__ import annotations

import shlex
import time
from typing import Any

from _common import latency_row

from actors.tools._danger import check_command
from tests.tools.danger_corpus import CORPUS, CWD, HARDLINE, HERMES_HOME, HOME, ORDINARY
from tests.tools.danger_corpus_dangerous import DANGEROUS

TARGET_US = 200.0


def _split(command: str) -> object:
    try:
        return shlex.split(command)
    except ValueError:  # an unterminated quote: shlex gives up where the checker reads on
        return None


def _timed_each(fn: Any, rounds: int) -> list[float]:
    """Microseconds of one call of ``fn(command)``, for every corpus command, ``rounds`` times."""
    samples = []
    for _ in range(rounds):
        for command, _, _ in CORPUS:
            start = time.perf_counter()
            fn(command)
            samples.append((time.perf_counter() - start) * 1e6)
    return samples


def bench_danger(rounds: int) -> tuple[dict[str, Any], int]:
    """(row, corpus commands whose verdict differs from the one the corpus states)."""

    def check(command: str) -> object:
        return check_command(command, home=HOME, cwd=CWD, hermes_home=HERMES_HOME)

    wrong = 0
    for command, expected, key in CORPUS:  # also warms caches (regexes, decoders) before timing
        verdict = check_command(command, home=HOME, cwd=CWD, hermes_home=HERMES_HOME)
        wrong += verdict.status != expected or (key is not None and key not in verdict.keys)
    samples = _timed_each(check, rounds)
    baseline = _timed_each(_split, rounds)
    row = latency_row(
        "tools",
        "danger_check",
        samples,
        baseline,
        target_us=TARGET_US,
        note="check_command once per corpus command (judged as written, normalised, and $IFS-split when used); baseline shlex.split of the same command",
    )
    row.update(commands=len(CORPUS), blocked=len(HARDLINE), dangerous=len(DANGEROUS), ok=len(ORDINARY), wrong_verdicts=wrong)
    return row, wrong
