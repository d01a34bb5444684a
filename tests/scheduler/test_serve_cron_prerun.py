"""A run's skills and pre-run script, in a real ``hermes serve``: the job's SKILL.md texts and
its script's stdout reach the model in the run's message; a script that hangs is killed with
its process group at its deadline (the run goes on, told of the error, and the occurrence
says so); a skill that does not exist is skipped with a recorded note."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from actors.chaos import ModelServer, TextReply
from tests.conftest import DEADLINE
from tests.platforms.serve_process import launched
from tests.scheduler.test_serve_cron_delivery import settled

KEY = "hk-cron-prerun-key-0123456789"
HEADERS = {"Authorization": f"Bearer {KEY}"}
SKILL = "---\nname: inbox-triage\ndescription: how to triage an inbox\n---\nSort by sender; flag anything from the boss as URGENT-7731.\n"


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _message(model_server: ModelServer, session_id: str) -> str:
    """The user message of the run ``session_id`` as the model received it."""
    for request in model_server.requests:
        if request.session == session_id:
            return "\n".join(str(m.get("content")) for m in request.body.get("messages", []) if m.get("role") == "user")
    raise AssertionError(f"the model received no request of {session_id}")


def test_skills_and_the_pre_run_script_reach_the_model_a_hung_script_is_killed_and_a_missing_skill_is_noted(
    tmp_path: Path, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / "skills" / "inbox-triage").mkdir(parents=True)
    (home / "skills" / "inbox-triage" / "SKILL.md").write_text(SKILL)
    scripts = home / "scripts"
    scripts.mkdir()
    (scripts / "collect.py").write_text("print('unread: 12, from boss: 2')\n")
    (scripts / "hang.sh").write_text(f'sleep 600 &\necho $! > "{tmp_path}/child"\necho $$ > "{tmp_path}/pid"\nwait\n')
    (home / "config.yaml").write_text(f"model:\n  default: test-model\n  base_url: {model_server.base_url}\n  api_key: upstream\n")
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
    monkeypatch.setenv("HERMES_CRON_SCRIPT_TIMEOUT", "1")
    model_server.script(
        [TextReply(content="Triaged."), TextReply(content="The script failed."), TextReply(content="Skill(s) not found: nope.")], model="test-model"
    )
    with launched(home) as (process, url), httpx.Client(base_url=url, headers=HEADERS, timeout=DEADLINE) as http:
        made = http.post("/api/jobs", json={"prompt": "triage my inbox", "schedule": "1s", "skills": ["inbox-triage"], "script": "collect.py"})
        assert made.status_code == 201, made.text
        assert made.json()["job"]["script"] == "collect.py"
        triaged = settled(http, made.json()["job"]["id"])  # fires on its own timer
        hung = http.post("/api/jobs", json={"prompt": "report", "schedule": "every 1d", "script": "hang.sh"}).json()["job"]["id"]
        assert http.post(f"/api/jobs/{hung}/run").status_code == 202
        stuck = settled(http, hung)
        missing = http.post("/api/jobs", json={"prompt": "triage", "schedule": "every 1d", "skills": ["inbox-triage", "nope"]}).json()["job"]["id"]
        assert http.post(f"/api/jobs/{missing}/run").status_code == 202
        noted = settled(http, missing)
        bad = http.post("/api/jobs", json={"prompt": "x", "schedule": "every 1d", "script": 7})
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=DEADLINE)
    assert process.returncode == 0 and "Traceback" not in stderr, stderr
    # the skill's text and the script's output are in the run's message
    first = _message(model_server, triaged["last_session_id"])
    assert triaged["last_status"] == "completed" and triaged["last_detail"] == "Triaged."
    assert "URGENT-7731" in first and "unread: 12, from boss: 2" in first and "triage my inbox" in first
    assert first.index("unread: 12") < first.index("URGENT-7731") < first.index("instruction: triage my inbox")
    # the hung script: killed with its group at 1 s; the run went on and was told; the occurrence says so
    assert stuck["last_status"] == "completed", stuck
    assert "hang.sh" in stuck["last_detail"] and "passed its deadline of 1 s" in stuck["last_detail"] and "killed" in stuck["last_detail"]
    assert "Script Error" in _message(model_server, stuck["last_session_id"])
    for name in ("pid", "child"):
        assert not _alive(int((tmp_path / name).read_text())), f"the script's {name} outlived its deadline"
    # an unknown skill: skipped, the model told to say so, the occurrence records it
    third = _message(model_server, noted["last_session_id"])
    assert noted["last_status"] == "completed" and "skill(s) not found, skipped: nope" in noted["last_detail"]
    assert "URGENT-7731" in third and "'nope'" not in third and "nope" in third and "not found" in third
    assert bad.status_code == 400 and "script" in bad.json()["error"]["message"]
