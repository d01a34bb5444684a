"""``compression:`` and ``model.context_length`` in config.yaml, read as Hermes users write them."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.agent._compress import DEFAULT_SETTINGS
from actors.agent._compression_settings import load_compression
from actors.agent._config import ConfigError


def home_with(tmp_path: Path, text: str) -> Path:
    (tmp_path / "config.yaml").write_text(text)
    return tmp_path


def test_compression_is_on_by_default_with_the_models_known_window(tmp_path: Path) -> None:
    loaded = load_compression(home_with(tmp_path, "model: gpt-4o\n"), "gpt-4o")
    assert loaded.settings == DEFAULT_SETTINGS and loaded.context_length == 128_000 and loaded.summary_model == ""


def test_the_config_sets_the_window_the_threshold_the_summary_model_or_turns_it_off(tmp_path: Path) -> None:
    text = "model:\n  default: local\n  context_length: 8192\ncompression:\n  threshold: 0.7\n  summary_model: small\n"
    loaded = load_compression(home_with(tmp_path, text), "local")
    assert loaded.context_length == 8192 and loaded.settings is not None and loaded.settings.threshold == 0.7 and loaded.summary_model == "small"
    assert load_compression(home_with(tmp_path, "compression:\n  enabled: false\n"), "local").settings is None


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("compression: yes please\n", "'compression' must be a mapping"),
        ("compression:\n  threshold: 2\n", "compression.threshold must be a share"),
        ("compression:\n  enabled: maybe\n", "compression.enabled must be true or false"),
        ("model:\n  context_length: lots\n", "model.context_length must be a whole number"),
        ("compression:\n  summary_model: [a, b]\n", "compression.summary_model must be a model name"),
    ],
)
def test_a_bad_value_names_the_key_and_what_it_takes(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        load_compression(home_with(tmp_path, text), "m")
