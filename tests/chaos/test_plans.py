"""Fault plans are data: they round-trip through JSON and YAML, validate, and seed the dice."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest

from actors._errors import UsageError
from actors.chaos._faults import PRESETS, Dice, default_plan, dump_plan, load_plan, parse_plan
from protocols import from_json, to_json
from protocols._faults import FaultPlan, MessageFaults, ModelFaults, StoreFaults


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_plan_round_trips_through_json_and_yaml_unchanged(name: str) -> None:
    plan = PRESETS[name]()
    assert parse_plan(dump_plan(plan, "json")) == plan
    assert parse_plan(dump_plan(plan, "yaml"), "yaml") == plan
    assert from_json(to_json(plan), FaultPlan) == plan


def test_a_plan_file_names_only_what_it_changes_and_the_rest_takes_defaults(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("name: busy store\nstore:\n  busy: 0.25\nmodel:\n  http_statuses: [429]\n")
    plan = load_plan(path)
    assert plan.name == "busy store"
    assert plan.store == StoreFaults(busy=0.25)
    assert plan.model == ModelFaults(http_statuses=(429,))
    assert plan.messages == MessageFaults()
    assert load_plan("default") == default_plan()


def test_a_rate_outside_zero_to_one_is_rejected_with_the_field_named() -> None:
    with pytest.raises(UsageError, match=r"StoreFaults.busy is a probability"):
        parse_plan('{"store": {"busy": 1.5}}')
    with pytest.raises(UsageError, match="http_statuses"):
        parse_plan('{"model": {"http_statuses": [200]}}')
    with pytest.raises(UsageError, match="not a valid fault plan"):
        parse_plan('{"store": {"busy": "often"}}')
    with pytest.raises(ValueError, match="min_messages"):
        msgspec.convert({"workload": {"min_messages": 3, "max_messages": 2}}, FaultPlan)


def test_a_missing_plan_file_says_which_presets_exist() -> None:
    with pytest.raises(UsageError, match="calm, default, crash, storm, passivate"):
        load_plan("/nonexistent/plan.json")


def test_the_same_seed_draws_the_same_faults_and_a_mask_skips_exactly_the_named_ones() -> None:
    def draw(dice: Dice) -> list[bool]:
        return [dice.fault("store", "busy", 0.3) for _ in range(50)] + [dice.fault("model", "cut", 0.3) for _ in range(50)]

    first, again = Dice(7), Dice(7)
    assert draw(first) == draw(again) and first.injected == again.injected
    masked_id = first.injected[0]
    masked = Dice(7, mask={masked_id})
    draws = draw(masked)
    assert masked.injected == first.injected[1:]
    assert sum(draws) == sum(draw(Dice(7))) - 1
    assert draw(Dice(8)) != draw(Dice(7))


def test_the_dice_draw_what_random_random_draws_for_the_stream_so_old_seeds_replay_the_same() -> None:
    dice, rng = Dice(11), random.Random("11/model")
    for n in (1, 2, 3, 5, 7, 64, 100, 1000):
        assert dice.below("model", n) == rng.randrange(n)
        assert dice.uniform("model", 0.01, 0.5) == rng.uniform(0.01, 0.5)
        assert dice.choice("model", ("a", "b", "c")) == rng.choice(("a", "b", "c"))
        assert dice.fault("model", "cut", 0.5) == (rng.random() < 0.5)
    assert dice.stream("model").random() == rng.random()
    with pytest.raises(ValueError):
        dice.below("model", 0)
