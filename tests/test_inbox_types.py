"""Telling an actor a message its inbox does not take is a type error under ``mypy --strict``.

Each snippet imports the real modules; the expected errors are marked on their lines
(``# expect: <code>``), and the checked output must match them exactly.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from actors import ActorPath, Registry
from actors.agent import SESSIONS_PATH
from actors.store import STORE_PATH

ROOT = Path(__file__).resolve().parent.parent

MISTAKES = """
from actors import Actor, Address, Registry
from actors.agent import SESSIONS_PATH, session_address, tell_session
from actors.store import STORE_PATH, store_address
from protocols import AppendMessages, CancelTurn, InjectCrash, SessionInbox, StartTurn, StoreCommand, WaitFinished


async def nothing() -> None:
    return None


def tell(registry: Registry) -> None:
    sessions = registry.lookup(SESSIONS_PATH)
    address: Address[SessionInbox] = session_address(registry, sessions, "s1")
    address.tell(AppendMessages(session_id="s1", messages=()))  # expect: arg-type
    store_address(registry).tell(StartTurn(text="hi"))  # expect: arg-type
    registry.lookup(STORE_PATH).tell(StartTurn(text="hi"))  # expect: arg-type
    sessions.tell(StartTurn(text="hi"))  # expect: arg-type
    tell_session(registry, sessions, "s1", WaitFinished(wait_id=1, tag="t", status="ok"))  # expect: arg-type
    address.ask(InjectCrash())  # expect: arg-type
    wider: Address[StoreCommand | StartTurn] = registry.lookup(STORE_PATH)  # expect: arg-type


class NoWaits(Actor[StartTurn]):
    def started(self) -> None:
        self.send_after(1.0, CancelTurn())  # expect: arg-type
        self.start_wait(nothing, tag="t", timeout=1.0)  # expect: misc


class Narrow(Actor[StartTurn | CancelTurn]):
    def receive(self, message: StartTurn) -> None:  # expect: override
        return None
"""

CONTROL = """
from actors import Actor, Address, Registry
from actors.agent import SESSIONS_PATH, session_address, tell_session
from actors.store import STORE_PATH, store_address
from protocols import AppendMessages, CancelTurn, InjectCrash, SessionInbox, StartTurn, Subscribe, TerminateChild, WaitFinished


async def nothing() -> None:
    return None


def tell(registry: Registry) -> None:
    sessions = registry.lookup(SESSIONS_PATH)
    address: Address[SessionInbox] = session_address(registry, sessions, "s1")
    address.tell(StartTurn(text="hi"))
    address.tell(InjectCrash(reason="chaos"))
    address.ask(Subscribe(subscriber=None))
    tell_session(registry, sessions, "s1", CancelTurn())
    store_address(registry).tell(AppendMessages(session_id="s1", messages=()))
    sessions.tell(TerminateChild(child_id="s1"))
    narrower: Address[AppendMessages] = registry.lookup(STORE_PATH)
    narrower.tell(AppendMessages(session_id="s1", messages=()))


class Worker(Actor[StartTurn | WaitFinished]):
    def started(self) -> None:
        self.start_wait(nothing, tag="t", timeout=1.0)
        self.send_after(1.0, StartTurn(text="again"))
        mine: Address[StartTurn] = self.address
        mine.tell(StartTurn(text="more"))

    def receive(self, message: StartTurn | WaitFinished | CancelTurn) -> None:
        return None
"""

_ERROR = re.compile(r"^(?P<file>.+?):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy_cache")


def _check(tmp_path: Path, cache_dir: Path, name: str, source: str) -> tuple[int, set[tuple[int, str]], str]:
    snippet = tmp_path / f"{name}.py"
    snippet.write_text(source)
    out = subprocess.run(
        # Errors in the imported modules are test_typing's business, not this test's.
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--cache-dir", str(cache_dir), str(snippet)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "MYPYPATH": str(ROOT)},
        timeout=120,
    )
    found = set()
    for line in out.stdout.splitlines():
        match = _ERROR.match(line)
        if match and Path(match["file"]).name == snippet.name:
            found.add((int(match["line"]), match["code"]))
    return out.returncode, found, out.stdout + out.stderr


def _expected(source: str) -> set[tuple[int, str]]:
    marks = (re.search(r"# expect: ([a-z-]+)$", line) for line in source.splitlines())
    return {(number, mark[1]) for number, mark in enumerate(marks, start=1) if mark}


def test_telling_an_actor_what_its_inbox_does_not_take_is_a_type_error(tmp_path: Path, cache_dir: Path) -> None:
    returncode, found, output = _check(tmp_path, cache_dir, "mistakes", MISTAKES)
    assert returncode != 0, output
    assert found == _expected(MISTAKES), output
    first = min(_expected(MISTAKES))[0]
    assert f'mistakes.py:{first}: error: Argument 1 to "tell" of "Address" has incompatible type "AppendMessages"' in output


def test_what_an_inbox_takes_type_checks(tmp_path: Path, cache_dir: Path) -> None:
    returncode, found, output = _check(tmp_path, cache_dir, "control", CONTROL)
    assert found == set(), output
    assert returncode == 0, output


def test_a_typed_path_finds_the_same_address_as_its_string() -> None:
    registry = Registry()
    store, _ = registry.reserve("/store")
    sessions, _ = registry.reserve("/sessions")
    assert registry.lookup(STORE_PATH) is store is registry.lookup("/store")
    assert registry.lookup(SESSIONS_PATH) is sessions
    assert str(STORE_PATH) == "/store"
    with pytest.raises(LookupError, match="/nowhere"):
        registry.lookup(ActorPath("/nowhere"))
