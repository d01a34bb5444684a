"""Which providers a session may call, with their keys and deadlines, read as Hermes users write them.

Sources: ``HERMES_HOME/config.yaml``, ``HERMES_HOME/.env`` (the environment wins over it) and the
credential pool ``hermes auth add`` keeps in ``HERMES_HOME/auth.json``.

- ``model:`` is the primary. What :func:`~actors.agent.load_model_settings` resolves stays its model,
  URL and first key, so every config that works today works the same. Resolved here instead:
  ``provider: custom:<name>`` and a built-in provider it knows no URL for (``anthropic``, ``gemini``,
  ... in :data:`BUILTIN_PROVIDERS`) when no ``base_url`` is given.
- ``custom_providers:`` (a list of ``{name, base_url, api_key | key_env, key_cmd, model,
  extra_headers}``) and ``providers:`` (the same keyed by name; entries with a ``base_url``) are named
  endpoints, addressed as ``custom:<name>`` (lower case, spaces as ``-``). Without a key a named
  endpoint is called with ``no-key-required``, as Hermes does for local servers.
- ``fallback_providers:`` (a list of ``{provider, model, base_url?, api_key? | key_env?, key_cmd?}``),
  then the legacy ``fallback_model:`` (one entry or a list) are the fallbacks in order; an entry for
  an endpoint and model already in the chain (the primary's included) is dropped.
- ``credential_pool_strategies: {<provider>: fill_first | round_robin | random | least_used}``
  (Hermes's Codex-only ``quota_aware`` reads as ``least_used``, its behaviour without quota data).
- More keys for one provider: ``auth.json`` ``credential_pool.<provider>`` entries of
  ``auth_type: api_key`` (their ``access_token``, or the variable of ``source: env:<NAME>``; OAuth
  entries are skipped), then this project's form in config.yaml, which mirrors it::

      credential_pool:
        openrouter:
          - {label: personal, key_env: OPENROUTER_API_KEY}
          - {label: team, api_key: "${OPENROUTER_TEAM_KEY}", priority: 1}
          - {label: sso, key_cmd: "my-auth-cli print-token"}

  An entry has ``api_key``, ``key_env`` or ``key_cmd`` (a command printing a fresh key, Hermes's
  ``providers.<name>.key_cmd``; alone, the key starts empty), and may have ``label`` and ``priority``.
  The key ``model:`` resolves to stays first; a pool entry with the same secret only lends it its
  label and ``key_cmd``. A key's id is its label (else the variable it came from), else ``key-<n>``.
- Deadlines, ``timeouts:`` then the Hermes variable then the default: ``turn`` (900 s),
  ``request`` (one model call; ``HERMES_API_TIMEOUT``; 300 s), ``stream_read`` (seconds without a
  byte before a stream is dead; ``HERMES_STREAM_READ_TIMEOUT``; 120 s as in Hermes).
  ``model.streaming: false`` (Hermes's key) makes calls without streaming.

``${NAME}`` in a string value expands from the environment, then ``.env``. Every problem is a
:class:`~actors.agent.ConfigError` naming the file, the key and what is allowed, never a secret.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from actors.agent._config import PROVIDER_URLS, ConfigError, hermes_home, load_model_settings, read_config, read_dotenv
from actors.config import VARIABLE_NAME, expand_references

from ._keys import STRATEGIES, KeySpec, ProviderSpec, Strategy

BUILTIN_PROVIDERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "openai": (PROVIDER_URLS["openai"], ("OPENAI_API_KEY",)),
    "openrouter": (PROVIDER_URLS["openrouter"], ("OPENROUTER_API_KEY",)),
    "anthropic": ("https://api.anthropic.com/v1", ("ANTHROPIC_API_KEY",)),
    "gemini": ("https://generativelanguage.googleapis.com/v1beta/openai", ("GOOGLE_API_KEY", "GEMINI_API_KEY")),
    "deepseek": ("https://api.deepseek.com/v1", ("DEEPSEEK_API_KEY",)),
    "xai": ("https://api.x.ai/v1", ("XAI_API_KEY",)),
    "nvidia": ("https://integrate.api.nvidia.com/v1", ("NVIDIA_API_KEY",)),
    "huggingface": ("https://router.huggingface.co/v1", ("HF_TOKEN",)),
    "ollama-cloud": ("https://ollama.com/v1", ("OLLAMA_API_KEY",)),
    "zai": ("https://api.z.ai/api/paas/v4", ("GLM_API_KEY", "ZAI_API_KEY")),
}
"""Provider id -> (OpenAI-compatible base URL, the variables its key is read from, in order)."""
KEYLESS = "no-key-required"
"""What a named endpoint without a key is called with (Hermes's value for keyless local servers)."""

_STRATEGY: dict[str, Strategy] = {**{name: name for name in STRATEGIES}, "quota_aware": "least_used"}
_POOL_FIELDS = ("label", "api_key", "key_env", "key_cmd", "priority")
_POOL_EXAMPLE = "credential_pool:\n  openrouter:\n    - {label: personal, key_env: OPENROUTER_API_KEY}\n    - {label: team, api_key: '${TEAM_KEY}'}"
_FALLBACK_EXAMPLE = "fallback_providers:\n  - {provider: openrouter, model: anthropic/claude-sonnet-4}"


@dataclasses.dataclass(frozen=True, slots=True)
class ProviderChain:
    """The primary provider, its fallbacks in order, and the deadlines of a turn's model calls."""

    primary: ProviderSpec
    fallbacks: tuple[ProviderSpec, ...] = ()
    """Tried in order when the primary fails; none calls the primary's endpoint and model again."""
    turn_timeout: float = 900.0
    """``timeouts.turn``: seconds a whole turn may take, retries and fallbacks included."""
    request_timeout: float = 300.0
    """``timeouts.request``, else ``HERMES_API_TIMEOUT``: seconds one model call may take."""
    stream_read_timeout: float = 120.0
    """``timeouts.stream_read``, else ``HERMES_STREAM_READ_TIMEOUT``: seconds without a byte before a stream counts as dead."""
    stream: bool = True
    """``model.streaming``: false for endpoints that refuse streamed responses."""

    @property
    def providers(self) -> tuple[ProviderSpec, ...]:
        return (self.primary, *self.fallbacks)


def load_providers(
    home: Path | None = None, *, env: Mapping[str, str] | None = None, override: Mapping[str, Any] | None = None, config: Mapping[str, Any] | None = None
) -> ProviderChain:
    """Resolve the provider chain; raise :class:`ConfigError` with advice when it is incomplete.

    ``config``: config.yaml as already read (``LoadedConfig.raw``); None reads the file."""
    environ = dict(os.environ if env is None else env)
    home = home or hermes_home(environ)
    reader = _Reader(home, environ, read_config(home) if config is None else config)
    route = reader.primary(dict(override or {}))
    primary, seen = reader.spec(route), {route.identity}
    fallbacks: list[ProviderSpec] = []
    for route in reader.fallbacks():
        if route.identity not in seen:
            seen.add(route.identity)
            fallbacks.append(reader.spec(route))
    return ProviderChain(
        primary=primary,
        fallbacks=tuple(fallbacks),
        turn_timeout=reader.seconds("turn", None, 900.0),
        request_timeout=reader.seconds("request", "HERMES_API_TIMEOUT", 300.0),
        stream_read_timeout=reader.seconds("stream_read", "HERMES_STREAM_READ_TIMEOUT", 120.0),
        stream=reader.streaming(),
    )


@dataclasses.dataclass(slots=True)
class _Key:
    secret: str
    label: str = ""
    """Given by the user (``label:``, auth.json's label)."""
    source: str = ""
    """The variable the secret came from: the label when none was given."""
    command: str | None = None
    priority: int = 0


@dataclasses.dataclass(slots=True)
class _Route:
    """One provider as configured, before the keys of its pool are added."""

    name: str
    model: str
    base_url: str
    key: _Key | None
    missing: tuple[str, str, str] | None = None
    """(key path, problem, advice) when neither this entry nor the pool gives a key; None: keyless is fine."""
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def identity(self) -> tuple[str, str]:
        return self.base_url.rstrip("/").lower(), self.model.lower()


def _custom_name(name: str) -> str:
    return name.strip().lower().replace(" ", "-")


def _pool_name(provider: str) -> str:
    provider = provider.strip()
    return "custom:" + _custom_name(provider[7:]) if provider.lower().startswith("custom:") else provider


class _Reader:
    """One reading of the files; every error names the file and the key path it is about."""

    def __init__(self, home: Path, env: dict[str, str], config: Mapping[str, Any]) -> None:
        self.home, self.env = home, env
        self.file, self.dotenv = home / "config.yaml", home / ".env"
        self.secrets = {**read_dotenv(self.dotenv), **env}  # the real environment wins
        self.config = config
        self.named = self._named()
        self.strategies = self._strategies()
        self._auth: dict[str, Any] | None = None

    def fail(self, path: str, problem: str, advice: str) -> NoReturn:
        raise ConfigError(f"{self.file}: {path} {problem}; {advice}")

    def text(self, value: Any, path: str) -> str:
        """A string with ``${NAME}`` expanded; an unset or empty variable is an error naming it."""
        if not isinstance(value, str):
            self.fail(path, "must be a string", "quote it")
        expanded, missing = expand_references(value, self.secrets)
        if missing:
            self.fail(path, f"uses ${{{missing[0]}}}, which is empty or not set", f"set {missing[0]} in the environment or in {self.dotenv}")
        return expanded.strip()

    def optional(self, entry: Mapping[str, Any], field: str, path: str) -> str | None:
        value = entry.get(field)
        return None if value in (None, "") else self.text(value, f"{path}.{field}") or None

    def key(self, entry: Mapping[str, Any], path: str) -> _Key | None:
        """``api_key`` (``${NAME}`` allowed), else ``key_env`` (or ``api_key_env``); ``key_cmd``; ``label``."""
        command, label = self.optional(entry, "key_cmd", path), self.optional(entry, "label", path) or ""
        if entry.get("api_key") not in (None, ""):
            return _Key(self.text(entry["api_key"], f"{path}.api_key"), label, command=command)
        field = "key_env" if entry.get("key_env") else "api_key_env"
        name = self.optional(entry, field, path)
        if name is not None:
            if not VARIABLE_NAME.fullmatch(name):  # never echo it: it may be the key itself
                self.fail(f"{path}.{field}", "is not the name of a variable", "key_env takes a variable's name; put the key itself in api_key")
            if not self.secrets.get(name):
                self.fail(f"{path}.{field}", f"names {name}, which is empty or not set", f"set {name} in the environment or in {self.dotenv}")
            return _Key(self.secrets[name], label, name, command)
        return _Key("", label, command=command) if command else None

    def headers(self, *entries: tuple[Mapping[str, Any], str]) -> tuple[tuple[str, str], ...]:
        """``default_headers`` then ``extra_headers`` of each entry; later ones win."""
        merged: dict[str, str] = {}
        for entry, path in entries:
            for field in ("default_headers", "extra_headers"):
                raw = entry.get(field)
                if raw is not None and not isinstance(raw, dict):
                    self.fail(f"{path}.{field}", "must map header names to values", "for example {X-Client-Name: hermes}")
                merged |= {str(name): self.text(value, f"{path}.{field}.{name}") for name, value in (raw or {}).items()}
        return tuple(merged.items())

    def _named(self) -> dict[str, tuple[str, Mapping[str, Any]]]:
        """Normalized name -> (key path, entry): ``custom_providers`` first, then ``providers`` with a URL."""
        listed = self.config.get("custom_providers")
        if listed is not None and not isinstance(listed, list):
            self.fail("custom_providers", "must be a list", "each item {name, base_url, api_key or key_env, model}")
        named: dict[str, tuple[str, Mapping[str, Any]]] = {}
        for i, entry in enumerate(listed or []):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"].strip():
                self.fail(f"custom_providers[{i}]", "needs a name", "for example {name: local, base_url: http://localhost:8000/v1}")
            named.setdefault(_custom_name(entry["name"]), (f"custom_providers[{i}]", entry))
        keyed = self.config.get("providers")
        for key, entry in keyed.items() if isinstance(keyed, dict) else ():
            if isinstance(entry, dict) and entry.get("enabled") is not False and any(entry.get(f) for f in ("base_url", "url", "api")):
                name = entry.get("name")
                named.setdefault(_custom_name(name if isinstance(name, str) and name.strip() else str(key)), (f"providers.{key}", entry))
        return named

    def _strategies(self) -> dict[str, Strategy]:
        section = self.config.get("credential_pool_strategies")
        allowed = ", ".join(STRATEGIES)
        if section is not None and not isinstance(section, dict):
            self.fail("credential_pool_strategies", "must map provider names to a strategy", f"each one of: {allowed}")
        strategies: dict[str, Strategy] = {}
        for provider, raw in (section or {}).items():
            value = str(raw or "").strip().lower()
            if value and value not in _STRATEGY:
                self.fail(f"credential_pool_strategies.{provider}", f"is {raw!r}, which is not a strategy", f"use one of: {allowed}")
            if value:
                strategies[_pool_name(str(provider))] = _STRATEGY[value]
        return strategies

    def known(self) -> str:
        names = ", ".join(f"custom:{name}" for name in self.named)
        return f"known ones: {names}" if names else "none is defined yet: add one under custom_providers (name, base_url)"

    def lookup(self, provider: str) -> str | None:
        """The named endpoint ``custom:<name>`` (or a bare name that is not a built-in) refers to."""
        if provider.lower().startswith("custom:"):
            return name if (name := _custom_name(provider[7:])) in self.named else None
        name = _custom_name(provider)
        return name if name in self.named and provider not in BUILTIN_PROVIDERS and name not in ("custom", "auto") else None

    def primary(self, override: dict[str, Any]) -> _Route:
        section: Any = self.config.get("model", {})
        section = {"default": section} if isinstance(section, str) else section
        if not isinstance(section, dict):
            return self.settings(override, {})  # load_model_settings says what is wrong
        chosen = {**{k: v for k, v in section.items() if v not in (None, "")}, **{k: v for k, v in override.items() if v}}
        provider = str(chosen.get("provider") or "")
        model = chosen.get("model") or chosen.get("default") or self.secrets.get("HERMES_MODEL")
        if provider.lower().startswith("custom:") or self.lookup(provider):
            return self.route(provider, str(model or ""), chosen, "model")
        has_url = chosen.get("base_url") or self.secrets.get("OPENAI_BASE_URL")
        if model and provider in BUILTIN_PROVIDERS and provider not in PROVIDER_URLS and not has_url:
            return self.route(provider, str(model), chosen, "model")
        return self.settings(override, chosen)

    def settings(self, override: dict[str, Any], chosen: Mapping[str, Any]) -> _Route:
        """The route :func:`load_model_settings` resolves, with ``${NAME}`` expanded where it left it."""
        settings = load_model_settings(self.home, env=self.env, override=override, config=self.config)
        command, configured = self.optional(chosen, "key_cmd", "model"), chosen.get("api_key")
        if configured and settings.api_key == str(configured):
            key = _Key(self.text(str(configured), "model.api_key"), command=command)
        else:
            source = next((n for n in ("OPENAI_API_KEY", "OPENROUTER_API_KEY") if self.secrets.get(n) == settings.api_key), "")
            key = _Key(settings.api_key, source=source, command=command)
        base_url = self.text(settings.base_url, "model.base_url") if "${" in settings.base_url else settings.base_url
        known = BUILTIN_PROVIDERS.get(settings.provider)
        name = settings.provider
        if settings.provider in ("", "auto") or (known is not None and known[0] != base_url):  # a built-in's id on another endpoint
            name = next((n for n, (url, _) in BUILTIN_PROVIDERS.items() if url == base_url), "custom")
        return _Route(name, settings.model, base_url, key, headers=self.headers((chosen, "model")))

    def route(self, provider: str, model: str, chosen: Mapping[str, Any], path: str) -> _Route:
        """A primary or fallback entry naming a provider: named endpoint, built-in, or any with a ``base_url``."""
        if (name := self.lookup(provider)) is not None:
            return self.named_route(name, model, chosen, path)
        if provider.lower().startswith("custom:"):
            self.fail(f"{path}.provider", f"names {provider!r}, which is not defined", self.known())
        base_url, builtin = self.optional(chosen, "base_url", path), BUILTIN_PROVIDERS.get(provider)
        if builtin is None and base_url is None:
            advice = f"use one of {', '.join(BUILTIN_PROVIDERS)}, give it a base_url, or a named custom:<name> ({self.known()})"
            self.fail(f"{path}.provider", f"is {provider!r}, for which no URL is known", advice)
        key, missing = self.key(chosen, path), None
        if key is None and builtin is not None:
            source = next((n for n in builtin[1] if self.secrets.get(n)), None)
            key = _Key(self.secrets[source], source=source) if source else None
            advice = f"set {' or '.join(builtin[1])} in the environment or in {self.dotenv}, or key_env in {path}"
            missing = (f"{path}.provider", f"is {provider!r}, which needs a key", advice)
        elif key is None and self.secrets.get("OPENAI_API_KEY"):  # a custom endpoint, as load_model_settings does
            key = _Key(self.secrets["OPENAI_API_KEY"], source="OPENAI_API_KEY")
        url = base_url or (builtin[0] if builtin else "")
        return _Route(provider or "custom", model, url, key, missing, self.headers((chosen, path)))

    def named_route(self, name: str, model: str, chosen: Mapping[str, Any], path: str) -> _Route:
        where, entry = self.named[name]
        base_url = self.optional(chosen, "base_url", path) or next(
            (self.text(entry[f], f"{where}.{f}") for f in ("base_url", "url", "api") if entry.get(f)), None
        )
        if not base_url:
            self.fail(where, "has no base_url", "add base_url: http://host:port/v1")
        model = model or self.optional(entry, "model", where) or self.optional(entry, "default_model", where) or ""
        if not model:
            self.fail(f"{path}.model", f"is missing and custom:{name} ({where}) names no model", "set a model name in either")
        key = self.key(chosen, path) or self.key(entry, where)
        return _Route(f"custom:{name}", model, base_url, key, headers=self.headers((entry, where), (chosen, path)))

    def fallbacks(self) -> list[_Route]:
        """``fallback_providers`` then ``fallback_model``, in order (Hermes's merge of the two)."""
        routes: list[_Route] = []
        for section in ("fallback_providers", "fallback_model"):
            raw = self.config.get(section)
            if isinstance(raw, list):
                items = [(f"{section}[{i}]", entry) for i, entry in enumerate(raw)]
            elif isinstance(raw, dict) or raw is None:
                items = [(section, raw)] if raw else []
            else:
                self.fail(section, "must be a list of {provider, model} entries", f"for example\n{_FALLBACK_EXAMPLE}")
            for path, entry in items:
                provider, model = (entry.get("provider"), entry.get("model")) if isinstance(entry, dict) else (None, None)
                if isinstance(entry, dict) and not provider and not model:
                    continue  # an empty placeholder: no fallback, as in Hermes
                if not isinstance(entry, dict) or not provider or not model:
                    self.fail(path, "needs both provider and model", f"for example\n{_FALLBACK_EXAMPLE}")
                routes.append(self.route(str(provider).strip(), str(model).strip(), entry, path))
        return routes

    def spec(self, route: _Route) -> ProviderSpec:
        """The route with its pool: its own key first, then config.yaml's and auth.json's, each secret once."""
        merged: list[_Key] = []
        for key in [route.key, *self.configured_pool(route.name), *self.auth_pool(route.name)]:
            same = next((k for k in merged if key is not None and key.secret and k.secret == key.secret), None)
            if same is not None and key is not None:
                same.label, same.command = same.label or key.label, same.command or key.command
            elif key is not None:
                merged.append(key)
        if not merged and route.missing is not None:
            self.fail(*route.missing)
        keys: list[KeySpec] = []
        for n, key in enumerate(merged or [_Key(KEYLESS, source="keyless")], 1):
            key_id = base = key.label or key.source or f"key-{n}"
            taken, suffix = {k.key_id for k in keys}, 2
            while key_id in taken:
                key_id, suffix = f"{base}-{suffix}", suffix + 1
            keys.append(KeySpec(key_id, key.secret, key.label or key.source, key.priority, key.command))
        strategy = self.strategies.get(route.name, "fill_first")
        return ProviderSpec(route.name, route.base_url.rstrip("/"), route.model, tuple(keys), strategy, route.headers)

    def configured_pool(self, name: str) -> list[_Key]:
        section = self.config.get("credential_pool")
        if section is not None and not isinstance(section, dict):
            self.fail("credential_pool", "must map provider names to lists of keys", f"for example\n{_POOL_EXAMPLE}")
        found = next(((str(p), entries) for p, entries in (section or {}).items() if _pool_name(str(p)) == name), None)
        if found is None:
            return []
        path, entries = f"credential_pool.{found[0]}", found[1]
        if not isinstance(entries, list):
            self.fail(path, "must be a list of keys", f"for example\n{_POOL_EXAMPLE}")
        keys: list[_Key] = []
        for i, entry in enumerate(entries):
            where = f"{path}[{i}]"
            if not isinstance(entry, dict) or set(entry) - set(_POOL_FIELDS):
                self.fail(where, f"must be a mapping of {', '.join(_POOL_FIELDS)}", f"for example\n{_POOL_EXAMPLE}")
            key, priority = self.key(entry, where), entry.get("priority", 0)
            if key is None:
                self.fail(where, "has no key", "give it api_key, key_env or key_cmd")
            if not isinstance(priority, int) or isinstance(priority, bool):
                self.fail(f"{where}.priority", "must be a whole number", "lower ones are used first")
            key.priority = priority
            keys.append(key)
        return keys

    def auth_pool(self, name: str) -> list[_Key]:
        """API keys ``hermes auth add`` stored for the provider; OAuth credentials are Hermes's to refresh."""
        if self._auth is None:
            path = self.home / "auth.json"
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                data = {}
            except (ValueError, UnicodeDecodeError):
                raise ConfigError(f"{path} is not valid JSON; fix it or move it away (`hermes auth list` shows what it holds)") from None
            pool = data.get("credential_pool") if isinstance(data, dict) else None
            self._auth = pool if isinstance(pool, dict) else {}
        entries = self._auth.get(name)
        keys: list[_Key] = []
        for entry in entries if isinstance(entries, list) else ():
            if not isinstance(entry, dict) or (entry.get("auth_type") or "api_key") != "api_key":
                continue
            secret, source = entry.get("access_token"), str(entry.get("source") or "")
            if not secret and source.startswith("env:"):
                secret = self.secrets.get(source[4:])
            priority = entry.get("priority")
            if isinstance(secret, str) and secret:
                keys.append(_Key(secret, str(entry.get("label") or ""), priority=priority if type(priority) is int else 0))
        return keys

    def seconds(self, key: str, variable: str | None, default: float) -> float:
        section = self.config.get("timeouts")
        if section is not None and not isinstance(section, dict):
            self.fail("timeouts", "must be a mapping", "for example timeouts: {turn: 900, request: 300, stream_read: 120}")
        raw, where = (section or {}).get(key), f"{self.file}: timeouts.{key}"
        if raw is None and variable is not None and self.secrets.get(variable):
            raw, where = self.secrets[variable], f"{variable} (in the environment or {self.dotenv})"
        if raw is None:
            return default
        try:
            value = math.nan if isinstance(raw, bool) else float(raw)
        except (TypeError, ValueError):
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{where} must be a number of seconds > 0 (the default is {default:g})")
        return value

    def streaming(self) -> bool:
        section = self.config.get("model")
        flag = section.get("streaming", True) if isinstance(section, dict) else True
        if not isinstance(flag, bool):
            self.fail("model.streaming", "must be true or false", "false makes model calls without streaming, for endpoints that refuse it")
        return flag
