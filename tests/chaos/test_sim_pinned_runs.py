"""Work on the simulator's speed changes no run: pinned seeds of every preset give the runs they gave.

Each preset's seeds 0-39 are run (trace off, as a sweep runs them) and summed up in one digest:
per seed its steps, virtual time, the faults and client actions injected in order, the counts
and the violations (rule, session, step). The digests were taken at 98c2fcf, before the
sixteenth session's speed work (``bench/README.md``), and every change since gave the same.

A change meant to change what is simulated (a new fault, a new draw, another order of draws)
changes them: check that it should, then print the new ones with
``python -m tests.chaos.test_sim_pinned_runs`` and paste them here.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from actors.chaos._faults import PRESETS
from actors.chaos._sim import SimOptions, simulate

SEEDS = range(40)

PINNED = {
    "calm": "bf99e20fcbc5a8acc7203b210e1743051f25a2f6e025e535f4f1b40ac50a93ff",
    "default": "0cbd16f77ae048f258b3ed0c2b637451e78a04230ca39f610ea7b11ab5a390e9",
    "crash": "617c3c6c73c458c9ee77d9be47eebe0c167a85ab8f1c5f1dde21e7798bc49179",
    "storm": "7d1e410d25d3ef7d5c36587a0df8002758a6185358a5b7c1a0b613593e38d8b2",
    "passivate": "abd1f6454bf5bc6b6c643c65226ec462afafb744d1cb06d3353b90f40afc5c9c",
    "store-busy": "c52b6574172e891d44075ae24adee0f375c0745de33e8ec0d798779f2a187962",
    "client-retries": "1e3103c50754f644d4f9bea5ae97742071fe0e3a9eb3e854efc86afe4935af15",
    "process-death": "448b2abbcd5d3f1765b49411667b34ec00c5f1a78ba88645554b67028a4853c3",
    "keys": "5b364586601dcf2530a31e151f8976fc58665b914f3077cdb2910aa92eac16b2",
    "long": "38a8de11b06c9398098bda0ab670400f3d462ad33c2eaa1e118fc901fae3c7b5",
    "hooks": "2437b7bd3f0a5f19197f6b70797fad4fd09e05eb54c81e7f364add0b3420a908",
    "review": "5f186f4ec7f90cedb03db27cb35ead06af2b5bd7765ce4f67ce1e2274e5b3233",
}


def digest(preset: str) -> str:
    """One preset's runs of :data:`SEEDS`, as a hex digest."""
    plan = PRESETS[preset]()
    runs = []
    for seed in SEEDS:
        result = simulate(seed, plan, options=SimOptions(trace=False))
        violations = [(v.rule, v.session_id, v.step) for v in result.violations]
        runs.append([seed, result.steps, repr(result.virtual_s), list(result.injected), sorted(result.counts.items()), violations])
    return hashlib.sha256(json.dumps(runs).encode()).hexdigest()


def test_every_preset_is_pinned() -> None:
    assert sorted(PINNED) == sorted(PRESETS)


@pytest.mark.parametrize("preset", list(PINNED))
def test_pinned_seeds_give_the_runs_they_gave(preset: str) -> None:
    assert digest(preset) == PINNED[preset], f"the runs of {preset} changed; if they should, see this module's docstring"


if __name__ == "__main__":
    for name in PRESETS:
        print(f'    "{name}": "{digest(name)}",')
