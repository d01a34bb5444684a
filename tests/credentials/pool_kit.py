"""What the credential pool tests share: a store writer the test can hold and watch, and
helpers that talk to a pool through messages with deadlines."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from actors import Address
from actors.credentials import KeySpec, PoolOptions, ProviderSpec, credential_specs, pool_address
from actors.store import StoreWriter
from protocols import KeyLeased, LeaseKey, NoKeyAvailable, PoolInbox, PoolStatus, PoolStatusRequest, SavePoolState
from supervisor import ChildSpec, Runtime
from tests.conftest import DEADLINE, Probe

StartRuntime = Callable[..., Runtime]

SECRETS = {"a": "sk-alpha-secret-1111", "b": "sk-bravo-secret-2222"}


class Hold:
    """Parks the writer's thread until ``release`` is set, so that commands queue up."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.release = threading.Event()


class WatchedWriter(StoreWriter):
    """The real writer; it copies each ``SavePoolState`` to ``saves`` and takes ``Hold``."""

    def __init__(self, path: str, saves: Probe | None = None) -> None:
        super().__init__(path)
        self.saves = saves

    def receive(self, message: Any) -> Any:
        if isinstance(message, Hold):
            message.held.set()
            message.release.wait(DEADLINE)
            return None
        if isinstance(message, SavePoolState) and self.saves is not None:
            self.saves.put(message)
        return super().receive(message)


def provider(*keys: KeySpec, strategy: str = "fill_first") -> ProviderSpec:
    if not keys:
        keys = tuple(KeySpec(key_id=k, api_key=v) for k, v in SECRETS.items())
    return ProviderSpec(name="openai", base_url="http://127.0.0.1:1/v1", model="m", keys=keys, strategy=strategy)  # type: ignore[arg-type]


def start_pools(
    start_runtime: StartRuntime, db: Path | None, providers: Sequence[ProviderSpec], *, saves: Probe | None = None, **options: Any
) -> tuple[Runtime, Address[PoolInbox]]:
    """A runtime with ``/store`` (when ``db``) and ``/credentials``; the first provider's pool."""
    children = []
    if db is not None:
        children.append(ChildSpec(id="store", actor=WatchedWriter, args=(str(db),), kwargs={"saves": saves}))
    children.append(credential_specs(providers, PoolOptions(store_file=db, **options)))
    runtime = start_runtime(children)
    return runtime, pool_address(runtime.registry, providers[0].name)


def take(pool: Address[PoolInbox], lease_id: str) -> KeyLeased | NoKeyAvailable:
    replies = Probe()
    pool.tell(LeaseKey(lease_id=lease_id, session_id="s1", reply_to=replies))
    answer = replies.get()
    assert isinstance(answer, KeyLeased | NoKeyAvailable), answer
    return answer


def leased(pool: Address[PoolInbox], lease_id: str) -> KeyLeased:
    answer = take(pool, lease_id)
    assert isinstance(answer, KeyLeased), answer
    return answer


def status(pool: Address[PoolInbox]) -> PoolStatus:
    """The pool's status; also a barrier: every message told before it was handled."""
    replies = Probe()
    pool.tell(PoolStatusRequest(reply_to=replies))
    answer = replies.get()
    assert isinstance(answer, PoolStatus), answer
    return answer


def row(pool_status: PoolStatus, key_id: str) -> Any:
    return next(k for k in pool_status.keys if k.key_id == key_id)


def hold(store: Address[Any]) -> Hold:
    gate = Hold()
    store.tell(gate)
    assert gate.held.wait(DEADLINE), "the writer did not take the Hold within the deadline"
    return gate
