"""The pre-run script runner on its own (real subprocesses) and the run's message (pure)."""

from __future__ import annotations

from pathlib import Path

import trio

from actors.scheduler._prerun import MAX_OUTPUT, ScriptResult, run_script, script_timeout
from actors.scheduler._prompt import run_prompt
from protocols._scheduler import Job


def _home(tmp_path: Path, **scripts: str) -> Path:
    (tmp_path / "scripts").mkdir()
    for name, text in scripts.items():
        (tmp_path / "scripts" / name.replace("_", ".")).write_text(text)
    return tmp_path


def test_a_script_outside_the_scripts_folder_or_missing_is_not_run(tmp_path: Path) -> None:
    home = _home(tmp_path)
    (tmp_path / "evil.py").write_text("print('ran')\n")
    outside = trio.run(lambda: run_script(home, "../evil.py", timeout=5))
    absent = trio.run(lambda: run_script(home, "nope.py", timeout=5))
    assert not outside.ok and "outside" in outside.note and "ran" not in outside.output
    assert not absent.ok and "was not found" in absent.note


def test_a_failing_script_is_an_error_with_its_stderr_and_long_output_is_capped(tmp_path: Path) -> None:
    home = _home(tmp_path, fail_py="import sys\nsys.stderr.write('no token')\nsys.exit(3)\n", loud_py=f"print('x' * {MAX_OUTPUT * 3})\n")
    failed = trio.run(lambda: run_script(home, "fail.py", timeout=20))
    loud = trio.run(lambda: run_script(home, "loud.py", timeout=20))
    assert not failed.ok and "exited with status 3" in failed.note and "no token" in failed.output
    assert loud.ok and len(loud.output) == MAX_OUTPUT


def test_the_timeout_comes_from_the_environment_and_the_message_orders_script_skills_prompt() -> None:
    assert script_timeout({"HERMES_CRON_SCRIPT_TIMEOUT": "2.5"}) == 2.5
    assert script_timeout({"HERMES_CRON_SCRIPT_TIMEOUT": "soon"}) == script_timeout({}) == 120.0
    job = Job(id="j1", name="n", prompt="do it", schedule="every 1d", created_at=0.0)
    text = run_prompt(job, 0.0, skills=[("a", "SKILL A")], missing=["b"], script=ScriptResult(ok=True, output="DATA"))
    assert text.index("DATA") < text.index("[Scheduled job") < text.index("b were not found") < text.index("SKILL A") < text.index("do it")
    assert "Script Error" in run_prompt(job, 0.0, script=ScriptResult(ok=False, output="boom", note="boom"))
    assert run_prompt(job, 0.0).endswith("\n\ndo it")


def test_a_script_does_not_inherit_the_servers_keys(tmp_path: Path) -> None:
    home = _home(tmp_path, env_py="import os\nprint(os.environ.get('OPENAI_API_KEY', 'none'), os.environ.get('LANG_HINT'))\n")
    result = trio.run(lambda: run_script(home, "env.py", timeout=20, environ={"OPENAI_API_KEY": "sk-secret-value", "LANG_HINT": "fr", "PATH": "/usr/bin:/bin"}))
    assert result.ok and result.output == "none fr"
