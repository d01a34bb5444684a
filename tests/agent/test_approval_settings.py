"""Approval modes from config.yaml, HERMES_YOLO_MODE and --yolo; Hermes's command_allowlist."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from actors.agent import ApprovalGate, ApprovalSettings, ConfigError, load_approval_settings
from protocols._session import ApprovalRequested


def home_with(tmp_path: Path, config: str = "", dotenv: str = "") -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    if config:
        (home / "config.yaml").write_text(config)
    if dotenv:
        (home / ".env").write_text(dotenv)
    return home


def test_without_configuration_a_person_is_asked_for_300_seconds(tmp_path: Path) -> None:
    settings = load_approval_settings(home_with(tmp_path), env={})
    assert (settings.mode, settings.timeout, settings.allowlist, settings.deny, settings.yolo) == ("manual", 300.0, frozenset(), (), False)


def test_the_approvals_section_sets_mode_timeout_and_deny_globs(tmp_path: Path) -> None:
    home = home_with(tmp_path, "approvals:\n  mode: manual\n  timeout: 45\n  deny: ['docker system prune*']\n")
    settings = load_approval_settings(home, env={})
    assert (settings.mode, settings.timeout, settings.deny) == ("manual", 45.0, ("docker system prune*",))


@pytest.mark.parametrize("spelling", ["off", "'off'", "OFF", "false"])
def test_mode_off_in_config_turns_asking_off_and_says_where_it_came_from(tmp_path: Path, spelling: str) -> None:
    settings = load_approval_settings(home_with(tmp_path, f"approvals:\n  mode: {spelling}\n"), env={})
    assert settings.yolo and "config.yaml" in settings.source


def test_hermes_yolo_mode_in_the_environment_or_dotenv_and_the_yolo_flag_turn_asking_off(tmp_path: Path) -> None:
    home = home_with(tmp_path)
    assert load_approval_settings(home, env={"HERMES_YOLO_MODE": "1"}).source == "HERMES_YOLO_MODE"
    assert not load_approval_settings(home, env={"HERMES_YOLO_MODE": "0"}).yolo
    assert load_approval_settings(home, env={}, yolo=True).source == "--yolo"
    home_with(tmp_path, dotenv="HERMES_YOLO_MODE=true\n")
    assert load_approval_settings(home, env={}).yolo


def test_smart_mode_falls_back_to_asking_a_person(tmp_path: Path) -> None:
    assert load_approval_settings(home_with(tmp_path, "approvals:\n  mode: smart\n"), env={}).mode == "manual"


@pytest.mark.parametrize(
    ("config", "names"),
    [
        ("approvals:\n  mode: sometimes\n", "approvals.mode"),
        ("approvals:\n  timeout: -1\n", "approvals.timeout"),
        ("approvals:\n  timeout: soon\n", "approvals.timeout"),
        ("approvals:\n  deny: rm\n", "approvals.deny"),
        ("approvals: [manual]\n", "'approvals'"),
    ],
)
def test_a_malformed_approvals_section_is_an_error_naming_the_file_and_key(tmp_path: Path, config: str, names: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_approval_settings(home_with(tmp_path, config), env={})
    assert names in str(raised.value) and "config.yaml" in str(raised.value)


def test_command_allowlist_is_read_as_hermes_writes_it(tmp_path: Path) -> None:
    config = (
        "command_allowlist:\n"
        "  - recursive delete\n"  # a Hermes description
        "  - 'git force push (rewrites remote history)'\n"
        "  - chmod\n"  # Hermes's older regex-derived key
        "  - git-clean\n"  # one of our own keys
        "  - something nobody knows\n"
    )
    settings = load_approval_settings(home_with(tmp_path, config), env={})
    assert {"rm-recursive", "git-force-push", "chmod-777", "git-clean"} <= settings.allowlist
    assert "rm-root" not in settings.allowlist


async def ask(gate: ApprovalGate, keys: tuple[str, ...]) -> str:
    return await gate.request(turn_id="t", call_id="c", command="x", reasons=("why",), keys=keys, timeout=60)


async def test_allowlisted_keys_run_without_asking_and_others_still_ask(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    events: list[object] = []
    gate = ApprovalGate(events.append, home=tmp_path, settings=ApprovalSettings(allowlist=frozenset({"rm-recursive"})))
    assert await ask(gate, ("rm-recursive",)) == "always"
    assert events == []
    assert await ask(gate, ("rm-recursive", "git-reset-hard")) == "timeout"  # one key not allowed: a person decides
    assert any(isinstance(e, ApprovalRequested) for e in events)


async def test_mode_off_answers_yolo_and_the_configured_timeout_applies(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    assert await ask(ApprovalGate(lambda e: None, home=tmp_path, settings=ApprovalSettings(mode="off")), ("rm-recursive",)) == "yolo"
    gate = ApprovalGate(lambda e: None, home=tmp_path, settings=ApprovalSettings(timeout=7))
    assert gate.timeout == 7 and gate.deny_globs == ()
    start = trio.current_time()
    assert await gate.request(turn_id="t", call_id="c", command="x", reasons=("why",), keys=("k",), timeout=gate.timeout) == "timeout"
    assert trio.current_time() - start == pytest.approx(7)


async def test_with_approvals_off_changing_the_agents_own_configuration_is_still_asked(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    events: list[object] = []
    gate = ApprovalGate(events.append, home=tmp_path, settings=ApprovalSettings(mode="off"))
    assert await ask(gate, ("write-hermes-home",)) == "timeout"  # nobody answered: not run
    assert any(isinstance(e, ApprovalRequested) for e in events)
    assert await ask(gate, ("rm-recursive",)) == "yolo"
