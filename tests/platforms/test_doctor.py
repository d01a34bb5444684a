"""``hermes doctor`` as a user runs it: a real subprocess on a real home, the test model server as
the endpoint (issue 16: a broken home prints each problem with its fix and exits 1; a good one 0)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from actors.chaos import HttpError, ModelServer
from actors.store._schema import open_writer
from tests.conftest import DEADLINE
from tests.platforms.serve_process import CLEARED


def doctor(home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["HERMES_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "actors.cli", "doctor", *extra], capture_output=True, text=True, env=env, timeout=DEADLINE)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pooled_config(server: ModelServer, fallback_url: str) -> str:
    return f"""
model:
  default: test-model
  provider: custom:local
custom_providers:
  - {{name: local, base_url: "{server.base_url}", api_key: "${{LOCAL_KEY}}"}}
  - {{name: gone, base_url: "{fallback_url}", api_key: sk-gone-0123456789, model: other}}
credential_pool:
  custom:local:
    - {{label: main, key_env: LOCAL_KEY}}
    - {{label: old, api_key: sk-revoked-0123456789}}
fallback_providers:
  - {{provider: "custom:gone", model: other}}
"""


def test_doctor_on_a_good_home_says_all_is_well_and_exits_0(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with ModelServer(seed=1) as server:
        (home / "config.yaml").write_text(f'model:\n  default: test-model\n  base_url: "{server.base_url}"\n')
        (home / ".env").write_text("OPENAI_API_KEY=sk-good-0123456789\n")
        (home / ".env").chmod(0o600)
        open_writer(home / "state.db").close()
        done = doctor(home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("[FAIL]" not in done.stdout and "0 failed" in done.stdout) or "all good" in done.stdout
    assert "integrity ok, schema version" in done.stdout
    assert f"{server.base_url}/models answers" in done.stdout
    assert done.stderr == ""


def test_doctor_on_a_broken_home_names_every_problem_with_its_fix_and_exits_1(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with ModelServer(seed=2) as server:
        server.fail_key("sk-revoked-0123456789", HttpError.invalid_api_key("sk-revoked-0123456789"))
        (home / "config.yaml").write_text(pooled_config(server, f"http://127.0.0.1:{closed_port()}/v1"))
        (home / ".env").write_text("LOCAL_KEY=sk-local-0123456789\n")
        (home / ".env").chmod(0o644)
        (home / "state.db").write_bytes(b"this is not a database, it was overwritten by accident\n" * 200)
        done = doctor(home)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "Traceback" not in out + done.stderr
    lines = out.splitlines()

    def problem(start: str) -> tuple[str, str]:
        index = next(i for i, line in enumerate(lines) if line.startswith(start))
        return lines[index], lines[index + 1]

    env_line, env_fix = problem("[FAIL] .env")
    assert "mode 644" in env_line and f"chmod 600 {home / '.env'}" in env_fix
    store_line, store_fix = problem("[FAIL] store")
    assert "state.db" in store_line and "mv " in store_fix
    revoked, revoked_fix = problem("[FAIL] custom:local key old")
    assert "401" in revoked and "replace the key" in revoked_fix
    gone, gone_fix = problem("[FAIL] custom:gone key")
    assert "does not answer" in gone and "base_url" in gone_fix
    assert any(line.startswith("[ok  ] custom:local key main") for line in lines), "the good key is not blamed"
    assert "sk-local-0123456789" not in out and "sk-revoked-0123456789" not in out, "secrets are never printed"
    assert lines[-1].startswith(f"{len([x for x in lines if x.startswith('[')])} checks: 4 failed"), out


def test_doctor_reports_a_config_it_cannot_read_and_offline_skips_the_network(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("model: [unclosed\n")
    done = doctor(home, "--offline")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "[FAIL] config.yaml" in done.stdout and "not valid YAML" in done.stdout
    assert "[ok  ] model and providers" not in done.stdout, "sections of an unreadable file are not claimed to be fine"
    missing = doctor(tmp_path / "nowhere", "--offline")
    assert missing.returncode == 1 and "does not exist" in missing.stdout
