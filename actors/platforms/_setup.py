"""``hermes setup``: find a model on first run, check it with a real call, and save it.

It looks for the local servers people run (Ollama on 11434, llama.cpp on 8080, vLLM on 8000,
LM Studio on 1234) and lists their models, or takes a provider (OpenRouter, OpenAI, any
OpenAI-compatible URL) and its key. The choice is checked with one small chat completion before
anything is written; then ``model:`` in config.yaml is set (the rest of the file, comments
included, stays as it was) and the key goes to ``.env`` (mode 600), never to config.yaml.

Plain prompts on stdin/stdout (no screen needed); ``--non-interactive`` with flags for scripts.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from actors._atomic import write_atomic

LOCAL_SERVERS: tuple[tuple[str, int], ...] = (("Ollama", 11434), ("llama.cpp", 8080), ("vLLM", 8000), ("LM Studio", 1234))
PROVIDERS: Mapping[str, tuple[str, str, str]] = {
    "openrouter": ("OpenRouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "openai": ("OpenAI", "https://api.openai.com/v1", "OPENAI_API_KEY"),
}
"""Provider -> (name shown, base URL, the .env variable its key goes to)."""
KEYLESS = "no-key-required"
"""The key a local server is called with (they ignore it; Hermes uses the same value)."""
PROBE_TIMEOUT = httpx.Timeout(1.5, connect=0.5)
CHECK_TIMEOUT = httpx.Timeout(60.0, connect=5.0)


class SetupCancelled(Exception):
    """The person ended the prompts (Ctrl+D / Ctrl+C): nothing was written."""


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """A local server that answered ``GET /models``."""

    name: str
    base_url: str
    models: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    base_url: str
    model: str
    api_key: str
    key_variable: str | None
    """Where the key is saved in .env; None for a local server's placeholder key (config.yaml)."""
    provider: str = "custom"


def probe_local(host: str = "127.0.0.1", servers: tuple[tuple[str, int], ...] = LOCAL_SERVERS) -> list[Found]:
    """The local servers that answer, with their models (a closed port costs a refused connect)."""
    found: list[Found] = []
    with httpx.Client(timeout=PROBE_TIMEOUT) as client:
        for name, port in servers:
            base_url = f"http://{host}:{port}/v1"
            try:
                answer = client.get(f"{base_url}/models")
                data = answer.json().get("data") if answer.status_code == 200 else None
            except (httpx.HTTPError, ValueError, AttributeError):
                continue
            if isinstance(data, list):
                models = tuple(str(m["id"]) for m in data if isinstance(m, dict) and m.get("id"))
                found.append(Found(name=name, base_url=base_url, models=models))
    return found


def check(choice: Choice) -> str | None:
    """One small chat completion with the choice; None when it answered, else what went wrong."""
    body = {"model": choice.model, "messages": [{"role": "user", "content": "Reply with the word OK."}], "max_tokens": 16, "stream": False}
    try:
        with httpx.Client(timeout=CHECK_TIMEOUT) as client:
            answer = client.post(f"{choice.base_url}/chat/completions", json=body, headers={"authorization": f"Bearer {choice.api_key}"})
    except httpx.HTTPError as exc:
        return f"nothing answers at {choice.base_url} ({type(exc).__name__}); is the server running?"
    if answer.status_code in (401, 403):
        return f"the key was refused ({answer.status_code}); check it and try again"
    if answer.status_code == 404:
        return f"{choice.base_url} does not know model {choice.model!r} (404); pick one it lists"
    if answer.status_code >= 400:
        return f"the call failed with {answer.status_code}: {answer.text[:300]}"
    try:
        choices = answer.json()["choices"]
    except (ValueError, KeyError, TypeError):
        return f"{choice.base_url} answered 200 but not with a chat completion; is it OpenAI-compatible?"
    return None if isinstance(choices, list) and choices else "the reply had no choices"


