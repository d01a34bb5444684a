"""Slash commands, session resets, batching and gateway hooks through a real ``hermes serve``,
the test Bot API server and the test model server (echo mode: the answer to ``x`` is ``echo: x``).

The hooks (a Python plugin and a ``HOOK.yaml`` gateway hook) report each call as a UDP datagram
to the test on loopback: the test waits for what it expects, with a deadline, without polling."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.chaos import ModelServer
from tests.conftest import DEADLINE
from tests.platforms.gateway.telegram_server import TelegramServer
from tests.platforms.gateway.test_serve_telegram import ALLOWED, _home, _stop
from tests.platforms.serve_process import launched

KEY = f"agent:main:telegram:dm:{ALLOWED}"

PLUGIN = """
import json, socket

PORT = {port}

def tell(*what):
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(json.dumps(what).encode(), ("127.0.0.1", PORT))

def dispatch(event, gateway, session_store, **kwargs):
    tell("pre_gateway_dispatch", event.text, event.source.platform, event.source.user_id)
    if event.text.startswith("ambient"):
        return {{"action": "skip", "reason": "ambient-buffered"}}
    if event.text == "rewrite me":
        return {{"action": "rewrite", "text": "rewritten"}}
    return None

def finalize(session_id, platform, **kwargs):
    tell("on_session_finalize", session_id, platform)

def reset(session_id, platform, **kwargs):
    tell("on_session_reset", session_id, platform)

def register(ctx):
    ctx.register_hook("pre_gateway_dispatch", dispatch)
    ctx.register_hook("on_session_finalize", finalize)
    ctx.register_hook("on_session_reset", reset)
"""

HANDLER = """
import json, socket

def handle(event_type, context):
    message = json.dumps([event_type, context.get("session_id"), context.get("session_key")]).encode()
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(message, ("127.0.0.1", {port}))
"""


class Heard:
    """The hooks' datagrams, in arrival order."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.calls: list[list[str]] = []

    def wait_for(self, *call: str) -> list[list[str]]:
        """Every call heard until ``call`` (its first fields) was heard, or the deadline."""
        end = time.monotonic() + DEADLINE
        while not any(c[: len(call)] == list(call) for c in self.calls):
            left = end - time.monotonic()
            assert left > 0, f"{call} was not heard; heard: {self.calls}"
            self.sock.settimeout(left)
            self.calls.append(json.loads(self.sock.recv(65536)))
        return self.calls


@pytest.fixture
def heard() -> Iterator[Heard]:
    h = Heard()
    yield h
    h.sock.close()


def _with_hooks(home: Path, port: int) -> None:
    plugin = home / "plugins" / "gateway-policy"
    plugin.mkdir(parents=True)
    (plugin / "plugin.yaml").write_text("name: gateway-policy\nversion: 1.0.0\n")
    (plugin / "__init__.py").write_text(PLUGIN.format(port=port))
    hook = home / "hooks" / "session-log"
    hook.mkdir(parents=True)
    (hook / "HOOK.yaml").write_text("name: session-log\nevents: [session:start, session:end, session:reset, 'command:*']\n")
    (hook / "handler.py").write_text(HANDLER.format(port=port))


def _last_call_messages(model: ModelServer) -> str:
    return str([r for r in model.requests if r.path == "/v1/chat/completions"][-1].body["messages"])


