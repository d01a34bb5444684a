"""An existing Hermes home works (issue 16, part 5): ``hermes serve`` as a real process on a home
laid out as Hermes leaves it (config.yaml from its documented defaults, .env, SOUL.md,
memories, a skill, a ``state.db`` in Hermes's v30 layout, ``tests/hermes_home.py``).

It imports the store at start (backup first) and says so; an old session is listed, resumed
with its transcript, and found by ``session_search``; a new session's prompt opens with SOUL.md
and carries the memories and the skill; ``hermes doctor`` reports the import.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import openai

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from tests.conftest import DEADLINE
from tests.hermes_home import OLD_WORDS, SOUL, make_hermes_home
from tests.platforms.serve_process import CLEARED, HERMES

KEY = "hk-hermes-home-test-0123456789"
OLD = "20250101_090000_a1b2c3"


def _environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["HERMES_HOME"] = str(home)
    return env


def _text(content: Any) -> str:
    """A message's text, whether plain or in parts (prompt caching marks parts)."""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content)
    return str(content or "")


def _system(request: Any) -> str:
    return _text(request.body["messages"][0]["content"])


def test_a_hermes_home_is_served_as_it_is_with_its_sessions_soul_memories_and_skills(tmp_path: Path, model_server: ModelServer) -> None:
    home = tmp_path / ".hermes"
    make_hermes_home(home, model="test-model", base_url=model_server.base_url, port=0)
    process = subprocess.Popen(
        [*HERMES, "serve", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_environment(home), start_new_session=True
    )
    try:
        assert process.stdout is not None
        before: list[str] = []
        while not (line := process.stdout.readline()).startswith("hermes serve ") or "listening" not in line:
            assert line, "".join(before) + (process.stderr.read() if process.stderr and process.poll() is not None else "")
            before.append(line)
        found = re.search(r"listening on (http://\S+/v1)", line)
        assert found, line
        url = found.group(1)
        imported = [b for b in before if "imported Hermes's" in b]
        assert len(imported) == 1, before
        assert "Hermes schema v30: 2 session(s), 8 message(s)" in imported[0]
        backups = [p.name for p in home.iterdir() if p.name.startswith("state.db.hermes-backup-")]
        assert len(backups) == 1 and backups[0] in imported[0]

        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=DEADLINE) as http:
            # The old session, as the sessions API shows it.
            listed = http.get("/sessions").json()
            assert OLD in json.dumps(listed)
            record = http.get(f"/sessions/{OLD}").json()
            assert record["title"] == "Quokka plan"
            old_messages = http.get(f"/sessions/{OLD}/messages").json()
            assert OLD_WORDS in json.dumps(old_messages)
            health = http.get(url.removesuffix("/v1") + "/health/detailed").json()
            assert health["hermes_import"]["hermes_version"] == 30 and health["hermes_import"]["backup"].endswith(backups[0])

        client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0, timeout=DEADLINE)
        # Resume the old session: the model sees Hermes's transcript and its stored prompt.
        model_server.script([TextReply(content="We planned the quokka migration.")])
        resumed = client.chat.completions.create(
            model="hermes-agent", messages=[{"role": "user", "content": "what did we plan?"}], extra_headers={"X-Hermes-Session-Id": OLD}
        )
        assert resumed.choices[0].message.content == "We planned the quokka migration."
        sent = model_server.requests[-1].body["messages"]
        assert "stored by Hermes" in _text(sent[0]["content"])
        assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "assistant", "user"]
        assert OLD_WORDS in _text(sent[1]["content"]) and _text(sent[-1]["content"]) == "what did we plan?"

        # A new session: SOUL.md opens its prompt, the memories and the skill are in it, and
        # session_search finds the old Hermes conversation.
        model_server.script(
            [
                ToolCallsReply(calls=(ScriptedCall(name="session_search", arguments=json.dumps({"query": "quokka migration"})),)),
                TextReply(content="They planned to move the quokkas."),  # session_search's summary of the old session
                TextReply(content="Found it."),
            ]
        )
        fresh = client.chat.completions.create(model="hermes-agent", messages=[{"role": "user", "content": "did we talk about quokkas before?"}])
        assert fresh.choices[0].message.content == "Found it."
        client.close()
        first, summary, second = model_server.requests[-3:]
        assert OLD_WORDS in json.dumps(summary.body["messages"])  # the old session's text went to the summariser
        prompt = _system(first)
        assert prompt.startswith(SOUL + "\n")
        assert "You are Hermes" not in prompt
        assert "three quokkas" in prompt and "Name: Robin" in prompt
        assert "feeding-schedule" in prompt
        result = next(m for m in second.body["messages"] if m["role"] == "tool")
        assert OLD in _text(result["content"]) and "They planned to move the quokkas." in _text(result["content"])

        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=DEADLINE)
        assert "stopped cleanly" in stdout
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=DEADLINE)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    # Every key of Hermes's config.yaml is used or reported, once, at start.
    for section in ("display", "agent.reasoning_effort"):
        assert section in stderr, stderr

    doctor = subprocess.run([*HERMES, "doctor", "--offline"], capture_output=True, text=True, env=_environment(home), timeout=DEADLINE)
    assert "imported from Hermes schema v30: 2 session(s), 8 message(s)" in doctor.stdout, doctor.stdout
    assert "Traceback" not in doctor.stderr


def test_serve_on_a_hermes_state_db_it_cannot_import_says_why_and_leaves_it(tmp_path: Path, model_server: ModelServer) -> None:
    home = tmp_path / ".hermes"
    make_hermes_home(home, model="test-model", base_url=model_server.base_url, port=0)
    import apsw

    db = apsw.Connection(str(home / "state.db"))
    db.execute("CREATE TABLE turns (note TEXT)")  # someone's table in the way of ours
    db.close()
    before = (home / "state.db").read_bytes()
    out = subprocess.run([*HERMES, "serve", "--port", "0"], capture_output=True, text=True, env=_environment(home), timeout=DEADLINE)
    assert out.returncode == 2, out
    assert "importing Hermes's" in out.stderr and "the file is as it was" in out.stderr
    assert "Traceback" not in out.stderr
    assert (home / "state.db").read_bytes() == before
    doctor = subprocess.run([*HERMES, "doctor", "--offline"], capture_output=True, text=True, env=_environment(home), timeout=DEADLINE)
    assert "written by Hermes" in doctor.stdout and "not imported yet" in doctor.stdout, doctor.stdout
