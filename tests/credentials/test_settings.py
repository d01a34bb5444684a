"""Providers, key pools, the fallback chain and deadlines from real config.yaml, .env and auth.json files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.agent import ConfigError, load_model_settings
from actors.credentials._keys import STRATEGIES, KeySpec, ProviderSpec, Strategy
from actors.credentials._settings import KEYLESS, load_providers


def write(home: Path, config: str | None = None, dotenv: str | None = None, auth: Any = None) -> Path:
    home.mkdir(exist_ok=True)
    for name, text in (("config.yaml", config), (".env", dotenv), ("auth.json", None if auth is None else json.dumps(auth))):
        if text is not None:
            (home / name).write_text(text)
    return home


def ids_and_keys(spec: ProviderSpec) -> list[tuple[str, str]]:
    return [(k.key_id, k.api_key) for k in spec.keys]


def failure(home: Path, env: dict[str, str], *secrets: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_providers(home, env=env)
    message = str(info.value)
    assert not [s for s in secrets if s in message], "an error message shows a secret"
    return message


def test_a_model_section_and_an_openai_key_are_a_one_key_pool_with_the_default_deadlines(tmp_path: Path) -> None:
    chain = load_providers(write(tmp_path, "model:\n  default: gpt-4o\n  provider: openai\n"), env={"OPENAI_API_KEY": "sk-env-0001"})
    key = KeySpec(key_id="OPENAI_API_KEY", api_key="sk-env-0001", label="OPENAI_API_KEY")
    assert chain.primary == ProviderSpec(name="openai", base_url="https://api.openai.com/v1", model="gpt-4o", keys=(key,), strategy="fill_first")
    assert chain.fallbacks == () and chain.providers == (chain.primary,)
    assert (chain.turn_timeout, chain.request_timeout, chain.stream_read_timeout, chain.stream) == (900.0, 300.0, 120.0, True)


# The configurations of tests/agent/test_config.py: (config.yaml, .env, environment, per-session override).
MODEL_SETTINGS_CASES = [
    ("model:\n  default: qwen3\n  provider: custom\n  base_url: http://127.0.0.1:9/v1/\n", "OPENAI_API_KEY='sk-from-file'\n", {}, None),
    ("model: gpt-x\n", "OPENAI_API_KEY=file\nexport OPENAI_BASE_URL=http://file/v1\n", {"OPENAI_API_KEY": "env"}, None),
    ("model: gpt-x\n", "OPENAI_API_KEY=file\nexport OPENAI_BASE_URL=http://file/v1\n", {"OPENAI_API_KEY": "env"}, {"model": "other", "api_key": "k2"}),
    (None, None, {"HERMES_MODEL": "m", "OPENROUTER_API_KEY": "or"}, None),
    ("model: gpt-x\npricing:\n  gpt-x: {input: 2.5, output: 10}\n", None, {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://h/v1"}, None),
]


@pytest.mark.parametrize(("config", "dotenv", "env", "override"), MODEL_SETTINGS_CASES)
def test_every_config_that_works_today_yields_the_same_primary_with_a_one_key_pool(
    tmp_path: Path, config: str | None, dotenv: str | None, env: dict[str, str], override: dict[str, str] | None
) -> None:
    home = write(tmp_path, config, dotenv)
    settings = load_model_settings(home, env=env, override=override)
    primary = load_providers(home, env=env, override=override).primary
    assert (primary.model, primary.base_url, primary.keys[0].api_key) == (settings.model, settings.base_url, settings.api_key)
    assert len(primary.keys) == 1


@pytest.mark.parametrize(("config", "env"), [(None, {}), ("model: m\n", {}), ("model: [unclosed\n", {})])
def test_a_config_that_fails_today_fails_with_the_same_advice(tmp_path: Path, config: str | None, env: dict[str, str]) -> None:
    home = write(tmp_path, config)
    with pytest.raises(ConfigError) as today:
        load_model_settings(home, env=env)
    assert failure(home, env) == str(today.value)


def test_the_environment_wins_over_dotenv_and_dollar_names_expand_from_either(tmp_path: Path) -> None:
    config = "model:\n  default: m\n  provider: custom:gw\ncustom_providers:\n  - name: gw\n    base_url: ${GW_URL}\n    api_key: ${GW_KEY}\n"
    home = write(tmp_path, config, "GW_URL=http://from-file/v1\nGW_KEY=file-key-1234\n")
    primary = load_providers(home, env={"GW_KEY": "env-key-5678"}).primary
    assert (primary.base_url, primary.keys[0].api_key) == ("http://from-file/v1", "env-key-5678")
    assert load_providers(home, env={}).primary.keys[0].api_key == "file-key-1234"


def test_a_dollar_name_in_model_api_key_expands_where_model_settings_leaves_it_literal(tmp_path: Path) -> None:
    home = write(tmp_path, "model:\n  default: m\n  base_url: http://h/v1\n  api_key: ${MY_KEY}\n", "MY_KEY=sk-file-7777\n")
    assert load_model_settings(home, env={}).api_key == "${MY_KEY}"
    assert ids_and_keys(load_providers(home, env={}).primary) == [("key-1", "sk-file-7777")]


def test_an_unset_or_empty_variable_is_named_and_no_secret_is_shown(tmp_path: Path) -> None:
    base = "model:\n  default: m\n  provider: custom:gw\ncustom_providers:\n  - name: gw\n    base_url: http://gw/v1\n"
    env = {"OTHER_KEY": "sk-secret-9999"}
    message = failure(write(tmp_path, base + "    api_key: ${MISSING_KEY}\n"), env, "sk-secret-9999")
    assert "config.yaml: custom_providers[0].api_key uses ${MISSING_KEY}, which is empty or not set" in message
    assert f"set MISSING_KEY in the environment or in {tmp_path / '.env'}" in message
    message = failure(write(tmp_path, base + "    key_env: EMPTY_KEY\n", "EMPTY_KEY=\n"), env, "sk-secret-9999")
    assert "custom_providers[0].key_env names EMPTY_KEY, which is empty or not set" in message
    message = failure(write(tmp_path, base + "    key_env: sk-pasted-here-1234\n"), env, "sk-pasted-here-1234")
    assert "custom_providers[0].key_env is not the name of a variable; key_env takes a variable's name; put the key itself in api_key" in message


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_of_the_four_strategies_is_read_for_its_provider(tmp_path: Path, strategy: Strategy) -> None:
    home = write(tmp_path, f"model: {{default: m, provider: openrouter}}\ncredential_pool_strategies:\n  openrouter: {strategy}\n  anthropic: random\n")
    assert load_providers(home, env={"OPENROUTER_API_KEY": "or-1"}).primary.strategy == strategy


def test_quota_aware_reads_as_least_used_and_an_unknown_strategy_lists_the_four(tmp_path: Path) -> None:
    env = {"OPENROUTER_API_KEY": "or-1"}
    home = write(tmp_path, "model: {default: m, provider: openrouter}\ncredential_pool_strategies:\n  openrouter: quota_aware\n")
    assert load_providers(home, env=env).primary.strategy == "least_used"
    message = failure(write(tmp_path, "model: {default: m, provider: openrouter}\ncredential_pool_strategies:\n  openrouter: fastest\n"), env)
    assert f"{tmp_path / 'config.yaml'}: credential_pool_strategies.openrouter is 'fastest', which is not a strategy" in message
    assert message.endswith("use one of: fill_first, round_robin, random, least_used")


POOL = """model: {default: m, provider: openrouter}
credential_pool:
  openrouter:
    - {label: personal, key_env: OPENROUTER_API_KEY, key_cmd: print-token}
    - {label: team, api_key: "${TEAM_KEY}", priority: 1}
    - {key_env: THIRD_KEY}
    - {api_key: sk-inline-4444}
    - {key_cmd: mint-a-key}
