"""The seed's own hooks, unchanged, through a real ``hermes serve``: its block-rm-rf and
inject-cwd-context shell scripts (bash + jq), its guardrails, redact-secrets and spongebob
plugins; what the model is sent, what the client gets and what the store keeps."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.store import StoreReader
from tests.conftest import DEADLINE

BLOCK_RM_RF = """#!/usr/bin/env bash
# ~/.hermes/agent-hooks/block-rm-rf.sh
payload="$(cat -)"
cmd=$(echo "$payload" | jq -r '.tool_input.command // empty')
if echo "$cmd" | grep -qE 'rm[[:space:]]+-rf?[[:space:]]+/'; then
  printf '{"decision": "block", "reason": "blocked: rm -rf / is not permitted"}\\n'
else
  printf '{}\\n'
fi
"""

INJECT_CWD_CONTEXT = """#!/usr/bin/env bash
# ~/.hermes/agent-hooks/inject-cwd-context.sh
cat - >/dev/null   # discard stdin payload
if status=$(git status --porcelain 2>/dev/null) && [[ -n "$status" ]]; then
  jq --null-input --arg s "$status" \\
     '{context: ("Uncommitted changes in cwd:\\n" + $s)}'
else
  printf '{}\\n'
fi
"""

PLUGIN = """
import os, re

POLICY = "Never execute commands that delete files without explicit user confirmation."

def guardrails(**kwargs):
    return {"context": POLICY}

SECRET = re.compile(r"sk-[A-Za-z0-9]{32,}")

def redact_secrets(tool_name, result, **kwargs):
    if SECRET.search(result):
        return SECRET.sub("[REDACTED]", result)
    return None

def spongebob(response_text, **kwargs):
    if os.environ.get("SPONGEBOB_MODE") != "on":
        return None  # pass through unchanged
    return re.sub(r"!", "!! Tartar sauce!", response_text)

def register(ctx):
    ctx.register_hook("pre_llm_call", guardrails)
    ctx.register_hook("transform_tool_result", redact_secrets)
    ctx.register_hook("transform_llm_output", spongebob)
"""

CONFIG_HOOKS = """hooks:
  pre_tool_call:
    - matcher: "terminal"
      command: "~/.hermes/agent-hooks/block-rm-rf.sh"
      timeout: 5
  pre_llm_call:
    - command: "~/.hermes/agent-hooks/inject-cwd-context.sh"
"""

KEY = "sk-hermes-test-key"
SECRET = "sk-" + "A1b2" * 10


def _home(tmp_path: Path, base_url: str) -> tuple[Path, Path]:
    user_home = tmp_path / "user"
    home = user_home / ".hermes"
    (home / "agent-hooks").mkdir(parents=True)
    for name, text in (("block-rm-rf.sh", BLOCK_RM_RF), ("inject-cwd-context.sh", INJECT_CWD_CONTEXT)):
        script = home / "agent-hooks" / name
        script.write_text(text)
        script.chmod(0o755)
    plugin = home / "plugins" / "seed-examples"
    plugin.mkdir(parents=True)
    (plugin / "plugin.yaml").write_text("name: seed-examples\nversion: 1.0.0\ndescription: the seed's plugin examples\n")
    (plugin / "__init__.py").write_text(PLUGIN)
    (home / "config.yaml").write_text(f'model:\n  default: test-model\n  base_url: "{base_url}"\n  api_key: unused\n' + CONFIG_HOOKS)
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
    work = tmp_path / "repo"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True, timeout=DEADLINE)
    (work / "notes.txt").write_text(f"the key is {SECRET}\n")
    return user_home, work


def test_the_seeds_shell_hooks_and_plugin_examples_run_unchanged_through_hermes_serve(tmp_path: Path) -> None:
    with ModelServer(seed=3) as server:
        user_home, work = _home(tmp_path, server.base_url)
        server.script(
            [
                ToolCallsReply(calls=(ScriptedCall(name="terminal", arguments=json.dumps({"command": "rm -rf /"})),)),
                ToolCallsReply(calls=(ScriptedCall(name="read_file", arguments=json.dumps({"path": str(work / "notes.txt")})),)),
                TextReply(content="Done!"),
            ]
        )
        env = {k: v for k, v in os.environ.items() if k not in ("API_SERVER_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HERMES_MODEL")}
        env.update(HOME=str(user_home), HERMES_HOME=str(user_home / ".hermes"), SPONGEBOB_MODE="on")
        argv = [sys.executable, "-m", "actors.cli", "serve", "--port", "0", "--accept-hooks"]
        process = subprocess.Popen(
            argv, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            found = re.search(r"listening on (http://\S+)/v1", first)
            assert found, first
            base = found.group(1)
            headers = {"authorization": f"Bearer {KEY}", "x-hermes-session-id": "hooked"}
            body = {"model": "hermes-agent", "messages": [{"role": "user", "content": "tidy up"}]}
            reply = httpx.post(f"{base}/v1/chat/completions", json=body, headers=headers, timeout=DEADLINE)
            if reply.status_code != 200:
                process.kill()
                raise AssertionError(reply.text + process.communicate(timeout=DEADLINE)[1][-3000:])
            health = httpx.get(f"{base}/health/detailed", headers=headers, timeout=DEADLINE).json()
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=DEADLINE)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate(timeout=DEADLINE)
        sent = [r.body["messages"] for r in server.requests if r.path == "/v1/chat/completions"]
    assert process.returncode == 0 and "Traceback" not in stderr, stderr
    # The answer went through transform_llm_output (the spongebob example).
    assert reply.json()["choices"][0]["message"]["content"] == "Done!! Tartar sauce!"
    # pre_llm_call: the plugin's context, then the shell hook's git status, after the user's text.
    user = sent[0][-1]
    assert user["role"] == "user"
    policy = "Never execute commands that delete files without explicit user confirmation."
    assert user["content"] == f"tidy up\n\n{policy}\n\nUncommitted changes in cwd:\n?? notes.txt"
    assert all(m["content"].endswith("?? notes.txt") for m in (s[1] for s in sent))  # every call of the turn
    # pre_tool_call: the seed's bash/jq script blocked the command with its reason.
    results = [m for m in sent[2] if m["role"] == "tool"]
    assert results[0]["content"] == "[error] blocked: rm -rf / is not permitted"
    # transform_tool_result: the secret never reached the model.
    assert "[REDACTED]" in results[1]["content"] and SECRET not in json.dumps(sent)
    # The context was for the request only: the store keeps what the user wrote.
    with StoreReader(user_home / ".hermes" / "state.db") as reader:
        stored = [m for m in reader.load_messages("hooked") if m.role == "user"]
    assert [m.content for m in stored] == ["tidy up"]
    plugins = health["hooks"]["plugins"]
    assert [(p["name"], p["faults"]) for p in plugins] == [("seed-examples", 0)] and plugins[0]["calls"] >= 3
    shell = {s["hook"]: s for s in health["hooks"]["shell"]}
    assert shell["pre_tool_call: ~/.hermes/agent-hooks/block-rm-rf.sh"]["calls"] == 1
    allowlist = json.loads((user_home / ".hermes" / "shell-hooks-allowlist.json").read_text())
    assert {a["event"] for a in allowlist["approvals"]} == {"pre_tool_call", "pre_llm_call"}
