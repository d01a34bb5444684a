"""A pool's address takes its inbox and nothing else, under ``mypy --strict`` (as in
``tests/test_inbox_types.py``); and the package's door lists exactly its public names."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import actors.credentials
from actors import Registry
from actors.credentials import CREDENTIALS_PATH, pool_address, pool_path

ROOT = Path(__file__).resolve().parent.parent.parent

MISTAKES = """
from actors import Registry
from actors.credentials import pool_address
from protocols import AppendMessages, KeyLeased, SavePoolState, StartTurn


def tell(registry: Registry) -> None:
    pool = pool_address(registry, "openai")
    pool.tell(StartTurn(text="hi"))  # expect: arg-type
    pool.tell(AppendMessages(session_id="s1", messages=()))  # expect: arg-type
    pool.tell(KeyLeased(lease_id="l", provider="p", key_id="k", api_key="x", shown="k"))  # expect: arg-type
    pool.tell(SavePoolState(provider="p", state="{}", saved_at=0.0))  # expect: arg-type
"""

CONTROL = """
from actors import Registry
from actors.credentials import pool_address
from protocols import InjectCrash, LeaseKey, PoolStatusRequest, ReloadPool, ReportKey


def tell(registry: Registry) -> None:
    pool = pool_address(registry, "openai")
    pool.tell(LeaseKey(lease_id="l1", reply_to=None))
    pool.tell(ReportKey(lease_id="l1", key_id="a", ok=True))
    pool.tell(ReloadPool(spec=None))
    pool.tell(InjectCrash(reason="chaos"))
    pool.ask(PoolStatusRequest())
"""

_ERROR = re.compile(r"^(?P<file>.+?):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")


def _check(tmp_path: Path, name: str, source: str) -> tuple[int, set[tuple[int, str]], str]:
    snippet = tmp_path / f"{name}.py"
    snippet.write_text(source)
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"), str(snippet)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "MYPYPATH": str(ROOT)},
        timeout=120,
    )
    found = {(int(m["line"]), m["code"]) for m in map(_ERROR.match, out.stdout.splitlines()) if m and Path(m["file"]).name == snippet.name}
    return out.returncode, found, out.stdout + out.stderr


def _expected(source: str) -> set[tuple[int, str]]:
    marks = (re.search(r"# expect: ([a-z-]+)$", line) for line in source.splitlines())
    return {(number, mark[1]) for number, mark in enumerate(marks, start=1) if mark}


def test_telling_a_pool_what_its_inbox_does_not_take_is_a_type_error_and_its_inbox_checks(tmp_path: Path) -> None:
    returncode, found, output = _check(tmp_path, "mistakes", MISTAKES)
    assert returncode != 0, output
    assert found == _expected(MISTAKES), output
    returncode, found, output = _check(tmp_path, "control", CONTROL)
    assert (returncode, found) == (0, set()), output


def test_a_pool_lives_under_credentials_at_its_provider_name() -> None:
    registry = Registry()
    address, _ = registry.reserve("/credentials/custom:local")
    assert pool_address(registry, "custom:local") is address
    assert str(pool_path("openai")) == "/credentials/openai" and str(CREDENTIALS_PATH) == "/credentials"


def test_the_package_exports_a_sorted_all_naming_exactly_its_public_names() -> None:
    exported = list(actors.credentials.__all__)
    assert exported == sorted(exported)
    public = sorted(n for n in vars(actors.credentials) if not n.startswith("_") and type(getattr(actors.credentials, n)).__name__ != "module")
    assert exported == public
