"""Sessions end to end: real HTTP to the test model server, a real SQLite file, real processes."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from actors.agent._sanitize import INTERRUPTED_RESULT, UNKNOWN_OUTCOME, cancelled_result, sanitize
from actors.chaos import HttpError, ScriptedCall, TextReply, ToolCallsReply
from protocols import ChildStarted
from protocols._session import (
    ModelRetrying,
    SessionRecovered,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnQueued,
    TurnStarted,
)
from protocols._supervision import InjectCrash
from tests.agent.session_kit import AgentKit, fifo, seqs, until
from tests.conftest import DEADLINE, Probe
from tests.processes import live_processes_with, wait_for_line


def reads(*paths: str, seconds: float = 0.01) -> ToolCallsReply:
    return ToolCallsReply(calls=tuple(ScriptedCall(name="read_file", arguments=f'{{"path": "{p}", "seconds": {seconds}}}') for p in paths))


def test_a_turn_with_two_tool_rounds_completes_with_a_valid_transcript_and_gap_free_events(agent: AgentKit) -> None:
    agent.server.script(
        [
            reads("a.txt", "b.txt"),
            ToolCallsReply(calls=(ScriptedCall(name="terminal", arguments='{"command": "echo hi"}'),)),
            TextReply(content="All done: read two files and said hi."),
        ],
        session="s1",
    )
    probe = agent.subscribe("s1")
    agent.start_turn("s1", "do the thing")
    events = until(probe, (TurnCompleted, TurnFailed))
    done = events[-1]
    assert isinstance(done, TurnCompleted), done
    assert done.text == "All done: read two files and said hi."
    assert done.iterations == 3
    assert seqs(events) == list(range(1, len(events) + 1))
    kinds = [type(e).__name__ for e in events if not isinstance(e, TextDelta)]
    assert kinds == [
        "TurnStarted",
        "UserMessageSaved",
        "ToolStarted",
        "ToolStarted",
        "ToolFinished",
        "ToolFinished",
        "ToolStarted",
        "ToolFinished",
        "TurnCompleted",
    ]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == done.text
    transcript = agent.transcript("s1")
    assert [m.role for m in transcript] == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    # Results are stored as they finish; what a model sees is put in the model's order.
    assert sanitize(transcript)[1] == 0
    assert transcript[5].content == "hi\n"
    # The model saw the tool results, in its own order, and our system prompt.
    third = agent.server.requests[2].body["messages"]
    assert third[0]["role"] == "system" and "Hermes" in third[0]["content"]
    assert [m.get("tool_call_id") for m in third if m["role"] == "tool"][:2] == [c.id for c in transcript[1].tool_calls]
    # A subscriber that reconnects after event 3 gets exactly the rest.
    again = agent.subscribe("s1", after_seq=3)
    replayed = [again.get() for _ in range(len(events) - 3)]
    assert replayed == events[3:]


def test_cancel_during_the_model_stream_ends_the_turn_and_closes_the_stream(agent: AgentKit) -> None:
    agent.server.script([TextReply(content="one two three four five six", stall_after_chunks=2, stall_seconds=30)], session="s2")
    probe = agent.subscribe("s2")
    agent.start_turn("s2", "talk slowly")
    until(probe, TextDelta)  # the stream is flowing, then stalls
    asked = time.monotonic()
    agent.session("s2").tell(__import__("protocols._session", fromlist=["CancelTurn"]).CancelTurn())
    cancelled = until(probe, TurnCancelled)[-1]
    latency = time.monotonic() - asked
    assert cancelled.reason == "cancelled by the user"
    transcript = agent.transcript("s2")
    assert [m.role for m in transcript] == ["user"]
    print(f"cancel during stream: TurnCancelled after {latency * 1000:.1f} ms")


def test_cancel_during_a_subprocess_tool_kills_its_group_and_settles_the_transcript(agent: AgentKit, tmp_path: Path) -> None:
    from protocols._session import CancelTurn

    ready = tmp_path / "ready"
    fd = fifo(ready)
    marker = f"40.{os.getpid()}7"
    command = f"echo go > {ready}; sleep {marker}; echo never"
    agent.server.script([ToolCallsReply(calls=(ScriptedCall(name="terminal", arguments=f'{{"command": "{command}"}}'),))], session="s3")
    probe = agent.subscribe("s3")
    try:
        agent.start_turn("s3", "run it")
        assert wait_for_line(fd, DEADLINE) == b"go\n"
    finally:
        os.close(fd)
    agent.session("s3").tell(CancelTurn(reason="enough"))
    assert until(probe, TurnCancelled)[-1].reason == "enough"
    transcript = agent.transcript("s3")
    assert [m.role for m in transcript] == ["user", "assistant", "tool"]
    assert transcript[-1].content == cancelled_result("enough") == "[cancelled] The turn was cancelled before this tool finished (enough)."
    assert agent.runtime.stop(timeout=DEADLINE)  # waits until the reactor let go of the group
    assert live_processes_with(f"sleep {marker}") == []


def test_cancel_during_backoff_ends_the_turn_at_once(agent: AgentKit) -> None:
    from protocols._session import CancelTurn

    agent.server.script([HttpError(status=429, message="slow down", retry_after=30)], session="s4")
    probe = agent.subscribe("s4")
    agent.start_turn("s4", "hello")
    rotated = until(probe, ModelRetrying)[-1]
    assert rotated.delay_s == 0 and "another key" in rotated.reason, "a rate-limited key is benched and another one tried at once"
    retrying = until(probe, ModelRetrying)[-1]  # the only key is benched: wait until it is back
    assert 29 < retrying.delay_s <= 30 and "rate limited" in retrying.reason and "back in" in retrying.reason
    agent.session("s4").tell(CancelTurn())
    until(probe, TurnCancelled)


def test_a_fatal_model_error_fails_the_turn_with_advice(agent: AgentKit) -> None:
    agent.server.script([HttpError(status=401, message="invalid api key")], session="s5")
    probe = agent.subscribe("s5")
    agent.start_turn("s5", "hello")
    failed = until(probe, (TurnFailed, TurnCompleted))[-1]
    assert isinstance(failed, TurnFailed) and failed.kind == "auth_permanent", "an invalid key is benched for good, not waited for"
    assert "OPENAI_API_KEY" in failed.error


def test_independent_slow_reads_overlap_and_writes_to_one_path_do_not(agent: AgentKit) -> None:
    calls = (
        ScriptedCall(name="read_file", arguments='{"path": "x", "seconds": 0.2}'),
        ScriptedCall(name="read_file", arguments='{"path": "y", "seconds": 0.2}'),
        ScriptedCall(name="write_file", arguments='{"path": "z", "content": "1", "seconds": 0.1}'),
        ScriptedCall(name="write_file", arguments='{"path": "z", "content": "2", "seconds": 0.1}'),
    )
    agent.server.script([ToolCallsReply(calls=calls), TextReply(content="ok")], session="s6")
    probe = agent.subscribe("s6")
    agent.start_turn("s6", "go")
    assert isinstance(until(probe, (TurnCompleted, TurnFailed))[-1], TurnCompleted)
    assert agent.intervals.overlap("read:x", "read:y")
    assert not agent.intervals.overlap("write:z:1", "write:z:2")
    assert agent.intervals.spans["write:z:1"][1] <= agent.intervals.spans["write:z:2"][0]


def test_concurrent_messages_for_one_session_never_make_two_agents(agent: AgentKit) -> None:
    started = Probe()
    agent.runtime.subscribe(lambda e: started.put(e) if isinstance(e, ChildStarted) and e.path.startswith("/sessions/") else None)
    agent.server.script([TextReply(content="first", latency=0.2), TextReply(content="second")], session="s7")
    probe = agent.subscribe("s7")
    go = threading.Barrier(2)

    def send(text: str) -> None:
        go.wait(DEADLINE)
        agent.start_turn("s7", text)

    threads = [threading.Thread(target=send, args=(t,)) for t in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    events = until(probe, TurnCompleted)
    events += until(probe, TurnCompleted)
    assert sum(isinstance(e, TurnQueued) for e in events) == 1
    assert sum(isinstance(e, TurnStarted) for e in events) == 2
    assert started.get().path == "/sessions/s7"
    assert started.drain() == []


def test_a_session_killed_mid_batch_restarts_with_a_valid_transcript_and_the_turn_settles(agent: AgentKit) -> None:
    agent.server.script([reads("slow1", "slow2", seconds=30)], session="s8")
    probe = agent.subscribe("s8")
    agent.start_turn("s8", "read slowly")
    until(probe, ToolStarted)
    until(probe, ToolStarted)
    agent.session("s8").tell(InjectCrash(reason="chaos"))
    recovered = until(probe, SessionRecovered)[-1]
    assert recovered.settled_calls == 2 and not recovered.resumed
    failed = until(probe, TurnFailed)[-1]
    assert failed.kind == "restarted"
    transcript = agent.transcript("s8")
    assert [m.role for m in transcript] == ["user", "assistant", "tool", "tool"]
    assert all(m.content == UNKNOWN_OUTCOME for m in transcript[2:])
    assert sanitize(transcript) == (tuple(transcript), 0)
    # The session works again.
    agent.server.script([TextReply(content="back")], session="s8")
    agent.start_turn("s8", "hello again")
    assert until(probe, TurnCompleted)[-1].text == "back"
    assert not any(isinstance(e, ToolFinished) for e in [])


def test_an_idle_session_is_passivated_and_rehydrated_with_its_history(tmp_path: Path, model_server) -> None:  # type: ignore[no-untyped-def]
    from tests.agent.session_kit import start_kit

    kit = start_kit(tmp_path / "state.db", model_server, idle_timeout=0.05)
    try:
        events = Probe()
        kit.runtime.subscribe(events.put)
        model_server.script([TextReply(content="first answer"), TextReply(content="second answer")], session="p1")
        probe = kit.subscribe("p1")
        kit.start_turn("p1", "first question")
        assert until(probe, TurnCompleted)[-1].text == "first answer"
        exited = events.get_matching(lambda e: isinstance(e, __import__("protocols").ChildExited) and e.path == "/sessions/p1")
        assert exited.kind == "normal"  # passivated: the actor is gone, its state is in the store
        hub = kit.hubs.get("p1")
        assert hub.events_after(0) != []  # someone follows it (probe): its events stay
        kit.start_turn("p1", "second question")  # rehydrates from the store
        assert until(probe, TurnCompleted)[-1].text == "second answer"
        sent = [m["content"] for m in model_server.requests[-1].body["messages"]]
        assert sent[1:] == ["first question", "first answer", "second question"]
        first_prompt = model_server.requests[0].body["messages"][0]["content"]
        assert model_server.requests[-1].body["messages"][0]["content"] == first_prompt  # byte-stable
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_with_the_resume_policy_a_restarted_session_continues_the_open_turn(tmp_path: Path, model_server) -> None:  # type: ignore[no-untyped-def]
    from tests.agent.session_kit import start_kit

    kit = start_kit(tmp_path / "state.db", model_server, recovery="resume")
    try:
        model_server.script([reads("slow", seconds=30), TextReply(content="carried on")], session="r1")
        probe = kit.subscribe("r1")
        kit.start_turn("r1", "read slowly")
        until(probe, ToolStarted)
        kit.session("r1").tell(InjectCrash())
        recovered = until(probe, SessionRecovered)[-1]
        assert recovered.resumed and recovered.settled_calls == 1
        assert until(probe, (TurnCompleted, TurnFailed))[-1].text == "carried on"
        last = model_server.requests[-1].body["messages"]
        assert last[-1]["role"] == "tool" and "outcome unknown" in last[-1]["content"]
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_a_hard_killed_process_loses_nothing_acknowledged_and_recovers_a_valid_transcript(tmp_path: Path, model_server) -> None:  # type: ignore[no-untyped-def]
    import signal
    import subprocess
    import sys

    from actors._groups import reap_orphan_groups
    from tests.agent.session_kit import start_kit

    store = tmp_path / "state.db"
    marker = f"41.{os.getpid()}9"
    up = tmp_path / "up"
    os.mkfifo(up)
    # "up" once the host has recorded the command's group in its ledger (the record is named by the
    # group id, bash's $$): the host prints "running" after it, so the kill never lands between the
    # spawn and the record.
    command = json.dumps({"command": f"until [ -e {tmp_path / 'groups'}/$$ ]; do sleep 0.01; done; echo up > {up}; sleep {marker}"})
    model_server.script([ToolCallsReply(calls=(ScriptedCall(name="terminal", arguments=command),))], session="hard")
    host = subprocess.Popen(
        [sys.executable, "-m", "tests.agent.crash_host", str(store), model_server.base_url, str(up)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == "running"
    finally:
        os.killpg(host.pid, signal.SIGKILL)  # the host's group (its tool's sleep runs in a session of its own and outlives it)
        host.communicate(timeout=DEADLINE)
        orphans = reap_orphan_groups(tmp_path / "groups")  # what a restarted hermes does first: the sleep's group, killed
    assert len(orphans) == 1 and marker in " ".join(orphans[0].argv), orphans  # the tool's group, left running, now killed
    kit = start_kit(store, model_server)
    try:
        probe = kit.subscribe("hard")
        recovered = until(probe, SessionRecovered)[-1]
        assert recovered.settled_calls == 1
        transcript = kit.transcript("hard")
        assert [m.role for m in transcript] == ["user", "assistant", "tool"]
        assert transcript[0].content == "run the slow thing"
        assert transcript[2].content == INTERRUPTED_RESULT  # settled when the runtime started, before any session ran
        assert sanitize(transcript) == (tuple(transcript), 0)
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_a_new_session_freezes_memory_skills_and_context_files_into_its_system_prompt(tmp_path: Path, model_server) -> None:  # type: ignore[no-untyped-def]
    from actors.memory import MemoryStore
    from tests.agent.session_kit import start_kit

    home, workdir = tmp_path / "home", tmp_path / "work"
    workdir.mkdir()
    MemoryStore(home).add("memory", "The user prefers tabs.")
    (workdir / "AGENTS.md").write_text("Run the tests with make test.")
    kit = start_kit(tmp_path / "state.db", model_server, home=home, workdir=workdir)
    try:
        model_server.script([TextReply(content="noted"), TextReply(content="again")], session="m1")
        probe = kit.subscribe("m1")
        kit.start_turn("m1", "hi")
        until(probe, TurnCompleted)
        prompt = model_server.requests[-1].body["messages"][0]["content"]
        assert "The user prefers tabs." in prompt and "make test" in prompt
        MemoryStore(home).add("memory", "A later fact.")  # not in this session's frozen prompt
        kit.start_turn("m1", "hi again")
        until(probe, TurnCompleted)
        assert model_server.requests[-1].body["messages"][0]["content"] == prompt
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_clarify_asks_the_attached_person_and_an_unattended_session_fails_fast(tmp_path: Path, model_server) -> None:  # type: ignore[no-untyped-def]
    from actors.agent import MachineConfig
    from actors.tools import REGISTRY
    from protocols import AnswerClarification, ClarificationRequested
    from tests.agent.session_kit import Intervals, make_tools, start_kit

    tools = {**make_tools(Intervals()), "clarify": REGISTRY.get("clarify").spec()}
    kit = start_kit(tmp_path / "state.db", model_server, tools=tools, config=MachineConfig(traits={n: t.traits for n, t in tools.items()}))
    ask = ToolCallsReply(calls=(ScriptedCall(name="clarify", arguments='{"question": "Which colour?", "choices": ["red", "blue"]}'),))
    try:
        model_server.script([ask, TextReply(content="blue it is")], session="c1")
        probe = kit.subscribe("c1")
        kit.start_turn("c1", "paint it")
        question = until(probe, ClarificationRequested)[-1]
        assert question.question == "Which colour?" and question.choices == ("red", "blue")
        kit.session("c1").tell(AnswerClarification(request_id=question.request_id, answer="blue"))
        until(probe, TurnCompleted)
        assert model_server.requests[-1].body["messages"][-1]["content"] == "blue"
        # Nobody attached: the question is answered at once with "no answer".
        model_server.script([ask, TextReply(content="assumed red")], session="c2")
        watcher = kit.subscribe("c2", observer=True)  # a watcher is not someone who can answer
        kit.start_turn("c2", "paint it")
        assert until(watcher, TurnCompleted)[-1].text == "assumed red"
        tool_result = next(m for m in kit.transcript("c2") if m.role == "tool")
        assert tool_result.content is not None and tool_result.content.startswith("[no answer]")
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_a_session_can_switch_its_model_and_keeps_it_after_rehydration(tmp_path: Path, model_server) -> None:  # type: ignore[no-untyped-def]
    from protocols import ChildExited, SwitchModel
    from tests.agent.session_kit import start_kit

    kit = start_kit(tmp_path / "state.db", model_server, idle_timeout=0.05)
    try:
        events = Probe()
        kit.runtime.subscribe(events.put)
        model_server.script([TextReply(content="a"), TextReply(content="b"), TextReply(content="c")], session="sw")
        probe = kit.subscribe("sw")
        kit.start_turn("sw", "one")
        until(probe, TurnCompleted)
        assert model_server.requests[-1].body["model"] == "test-model"
        kit.session("sw").tell(SwitchModel(model="bigger-model"))
        kit.start_turn("sw", "two")
        until(probe, TurnCompleted)
        assert model_server.requests[-1].body["model"] == "bigger-model"
        events.drain()  # exits before turn two are not the one we wait for
        events.get_matching(lambda e: isinstance(e, ChildExited) and e.path == "/sessions/sw")  # passivated after two
        kit.start_turn("sw", "three")
        until(probe, TurnCompleted)
        assert model_server.requests[-1].body["model"] == "bigger-model"
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_undo_takes_back_the_last_exchange_in_memory_and_in_the_store(agent: AgentKit) -> None:
    from actors.store import StoreReader
    from protocols import ModelSwitched, SwitchModel, TurnUndone, UndoTurn

    server = agent.server
    server.script(
        [
            TextReply(content="first answer"),
            ToolCallsReply(calls=(ScriptedCall(name="read_file", arguments='{"path": "x", "seconds": 0}'),)),
            TextReply(content="second answer"),
            TextReply(content="third answer"),
        ],
        session="u1",
    )
    probe = agent.subscribe("u1")
    agent.start_turn("u1", "one")
    until(probe, TurnCompleted)
    agent.start_turn("u1", "two")
    until(probe, TurnCompleted)
    assert [m.role for m in agent.transcript("u1")] == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    replies = Probe()
    agent.session("u1").tell(UndoTurn(reply_to=replies))
    undone = replies.get(DEADLINE)
    assert isinstance(undone, TurnUndone) and undone.error is None
    assert (undone.removed, undone.text) == (4, "two")
    # Answered after the commit: a fresh reader sees it without a barrier.
    with StoreReader(agent.store_file) as reader:
        assert [m.content for m in reader.load_messages("u1")] == ["one", "first answer"]
        record = reader.get_session("u1")
    assert record is not None and (record.message_count, record.tool_call_count) == (2, 0)
    agent.start_turn("u1", "three")
    until(probe, TurnCompleted)
    sent = [m["content"] for m in server.requests[-1].body["messages"] if m["role"] != "system"]
    assert sent == ["one", "first answer", "three"]  # the model never sees the undone exchange
    agent.session("u1").tell(SwitchModel(model="other-model", reply_to=replies))
    switched = replies.get(DEADLINE)
    assert isinstance(switched, ModelSwitched) and (switched.model, switched.error) == ("other-model", None)
    with StoreReader(agent.store_file) as reader:
        record = reader.get_session("u1")
    assert record is not None and record.model == "other-model"


def test_undo_is_refused_while_a_turn_runs_and_when_there_is_nothing_to_undo(agent: AgentKit) -> None:
    from protocols import CancelTurn, TurnUndone, UndoTurn

    replies = Probe()
    agent.session("u2").tell(UndoTurn(reply_to=replies))
    empty = replies.get(DEADLINE)
    assert isinstance(empty, TurnUndone) and empty.removed == 0 and "nothing to undo" in (empty.error or "")
    agent.server.script([ToolCallsReply(calls=(ScriptedCall(name="read_file", arguments='{"path": "x", "seconds": 30}'),))], session="u2")
    probe = agent.subscribe("u2")
    agent.start_turn("u2", "slow")
    until(probe, ToolStarted)
    agent.session("u2").tell(UndoTurn(reply_to=replies))
    busy = replies.get(DEADLINE)
    assert isinstance(busy, TurnUndone) and busy.removed == 0 and "stop it first" in (busy.error or "")
    agent.session("u2").tell(CancelTurn())
    until(probe, TurnCancelled)
    assert [m.role for m in agent.transcript("u2")] == ["user", "assistant", "tool"]


def test_a_write_the_store_leaves_unanswered_past_the_deadline_restarts_the_session_from_the_store(tmp_path: Path, model_server) -> None:  # type: ignore[no-untyped-def]
    import apsw

    from protocols import ChildRestarted
    from tests.agent.session_kit import start_kit

    # The store's answer can be late (a wedged writer) or lost: here an outside program holds
    # the database's write lock, so the writer waits its 2 s busy timeout, far past the
    # session's acknowledgement deadline.
    kit = start_kit(tmp_path / "state.db", model_server, store_ack_timeout=0.2)
    try:
        events = Probe()
        kit.runtime.subscribe(events.put)
        model_server.script([TextReply(content="first"), TextReply(content="after")], session="wedged")
        probe = kit.subscribe("wedged")
        kit.start_turn("wedged", "one")
        until(probe, TurnCompleted)
        outsider = apsw.Connection(str(kit.store_file))
        outsider.execute("BEGIN EXCLUSIVE")
        try:
            kit.start_turn("wedged", "two")
            failed = until(probe, TurnFailed)[-1]
            assert failed.kind == "restarted"  # the deadline passed: reloaded, not left waiting
            restarted = events.get_matching(lambda e: isinstance(e, ChildRestarted) and e.path == "/sessions/wedged")
            assert restarted.restarts == 1
        finally:
            outsider.execute("ROLLBACK")
            outsider.close()
        kit.start_turn("wedged", "three")
        assert until(probe, TurnCompleted)[-1].text == "after"
        assert [m.content for m in kit.transcript("wedged") if m.role == "user"][-1] == "three"
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_a_passivated_session_nobody_follows_keeps_its_numbering_but_not_its_events(tmp_path: Path, model_server) -> None:  # type: ignore[no-untyped-def]
    from protocols import ChildExited, Unsubscribe
    from tests.agent.session_kit import start_kit

    kit = start_kit(tmp_path / "state.db", model_server, idle_timeout=0.05)
    try:
        events = Probe()
        kit.runtime.subscribe(events.put)
        model_server.script([TextReply(content="answer")], session="quiet")
        probe = kit.subscribe("quiet")
        kit.start_turn("quiet", "question")
        until(probe, TurnCompleted)
        kit.session("quiet").tell(Unsubscribe(subscriber=probe))
        events.get_matching(lambda e: isinstance(e, ChildExited) and e.path == "/sessions/quiet")
        hub = kit.hubs.get("quiet")
        last = hub.last_seq
        assert last > 0 and hub.events_after(0) == []  # the events went with the actor
        late = Probe()
        assert hub.subscribe(late, after_seq=2) == last - 2  # a returning client learns what it missed
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