def save(home: Path, choice: Choice) -> tuple[Path, Path | None]:
    """Set ``model:`` in config.yaml (comments and other sections kept) and the key in .env (mode 600)."""
    from ruamel.yaml import YAML

    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.yaml"
    yaml = YAML()  # round trip: comments, order and quoting stay
    document: Any = yaml.load(config.read_text(encoding="utf-8")) if config.exists() else None
    if document is None:
        document = yaml.load("{}")
    if not hasattr(document, "get"):
        msg = f"{config} does not hold a mapping of settings; fix or move it, then run hermes setup again"
        raise ValueError(msg)
    section = document.get("model")
    if not hasattr(section, "get"):
        section = yaml.load("{}")
        document["model"] = section
    section["default"] = choice.model
    section["provider"] = choice.provider
    section["base_url"] = choice.base_url
    if choice.key_variable is None:
        section["api_key"] = choice.api_key
    elif "api_key" in section:
        del section["api_key"]  # the key lives in .env from now on
    write_atomic(config, _dumped(yaml, document).encode(), new_mode=0o600)  # an existing file keeps its mode
    if choice.key_variable is None:
        return config, None
    dotenv = home / ".env"
    write_atomic(dotenv, _with_variable(dotenv, choice.key_variable, choice.api_key).encode(), new_mode=0o600)
    dotenv.chmod(0o600)  # it holds keys: also when it existed with a looser mode
    return config, dotenv


def _dumped(yaml: Any, document: Any) -> str:
    import io

    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def _with_variable(dotenv: Path, name: str, value: str) -> str:
    """``.env`` with ``name`` set to ``value``: an existing line replaced in place, else appended."""
    lines = dotenv.read_text(encoding="utf-8").splitlines() if dotenv.exists() else []
    line = f"{name}={value}"
    for index, existing in enumerate(lines):
        if existing.strip().removeprefix("export ").split("=", 1)[0].strip() == name:
            lines[index] = line
            break
    else:
        lines.append(line)
    return "\n".join(lines) + "\n"


# -- the conversation ---------------------------------------------------------------------------


Ask = Callable[[str], str]
Say = Callable[[str], None]


def interactive(ask: Ask, say: Say, env: Mapping[str, str]) -> Choice:
    """The prompts; raises :class:`SetupCancelled` on end of input."""
    say("Looking for local model servers...")
    found = probe_local()
    options: list[tuple[str, str]] = []
    for index, server in enumerate(found, 1):
        listed = ", ".join(server.models[:5]) + (" ..." if len(server.models) > 5 else "")
        options.append((str(index), f"{server.name} at {server.base_url} (models: {listed or 'none listed'})"))
    if not found:
        say("  none found on 11434 (Ollama), 8080 (llama.cpp), 8000 (vLLM) or 1234 (LM Studio)")
    options += [("o", "OpenRouter (needs a key)"), ("a", "OpenAI (needs a key)"), ("c", "another OpenAI-compatible URL")]
    for key, text in options:
        say(f"  [{key}] {text}")
    default = "1" if found else "o"
    picked = _pick(ask, f"Choose [{default}]: ", {k for k, _ in options}, default, say)
    if picked.isdigit():
        server = found[int(picked) - 1]
        model = _ask_model(ask, server.models, say)
        return Choice(base_url=server.base_url, model=model, api_key=KEYLESS, key_variable=None)
    if picked == "c":
        base_url = _required(ask, "Base URL (for example http://192.168.1.5:8000/v1): ", say).rstrip("/")
        model = _required(ask, "Model name: ", say)
        key = ask("API key (empty if the server needs none): ").strip()
        return Choice(base_url=base_url, model=model, api_key=key or KEYLESS, key_variable="OPENAI_API_KEY" if key else None)
    provider = "openrouter" if picked == "o" else "openai"
    shown, base_url, variable = PROVIDERS[provider]
    known = env.get(variable, "")
    key = ask(f"{shown} API key{' (Enter keeps the one in ' + variable + ')' if known else ''}: ").strip() or known
    while not key:
        say(f"  a key is needed for {shown}")
        key = ask(f"{shown} API key: ").strip()
    model = _required(ask, "Model name (for example anthropic/claude-sonnet-4 or gpt-4o): ", say)
    return Choice(base_url=base_url, model=model, api_key=key, key_variable=variable, provider=provider)


def _pick(ask: Ask, prompt: str, allowed: set[str], default: str, say: Say) -> str:
    while True:
        answer = ask(prompt).strip().lower() or default
        if answer in allowed:
            return answer
        say(f"  choose one of {', '.join(sorted(allowed))}")


