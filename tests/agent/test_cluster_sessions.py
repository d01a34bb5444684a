"""Sessions in cluster mode (``SessionDeps.node``): a session holds its lease from before it loads,
fences its writes, stops when another node has taken it over, and releases it when it stops.

Real runtimes on one real SQLite file: node-a is an agent runtime with sessions (the test model
server on loopback); node-b is a second store writer on the same file whose store clock runs an
hour ahead, so node-a's live lease is a lapsed one to it (a takeover without waiting).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from actors.agent import ConfigError
from actors.agent._node import NodeIdentity, cluster_health
from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.config import load_config
from actors.platforms._runtime_deps import Platform, configured_deps
from actors.store._backend import open_store_reader
from actors.store._lease_rows import read_lease
from protocols._leases import AcquireLease, LeaseGranted, LeaseRecord
from protocols._session import ToolStarted, TurnCancelled, TurnCompleted, TurnFailed, TurnQueued, TurnStarted
from supervisor import ChildSpec
from tests.agent.session_kit import start_kit, until
from tests.config.test_applied_sections import home_with
from tests.conftest import DEADLINE
from tests.store_kit import ControlledWriter, Replies, StartRuntime

NODE_A = NodeIdentity(node_id="node-a", lease_ttl=600.0)


def lease_of(store_file: Path, session_id: str) -> LeaseRecord | None:
    db = open_store_reader(str(store_file))
    try:
        return read_lease(db, session_id)
    finally:
        db.close()


def test_a_session_owns_its_lease_loses_it_to_a_takeover_and_writes_nothing_after(
    tmp_path: Path, model_server: ModelServer, start_runtime: StartRuntime
) -> None:
    store_file = tmp_path / "state.db"
    kit = start_kit(store_file, model_server, node=NODE_A)
    try:
        model_server.script([TextReply(content="first answer"), TextReply(content="never stored")], session="s1")
        probe = kit.subscribe("s1")
        kit.start_turn("s1", "hello")
        assert isinstance(until(probe, (TurnCompleted, TurnFailed))[-1], TurnCompleted)
        kit.flush_store()
        lease = lease_of(store_file, "s1")
        assert lease is not None and (lease.node_id, lease.epoch) == ("node-a", 1) and lease.expires_at > time.time()

        # node-b takes s1 over: by its store clock, node-a's lease lapsed long ago.
        node_b = start_runtime([ChildSpec(id="store", actor=ControlledWriter, args=(store_file,), kwargs={"clock": lambda: time.time() + 3600})])
        replies = Replies()
        node_b.lookup("/store").tell(AcquireLease(session_id="s1", node_id="node-b", ttl=600.0, reply_to=replies))
        taken = replies.get()
        assert isinstance(taken, LeaseGranted) and taken.epoch == 2

        # node-a's next turn is refused at its first write: nothing of it lands, and the session lets go.
        kit.start_turn("s1", "are you still there?")
        failed = until(probe, (TurnCompleted, TurnFailed))[-1]
        assert isinstance(failed, TurnFailed), failed
        assert [m.content for m in kit.transcript("s1")] == ["hello", "first answer"]
        after = lease_of(store_file, "s1")
        assert after is not None and (after.node_id, after.epoch) == ("node-b", 2)
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_a_session_releases_its_lease_when_it_stops(tmp_path: Path, model_server: ModelServer) -> None:
    store_file = tmp_path / "state.db"
    kit = start_kit(store_file, model_server, node=NODE_A)
    try:
        model_server.script([TextReply(content="hi")], session="s2")
        probe = kit.subscribe("s2")
        kit.start_turn("s2", "hello")
        assert isinstance(until(probe, (TurnCompleted, TurnFailed))[-1], TurnCompleted)
        kit.flush_store()
        held = lease_of(store_file, "s2")
        assert held is not None and held.expires_at > time.time() + 60
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
    released = lease_of(store_file, "s2")
    assert released is not None and (released.node_id, released.epoch) == ("node-a", 1) and released.expires_at <= time.time()


def test_the_cluster_section_of_config_yaml_gives_sessions_a_node_identity(tmp_path: Path) -> None:
    cli = Platform(name="cli", source="cli", hint="")
    home = home_with(tmp_path, "")
    assert configured_deps(home, {}, load_config(home, {}), cli).node is None  # off by default: one process, no lease
    home = home_with(tmp_path, "cluster:\n  enabled: true\n  node_id: node-7\n  lease_ttl: 12\n")
    node = configured_deps(home, {}, load_config(home, {}), cli).node
    assert node == NodeIdentity(node_id="node-7", lease_ttl=12.0) and node.renew_every == 4.0
    assert cluster_health(node) == {"node_id": "node-7", "lease_ttl": 12.0}
    home = home_with(tmp_path, "cluster:\n  enabled: true\n")
    unnamed = configured_deps(home, {}, load_config(home, {}), cli).node
    assert unnamed is not None and unnamed.node_id  # the host name
    home = home_with(tmp_path, "cluster:\n  enabled: true\n  lease_ttl: 0\n")
    with pytest.raises(ConfigError, match="lease_ttl"):
        configured_deps(home, {}, load_config(home, {}), cli)


def test_a_turn_asked_of_a_session_another_node_holds_fails_at_once_with_not_owner(
    tmp_path: Path, model_server: ModelServer, start_runtime: StartRuntime
) -> None:
    store_file = tmp_path / "state.db"
    kit = start_kit(store_file, model_server, node=NODE_A)
    try:
        kit.flush_store()
        node_b = start_runtime([ChildSpec(id="store", actor=ControlledWriter, args=(store_file,))])
        replies = Replies()
        node_b.lookup("/store").tell(AcquireLease(session_id="s4", node_id="node-b", ttl=600.0, reply_to=replies))
        assert isinstance(replies.get(), LeaseGranted)
        probe = kit.subscribe("s4")
        kit.start_turn("s4", "hello", turn_id="turn-1")  # node-a's actor is refused the lease before it loads
        failed = until(probe, (TurnCompleted, TurnFailed))[-1]
        assert isinstance(failed, TurnFailed) and failed.kind == "not_owner" and failed.turn_id == "turn-1" and "node-b" in failed.error
        assert kit.transcript("s4") == []
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_a_session_that_loses_its_lease_mid_turn_fails_the_running_and_the_queued_turn_with_not_owner(
    tmp_path: Path, model_server: ModelServer, start_runtime: StartRuntime
) -> None:
    """node-a runs a turn (a tool sleeping) with a second one queued behind it; node-b takes the
    session over. At node-a's next renewal (refused), both turns fail ``not_owner`` (503, retry
    elsewhere) at once: neither is "cancelled by a shutdown", and the queued one does not start
    in an incarnation that is stopping (where nothing would ever answer it)."""
    store_file = tmp_path / "state.db"
    kit = start_kit(store_file, model_server, node=NodeIdentity(node_id="node-a", lease_ttl=1.5))
    try:
        model_server.script([ToolCallsReply(calls=(ScriptedCall(name="terminal", arguments=json.dumps({"command": "sleep 30"})),))], session="s3")
        probe = kit.subscribe("s3")
        kit.start_turn("s3", "run it", turn_id="turn-1")
        until(probe, ToolStarted)
        kit.start_turn("s3", "and then this", turn_id="turn-2", policy="queue")
        until(probe, TurnQueued)

        node_b = start_runtime([ChildSpec(id="store", actor=ControlledWriter, args=(store_file,), kwargs={"clock": lambda: time.time() + 3600})])
        replies = Replies()
        node_b.lookup("/store").tell(AcquireLease(session_id="s3", node_id="node-b", ttl=600.0, reply_to=replies))
        assert isinstance(replies.get(), LeaseGranted)

        ended: dict[str, object] = {}
        while len(ended) < 2:
            event = until(probe, (TurnCompleted, TurnFailed, TurnCancelled, TurnStarted))[-1]
            assert not isinstance(event, TurnStarted), f"a turn started in the incarnation that lost the session: {event}"
            ended[event.turn_id] = event
        for turn_id in ("turn-1", "turn-2"):
            failed = ended[turn_id]
            assert isinstance(failed, TurnFailed) and failed.kind == "not_owner" and "lost session 's3'" in failed.error, failed
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
