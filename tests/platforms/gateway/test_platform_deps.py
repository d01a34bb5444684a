"""Each chat platform's sessions run with that platform's toolset, system-prompt line and
``source``: the choice by session id (pure), then a real ``hermes serve`` with the Telegram
test server and the API server side by side, before and after a SIGHUP."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.agent import ConfigError, DepsTable, HubRegistry, ModelClients, ModelSettings, SessionDeps, deps_for, platform_of, reader_opener
from actors.chaos import ModelServer
from actors.config import load_config
from actors.platforms._runtime_deps import GATEWAY_PLATFORMS, configured_deps, gateway_deps
from actors.platforms._serve import API_PLATFORM
from actors.platforms.gateway._session_key import session_key
from actors.tools import resolve_toolsets
from actors.tools.mcp import McpCatalog
from actors.tools.mcp._catalog import LiveTools
from tests.config.test_reload import Lines
from tests.conftest import DEADLINE
from tests.platforms.gateway.telegram_server import TOKEN, TelegramServer
from tests.platforms.serve_process import CLEARED, HERMES, launched

ALLOWED = 111
KEY = "sk-hermes-platform-deps-test"
TELEGRAM_HINT = GATEWAY_PLATFORMS["telegram"].hint


def _deps(tmp_path: Path, source: str) -> SessionDeps:
    model = ModelSettings(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
    return SessionDeps(hubs=HubRegistry(), open_reader=reader_opener(tmp_path / "s.db"), model=model, clients=ModelClients(), source=source)


def test_a_session_id_names_its_platform_and_so_its_deps(tmp_path: Path) -> None:
    api, telegram, matrix = _deps(tmp_path, "api"), _deps(tmp_path, "telegram"), _deps(tmp_path, "matrix")
    table = DepsTable(default=api, platforms={"telegram": telegram, "matrix": matrix})
    chat = session_key("telegram", "dm", "42")
    assert platform_of(chat) == "telegram" and platform_of(session_key("matrix", "group", "!room:example.org", "$root")) == "matrix"
    assert deps_for(table, chat) is telegram
    assert deps_for(table, f"{chat}#3") is telegram  # after a reset
    assert deps_for(table, f"{chat}.child-1") is telegram  # a delegated child: its parent's platform (then its own limits)
    assert deps_for(table, session_key("matrix", "dm", "!r:x")) is matrix
    # Everything else is the API server's: another platform with no deps here, API and cron sessions, look-alikes.
    for other in (session_key("webhook", "route", "ci"), "s", "cron:job:20260101T000000Z", "agent:main:", "agent:main:telegram", "agent:other:telegram:dm:1"):
        assert deps_for(table, other) is api, other
    assert deps_for(api, chat) is api  # a runtime without platforms: one deps for all


def test_the_chat_platforms_presets_leave_out_clarify() -> None:
    api = resolve_toolsets(["hermes-api-server"])
    for name in ("telegram", "matrix", "webhook"):
        assert resolve_toolsets([f"hermes-{name}"]) == api and "clarify" not in api
        assert GATEWAY_PLATFORMS[name].source == name and GATEWAY_PLATFORMS[name].hint
    assert resolve_toolsets(["hermes-gateway"]) == api


def _config(model: ModelServer, telegram: TelegramServer, telegram_tools: str) -> str:
    return (
        f'model:\n  default: test-model\n  base_url: "{model.base_url}"\n  api_key: unused\n'
        f"platform_toolsets:\n  api_server: [terminal]\n  telegram: [{telegram_tools}]\n"
        f'platforms:\n  telegram:\n    enabled: true\n    extra:\n      base_url: "{telegram.base_url}"\n      poll_timeout: 5\n      batch_delay: 0\n'
    )


def _call_with(model: ModelServer, text: str) -> dict[str, Any]:
    (body,) = [r.body for r in model.requests if r.path == "/v1/chat/completions" and text in str(r.body["messages"][-1])]
    return body


def _offered(body: dict[str, Any]) -> list[str]:
    return sorted(t["function"]["name"] for t in body.get("tools") or ())


def test_a_telegram_chat_runs_with_telegrams_tools_and_prompt_and_a_reload_changes_its_tools(tmp_path: Path, telegram: TelegramServer) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with ModelServer(seed=5) as model:
        (home / "config.yaml").write_text(_config(model, telegram, "todo"))
        (home / ".env").write_text(f"API_SERVER_KEY={KEY}\nTELEGRAM_BOT_TOKEN={TOKEN}\nTELEGRAM_ALLOWED_USERS={ALLOWED}\n")
        with launched(home) as (process, base):
            out = Lines(process)
            assert out.next_with("telegram adapter started").endswith("telegram adapter started; its sessions' tools: todo\n")
            telegram.push(ALLOWED, "from telegram, first")
            assert telegram.wait_delivered(ALLOWED, 1)[0].text == "echo: from telegram, first"
            ask = {"messages": [{"role": "user", "content": "from the api"}]}
            reply = httpx.post(f"{base}/v1/chat/completions", json=ask, headers={"authorization": f"Bearer {KEY}"}, timeout=DEADLINE)
            assert reply.status_code == 200, reply.text
            (home / "config.yaml").write_text(_config(model, telegram, "todo, terminal"))
            process.send_signal(signal.SIGHUP)
            assert "platform_toolsets apply to every session" in out.next_with("reloaded")
            telegram.push(ALLOWED, "from telegram, second")
            assert telegram.wait_delivered(ALLOWED, 2)[1].text == "echo: from telegram, second"
            process.send_signal(signal.SIGTERM)
            assert process.wait(DEADLINE) == 0
        first, api, second = (_call_with(model, text) for text in ("from telegram, first", "from the api", "from telegram, second"))
    assert _offered(first) == ["todo"]  # platform_toolsets.telegram, not the API server's
    assert _offered(api) == ["process", "terminal"]  # platform_toolsets.api_server
    assert _offered(second) == ["process", "terminal", "todo"]  # the reloaded platform_toolsets.telegram
    for body in (first, second):  # the chat's system prompt (frozen at its first turn) says how Telegram shows replies, once
        system = body["messages"][0]
        assert system["role"] == "system" and TELEGRAM_HINT in system["content"]
        assert str(body["messages"]).count("shown as Telegram messages") == 1
    assert API_PLATFORM.hint in api["messages"][0]["content"] and "Telegram" not in str(api["messages"])
    env = {k: v for k, v in os.environ.items() if k not in CLEARED} | {"HERMES_HOME": str(home)}
    listed = subprocess.run([*HERMES, "sessions", "list"], env=env, capture_output=True, text=True, timeout=DEADLINE, check=True)
    sources = {line.split()[0]: line.split()[4] for line in listed.stdout.splitlines()[1:] if line.strip()}
    assert sources[session_key("telegram", "dm", str(ALLOWED))] == "telegram", listed.stdout
    assert sorted(sources.values()) == ["api", "telegram"], listed.stdout


def test_each_platforms_deps_share_the_runtimes_hubs_clients_and_mcp_servers(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("model: {default: m, base_url: 'http://127.0.0.1:9/v1', api_key: k}\nplatform_toolsets: {telegram: [todo]}\n")
    loaded = load_config(tmp_path, {})
    api = configured_deps(tmp_path, {}, loaded, API_PLATFORM)
    catalog = McpCatalog([])
    api = dataclasses.replace(api, tools=LiveTools(api.tools, catalog))  # as with_mcp leaves it
    found = gateway_deps(tmp_path, {}, loaded, ["telegram", "webhook", "api"], api)
    assert sorted(found) == ["telegram", "webhook"]  # only chat platforms
    telegram, webhook = found["telegram"], found["webhook"]
    assert isinstance(telegram.tools, LiveTools) and telegram.tools.version == catalog.version  # the same MCP servers, read live
    assert sorted(telegram.tools) == ["todo"] and sorted(telegram.config.traits) == ["todo"]
    assert "clarify" not in webhook.tools and sorted(webhook.tools) == sorted(api.tools)  # hermes-webhook, the default
    assert (telegram.source, webhook.source) == ("telegram", "webhook") and telegram.platform_hint == TELEGRAM_HINT
    assert all(d.hubs is api.hubs and d.clients is api.clients for d in found.values())
    (tmp_path / "config.yaml").write_text("model: {default: m, base_url: 'http://127.0.0.1:9/v1', api_key: k}\nplatform_toolsets: {telegram: [todoo]}\n")
    with pytest.raises(ConfigError, match=r"platform_toolsets.telegram: unknown toolset 'todoo'; did you mean 'todo'"):
        gateway_deps(tmp_path, {}, load_config(tmp_path, {}), ["telegram"], api)
