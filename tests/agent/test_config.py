"""Model settings from config.yaml, .env and the environment, with actionable errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.agent import ConfigError, Price, load_model_settings


def write(home: Path, config: str | None = None, dotenv: str | None = None) -> Path:
    home.mkdir(exist_ok=True)
    if config is not None:
        (home / "config.yaml").write_text(config)
    if dotenv is not None:
        (home / ".env").write_text(dotenv)
    return home


def test_config_yaml_model_section_with_a_key_from_dotenv(tmp_path: Path) -> None:
    home = write(tmp_path, "model:\n  default: qwen3\n  provider: custom\n  base_url: http://127.0.0.1:9/v1/\n", "OPENAI_API_KEY='sk-from-file'\n")
    settings = load_model_settings(home, env={})
    assert (settings.model, settings.base_url, settings.api_key) == ("qwen3", "http://127.0.0.1:9/v1", "sk-from-file")


def test_the_environment_wins_over_dotenv_and_a_session_override_wins_over_everything(tmp_path: Path) -> None:
    home = write(tmp_path, "model: gpt-x\n", "OPENAI_API_KEY=file\nexport OPENAI_BASE_URL=http://file/v1\n")
    settings = load_model_settings(home, env={"OPENAI_API_KEY": "env"})
    assert (settings.model, settings.api_key, settings.base_url) == ("gpt-x", "env", "http://file/v1")
    override = load_model_settings(home, env={"OPENAI_API_KEY": "env"}, override={"model": "other", "api_key": "k2"})
    assert (override.model, override.api_key) == ("other", "k2")


def test_openrouter_key_alone_selects_openrouter(tmp_path: Path) -> None:
    settings = load_model_settings(write(tmp_path), env={"HERMES_MODEL": "m", "OPENROUTER_API_KEY": "or"})
    assert settings.provider == "openrouter" and settings.base_url == "https://openrouter.ai/api/v1" and settings.api_key == "or"


def test_no_model_configured_says_what_to_set_and_where(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no model is configured") as info:
        load_model_settings(write(tmp_path), env={})
    assert "config.yaml" in str(info.value) and "HERMES_MODEL" in str(info.value)


def test_a_missing_key_and_broken_yaml_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no API key"):
        load_model_settings(write(tmp_path, "model: m\n"), env={})
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_model_settings(write(tmp_path, "model: [unclosed\n"), env={})


def test_pricing_gives_a_turns_cost_and_bad_prices_say_how_to_write_them(tmp_path: Path) -> None:
    config = "model: gpt-x\npricing:\n  gpt-x: {input: 2.5, output: 10}\n  other: {input: 0, output: 1}\n"
    settings = load_model_settings(write(tmp_path, config), env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://h/v1"})
    assert settings.prices == {"gpt-x": Price(input=2.5, output=10.0), "other": Price(input=0.0, output=1.0)}
    assert settings.cost(1_000, 500) == pytest.approx(0.0075)
    unpriced = load_model_settings(write(tmp_path, "model: gpt-x\n"), env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://h/v1"})
    assert unpriced.cost(1_000, 500) is None
    for bad in (
        "pricing: [1, 2]\n",
        "pricing:\n  gpt-x: {input: 2.5}\n",
        "pricing:\n  gpt-x: {input: -1, output: 2}\n",
        "pricing:\n  gpt-x: {input: yes, output: 2}\n",
    ):
        with pytest.raises(ConfigError, match="per million tokens|must map model names") as info:
            load_model_settings(write(tmp_path, "model: gpt-x\n" + bad), env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://h/v1"})
        assert "gpt-4o: {input: 2.5, output: 10}" in str(info.value)
