"""Consent for shell hooks and ``hermes hooks list|test|doctor`` on the seed's block-rm-rf script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from actors.hooks import build_hooks
from tests.conftest import DEADLINE
from tests.hooks.test_hooks_serve import BLOCK_RM_RF

CONFIG = 'hooks:\n  pre_tool_call:\n    - matcher: "terminal"\n      command: "{script}"\n      timeout: 5\n  pre_tool_cal:\n    - command: "true"\n'


def _hermes(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HERMES_HOME": str(home)}
    env.pop("HERMES_ACCEPT_HOOKS", None)
    return subprocess.run(
        [sys.executable, "-m", "actors.cli", "hooks", *args], capture_output=True, text=True, env=env, timeout=DEADLINE, stdin=subprocess.DEVNULL
    )


def test_a_new_shell_hook_stays_unregistered_without_a_terminal_until_accepted_and_doctor_sees_the_script_change(tmp_path: Path) -> None:
    script = tmp_path / "block-rm-rf.sh"
    script.write_text(BLOCK_RM_RF)
    script.chmod(0o755)
    (tmp_path / "config.yaml").write_text(CONFIG.format(script=script))
    from actors.config import load_config

    section = load_config(tmp_path, {}).config.hooks
    hooks, lines = build_hooks(tmp_path, section, env={}, tty=False)
    assert hooks is None
    assert any("pre_tool_cal: not a hook event (did you mean pre_tool_call?)" in line for line in lines)
    assert any("is not allowed yet and stays unregistered" in line for line in lines)
    assert "not allowed yet" in _hermes(tmp_path, "list").stdout
    hooks, lines = build_hooks(tmp_path, section, env={"HERMES_ACCEPT_HOOKS": "1"}, tty=False)
    assert hooks is not None and [h.command for h in hooks.shell] == [str(script)]
    assert "shell hooks accepted by HERMES_ACCEPT_HOOKS=1: 1" in lines
    hooks, lines = build_hooks(tmp_path, section, env={}, tty=False)  # recorded: no bypass needed now
    assert hooks is not None and not any("stays unregistered" in line for line in lines)
    # hermes hooks test runs the seed's script on a synthetic payload.
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps({"tool_input": {"command": "rm -rf /"}}))
    tested = _hermes(tmp_path, "test", "pre_tool_call", "--for-tool", "terminal", "--payload-file", str(payload))
    assert tested.returncode == 0 and "block: blocked: rm -rf / is not permitted" in tested.stdout, tested.stdout + tested.stderr
    healthy = _hermes(tmp_path, "doctor")
    assert healthy.returncode == 0 and "ok   pre_tool_call" in healthy.stdout, healthy.stdout
    stat = script.stat()
    os.utime(script, (stat.st_atime, stat.st_mtime + 60))
    changed = _hermes(tmp_path, "doctor")
    assert changed.returncode == 1 and "the script changed since it was allowed" in changed.stdout, changed.stdout
