"""Which model a session calls, read the way Hermes users already write it.

Sources, first match wins for each setting:

- a per-session override (a mapping with ``model``, ``provider``, ``base_url``, ``api_key``);
- ``HERMES_HOME/config.yaml``, section ``model:`` (``default`` or ``model``, ``provider``,
  ``base_url``, ``api_key``; or just a model name as a string);
- the environment, then ``HERMES_HOME/.env``: ``HERMES_MODEL``, ``OPENAI_BASE_URL``,
  ``OPENAI_API_KEY``, ``OPENROUTER_API_KEY``.

Prices (for the cost of a turn) come from the top-level ``pricing:`` section only: model
name -> ``{input, output}`` in USD per million tokens, and optionally ``cache_read`` and
``cache_write`` (prompt tokens read from / written to the provider's cache; default: the
input price). A model without prices has no cost.

Prompt caching comes from ``prompt_caching:`` (``enabled: auto | true | false``, default auto:
Claude models only; ``cache_ttl: 5m | 1h``, Hermes's key).

A missing model, URL or key is a :class:`ConfigError` that says what to set and where.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from actors.config import ConfigError as ConfigError
from actors.config import hermes_home as hermes_home
from actors.config import read_dotenv as read_dotenv

from ._caching import AUTO, PromptCaching
from ._model import ModelSettings
from ._pricing import Price

PROVIDER_URLS = {
    "openai": "https://api.openai.com/v1",
    "openrouter": "https://openrouter.ai/api/v1",
}


def read_config(home: Path) -> dict[str, Any]:
    path = home / "config.yaml"
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except yaml.YAMLError as exc:
        msg = f"{path} is not valid YAML ({exc}); fix the file or move it away"
        raise ConfigError(msg) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        msg = f"{path} must hold a mapping of settings (it holds a {type(loaded).__name__})"
        raise ConfigError(msg)
    return loaded


def load_model_settings(
    home: Path | None = None, *, env: Mapping[str, str] | None = None, override: Mapping[str, Any] | None = None, config: Mapping[str, Any] | None = None
) -> ModelSettings:
    """Resolve the model settings; raise :class:`ConfigError` with advice when incomplete.

    ``config``: config.yaml as already read (``LoadedConfig.raw``); None reads the file."""
    env = dict(os.environ if env is None else env)
    home = home or hermes_home(env)
    secrets = {**read_dotenv(home / ".env"), **env}  # the real environment wins
    raw = read_config(home) if config is None else config
    section: Any = raw.get("model", {})
    if isinstance(section, str):
        section = {"default": section}
    if not isinstance(section, dict):
        msg = f"{home / 'config.yaml'}: 'model' must be a model name or a mapping (default, provider, base_url, api_key)"
        raise ConfigError(msg)
    chosen = {**{k: v for k, v in section.items() if v not in (None, "")}, **{k: v for k, v in (override or {}).items() if v}}

    model = chosen.get("model") or chosen.get("default") or secrets.get("HERMES_MODEL")
    provider = str(chosen.get("provider") or ("openrouter" if "OPENROUTER_API_KEY" in secrets and "OPENAI_API_KEY" not in secrets else "openai"))
    base_url = chosen.get("base_url") or secrets.get("OPENAI_BASE_URL") or PROVIDER_URLS.get(provider)
    key_names = ["OPENROUTER_API_KEY", "OPENAI_API_KEY"] if provider == "openrouter" else ["OPENAI_API_KEY", "OPENROUTER_API_KEY"]
    api_key = chosen.get("api_key") or next((secrets[k] for k in key_names if secrets.get(k)), None)

    where = home / "config.yaml"
    if not model:
        msg = (
            f"no model is configured: run 'hermes setup' to find one, or add to {where}\n  model:\n    default: <model name>\n    base_url: <https://.../v1>\n"
            f"or set HERMES_MODEL (and OPENAI_BASE_URL / OPENAI_API_KEY) in the environment or {home / '.env'}"
        )
        raise ConfigError(msg)
    if not base_url:
        msg = f"model {model!r} has no endpoint: set model.base_url in {where} or OPENAI_BASE_URL (provider {provider!r} has no default URL)"
        raise ConfigError(msg)
    if not api_key:
        msg = f"no API key for {base_url}: set OPENAI_API_KEY (or OPENROUTER_API_KEY) in the environment or in {home / '.env'}, or model.api_key in {where}"
        raise ConfigError(msg)
    prices = read_prices(raw.get("pricing"), where)
    caching = read_prompt_caching(raw.get("prompt_caching"), where)
    vision = chosen.get("vision")
    if vision is not None and not isinstance(vision, bool):
        msg = f"{where}: model.vision must be true or false (whether the model can see images)"
        raise ConfigError(msg)
    return ModelSettings(
        model=str(model), base_url=str(base_url).rstrip("/"), api_key=str(api_key), provider=provider, prices=prices, vision=vision, caching=caching
    )


def _price_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def read_prices(section: Any, where: Path) -> dict[str, Price]:
    """``pricing:`` maps model names to ``{input: USD per million tokens, output: ..., cache_read: ..., cache_write: ...}``."""
    if section is None:
        return {}
    example = "pricing:\n  gpt-4o: {input: 2.5, output: 10}\n  anthropic/claude-sonnet-4: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}"
    if not isinstance(section, dict):
        msg = f"{where}: 'pricing' must map model names to prices, for example\n{example}"
        raise ConfigError(msg)
    prices: dict[str, Price] = {}
    for name, price in section.items():
        values = (price.get("input"), price.get("output")) if isinstance(price, dict) else (None, None)
        if not all(_price_number(v) for v in values):
            msg = f"{where}: pricing for {name!r} needs 'input' and 'output' in USD per million tokens (numbers >= 0), for example\n{example}"
            raise ConfigError(msg)
        assert isinstance(price, dict)
        cached = {key: price.get(key) for key in ("cache_read", "cache_write")}
        for key, value in cached.items():
            if value is not None and not _price_number(value):
                msg = f"{where}: pricing.{name}.{key} must be USD per million tokens (a number >= 0), or left out to charge the input price, not {value!r}"
                raise ConfigError(msg)
        read, write = (None if v is None else float(v) for v in cached.values())
        prices[str(name)] = Price(input=float(values[0]), output=float(values[1]), cache_read=read, cache_write=write)  # type: ignore[arg-type]
    return prices


_CACHING_EXAMPLE = "prompt_caching:\n  enabled: auto      # auto (Claude models only), true or false\n  cache_ttl: 5m      # 5m or 1h"


def read_prompt_caching(section: Any, where: Path) -> PromptCaching:
    """``prompt_caching:``: ``enabled`` (``auto``, true, false) and ``cache_ttl`` (``5m``, ``1h``).

    Raises:
        ConfigError: a value outside those, saying which key and what it takes.
    """
    if section is None:
        return AUTO
    if not isinstance(section, dict):
        msg = f"{where}: 'prompt_caching' must be a mapping, for example\n{_CACHING_EXAMPLE}"
        raise ConfigError(msg)
    # Other keys (Hermes's long_lived_prefix / long_lived_ttl) are not built here: ignored, as Hermes ignores keys it does not know.
    enabled = section.get("enabled", "auto")
    if enabled is not None and not isinstance(enabled, bool) and str(enabled).strip().lower() != "auto":
        msg = f"{where}: prompt_caching.enabled must be auto, true or false, not {enabled!r}"
        raise ConfigError(msg)
    ttl = section.get("cache_ttl", "5m")
    if ttl not in ("5m", "1h"):
        msg = f"{where}: prompt_caching.cache_ttl must be 5m or 1h (how long Anthropic keeps a cached prefix), not {ttl!r}"
        raise ConfigError(msg)
    return PromptCaching(enabled=enabled if isinstance(enabled, bool) else None, cache_ttl=ttl)
