"""``hermes chaos``: sim, replay and plan, through ``main(argv)`` as the CLI calls it."""

from __future__ import annotations

import io
import json

from actors.chaos._chaos_cli import main
from actors.chaos._faults import PRESETS, default_plan, parse_plan


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def test_sim_reports_figures_and_exits_zero_when_every_invariant_holds() -> None:
    status, out, _ = run("sim", "--seeds", "60", "--start", "100")
    assert status == 0, out
    assert "60 seeds, 60 sessions" in out and "sessions per CPU second" in out and "every invariant held" in out


def test_sim_with_a_planted_bug_exits_one_and_prints_a_shrunk_seed_with_its_replay_command() -> None:
    status, out, _ = run("sim", "--seeds", "150", "--bug", "drop_settle", "--show", "1")
    assert status == 1
    assert "[durable_unpaired]" in out and "planted bug: settle write" in out and "trace (" in out
    replay_line = next(line for line in out.splitlines() if "replay: hermes chaos replay" in line)
    words = replay_line.split("replay: hermes chaos ")[1].split()
    assert words[words.index("--bug") + 1] == "drop_settle"
    again_status, again, _ = run(*words)
    assert again_status == 1 and "[durable_unpaired]" in again


def test_sim_json_is_one_object_with_the_failing_seeds() -> None:
    status, out, _ = run("sim", "--seeds", "20", "--json")
    record = json.loads(out)
    assert status == 0 and record["seeds"] == 20 and record["failing_seeds"] == [] and record["sessions_per_cpu_s"] > 0


def test_sim_all_presets_sweeps_the_same_seeds_of_every_preset_and_names_the_commit() -> None:
    status, out, _ = run("sim", "--all-presets", "--seeds", "4", "--start", "10", "--json")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["plan"] for r in records] == [make().name for make in PRESETS.values()]
    assert all(r["seeds"] == 4 and r["start"] == 10 and r["commit"] and r["wall_s"] >= 0 for r in records)
    assert status == (1 if any(r["failing_seeds"] for r in records) else 0)
    status, out, _ = run("sim", "--all-presets", "--seeds", "4", "--start", "10", "--show", "0")
    table = out.splitlines()[-len(PRESETS) - 1 :]
    assert table[0].startswith("every preset, seeds 10-13; commit ")
    assert [line.split()[:3] for line in table[1:]] == [[make().name, "4", "seeds,"] for make in PRESETS.values()]
    assert all("s wall" in line and "sessions per CPU second" in line for line in table[1:])


def test_replay_prints_the_same_trace_every_time() -> None:
    first = run("replay", "7", "--plan", "crash", "--full")
    assert first == run("replay", "7", "--plan", "crash", "--full")
    assert "StartTurn s0-t0" in first[1] and "virtual seconds" in first[1]


def test_plan_prints_a_plan_that_parses_back_to_the_same_plan() -> None:
    status, out, _ = run("plan", "default")
    assert status == 0 and parse_plan(out) == default_plan()
    status, out, _ = run("plan", "default", "--yaml")
    assert status == 0 and parse_plan(out, "yaml") == default_plan()


def test_a_bad_plan_or_argument_is_a_usage_error_with_exit_status_two() -> None:
    status, _, err = run("sim", "--plan", "/nonexistent.yaml")
    assert status == 2 and "cannot read the fault plan" in err
    assert run("sim", "--seeds", "0")[0] == 2
    assert run("sim", "--all-presets", "--plan", "crash")[0] == 2
    assert run("frobnicate")[0] == 2


def test_sim_plants_a_credential_pool_bug_by_name_and_the_checker_catches_it() -> None:
    status, out, _ = run("sim", "--seeds", "40", "--plan", "keys", "--bug", "grant_benched", "--show", "1")
    assert status == 1
    assert "[benched_key_granted]" in out
