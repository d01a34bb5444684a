"""Taking over a dead node's sessions, on both backends (issue 22 part 3).

A node that stopped beating loses its live leases to the next node that acquires with
``dead_after`` (epoch + 1); the acquire's ``settle`` fails what it left running and answers
each of its unanswered tool calls once, in the grant's transaction. A node that settles the
store at start in cluster mode leaves a session another node holds live alone. Real writers in
real runtimes on a SQLite file and a real Postgres database; the store's clock is the test's.
"""

from __future__ import annotations

from actors.store import StoreReader, settle_interrupted
from protocols import ChatMessage, ToolCall
from protocols._leases import AcquireLease, Fence, LeaseGranted, LeaseRefused, NodeHeartbeat, NodeSeen
from protocols._store import AppendMessages, CreateSession, MessagesPersisted, SessionCreated, StoreFailed, TurnMark
from tests.store_conformance.test_leases import T0, TTL, Node, StoreClock, lease_of
from tests.store_kit import StartRuntime, user

RESULT = "[interrupted] the node running this tool stopped; its outcome is unknown"


def beat(node: Node) -> None:
    assert isinstance(node.ask(NodeHeartbeat(node_id=node.node_id, address=f"http://{node.node_id}:1", reply_to=node.replies)), NodeSeen)


def take(node: Node, session_id: str, *, settle: str = RESULT) -> object:
    return node.ask(AcquireLease(session_id=session_id, node_id=node.node_id, ttl=TTL, dead_after=TTL, settle=settle, token="t", reply_to=node.replies))


def open_turn(node: Node, session_id: str, epoch: int, turn_id: str) -> None:
    """A session of ``node`` mid-turn: a tool batch of two calls, one answered."""
    fence = Fence(node_id=node.node_id, epoch=epoch)
    created = node.ask(CreateSession(session_id=session_id, source="api", fence=fence, token="c", reply_to=node.replies))
    assert isinstance(created, SessionCreated), created
    calls = (ToolCall(id=f"{session_id}-1", name="terminal", arguments="{}"), ToolCall(id=f"{session_id}-2", name="terminal", arguments="{}"))
    first = AppendMessages(session_id=session_id, messages=(user("go"),), turn=TurnMark(turn_id=turn_id, event="started"), fence=fence, reply_to=node.replies)
    assert isinstance(node.ask(first), MessagesPersisted)
    tools = (ChatMessage(role="assistant", tool_calls=calls), ChatMessage(role="tool", tool_call_id=calls[0].id, content="ran"))
    assert isinstance(node.ask(AppendMessages(session_id=session_id, messages=tools, fence=fence, reply_to=node.replies)), MessagesPersisted)


def test_a_node_that_stopped_beating_loses_its_live_lease_and_what_it_left_open_is_settled_once(start_runtime: StartRuntime, location: str) -> None:
    clock = StoreClock()
    a, b = Node(start_runtime, location, clock, "node-a"), Node(start_runtime, location, clock, "node-b")
    beat(a)
    beat(b)
    assert isinstance(take(a, "s1"), LeaseGranted)
    open_turn(a, "s1", 1, "t1")
    clock.set(T0 + TTL / 2)
    assert isinstance(a.renew("s1", 1), LeaseGranted)  # its lease runs to T0 + 1.5 ttl
    beat(b)
    refused = take(b, "s1")  # node-a beat ttl/2 ago: alive, its lease holds
    assert isinstance(refused, LeaseRefused) and refused.owner == "node-a"

    clock.set(T0 + TTL)  # node-a's last beat is a ttl old: it is not live, its lease still is
    beat(b)
    taken = take(b, "s1")
    assert isinstance(taken, LeaseGranted) and taken.epoch == 2
    with StoreReader(location) as reader:
        [turn] = reader.load_turns("s1")
        assert (turn.turn_id, turn.status, turn.reason) == ("t1", "failed", "interrupted")
        results = [m for m in reader.load_messages("s1") if m.role == "tool"]
    assert [(m.tool_call_id, m.content) for m in results] == [("s1-1", "ran"), ("s1-2", RESULT)]  # one result each

    late = a.ask(
        AppendMessages(
            session_id="s1",
            messages=(ChatMessage(role="tool", tool_call_id="s1-2", content="late"),),
            fence=Fence(node_id="node-a", epoch=1),
            reply_to=a.replies,
        )
    )
    assert isinstance(late, StoreFailed) and late.fenced == Fence(node_id="node-b", epoch=2)  # nothing of node-a lands
    again = take(b, "s1")  # node-b acquiring again (a restarted actor) finds nothing more to settle
    assert isinstance(again, LeaseGranted) and again.epoch == 2
    with StoreReader(location) as reader:
        assert [m.tool_call_id for m in reader.load_messages("s1") if m.role == "tool"] == ["s1-1", "s1-2"]


def test_a_holder_that_never_beat_keeps_its_live_lease(start_runtime: StartRuntime, location: str) -> None:
    clock = StoreClock()
    a, b = Node(start_runtime, location, clock, "node-a"), Node(start_runtime, location, clock, "node-b")
    assert isinstance(a.acquire("s1"), LeaseGranted)  # node-a sends no heartbeat (as hermes chat would not)
    clock.set(T0 + TTL / 2)
    refused = take(b, "s1")
    assert isinstance(refused, LeaseRefused) and refused.owner == "node-a"
    clock.set(T0 + TTL + 1)
    assert isinstance(take(b, "s1"), LeaseGranted)  # once it lapses, it is free as before


def test_settling_at_start_in_cluster_mode_leaves_the_sessions_another_node_holds_live(start_runtime: StartRuntime, location: str) -> None:
    clock = StoreClock(T0)
    a, b = Node(start_runtime, location, clock, "node-a"), Node(start_runtime, location, clock, "node-b")
    for node, session_id in ((a, "mine"), (b, "theirs"), (b, "lapsed")):
        granted = take(node, session_id)
        assert isinstance(granted, LeaseGranted)
        open_turn(node, session_id, granted.epoch, f"t-{session_id}")
    lapsed = b.ask(AcquireLease(session_id="lapsed", node_id="node-b", ttl=TTL, reply_to=b.replies))
    assert isinstance(lapsed, LeaseGranted)
    # The store's own clock (the settle reads it) is far past T0 + ttl: every lease above lapsed;
    # "theirs" is renewed live on it through a writer whose clock is now.
    import time

    live_clock = StoreClock(time.time())
    b_now = Node(start_runtime, location, live_clock, "node-b")
    renewed = b_now.ask(AcquireLease(session_id="theirs", node_id="node-b", ttl=600.0, reply_to=b_now.replies))
    assert isinstance(renewed, LeaseGranted) and renewed.epoch == 2
    report = settle_interrupted(location, result_text=RESULT, node_id="node-a")
    assert set(report.sessions) == {"mine", "lapsed"}
    with StoreReader(location) as reader:
        assert [t.status for t in reader.load_turns("theirs")] == ["running"]
        assert [t.status for t in reader.load_turns("mine")] == ["failed"]
    held = lease_of(location, "theirs")
    assert held is not None and (held.node_id, held.epoch) == ("node-b", 2)
