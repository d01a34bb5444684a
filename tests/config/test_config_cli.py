"""``hermes config path|show|get|set`` as a user runs it: real subprocesses on a real home."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.conftest import DEADLINE
from tests.platforms.serve_process import CLEARED

COMMENTED = """\
# My Hermes configuration
model:
  default: "qwen3-32b"   # the local model
  base_url: http://127.0.0.1:8000/v1

# Summaries start at half the window
compression:
  enabled: true
  threshold: 0.50  # keep this low

custom_providers:
  - {name: gw, base_url: "https://llm.example.com/v1", key_env: GW_KEY}
pricing:
  gpt-4.1: {input: 2, output: 8}  # USD per million
"""


def hermes_config(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["HERMES_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "actors.cli", "config", *args], capture_output=True, text=True, env=env, timeout=DEADLINE)


def test_path_prints_config_yaml_then_dotenv(tmp_path: Path) -> None:
    done = hermes_config(tmp_path, "path")
    assert done.returncode == 0
    assert done.stdout.splitlines() == [str(tmp_path / "config.yaml"), str(tmp_path / ".env")]


def test_set_changes_one_value_and_keeps_every_comment_and_the_order(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text(COMMENTED)
    file.chmod(0o640)
    done = hermes_config(tmp_path, "set", "compression.threshold", "0.6")
    assert done.returncode == 0, done.stderr
    assert file.read_text() == COMMENTED.replace("threshold: 0.50  # keep this low", "threshold: 0.6   # keep this low")
    assert stat.S_IMODE(file.stat().st_mode) == 0o640
    assert hermes_config(tmp_path, "get", "compression.threshold").stdout == "0.6\n"
    # A new key goes at the end of its section; the rest stays line for line.
    assert hermes_config(tmp_path, "set", "pricing.gpt-4.1.output", "9").returncode == 0
    assert hermes_config(tmp_path, "set", "model.vision", "true").returncode == 0
    expected = COMMENTED.replace("threshold: 0.50  # keep this low", "threshold: 0.6   # keep this low")
    expected = expected.replace("base_url: http://127.0.0.1:8000/v1\n", "base_url: http://127.0.0.1:8000/v1\n  vision: true\n")
    expected = expected.replace("{input: 2, output: 8}", "{input: 2, output: 9}")
    assert file.read_text() == expected


def test_set_keeps_a_string_a_string_where_the_key_takes_text(tmp_path: Path) -> None:
    assert hermes_config(tmp_path, "set", "approvals.mode", "off").returncode == 0
    assert hermes_config(tmp_path, "set", "model.default", "3.5").returncode == 0
    assert hermes_config(tmp_path, "set", "api_server.cors_origins", "[http://a.test, http://b.test]").returncode == 0
    text = (tmp_path / "config.yaml").read_text()
    assert 'mode: "off"' in text and 'default: "3.5"' in text and "cors_origins: [http://a.test, http://b.test]" in text
    assert stat.S_IMODE((tmp_path / "config.yaml").stat().st_mode) == 0o600  # a new file may hold keys
    assert hermes_config(tmp_path, "get", "api_server.cors_origins").stdout == "- http://a.test\n- http://b.test\n"


def test_set_refuses_an_invalid_value_and_leaves_the_file_byte_identical(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text(COMMENTED)
    before = file.read_bytes()
    for args, said in [
        (("compression.threshold", "2"), "compression.threshold is 2, which is not allowed: it must be a number > 0 and <= 1"),
        (("compression.threshold", "high"), "compression.threshold is 'high'"),
        (("api_server.port", "[1, 2]"), "api_server.port is [1, 2]"),
        (("compresion.threshold", "0.4"), "'compresion' is not a known key (did you mean 'compression'?)"),
        (("model.defualt", "x"), "'model.defualt' is not a known key (did you mean 'default'?)"),
        (("model.default.name", "x"), "model.default is a value, not a section"),
        (("compression", "{a: 1}"), "set a mapping's keys one at a time"),
    ]:
        done = hermes_config(tmp_path, "set", *args)
        assert done.returncode == 1, (args, done.stdout)
        assert said in done.stderr and "is unchanged" in done.stderr, done.stderr
        assert file.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["config.yaml"]  # no temporary file left


def test_set_of_a_key_in_the_open_warns_to_use_dotenv_but_writes_it(tmp_path: Path) -> None:
    done = hermes_config(tmp_path, "set", "model.api_key", "sk-typed-in-the-open-1234")
    assert done.returncode == 0
    assert "holds a secret" in done.stderr and ".env" in done.stderr
    assert "sk-typed-in-the-open-1234" not in done.stdout + done.stderr
    assert "api_key: sk-typed-in-the-open-1234" in (tmp_path / "config.yaml").read_text()
    quiet = hermes_config(tmp_path, "set", "model.api_key", "${MY_KEY}")
    assert quiet.returncode == 0 and "secret" not in quiet.stderr


def test_set_of_a_hermes_key_this_build_ignores_says_so(tmp_path: Path) -> None:
    done = hermes_config(tmp_path, "set", "compression.target_ratio", "0.3")
    assert done.returncode == 0
    assert "compression.target_ratio is not supported by this build and is ignored" in done.stderr


def test_get_prints_one_value_and_an_unknown_key_exits_1_with_a_suggestion(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(COMMENTED + "browser:\n  headed: true\n")
    assert hermes_config(tmp_path, "get", "model.default").stdout == "qwen3-32b\n"
    assert hermes_config(tmp_path, "get", "pricing.gpt-4.1.output").stdout == "8.0\n"
    assert hermes_config(tmp_path, "get", "approvals.timeout").stdout == "300.0\n"  # a default
    assert hermes_config(tmp_path, "get", "custom_providers[0].key_env").stdout == "GW_KEY\n"
    ignored = hermes_config(tmp_path, "get", "browser.headed")
    assert ignored.returncode == 0 and ignored.stdout == "true\n" and "not used by this build" in ignored.stderr
    for key, said in [
        ("model.defualt", "did you mean 'model.default'?"),
        ("compresion.threshold", "did you mean 'compression'?"),
        ("api_server.nothing_like_it", "api_server has no key 'nothing_like_it'"),
    ]:
        done = hermes_config(tmp_path, "get", key)
        assert done.returncode == 1 and done.stdout == ""
        assert said in done.stderr, done.stderr


def test_show_prints_the_effective_configuration_and_never_a_secret(tmp_path: Path) -> None:
    secrets = ["sk-literal-0123456789", "sk-from-dotenv-0123456789", "header-secret-0123456789", "tg-token-0123456789", "sk-in-url-0123456789"]
    (tmp_path / "config.yaml").write_text(
        f"""\