"""


def test_config_pool_entries_follow_the_first_key_which_takes_the_label_of_its_own_entry(tmp_path: Path) -> None:
    env = {"OPENROUTER_API_KEY": "or-main-0001", "TEAM_KEY": "or-team-0002", "THIRD_KEY": "or-third-0003"}
    keys = load_providers(write(tmp_path, POOL), env=env).primary.keys
    assert keys == (
        KeySpec("personal", "or-main-0001", "personal", 0, "print-token"),
        KeySpec("team", "or-team-0002", "team", 1),
        KeySpec("THIRD_KEY", "or-third-0003", "THIRD_KEY"),
        KeySpec("key-4", "sk-inline-4444"),
        KeySpec("key-5", "", refresh_command="mint-a-key"),
    )


@pytest.mark.parametrize(
    ("entry", "advice"),
    [
        ("{apikey: sk-1}", "credential_pool.openrouter[0] must be a mapping of label, api_key, key_env, key_cmd, priority"),
        ("{label: lonely}", "credential_pool.openrouter[0] has no key; give it api_key, key_env or key_cmd"),
        ("{api_key: sk-1, priority: high}", "credential_pool.openrouter[0].priority must be a whole number"),
    ],
)
def test_a_wrong_pool_entry_says_which_and_what_it_may_hold(tmp_path: Path, entry: str, advice: str) -> None:
    home = write(tmp_path, f"model: {{default: m, provider: openrouter}}\ncredential_pool:\n  openrouter:\n    - {entry}\n")
    assert advice in failure(home, {"OPENROUTER_API_KEY": "or-main-0001"}, "or-main-0001")


def test_api_keys_hermes_auth_add_stored_join_the_pool_and_oauth_ones_do_not(tmp_path: Path) -> None:
    entries = [
        {"id": "a1", "label": "OPENROUTER_API_KEY", "auth_type": "api_key", "priority": 0, "source": "env:OPENROUTER_API_KEY"},
        {"id": "b2", "label": "backup-key", "auth_type": "api_key", "priority": 1, "source": "manual", "access_token": "or-backup-0002"},
        {"id": "c3", "label": "browser", "auth_type": "oauth", "priority": 2, "source": "manual", "access_token": "tok-oauth-0003"},
        {"id": "d4", "label": "vault", "auth_type": "api_key", "priority": 3, "source": "bitwarden"},
        {"id": "e5", "label": "second", "auth_type": "api_key", "priority": 4, "source": "env:OR_SECOND"},
    ]
    home = write(tmp_path, "model: {default: m, provider: openrouter}\n", auth={"version": 1, "credential_pool": {"openrouter": entries}})
    keys = load_providers(home, env={"OPENROUTER_API_KEY": "or-main-0001", "OR_SECOND": "or-second-0005"}).primary.keys
    assert keys == (
        KeySpec("OPENROUTER_API_KEY", "or-main-0001", "OPENROUTER_API_KEY"),
        KeySpec("backup-key", "or-backup-0002", "backup-key", 1),
        KeySpec("second", "or-second-0005", "second", 4),
    )
    (home / "auth.json").write_text("{not json")
    assert "auth.json is not valid JSON; fix it or move it away" in failure(home, {"OPENROUTER_API_KEY": "or-main-0001"})


NAMED = """model:
  provider: custom:My Gateway
