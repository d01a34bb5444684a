"""The sections of config.yaml the runtime applies beyond the model (issue 16, part 1): toolsets,
``agent``, ``terminal``, ``memory`` and ``delegation``, read from the typed configuration by the
one builder ``hermes serve`` and ``hermes chat`` share, and seen working through a real server."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from actors.agent import ConfigError
from actors.agent._session_settings import UNCAPPED, session_settings
from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.config import load_config
from actors.platforms._runtime_deps import Platform, configured_deps
from tests.config.hermes_layout import HERMES_CONFIG
from tests.conftest import DEADLINE
from tests.platforms.serve_process import serving

KEY = "sk-hermes-test-key"
CLI = Platform(name="cli", source="cli", hint="")
API = Platform(name="api_server", source="api", hint="")


def home_with(tmp_path: Path, config: str) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    model = 'model:\n  default: m\n  base_url: "http://127.0.0.1:9/v1"\n  api_key: sk-x\n'
    (home / "config.yaml").write_text(model + config)
    return home


def test_a_hermes_config_sets_the_sessions_limits_as_hermes_does(tmp_path: Path) -> None:
    loaded = load_config(home_with(tmp_path, "\n".join(HERMES_CONFIG.split("\n")[7:])), {"LOCAL_KEY": "k"})
    settings = session_settings(loaded.config, "cli", file=loaded.file, cwd=tmp_path)
    assert settings.max_iterations == 90  # max_turns: null is unset
    assert settings.max_attempts == 4  # api_max_retries: 3
    assert settings.toolsets == ("hermes-cli",)
    assert settings.workdir == tmp_path  # terminal.cwd: "."
    assert settings.tools.terminal_timeout == 180
    assert (settings.tools.memory.memory_limit, settings.tools.memory.user_limit) == (2200, 1375)
    delegation = settings.delegation
    assert (delegation.max_children, delegation.spawn_depth, delegation.child_iterations) == (10, 1, 250)


@pytest.mark.parametrize(("value", "cap"), [("7", 7), ("unlimited", UNCAPPED), ("0", UNCAPPED), ("-1", UNCAPPED), ("null", 90)])
def test_max_turns_takes_a_number_or_no_cap(tmp_path: Path, value: str, cap: int) -> None:
    loaded = load_config(home_with(tmp_path, f"agent:\n  max_turns: {value}\n"), {})
    assert session_settings(loaded.config, "cli", file=loaded.file, cwd=tmp_path).max_iterations == cap


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ("agent:\n  max_turns: lots\n", ["agent.max_turns is 'lots'", "unlimited"]),
        ("terminal:\n  cwd: /no/such/dir\n", ["terminal.cwd", "/no/such/dir", "not a directory"]),
        ("terminal:\n  backend: docker\n", ["terminal.backend", "one of: local"]),
        ("terminal:\n  timeout: 9000\n", ["terminal.timeout", "<= 600"]),
        ("toolsets: [hermes-clu]\n", ["toolsets", "hermes-clu", "hermes-cli"]),
        ("agent:\n  disabled_toolsets: [terminl]\n", ["agent.disabled_toolsets", "terminl", "terminal"]),
        ("delegation:\n  max_concurrent_children: 0\n", ["delegation.max_concurrent_children", "> 0 and <= 64"]),
        ("memory:\n  provider: stor\n", ["memory.provider", "unknown memory provider 'stor'", "store"]),
        ("memory:\n  prefetch_timeout: 0\n", ["memory.prefetch_timeout", "> 0"]),
    ],
)
def test_a_setting_that_cannot_be_used_is_an_error_naming_the_key(tmp_path: Path, config: str, said: list[str]) -> None:
    home = home_with(tmp_path, config)
    with pytest.raises(ConfigError) as raised:
        configured_deps(home, {}, load_config(home, {}), CLI)
    for part in said:
        assert part in str(raised.value)
    assert str(home / "config.yaml") in str(raised.value)


def test_toolsets_disabled_toolsets_memory_and_delegation_choose_the_tools(tmp_path: Path) -> None:
    home = home_with(tmp_path, "")
    assert {"clarify", "memory", "delegate_task", "terminal"} <= set(configured_deps(home, {}, load_config(home, {}), CLI).tools)
    assert "clarify" not in configured_deps(home, {}, load_config(home, {}), API).tools
    home = home_with(
        tmp_path,
        "toolsets: [hermes-cli]\nagent:\n  disabled_toolsets: [terminal, todo]\n"
        "memory:\n  memory_enabled: false\n  user_profile_enabled: false\ndelegation:\n  max_spawn_depth: 0\n",
    )
    tools = set(configured_deps(home, {}, load_config(home, {}), CLI).tools)
    assert "read_file" in tools and "clarify" in tools
    assert not tools & {"terminal", "process", "todo", "memory", "delegate_task"}
    home = home_with(tmp_path, "memory:\n  provider: store\n  prefetch_timeout: 1.5\n")
    deps = configured_deps(home, {}, load_config(home, {}), CLI)
    assert "fact_store" in deps.tools and "fact_store" in deps.config.traits  # the provider's tool comes with it
    assert (deps.memory.provider, deps.memory.prefetch_timeout) == ("store", 1.5)
    home = home_with(tmp_path, "memory:\n  provider: honcho\n")  # a Hermes plugin this build lacks: built-in only, logged
    assert configured_deps(home, {}, load_config(home, {}), CLI).memory.provider == ""
    home = home_with(tmp_path, "platform_toolsets:\n  cli: [file]\n  api_server: [todo]\n")
    assert set(configured_deps(home, {}, load_config(home, {}), CLI).tools) == {"read_file", "write_file", "patch", "search_files"}
    assert set(configured_deps(home, {}, load_config(home, {}), API).tools) == {"todo"}


def test_hermes_serve_applies_max_turns_toolsets_terminal_and_memory_from_config_yaml(tmp_path: Path) -> None:
    workdir = tmp_path / "work dir"
    workdir.mkdir()
    pwd = ScriptedCall(name="terminal", arguments=json.dumps({"command": "pwd"}), id="call_1")
    memory = ScriptedCall(name="memory", arguments=json.dumps({"action": "add", "target": "user", "content": "likes tea"}), id="call_2")
    with ModelServer(seed=3) as server:
        again = ScriptedCall(name="terminal", arguments=json.dumps({"command": "pwd"}), id="call_3")
        replies = [ToolCallsReply(calls=(pwd,)), ToolCallsReply(calls=(memory,)), ToolCallsReply(calls=(again,)), TextReply(content="stopped as told")]
        server.script(replies, session="limits")
        home = home_with(tmp_path, "")
        (home / "config.yaml").write_text(
            f'model:\n  default: test-model\n  base_url: "{server.base_url}"\n  api_key: sk-test\n'
            f"agent:\n  max_turns: 3\nplatform_toolsets:\n  api_server: [terminal, memory]\n"
            f"terminal:\n  cwd: {json.dumps(str(workdir))}\nmemory:\n  user_profile_enabled: false\n"
        )
        (home / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
        with serving(home) as base, httpx.Client(base_url=base, headers={"authorization": f"Bearer {KEY}"}, timeout=DEADLINE) as http:
            ask = {"messages": [{"role": "user", "content": "where are we?"}]}
            reply = http.post("/v1/chat/completions", json=ask, headers={"x-hermes-session-id": "limits"})
            assert reply.status_code == 200, reply.text
            assert reply.json()["choices"][0]["message"]["content"] == "stopped as told"
        calls = [r.body for r in server.requests if r.path == "/v1/chat/completions"]
    assert len(calls) == 4  # three model calls, then the one without tools that must answer
    assert sorted(t["function"]["name"] for t in calls[0]["tools"]) == ["memory", "process", "terminal"]
    assert not calls[3].get("tools")
    results = [m["content"] for m in calls[3]["messages"] if m["role"] == "tool"]
    assert str(workdir) in results[0]  # terminal.cwd is where the session starts
    assert "memory.user_profile_enabled: false" in results[1]
    assert results[2].startswith("[not run]") and "limit of 3" in results[2]  # the third call reached max_turns: 3
    assert not (home / "memories" / "USER.md").exists()


def test_the_runtime_reads_config_yaml_once_and_every_section_reader_takes_that_reading(tmp_path: Path) -> None:
    import sys

    home = home_with(tmp_path, "compression:\n  threshold: 0.7\napprovals:\n  timeout: 42\npricing:\n  m: {input: 1, output: 2}\n")
    opened: list[str] = []
    watched = str(home / "config.yaml")

    def audit(event: str, args: tuple[object, ...]) -> None:
        if event == "open" and args and str(args[0]) == watched:
            opened.append(event)

    sys.addaudithook(audit)  # hooks cannot be removed: this one only records opens of this test's file
    loaded = load_config(home, {})
    deps = configured_deps(home, {}, loaded, API)
    assert len(opened) == 1  # load_config's reading; the providers, model, approvals and compression readers took it
    assert deps.approvals.timeout == 42 and deps.model.prices["m"].output == 2
    assert deps.config.compression is not None and deps.config.compression.threshold == 0.7