def test_commands_a_reset_and_the_dispatch_hook_in_a_telegram_chat(tmp_path: Path, model: ModelServer, telegram: TelegramServer, heard: Heard) -> None:
    home = _home(tmp_path, model, telegram)
    _with_hooks(home, heard.port)
    texts: list[str] = []

    def say(text: str) -> str:
        telegram.push(ALLOWED, text)
        texts.append(text)
        return telegram.wait_delivered(ALLOWED, len([t for t in texts if not t.startswith("ambient")]))[-1].text

    with launched(home) as (process, _):
        telegram.push(ALLOWED, "ambient chatter")  # skipped by the plugin: no reply, no turn
        texts.append("ambient chatter")
        assert say("rewrite me") == "echo: rewritten"  # its reply is also the barrier for the skipped one
        assert say("second") == "echo: second"
        assert "/new, /reset" in say("/help")
        assert say("/foo") == "unknown command /foo. /help lists the commands."
        assert say("/usage").startswith(f"Session {KEY}: 4 messages")
        assert say("/undo") == "Took back the last exchange (2 messages)."
        assert say("/model other-model") == "This chat's session calls other-model from its next turn on."
        assert say("/reset") == "Started a new session; the last one is kept."
        assert say("after the reset") == "echo: after the reset"
        fresh = _last_call_messages(model)
        compressed = say("/compress")
        assert say("/usage").startswith(f"Session {KEY}#2: 2 messages")
        expected = [
            ["command:help", KEY],
            ["command:usage", KEY],
            ["command:undo", KEY],
            ["command:model", KEY],
            ["command:reset", KEY],
            ["command:compress", f"{KEY}#2"],
            ["command:usage", f"{KEY}#2"],
        ]
        for call in [*expected, ["session:reset", f"{KEY}#2"]]:
            heard.wait_for(*call)
        calls = heard.wait_for("session:start", f"{KEY}#2")
        _stop(process)
    # Each command once (/foo is no command; /undo and /model are the session's own), whoever fired it.
    assert sorted(c[:2] for c in calls if c[0].startswith("command:")) == sorted(expected)
    assert "rewritten" not in fresh and "after the reset" in fresh  # the new session has its own history
    assert compressed.startswith("Nothing to compress: the conversation (2 messages)"), compressed  # the compression's turn, followed
    assert "shown as Telegram messages" in fresh  # the platform's hint, in the new session's system prompt
    assert not any("ambient chatter" in str(r.body.get("messages")) for r in model.requests)
    dispatched = [c[1] for c in calls if c[0] == "pre_gateway_dispatch"]
    assert dispatched[:3] == ["ambient chatter", "rewrite me", "second"]
    lifecycle = [c[:2] for c in calls if c[0] != "pre_gateway_dispatch" and not c[0].startswith("command:")]
    # One reset is heard in order; the new session's start is a call of its own (it may overtake).
    assert ["session:start", f"{KEY}#2"] in lifecycle
    assert [c for c in lifecycle if c != ["session:start", f"{KEY}#2"]] == [
        ["session:start", KEY],
        ["on_session_finalize", KEY],
        ["session:end", KEY],
        ["on_session_reset", f"{KEY}#2"],
        ["session:reset", f"{KEY}#2"],
    ]
    saved = json.loads((home / "gateway" / "telegram.json").read_text())
    assert saved["sessions"][KEY][0] == 2  # the generation survives a restart


def test_a_burst_is_one_turn_and_a_stale_session_is_replaced(tmp_path: Path, model: ModelServer, telegram: TelegramServer, heard: Heard) -> None:
    home = _home(tmp_path, model, telegram)
    _with_hooks(home, heard.port)
    config = (home / "config.yaml").read_text().replace("batch_delay: 0", "batch_delay: 2\n      session_reset: {mode: idle, idle_minutes: 60}")
    (home / "config.yaml").write_text(config)
    (home / "gateway").mkdir()  # the chat's last message came two hours ago (a restart keeps the time)
    state = {"offset": 0, "seen": [], "chats": [], "outbox": [], "sessions": {KEY: [1, time.time() - 7200]}}
    (home / "gateway" / "telegram.json").write_text(json.dumps(state))
    with launched(home) as (process, _):
        telegram.push(ALLOWED, "one thought")
        telegram.push(ALLOWED, "in two messages")
        first = telegram.wait_delivered(ALLOWED, 2)
        telegram.push(ALLOWED, "/usage")  # a command is not held: its reply is the barrier for a second turn
        usage = telegram.wait_delivered(ALLOWED, 3)[2]
        heard.wait_for("session:reset", f"{KEY}#2")
        calls = heard.wait_for("session:start", f"{KEY}#2")
        _stop(process)
    assert sorted(s.text for s in first) == [  # the notice goes out before the turn starts; sent apart, either may land first
        "A new session started (idle for 60 minutes); earlier messages are not in its context.",
        "echo: one thought\nin two messages",
    ]
    assert usage.text.startswith(f"Session {KEY}#2: 2 messages")  # one turn, in the new session
    lifecycle = [c[:2] for c in calls if c[0] != "pre_gateway_dispatch"]
    assert [c for c in lifecycle if c[0] != "session:start"] == [
        ["on_session_finalize", KEY],
        ["session:end", KEY],
        ["on_session_reset", f"{KEY}#2"],
        ["session:reset", f"{KEY}#2"],
    ]
    assert ["session:start", KEY] not in lifecycle  # the stale session had started before the restart