custom_providers:
  - name: My Gateway
    base_url: http://gw:8080/v1/
    key_env: GW_KEY
    model: glm-5
    extra_headers: {X-Team: "${TEAM}"}
providers:
  local: {base_url: "http://localhost:11434/v1", model: qwen}
  anthropic: {request_timeout_seconds: 30}
credential_pool_strategies:
  custom:My Gateway: round_robin
fallback_providers:
  - {provider: "custom:local", model: qwen2}
"""


def test_named_custom_providers_from_either_section_are_addressed_as_custom_name(tmp_path: Path) -> None:
    chain = load_providers(write(tmp_path, NAMED), env={"GW_KEY": "gw-key-0001", "TEAM": "blue"})
    assert chain.primary == ProviderSpec(
        name="custom:my-gateway",
        base_url="http://gw:8080/v1",
        model="glm-5",
        keys=(KeySpec("GW_KEY", "gw-key-0001", "GW_KEY"),),
        strategy="round_robin",
        extra_headers=(("X-Team", "blue"),),
    )
    [local] = chain.fallbacks
    assert (local.name, local.base_url, local.model, ids_and_keys(local)) == ("custom:local", "http://localhost:11434/v1", "qwen2", [("keyless", KEYLESS)])


def test_fallbacks_come_in_order_then_fallback_model_without_the_primary_or_repeats(tmp_path: Path) -> None:
    config = """model: {default: gpt-4o, provider: openai}
