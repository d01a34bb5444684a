"""A runtime in the test's own process: sessions, store, reactor and the Telegram adapter under
``/platforms`` (as ``hermes serve`` builds them), against the test Bot API and model servers.
For the tests that must reach into the running tree: hold the adapter's thread, fire a hook."""

from __future__ import annotations

import queue
import time
from pathlib import Path
from typing import Any

from actors.agent import HubRegistry, MachineConfig, ModelClients, ModelSettings, SessionDeps, agent_specs, reader_opener
from actors.chaos import ModelServer
from actors.hooks import Hooks, hooks_spec
from actors.platforms.gateway import AccessPolicy, Chats, TelegramAdapter
from protocols import AdapterStatus, AdapterStatusRequest
from supervisor import ChildSpec, Runtime, Supervisor
from tests.conftest import DEADLINE
from tests.platforms.gateway.telegram_server import TOKEN, TelegramServer

ALLOWED = 111


def started_runtime(tmp_path: Path, model: ModelServer, telegram: TelegramServer, *, hooks: Hooks | None = None) -> Runtime:
    """Started; the caller stops it (``runtime.stop``). ``hooks``: bound once the tree runs."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    store = home / "state.db"
    hubs = HubRegistry()
    deps = SessionDeps(
        hubs=hubs,
        open_reader=reader_opener(store),
        model=ModelSettings(model="test-model", base_url=model.base_url, api_key="test-key"),
        clients=ModelClients(),
        tools={},
        config=MachineConfig(traits={}, retry_base=0.01, turn_timeout=60.0),
        idle_timeout=0,
        store_file=store,
        home=home,
    )
    adapter: dict[str, Any] = {
        "token": TOKEN,
        "base_url": telegram.base_url,
        "poll_timeout": 30.0,  # the test server answers a long poll within 10 s
        "home": home,
        "hubs": hubs,
        "policy": AccessPolicy(allowed=frozenset({str(ALLOWED)})),
        "chats": Chats(),
        "hooks": hooks,
    }
    platforms = ChildSpec(id="platforms", actor=Supervisor, args=((ChildSpec(id="telegram", actor=TelegramAdapter, kwargs=adapter),),))
    runtime = Runtime([*agent_specs(store, deps), *((hooks_spec(),) if hooks is not None else ()), platforms])
    runtime.reactor.at_stop(deps.clients.aclose)
    runtime.start()
    if hooks is not None:
        hooks.bind(runtime.registry, runtime.reactor)
    return runtime


def adapter_status(runtime: Runtime) -> AdapterStatus:
    status = runtime.lookup("/platforms/telegram").ask(AdapterStatusRequest(), timeout=DEADLINE)
    assert isinstance(status, AdapterStatus)
    return status


def wait_status(runtime: Runtime, done: Any, what: str) -> AdapterStatus:
    """The adapter's status once ``done(status)`` (asked again and again: each ask is a round trip)."""
    deadline = time.monotonic() + DEADLINE
    while not done(status := adapter_status(runtime)):
        assert time.monotonic() < deadline, f"never: {what}"
    return status


def in_reactor(runtime: Runtime, read: Any) -> Any:
    """``read()`` run in the reactor thread (where the hooks' state lives), its value here."""
    answer: queue.SimpleQueue[Any] = queue.SimpleQueue()
    runtime.reactor.call_soon(lambda: answer.put(read()))
    return answer.get(timeout=DEADLINE)


def wait_in_reactor(runtime: Runtime, done: Any, what: str) -> None:
    """Until ``done()`` is true in the reactor (asked again and again: each ask is a round trip)."""
    deadline = time.monotonic() + DEADLINE
    while not in_reactor(runtime, done):
        assert time.monotonic() < deadline, f"never: {what}"
