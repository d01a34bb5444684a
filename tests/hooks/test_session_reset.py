"""``/new`` in ``hermes chat`` (the TUI over the runtime in this process): the plugins see
``on_session_finalize`` of the old session, then ``on_session_reset`` of the new one; a reset
hook that raises is reported on the new session's stream."""

from __future__ import annotations

import json
from pathlib import Path

from textual.pilot import Pilot

from actors.chaos import ModelServer, TextReply
from actors.platforms.tui import ChatApp
from actors.platforms.tui._local import open_local_session
from protocols import TurnCompleted
from protocols._session import HookSkipped
from tests.tui.test_commands import run_command
from tests.tui.tui_kit import drive, kind, make_app, type_text

PLUGIN = """
import json

LOG = {log!r}

def finalize(session_id, platform, **kwargs):
    with open(LOG, "a") as f:
        f.write(json.dumps(["on_session_finalize", session_id, platform]) + "\\n")

def reset(session_id, platform, **kwargs):
    with open(LOG, "a") as f:
        f.write(json.dumps(["on_session_reset", session_id, platform]) + "\\n")
    raise RuntimeError("reset hook broke")

def register(ctx):
    ctx.register_hook("on_session_finalize", finalize)
    ctx.register_hook("on_session_reset", reset)
"""


def test_new_finalizes_the_old_session_then_resets_the_new_one(tmp_path: Path, model_server: ModelServer) -> None:
    home = tmp_path / "home"
    plugin = home / "plugins" / "resets"
    plugin.mkdir(parents=True)
    log = tmp_path / "hooks.jsonl"
    (plugin / "plugin.yaml").write_text("name: resets\n")
    (plugin / "__init__.py").write_text(PLUGIN.format(log=str(log)))
    (home / "config.yaml").write_text(f'model:\n  default: test-model\n  base_url: "{model_server.base_url}"\n  api_key: sk-test\n')
    handle = open_local_session(home, env={})
    model_server.script([TextReply(content="one")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> tuple[str, str, HookSkipped]:
        await type_text(pilot, "first")
        await app.wait_for_event(kind(TurnCompleted))
        old = app.session_id
        await run_command(pilot, app, "/new")
        skipped = await app.wait_for_event(kind(HookSkipped))
        return old, app.session_id, skipped  # type: ignore[return-value]

    try:
        old, new, skipped = drive(make_app(handle), scenario)
    finally:
        assert handle.close()
    assert old != new
    assert (skipped.hook, skipped.event, skipped.reason) == ("resets", "on_session_reset", "raised") and "reset hook broke" in skipped.detail
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    # The old session's own finalize (when its actor stops) may come too, at the end; the /new pair is in order.
    assert calls[:2] == [["on_session_finalize", old, "cli"], ["on_session_reset", new, "cli"]]