def _ask_model(ask: Ask, models: tuple[str, ...], say: Say) -> str:
    if not models:
        return _required(ask, "Model name: ", say)
    for index, name in enumerate(models, 1):
        say(f"  ({index}) {name}")
    while True:
        answer = ask("Model [1]: ").strip() or "1"
        if answer.isdigit() and 1 <= int(answer) <= len(models):
            return models[int(answer) - 1]
        if answer in models or not answer.isdigit():
            return answer  # a name, listed or not (a server may serve more than it lists)
        say(f"  a number from 1 to {len(models)}, or a model name")


def _required(ask: Ask, prompt: str, say: Say) -> str:
    while not (answer := ask(prompt).strip()):
        say("  this cannot be empty")
    return answer


def from_flags(provider: str | None, base_url: str | None, model: str | None, api_key: str | None, env: Mapping[str, str]) -> Choice:
    """The choice a script gave (``--non-interactive``); raises ValueError saying what is missing."""
    if provider in (None, "local"):
        found = [f for f in probe_local() if base_url is None or f.base_url == base_url.rstrip("/")]
        if base_url is None and not found:
            msg = "no local model server answers on 11434, 8080, 8000 or 1234; pass --provider and --base-url"
            raise ValueError(msg)
        url = base_url.rstrip("/") if base_url else found[0].base_url
        listed = found[0].models if found else ()
        chosen = model or (listed[0] if listed else None)
        if chosen is None:
            msg = f"{url} lists no model; pass --model"
            raise ValueError(msg)
        return Choice(base_url=url, model=chosen, api_key=api_key or KEYLESS, key_variable="OPENAI_API_KEY" if api_key else None)
    if provider == "custom":
        if not base_url or not model:
            msg = "--provider custom needs --base-url and --model"
            raise ValueError(msg)
        return Choice(base_url=base_url.rstrip("/"), model=model, api_key=api_key or KEYLESS, key_variable="OPENAI_API_KEY" if api_key else None)
    if provider not in PROVIDERS:
        msg = f"--provider must be local, openrouter, openai or custom, not {provider!r}"
        raise ValueError(msg)
    _, url, variable = PROVIDERS[provider]
    key = api_key or env.get(variable)
    if not key or not model:
        msg = f"--provider {provider} needs --model and a key (--api-key, or {variable} in the environment)"
        raise ValueError(msg)
    return Choice(base_url=base_url.rstrip("/") if base_url else url, model=model, api_key=key, key_variable=variable, provider=provider)


def run_setup(
    home: Path | None = None,
    *,
    interactive_mode: bool = True,
    flags: Mapping[str, str | None] | None = None,
    skip_check: bool = False,
    env: Mapping[str, str] | None = None,
) -> int:
    """``hermes setup``: 0 saved, 1 not saved (a failed check, a refusal), 2 bad flags, 130 cancelled."""
    from actors.agent._config import hermes_home

    environ = dict(os.environ if env is None else env)
    home = home or hermes_home(environ)
    print(f"hermes setup: choosing a model for {home}")
    try:
        if interactive_mode:
            choice = interactive(_ask, print, environ)
        else:
            given = dict(flags or {})
            choice = from_flags(given.get("provider"), given.get("base_url"), given.get("model"), given.get("api_key"), environ)
    except SetupCancelled:
        print("\nsetup cancelled; nothing was written")
        return 130
    except ValueError as exc:
        print(f"hermes setup: {exc}")
        return 2
    while not skip_check:
        print(f"Checking {choice.model} at {choice.base_url} with one small call...")
        problem = check(choice)
        if problem is None:
            print("  it answered.")
            break
        print(f"  {problem}")
        if not interactive_mode:
            print("nothing was written (pass --skip-check to save it anyway)")
            return 1
        try:
            again = _pick(_ask, "[r]etry, [s]ave anyway, [q]uit [r]: ", {"r", "s", "q"}, "r", print)
        except SetupCancelled:
            again = "q"
        if again == "q":
            print("nothing was written")
            return 1
        if again == "s":
            break
    try:
        config, dotenv = save(home, choice)
    except (OSError, ValueError) as exc:
        print(f"hermes setup: could not save the choice: {exc}")
        return 1
    print(f"Saved the model in {config}" + (f" and its key in {dotenv} (mode 600)" if dotenv else ""))
    print("Next: 'hermes serve' for the API, 'hermes chat' to talk; 'hermes doctor' checks the setup.")
    return 0


def _ask(prompt: str) -> str:
    try:
        return input(prompt)
    except (EOFError, KeyboardInterrupt):
        raise SetupCancelled from None
