"""The typed loader on real files: a Hermes home's config.yaml is applied or reported key by key;
typos get a did-you-mean; wrong values name the file, the key path and what is allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.config import ConfigError, HermesConfig, LoadedConfig, load_config
from actors.config._types import type_at
from tests.config.hermes_layout import HERMES_CONFIG


def home_with(tmp_path: Path, config: str, dotenv: str = "") -> Path:
    (tmp_path / "config.yaml").write_text(config)
    if dotenv:
        (tmp_path / ".env").write_text(dotenv)
    return tmp_path


def leaf_paths(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    if isinstance(value, dict) and value:
        return [p for key, item in value.items() for p in leaf_paths(item, (*path, str(key)))]
    if isinstance(value, list) and value:
        return [p for i, item in enumerate(value) for p in leaf_paths(item, (*path, i))]
    return [path]


def reported(loaded: LoadedConfig, path: tuple[str | int, ...]) -> bool:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
        if any(w.kind == "ignored" and w.path == text for w in loaded.warnings):
            return True
    return False


def test_a_hermes_config_in_its_layout_loads_with_every_key_applied_or_reported_as_ignored(tmp_path: Path) -> None:
    loaded = load_config(home_with(tmp_path, HERMES_CONFIG, "LOCAL_KEY=sk-local-0123456789\n"), {})
    assert [w for w in loaded.warnings if w.kind == "unknown"] == []
    config = loaded.config
    assert config.model.default == "qwen3-32b" and config.model.context_length == 32768
    assert config.custom_providers[0].api_key == "sk-local-0123456789"
    assert config.fallback_providers[0].model == "anthropic/claude-sonnet-4"
    assert config.credential_pool_strategies == {"openrouter": "round_robin"}
    assert config.compression.threshold == 0.5 and config.approvals.mode == "smart"
    assert config.timeouts.turn == 600 and config.api_server.port == 8643
    assert config.pricing["qwen3-32b"].output == 0.3
    unaccounted = [
        path
        for path in leaf_paths(loaded.data)
        if not str(path[0]).startswith("_") and not reported(loaded, path) and type_at(list(path), HermesConfig) is None
    ]
    assert unaccounted == []
    ignored = {w.path for w in loaded.warnings}
    assert {"browser", "display", "compression.target_ratio", "approvals.cron_mode", "model.api_mode", "custom_providers[0].rate_limit_delay"} <= ignored
    assert {"terminal.docker_image", "agent.gateway_timeout", "delegation.model"} <= ignored
    assert config.memory.provider == "" and config.memory.prefetch_timeout == 0.5  # built-in memory only, as in Hermes
    assert config.memory.nudge_interval == 10 and "memory.nudge_interval" not in ignored
    assert not {"agent", "terminal", "memory", "skills", "delegation", "toolsets", "platforms", "hooks", "mcp_servers", "cron", "timezone"} & ignored
    assert "compression" not in ignored and "compression.threshold" not in ignored
    assert len(loaded.warning_lines()) == 1  # all ignored keys said once, on one line


def test_no_file_gives_this_builds_defaults_and_no_warnings(tmp_path: Path) -> None:
    loaded = load_config(tmp_path, {})
    assert loaded.config == HermesConfig() and not loaded.exists and loaded.warnings == ()


@pytest.mark.parametrize(
    ("config", "path", "suggestion"),
    [
        ("compresion:\n  threshold: 0.4\n", "compresion", "compression"),
        ("model:\n  defualt: qwen\n", "model.defualt", "default"),
        ("approvals:\n  tiemout: 30\n", "approvals.tiemout", "timeout"),
        ("custom_providers:\n  - {name: a, base_url: http://x/v1, api_kye: k}\n", "custom_providers[0].api_kye", "api_key"),
        ("zzz_unrelated: 1\n", "zzz_unrelated", ""),
    ],
)
def test_an_unknown_key_is_reported_with_the_closest_known_one(tmp_path: Path, config: str, path: str, suggestion: str) -> None:
    loaded = load_config(home_with(tmp_path, config), {})
    unknown = [w for w in loaded.warnings if w.kind == "unknown"]
    assert [(w.path, w.suggestion) for w in unknown] == [(path, suggestion)]
    line = loaded.warning_lines()[0]
    assert str(tmp_path / "config.yaml") in line and repr(path) in line
    assert (f"did you mean {suggestion!r}" in line) == bool(suggestion)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("compression:\n  threshold: high\n", ["compression.threshold is 'high'", "a number > 0 and <= 1"]),
        ("compression:\n  threshold: 1.5\n", ["compression.threshold is 1.5", "<= 1"]),
        ("approvals:\n  mode: sometimes\n", ["approvals.mode is 'sometimes'", "one of: manual, smart, off"]),
        ("api_server:\n  port: 70000\n", ["api_server.port is 70000", "a whole number >= 0 and <= 65535"]),
        ("pricing:\n  gpt-4.1: {input: 2}\n", ["pricing.gpt-4.1 needs 'output'"]),
        ("pricing:\n  gpt-4.1: {input: -2, output: 1}\n", ["pricing.gpt-4.1.input is -2", ">= 0"]),
        ("custom_providers:\n  - {name: 3}\n", ["custom_providers[0].name is 3", "a string (YAML read a number: quote it, '3')"]),
        ("credential_pool:\n  openrouter:\n    - {label: a, priority: first}\n", ["credential_pool.openrouter[0].priority is 'first'", "a whole number"]),
        ("model: [a, b]\n", ["model is ['a', 'b']", "a mapping (keys: default, model"]),
        ("toolsets: hermes-cli\n", ["toolsets is 'hermes-cli'", "a list"]),
        ("- just\n- a list\n", ["must hold a mapping of settings"]),
        ("model:\n  default: [unclosed\n", ["is not valid YAML", "line 3"]),
    ],
)
def test_a_wrong_value_names_the_file_the_key_path_and_what_is_allowed(tmp_path: Path, config: str, expected: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(home_with(tmp_path, config), {})
    message = str(caught.value)
    assert message.startswith(str(tmp_path / "config.yaml"))
    for fragment in expected:
        assert fragment in message


def test_references_expand_from_the_environment_then_dotenv_and_are_remembered_as_written(tmp_path: Path) -> None:
    config = 'model:\n  api_key: "${KEY_A}"\n  base_url: "http://${HOST}/v1"\n  default: "${UNSET_NAME}"\n'
    loaded = load_config(home_with(tmp_path, config, "KEY_A=from-dotenv\nHOST=dotenv-host\n"), {"HOST": "env-host"})
    assert loaded.config.model.api_key == "from-dotenv"
    assert loaded.config.model.base_url == "http://env-host/v1"  # the environment wins over .env
    assert loaded.config.model.default == "${UNSET_NAME}"  # left as written: its reader says it is unset
    assert loaded.references[("model", "api_key")] == "${KEY_A}"


def test_an_empty_section_or_key_means_its_defaults(tmp_path: Path) -> None:
    loaded = load_config(home_with(tmp_path, "compression:\napi_server:\n  port:\n  host: 0.0.0.0\n"), {})
    assert loaded.config.compression == HermesConfig().compression
    assert loaded.config.api_server.port == 8642 and loaded.config.api_server.host == "0.0.0.0"


def test_yaml_reads_a_bare_off_as_false_and_approvals_accept_it(tmp_path: Path) -> None:
    loaded = load_config(home_with(tmp_path, "approvals:\n  mode: off\n"), {})
    assert loaded.config.approvals.mode is False


def test_a_mapping_key_written_off_or_yes_stays_a_name_while_values_keep_yaml_booleans(tmp_path: Path) -> None:
    config = "mcp_servers:\n  off:\n    command: off-server\n  yes:\n    url: http://127.0.0.1:1/mcp\n    enabled: no\n"
    loaded = load_config(home_with(tmp_path, config), {})
    servers = loaded.config.mcp_servers
    assert sorted(servers) == ["off", "yes"]  # not "False" and "True"
    assert servers["off"].command == "off-server"
    assert servers["yes"].enabled is False