fallback_providers:
  - {provider: openrouter, model: anthropic/claude-sonnet-4}
  - {provider: openai, model: GPT-4o}
  - {provider: custom, model: llama, base_url: "http://localhost:8000/v1/", key_env: LOCAL_KEY}
  - {provider: openrouter, model: anthropic/claude-sonnet-4}
fallback_model: {provider: anthropic, model: claude-sonnet-4-6}
"""
    env = {"OPENAI_API_KEY": "sk-1", "OPENROUTER_API_KEY": "or-2", "LOCAL_KEY": "lo-3", "ANTHROPIC_API_KEY": "an-4"}
    chain = load_providers(write(tmp_path, config), env=env)
    assert [(f.name, f.model, f.base_url, ids_and_keys(f)) for f in chain.fallbacks] == [
        ("openrouter", "anthropic/claude-sonnet-4", "https://openrouter.ai/api/v1", [("OPENROUTER_API_KEY", "or-2")]),
        ("custom", "llama", "http://localhost:8000/v1", [("LOCAL_KEY", "lo-3")]),
        ("anthropic", "claude-sonnet-4-6", "https://api.anthropic.com/v1", [("ANTHROPIC_API_KEY", "an-4")]),
    ]


def test_a_fallback_naming_an_unknown_custom_provider_lists_the_known_ones(tmp_path: Path) -> None:
    named = "custom_providers:\n  - {name: local, base_url: 'http://localhost:8000/v1'}\n  - {name: work, base_url: 'https://gpu/v1'}\n"
    message = failure(
        write(tmp_path, "model: gpt-4o\n" + named + "fallback_providers:\n  - {provider: custom:lcoal, model: m}\n"), {"OPENAI_API_KEY": "sk-1"}, "sk-1"
    )
    assert (
        f"{tmp_path / 'config.yaml'}: fallback_providers[0].provider names 'custom:lcoal', which is not defined; known ones: custom:local, custom:work"
        == message
    )
    message = failure(write(tmp_path, "model: gpt-4o\nfallback_model: {provider: foo, model: m}\n"), {"OPENAI_API_KEY": "sk-1"})
    assert "fallback_model.provider is 'foo', for which no URL is known; use one of openai, openrouter, anthropic" in message
    assert "none is defined yet: add one under custom_providers (name, base_url)" in message


def test_a_half_written_fallback_is_an_error_and_an_empty_placeholder_is_no_fallback(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-1"}
    assert load_providers(write(tmp_path, "model: gpt-4o\nfallback_model: {provider: '', model: ''}\n"), env=env).fallbacks == ()
    message = failure(write(tmp_path, "model: gpt-4o\nfallback_providers:\n  - {provider: openrouter}\n"), env)
    assert "fallback_providers[0] needs both provider and model; for example\nfallback_providers:\n  - {provider: openrouter" in message


def test_a_built_in_fallback_without_a_key_names_its_variable_unless_its_pool_has_one(tmp_path: Path) -> None:
    home = write(tmp_path, "model: gpt-4o\nfallback_providers:\n  - {provider: anthropic, model: claude}\n")
    message = failure(home, {"OPENAI_API_KEY": "sk-1"}, "sk-1")
    assert f"fallback_providers[0].provider is 'anthropic', which needs a key; set ANTHROPIC_API_KEY in the environment or in {home / '.env'}" in message
    pool = {"credential_pool": {"anthropic": [{"label": "manual-1", "auth_type": "api_key", "access_token": "an-manual-5"}]}}
    write(tmp_path, auth=pool)
    [fallback] = load_providers(home, env={"OPENAI_API_KEY": "sk-1"}).fallbacks
    assert ids_and_keys(fallback) == [("manual-1", "an-manual-5")]


def test_a_built_in_primary_model_settings_has_no_url_for_uses_its_own_url_and_key(tmp_path: Path) -> None:
    home = write(tmp_path, "model:\n  provider: anthropic\n  default: claude-sonnet-4-6\n")
    with pytest.raises(ConfigError, match="has no endpoint"):
        load_model_settings(home, env={"ANTHROPIC_API_KEY": "an-1"})
    primary = load_providers(home, env={"ANTHROPIC_API_KEY": "an-1"}).primary
    assert (primary.name, primary.base_url, ids_and_keys(primary)) == ("anthropic", "https://api.anthropic.com/v1", [("ANTHROPIC_API_KEY", "an-1")])
    assert "model.provider is 'anthropic', which needs a key; set ANTHROPIC_API_KEY" in failure(home, {})


def test_a_session_override_can_pick_a_named_provider(tmp_path: Path) -> None:
    home = write(tmp_path, "model: gpt-4o\ncustom_providers:\n  - {name: local, base_url: 'http://localhost:8000/v1', model: qwen}\n")
    primary = load_providers(home, env={"OPENAI_API_KEY": "sk-1"}, override={"provider": "custom:local", "api_key": "sess-key-2"}).primary
    assert (primary.name, primary.model, ids_and_keys(primary)) == ("custom:local", "gpt-4o", [("key-1", "sess-key-2")])
    with pytest.raises(ConfigError, match=r"model\.provider names 'custom:remote', which is not defined; known ones: custom:local"):
        load_providers(home, env={"OPENAI_API_KEY": "sk-1"}, override={"provider": "custom:remote"})


def test_deadlines_come_from_timeouts_then_the_hermes_variables_then_the_defaults(tmp_path: Path) -> None:
    home = write(tmp_path, "model: m\ntimeouts:\n  turn: 600\n  request: 45.5\n  tools: {concurrent_batch: 420}\n", "HERMES_STREAM_READ_TIMEOUT=30\n")
    chain = load_providers(home, env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://h/v1", "HERMES_API_TIMEOUT": "999"})
    assert (chain.turn_timeout, chain.request_timeout, chain.stream_read_timeout) == (600.0, 45.5, 30.0)
    chain = load_providers(write(tmp_path, "model: m\n", ""), env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://h/v1", "HERMES_API_TIMEOUT": "1800"})
    assert (chain.turn_timeout, chain.request_timeout, chain.stream_read_timeout) == (900.0, 1800.0, 120.0)


@pytest.mark.parametrize(
    ("config", "dotenv", "advice"),
    [
        ("timeouts: {turn: 0}\n", "", "config.yaml: timeouts.turn must be a number of seconds > 0 (the default is 900)"),
        ("timeouts: {request: soon}\n", "", "config.yaml: timeouts.request must be a number of seconds > 0 (the default is 300)"),
        ("", "HERMES_STREAM_READ_TIMEOUT=abc\n", "HERMES_STREAM_READ_TIMEOUT (in the environment or"),
        ("timeouts: [1]\n", "", "config.yaml: timeouts must be a mapping; for example timeouts: {turn: 900, request: 300, stream_read: 120}"),
        ("model: {default: m, streaming: 'no'}\n", "", "model.streaming must be true or false; false makes model calls without streaming"),
    ],
)
def test_a_bad_deadline_or_streaming_flag_says_what_is_allowed(tmp_path: Path, config: str, dotenv: str, advice: str) -> None:
    home = write(tmp_path, config if config.startswith("model:") else "model: m\n" + config, dotenv)
    assert advice in failure(home, {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://h/v1"})


def test_streaming_false_is_read_for_endpoints_that_refuse_it(tmp_path: Path) -> None:
    home = write(tmp_path, "model: {default: m, base_url: 'http://vllm/v1', streaming: false}\n")
    assert load_providers(home, env={"OPENAI_API_KEY": "k"}).stream is False
