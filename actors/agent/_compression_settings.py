"""Compression as config.yaml sets it (Hermes's layout), read once at start.

::

    model:
      context_length: 32768        # optional: the window, when /v1/models does not say
    compression:
      enabled: true                # default true
      threshold: 0.50              # share of the window at which a pass starts
      summary_model: small-model   # optional: the model that writes summaries

A bad value is a :class:`ConfigError` naming the key and what it takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ._compress import DEFAULT_SETTINGS, CompressionSettings
from ._config import ConfigError, read_config
from ._tokens import context_window


class CompressionConfig(msgspec.Struct, frozen=True, kw_only=True):
    settings: CompressionSettings | None
    """None: compression is off."""
    context_length: int
    summary_model: str = ""


def load_compression(home: Path, model: str, config: Mapping[str, Any] | None = None) -> CompressionConfig:
    """What ``home``'s config.yaml (``config``, as already read; None reads it) says about compression, for a session of ``model``."""
    config = read_config(home) if config is None else config
    where = home / "config.yaml"
    section = config.get("compression") or {}
    model_section = config.get("model")
    if not isinstance(section, dict):
        msg = f"{where}: 'compression' must be a mapping (enabled, threshold, summary_model)"
        raise ConfigError(msg)
    configured = model_section.get("context_length") if isinstance(model_section, dict) else None
    if configured is not None and (isinstance(configured, bool) or not isinstance(configured, int) or configured < 1):
        msg = f"{where}: model.context_length must be a whole number of tokens, not {configured!r}"
        raise ConfigError(msg)
    window = context_window(model, configured=configured, metadata=None)
    enabled = section.get("enabled", True)
    if not isinstance(enabled, bool):
        msg = f"{where}: compression.enabled must be true or false, not {enabled!r}"
        raise ConfigError(msg)
    threshold: Any = section.get("threshold", DEFAULT_SETTINGS.threshold)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0.0 < threshold <= 1.0:
        msg = f"{where}: compression.threshold must be a share of the context window in (0, 1], such as 0.5, not {threshold!r}"
        raise ConfigError(msg)
    summary_model = section.get("summary_model") or ""
    if not isinstance(summary_model, str):
        msg = f"{where}: compression.summary_model must be a model name, not {summary_model!r}"
        raise ConfigError(msg)
    settings = msgspec.structs.replace(DEFAULT_SETTINGS, threshold=float(threshold)) if enabled else None
    return CompressionConfig(settings=settings, context_length=window, summary_model=summary_model)
