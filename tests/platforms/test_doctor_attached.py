"""``hermes doctor`` on what config.yaml attaches (issue 16, part 3: "configured platforms, MCP
servers and hooks"): a real subprocess against a local Telegram Bot API server, a real MCP server
written with the official SDK, and real hook scripts."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from actors.chaos import ModelServer
from tests.platforms.gateway.telegram_server import TOKEN, TelegramServer
from tests.platforms.serve_process import CLEARED

SLOW_START = 60.0
"""Seconds the doctor may take here: it imports the MCP SDK and starts a server (a few seconds on a loaded machine)."""


def doctor(home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["HERMES_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "actors.cli", "doctor", *extra], capture_output=True, text=True, env=env, timeout=SLOW_START)


DEMO = str(Path(__file__).parents[1] / "tools" / "mcp" / "demo_server.py")


def home_with(tmp_path: Path, server: ModelServer, config: str, dotenv: str = "") -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text(f'model:\n  default: test-model\n  base_url: "{server.base_url}"\n' + config)
    (home / ".env").write_text("OPENAI_API_KEY=sk-good-0123456789\n" + dotenv)
    (home / ".env").chmod(0o600)
    return home


def lines_about(output: str, name: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("[") and f"] {name}" in line]


def test_doctor_checks_the_platforms_mcp_servers_hooks_and_session_settings_and_names_each_fix(tmp_path: Path) -> None:
    script = tmp_path / "hook.sh"
    script.write_text("#!/bin/sh\necho '{}'\n")  # not executable
    with ModelServer(seed=1) as server, TelegramServer() as telegram:
        config = (
            f"platforms:\n  telegram:\n    enabled: true\n    extra: {{base_url: '{telegram.base_url}'}}\n"
            f"mcp_servers:\n  gone: {{command: no-such-mcp-server-binary}}\n  both: {{command: x, url: 'http://127.0.0.1:9/mcp'}}\n"
            f"hooks:\n  pre_tool_call:\n    - {{command: {script}}}\n"
            "toolsets: [hermes-cli]\nplatform_toolsets:\n  api_server: [no-such-toolset]\n"
        )
        home = home_with(tmp_path, server, config, "TELEGRAM_BOT_TOKEN=999:revoked\n")
        done = doctor(home)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "Telegram refused the bot token" in lines_about(out, "platform telegram")[0] and "@BotFather" in out
    assert "no-such-mcp-server-binary is not installed" in lines_about(out, "MCP server gone")[0]
    assert "give either command" in lines_about(out, "MCP server both")[0]
    assert "is not executable" in lines_about(out, "hook pre_tool_call")[0] and f"chmod +x {script}" in out
    assert "platform_toolsets.api_server" in lines_about(out, "sessions")[0] and "no-such-toolset" in out
    assert done.stderr == ""


def test_doctor_on_a_good_home_with_a_platform_an_mcp_server_and_an_allowed_hook_exits_0(tmp_path: Path) -> None:
    script = tmp_path / "hook.sh"
    script.write_text("#!/bin/sh\necho '{}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    with ModelServer(seed=1) as server, TelegramServer() as telegram:
        config = (
            f"platforms:\n  telegram:\n    enabled: true\n    extra: {{base_url: '{telegram.base_url}'}}\n"
            f"mcp_servers:\n  demo: {{command: {sys.executable}, args: [{DEMO}, stdio]}}\n"
            f"hooks:\n  pre_tool_call:\n    - {{command: {script}}}\n"
        )
        home = home_with(tmp_path, server, config, f"TELEGRAM_BOT_TOKEN={TOKEN}\n")
        allowed = {"approvals": [{"event": "pre_tool_call", "command": str(script), "script_mtime": script.stat().st_mtime, "approved_at": 0}]}
        (home / "shell-hooks-allowlist.json").write_text(json.dumps(allowed))
        done = doctor(home)
        offline = doctor(home, "--offline")
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "the token works (@hermes_test_bot)" in lines_about(out, "platform telegram")[0]
    assert "up (" in lines_about(out, "MCP server demo")[0] and "tools" in lines_about(out, "MCP server demo")[0]
    assert "(allowed)" in lines_about(out, "hook pre_tool_call")[0]
    assert "turns of up to 90 model calls" in lines_about(out, "sessions")[0]
    assert offline.returncode == 0 and "not started: --offline" in lines_about(offline.stdout, "MCP server demo")[0]
