"""The inbound fast lane (``actors/platforms/gateway/_inbound_lane.py``) against what changes
while a long poll is in flight: its snapshot of the adapter is taken when the poll starts, so

- a ``/retry`` asked just before (its answer starts a turn outside any batch) keeps the chat
  out of the lane: the retried turn and a new message of the chat arriving in the next poll run
  one after the other, each answered once;
- a ``pre_gateway_dispatch`` hook that appears meanwhile (a plugin reloaded) is asked about the
  poll's messages all the same: the wait checks the hooks when the answer comes.

In-process (``inprocess.py``): the test fires a hook event into the running tree's hooks.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path

from actors.chaos import ModelServer, TextReply
from actors.hooks import build_hooks
from actors.store import StoreReader
from tests.platforms.gateway.inprocess import ALLOWED, started_runtime, wait_in_reactor
from tests.platforms.gateway.telegram_server import TelegramServer

KEY = f"agent:main:telegram:dm:{ALLOWED}"

PLUGIN = """
from pathlib import Path

SCREEN = Path({flag!r})


def broken(**kwargs):
    raise RuntimeError("the test asks for a fresh import")


def screen(event, gateway, session_store, **kwargs):
    return {{"action": "rewrite", "text": "screened: " + event.text}}


def register(ctx):
    ctx.register_hook("post_tool_call", broken)
    if SCREEN.exists():  # the fresh import after the fault screens the gateway's messages
        ctx.register_hook("pre_gateway_dispatch", screen)
"""


def _prompts_ending_with(model: ModelServer, text: str) -> int:
    return sum(1 for r in model.requests if r.path == "/v1/chat/completions" and r.body["messages"][-1].get("content") == text)


def test_a_retry_and_a_new_message_in_the_next_poll_run_one_turn_at_a_time_each_answered_once(
    tmp_path: Path, model: ModelServer, telegram: TelegramServer
) -> None:
    slow = 0.5  # the retried turn still runs when the next message comes
    model.script(
        [TextReply(content="answer 1"), TextReply(content="answer 2", latency=slow), TextReply(content="answer 3", latency=slow), TextReply(content="answer 4")]
    )
    runtime = started_runtime(tmp_path, model, telegram)
    try:
        telegram.push(ALLOWED, "first")
        telegram.wait_delivered(ALLOWED, 1)
        retry = telegram.push(ALLOWED, "/retry")
        telegram.wait_for(lambda: telegram.confirmed > retry["update_id"], "the poll after the /retry's batch (its lane snapshot taken)")
        telegram.push(ALLOWED, "second")  # answered by that poll
        telegram.wait_delivered(ALLOWED, 3)
        telegram.push(ALLOWED, "third")  # the barrier: no late second answer to either comes after its reply
        telegram.wait_delivered(ALLOWED, 4)
    finally:
        assert runtime.stop(timeout=30.0)
    assert [s.text for s in telegram.delivered(ALLOWED)] == ["answer 1", "answer 2", "answer 3", "answer 4"]
    assert _prompts_ending_with(model, "first") == 2 and _prompts_ending_with(model, "second") == 1  # each turn ran once
    with StoreReader(tmp_path / "home" / "state.db") as reader:
        turns = [t for t in reader.load_turns(KEY) if t.status == "completed"]
    assert len(turns) == 4  # first, its retry, second, third
    spans = sorted((t.started_at or 0.0, t.ended_at or 0.0) for t in turns)
    assert all(ended <= after for (_, ended), (after, _) in itertools.pairwise(spans)), spans  # one turn at a time


def test_a_dispatch_hook_registered_while_a_poll_waits_screens_that_poll_s_messages(tmp_path: Path, model: ModelServer, telegram: TelegramServer) -> None:
    home = tmp_path / "home"
    plugin = home / "plugins" / "late-screen"
    plugin.mkdir(parents=True)
    flag = plugin / "screen"
    (plugin / "plugin.yaml").write_text("name: late-screen\nversion: 1.0.0\n")
    (plugin / "__init__.py").write_text(PLUGIN.format(flag=str(flag)))
    hooks, _ = build_hooks(home, {}, env={})
    assert hooks is not None
    runtime = started_runtime(tmp_path, model, telegram, hooks=hooks)

    def events(*want: str) -> Callable[[], bool]:
        return lambda: hooks.statistics()["plugins"][0]["events"] == list(want)

    try:
        wait_in_reactor(runtime, events("post_tool_call"), "the plugin's first load (no dispatch hook)")
        warm = telegram.push(ALLOWED, "warm up")
        telegram.wait_delivered(ALLOWED, 1)
        telegram.wait_for(lambda: telegram.confirmed > warm["update_id"], "a poll started after the load (its lane snapshot: no hook)")
        polls = telegram.calls["getUpdates"]
        flag.touch()
        hooks.fire_soon("post_tool_call", {"tool_name": "terminal", "args": {}, "result": json.dumps({})}, tool_name="terminal")
        wait_in_reactor(runtime, events("post_tool_call", "pre_gateway_dispatch"), "the plugin reloaded with its dispatch hook")
        assert telegram.calls["getUpdates"] == polls, "the poll ended before the hook came (the server answers a long poll within 10 s)"
        other = ALLOWED + 1  # a chat idle in the snapshot (the warm-up's ran when that poll started)
        telegram.push(ALLOWED, "hello", chat_id=other)  # answered by the poll whose snapshot had no hook
        (reply,) = telegram.wait_delivered(other, 1)
    finally:
        assert runtime.stop(timeout=30.0)
    assert reply.text == "echo: screened: hello"
    assert _prompts_ending_with(model, "hello") == 0  # the unscreened text never reached the agent