model:
  default: qwen3-32b
  api_key: {secrets[0]}
  base_url: "https://llm.example.com/v1?key={secrets[4]}"
custom_providers:
  - name: gw
    base_url: https://gw.example.com/v1
    api_key: "${{GW_KEY}}"
    extra_headers: {{X-Api-Secret: {secrets[2]}}}
platforms:
  telegram: {{enabled: true, token: {secrets[3]}}}
"""
    )
    (tmp_path / ".env").write_text(f"GW_KEY={secrets[1]}\nLEAKED={secrets[4]}\n")
    done = hermes_config(tmp_path, "show")
    assert done.returncode == 0, done.stderr
    out = done.stdout + done.stderr
    assert not [s for s in secrets if s in out]
    assert "default: qwen3-32b" in done.stdout and "threshold: 0.5" in done.stdout  # file values over defaults
    assert "api_key: ${GW_KEY}" in done.stdout and "api_key: <redacted>" in done.stdout
    for key in ("model.api_key", "custom_providers.0.extra_headers", "platforms.telegram.token", "custom_providers.0.api_key"):
        shown = hermes_config(tmp_path, "get", key)
        assert shown.returncode == 0 and not [s for s in secrets if s in shown.stdout + shown.stderr]


def test_show_and_get_refuse_an_invalid_file_with_the_loaders_error(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("compression:\n  threshold: high\n")
    for args in (("show",), ("get", "compression.threshold")):
        done = hermes_config(tmp_path, *args)
        assert done.returncode == 2 and done.stdout == ""
        assert "compression.threshold is 'high'" in done.stderr
