"""Context compression's pure core: prune passes, the plan's boundaries, the request, assembly, the guard."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from actors.agent._compress import (
    DEFAULT_SETTINGS,
    SUMMARY_PREFIX,
    CompressionGuard,
    CompressionPlan,
    CompressionRefused,
    CompressionSettings,
    assemble,
    fit_to_window,
    may_compress,
    needs_compression,
    plan,
    prune,
    record_failure,
    record_pass,
    summary_budget,
)
from actors.agent._sanitize import sanitize
from protocols import ChatMessage, ToolCall


def estimate(message: ChatMessage) -> int:
    return len(message.content or "") // 4 + 4 + sum(len(call.arguments) // 4 for call in message.tool_calls)


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def say(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


def calls(*ids: str, name: str = "read_file", arguments: str = '{"path": "notes.md"}') -> ChatMessage:
    return ChatMessage(role="assistant", content="", tool_calls=tuple(ToolCall(id=i, name=name, arguments=arguments) for i in ids))


def result(call_id: str, text: str, name: str = "read_file") -> ChatMessage:
    return ChatMessage(role="tool", tool_call_id=call_id, name=name, content=text)


SMALL = CompressionSettings(tail_token_budget=80, summary_min_tokens=10, summary_ceiling_tokens=60)
"""Sizes for transcripts of a few thousand characters."""


def check(messages: list[ChatMessage], p: CompressionPlan) -> tuple[ChatMessage, ...]:
    """The invariants every plan keeps; returns the assembled transcript."""
    assert (*p.head, *p.middle, *p.tail) == tuple(messages)
    for part in (p.head, p.middle, p.tail):
        assert sanitize(part) == (part, 0), "a boundary split a call from its results"
    out = assemble(p, "the notes")
    assert sanitize(out) == (out, 0)
    assert out[: len(p.head)] == p.head
    assert out[len(p.head) + 1 :] == p.tail
    summary = out[len(p.head)]
    assert summary.role == p.summary_role
    assert summary.content is not None and summary.content.startswith(SUMMARY_PREFIX) and summary.content.endswith("the notes")
    assert not p.head or p.head[-1].role != summary.role
    assert p.tail[0].role != summary.role
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    assert last_user is None or last_user < len(p.head) or last_user >= len(p.head) + len(p.middle)
    assert p.tokens_after < p.tokens_before == sum(map(estimate, messages))
    return out


def steps(turns: int, *, width: int = 3, size: int = 40) -> list[ChatMessage]:
    """A task, then per turn a parallel call group, its results, a remark and a user follow-up."""
    messages = [user("Refactor the parser module. " * 4)]
    for turn in range(turns):
        ids = [f"t{turn}c{j}" for j in range(width)]
        messages += [
            calls(*ids),
            *(result(i, f"contents of file {i} " * size) for i in ids),
            say(f"Step {turn} done. " * 8),
            user(f"Go on with step {turn + 1}."),
        ]
    return messages


# ---------------------------------------------------------------- boundaries


def test_a_transcript_of_a_few_messages_has_nothing_to_compress() -> None:
    assert plan([user("hi"), say("hello"), user("how are you?"), say("fine")], estimate=estimate) is None
    assert plan([], estimate=estimate) is None
    # Enough messages, but the middle is no bigger than the summary's minimum budget.
    assert plan([user("a"), say("b"), user("c"), say("d"), user("e"), say("f"), user("g"), say("h")], estimate=estimate, settings=SMALL) is None


def test_no_head_or_tail_boundary_ever_splits_a_parallel_call_group_from_its_results() -> None:
    messages = steps(5)
    total = sum(map(estimate, messages))
    heads_moved: set[int] = set()
    tail_starts: set[int] = set()
    for first in range(len(messages)):
        for budget in range(0, total, 25):
            settings = CompressionSettings(
                protect_first_n=first, tail_token_budget=budget, tail_min_messages=1, summary_min_tokens=10, summary_ceiling_tokens=40
            )
            p = plan(messages, estimate=estimate, settings=settings)
            if p is None:
                continue
            check(messages, p)
            if len(p.head) != first:
                heads_moved.add(first)
            tail_starts.add(len(p.head) + len(p.middle))
    # Every call group was cut by the head's count and by the tail's budget at some point.
    groups = [i for i, m in enumerate(messages) if m.tool_calls]
    assert {g + k for g in groups for k in (1, 2, 3)} <= heads_moved
    assert all(g in tail_starts or g + 4 in tail_starts for g in groups[1:])


def test_the_head_takes_the_whole_call_group_its_count_lands_in() -> None:
    messages = steps(4)
    p = plan(messages, estimate=estimate, settings=CompressionSettings(protect_first_n=2, tail_token_budget=80, summary_min_tokens=10))
    assert p is not None
    assert [m.role for m in p.head] == ["user", "assistant", "tool", "tool", "tool"]
    check(messages, p)


def test_the_last_user_message_is_kept_even_when_deep_in_the_tail() -> None:
    messages = [user("task " * 100), say("plan " * 100), user("more " * 100), say("ok " * 100), user("details " * 100), say("sure " * 100)]
    last = user("Now run the whole test suite and fix every failure.")
    messages.append(last)
    for n in range(8):
        messages += [calls(f"r{n}", name="terminal", arguments='{"command": "pytest"}'), result(f"r{n}", "FAILED test_x " * 200, name="terminal")]
    messages.append(say("All green."))
    p = plan(messages, estimate=estimate, settings=SMALL)
    assert p is not None
    assert p.tail[0] == last
    assert len(p.tail) == 18 and len(p.middle) == 3
    check(messages, p)


def test_a_group_cut_by_the_tail_is_kept_whole_within_the_soft_limit_and_left_out_beyond_it() -> None:
    def messages(size: int) -> list[ChatMessage]:
        return [*steps(2), calls("x1", "x2"), result("x1", "y" * size), result("x2", "small"), user("Summarise what you found."), say("Here it is.")]

    # The last three messages cost 21 tokens; the next one back breaks the budget of 40.
    settings = CompressionSettings(tail_token_budget=40, tail_min_messages=3, summary_min_tokens=10, summary_ceiling_tokens=40)
    fits = messages(64)  # with the 34 tokens of the whole group the tail costs 55, within 1.5 budgets
    p = plan(fits, estimate=estimate, settings=settings)
    assert p is not None and p.tail[0].tool_calls and p.tail[0].tool_calls[0].id == "x1"
    check(fits, p)
    huge = messages(1_600)  # it does not: the tail starts after its results
    p = plan(huge, estimate=estimate, settings=settings)
    assert p is not None and p.tail[0].content == "Summarise what you found."
    check(huge, p)


def test_the_tail_holds_at_least_three_messages_however_big() -> None:
    messages = [*steps(3), user("x" * 40_000), say("y" * 40_000), user("z" * 40_000)]
    p = plan(messages, estimate=estimate, settings=SMALL)
    assert p is not None and len(p.tail) == 3
    check(messages, p)


def test_the_summary_role_never_repeats_a_neighbours_and_the_tail_grows_when_no_role_fits() -> None:
    chat = [user("u0 " * 50), say("a0 " * 50), user("u1 " * 50), say("a1 " * 50), user("u2 " * 50), say("a2 " * 50), user("u3"), say("a3")]
    # The head ends with a user message and the budgeted tail [a2, u3, a3] starts with an assistant one:
    # neither role fits between them, so the tail takes u2 and the summary speaks as the assistant.
    p = plan(chat, estimate=estimate, settings=CompressionSettings(tail_token_budget=10, summary_min_tokens=10))
    assert p is not None
    assert p.summary_role == "assistant" and p.tail[0].content == "u2 " * 50
    check(chat, p)
    # One long tool loop after the head's user message, then an assistant message opens the tail: the
    # tail cannot take a user message from the middle, so the head takes the first call group.
    loop = [user("task"), say("ok"), user("now do it")]
    for n in range(6):
        loop += [calls(f"l{n}"), result(f"l{n}", "out " * 100)]
    loop += [say("done"), user("thanks"), say("bye")]
    p = plan(loop, estimate=estimate, settings=CompressionSettings(tail_token_budget=5, summary_min_tokens=10))
    assert p is not None
    assert [m.role for m in p.head] == ["user", "assistant", "user", "assistant", "tool"] and p.summary_role == "user" and len(p.middle) == 10
    check(loop, p)
    # A head ending in tool results and a tail starting with a user message: the summary is the assistant's.
    tools = [user("go"), calls("a"), result("a", "r"), say("x " * 200), user("next " * 100), say("y " * 200), user("last")]
    p = plan(tools, estimate=estimate, settings=CompressionSettings(tail_token_budget=5, tail_min_messages=1, summary_min_tokens=10))
    assert p is not None and p.head[-1].role == "tool" and p.tail[0].role == "user" and p.summary_role == "assistant"
    check(tools, p)
    # No head at all: the summary opens the conversation as a user message, so the tail takes "y".
    bare = [user("go " * 100), say("x " * 200), user("next " * 100), say("y"), user("last")]
    p = plan(bare, estimate=estimate, settings=CompressionSettings(protect_first_n=0, tail_token_budget=5, tail_min_messages=1, summary_min_tokens=10))
    assert p is not None and p.head == () and p.summary_role == "user" and p.tail[0].content == "y"
    check(bare, p)


def test_an_unpaired_transcript_is_repaired_before_planning() -> None:
    messages = [*steps(3), result("orphan", "stray")]
    messages.insert(4, result("t0c0", "a duplicate result"))
    p = plan(messages, estimate=estimate, settings=SMALL)
    assert p is not None
    check(list(sanitize(messages)[0]), p)


# ---------------------------------------------------------------- the summary request


def test_the_request_asks_for_the_structured_template_over_the_serialized_middle_within_budget() -> None:
    messages = steps(6)
    p = plan(messages, estimate=estimate, settings=SMALL)
    assert p is not None
    system, turns = p.request
    assert system.role == "system" and turns.role == "user"
    assert system.content is not None and turns.content is not None
    for section in ("## Goal", "## Current task", "## Progress", "## Decisions", "## Files and commands", "## Open questions", "## Next steps"):
        assert section in system.content
    assert f"about {p.summary_budget} tokens" in system.content
    assert "earlier compaction" not in system.content
    assert "[calls read_file, call t1c0]" in turns.content and "contents of file t1c0" in turns.content
    assert "[result of read_file, call t1c2]" in turns.content
    assert "Refactor the parser" not in turns.content  # the head is kept, not summarised
    assert p.tail[-1].content is not None and p.tail[-1].content not in turns.content


def test_huge_messages_are_clipped_in_the_request_keeping_their_start_and_end() -> None:
    blob = "BEGIN " + "m" * 50_000 + " END"
    messages = [
        user("a"),
        say("b"),
        user("c"),
        say("thinking"),
        calls("big"),
        result("big", blob),
        user("go on"),
        say("done"),
        user("next"),
        say("ok"),
        user("last"),
    ]
    p = plan(messages, estimate=estimate, settings=SMALL)
    assert p is not None and p.request[1].content is not None
    assert "BEGIN" in p.request[1].content and "END" in p.request[1].content
    assert len(p.request[1].content) < 5_000
    assert "chars left out" in p.request[1].content


def test_an_earlier_summary_is_updated_rather_than_summarised_again() -> None:
    p = plan(steps(6), estimate=estimate, settings=SMALL, previous_summary="## Goal\nShip the parser rewrite.")
    assert p is not None
    system, turns = p.request
    assert system.content is not None and "Do not summarise those notes" in system.content
    assert turns.content is not None and turns.content.startswith("Notes from the earlier compaction:\n\n## Goal\nShip the parser rewrite.")
    assert "Turns since then:" in turns.content


def test_a_second_pass_finds_the_first_summary_in_the_middle_and_sends_it_once_as_the_notes() -> None:
    first = plan(steps(6), estimate=estimate, settings=SMALL)
    assert first is not None
    compacted = [*assemble(first, "## Goal\nNOTES ONE"), *steps(6)[1:]]
    second = plan(compacted, estimate=estimate, settings=SMALL)
    assert second is not None and any(m.content and m.content.startswith(SUMMARY_PREFIX) for m in second.middle)
    turns = second.request[1].content
    assert turns is not None
    assert turns.count("NOTES ONE") == 1 and SUMMARY_PREFIX not in turns
    assert turns.startswith("Notes from the earlier compaction:\n\n## Goal\nNOTES ONE")
    check(compacted, second)


def test_a_focus_topic_is_put_in_the_instructions() -> None:
    p = plan(steps(6), estimate=estimate, settings=SMALL, focus="  the database migration  ")
    assert p is not None and p.request[0].content is not None
    assert "kept in full detail: the database migration\n" in p.request[0].content
    unfocused = plan(steps(6), estimate=estimate, settings=SMALL)
    assert unfocused is not None and unfocused.request[0].content is not None and "full detail" not in unfocused.request[0].content


def test_the_summary_budget_is_a_fifth_of_the_middle_between_two_thousand_and_twelve_thousand() -> None:
    assert summary_budget(1_000) == 2_000
    assert summary_budget(30_000) == 6_000
    assert summary_budget(500_000) == 12_000
    small = fit_to_window(DEFAULT_SETTINGS, 4_096)
    assert (small.tail_token_budget, small.summary_ceiling_tokens, small.summary_min_tokens) == (819, 409, 409)
    assert summary_budget(100, small) == 409
    big = fit_to_window(DEFAULT_SETTINGS, 200_000)
    assert (big.tail_token_budget, big.summary_ceiling_tokens, big.summary_min_tokens) == (20_000, 12_000, 2_000)


def test_settings_default_to_hermes_values() -> None:
    s = DEFAULT_SETTINGS
    assert (s.threshold, s.protect_first_n, s.tail_token_budget, s.tail_min_messages, s.tail_soft_limit, s.max_passes) == (0.50, 3, 20_000, 3, 1.5, 3)
    assert (s.summary_min_tokens, s.summary_ratio, s.summary_ceiling_tokens) == (2_000, 0.20, 12_000)
    assert (s.min_saving, s.thrash_passes, s.transient_cooldown, s.unavailable_cooldown) == (0.10, 2, 60.0, 600.0)
    assert needs_compression(64_000, 128_000) and not needs_compression(63_999, 128_000)


def test_assemble_frames_the_summary_once_even_when_the_summariser_echoes_the_frame() -> None:
    p = plan(steps(6), estimate=estimate, settings=SMALL)
    assert p is not None
    out = assemble(p, f"  {SUMMARY_PREFIX}\n\n## Goal\nx  ")
    assert out[len(p.head)].content == f"{SUMMARY_PREFIX}\n\n## Goal\nx"
    assert assemble(p, " ")[len(p.head)].content == f"{SUMMARY_PREFIX}\n\n(the summary came back empty)"


# ---------------------------------------------------------------- prune


def test_prune_points_older_duplicate_results_at_the_newest_copy() -> None:
    same = "identical directory listing\n" * 20
    messages = [user("go"), calls("c1", name="ls"), result("c1", same, "ls"), say("hm"), calls("c2", name="ls"), result("c2", same, "ls"), say("same again")]
    pruned = prune(messages, estimate=estimate, settings=SMALL)
    assert pruned.deduplicated == 1 and pruned.stubbed == 0
    assert pruned.messages[2].content == "[pruned] identical to the later result of call c2"
    assert pruned.messages[2].tool_call_id == "c1"
    assert pruned.messages[3:] == tuple(messages[3:])
    # Short duplicates are cheaper than a pointer and stay.
    short = [user("go"), calls("a"), result("a", "ok"), calls("b"), result("b", "ok"), say("done")]
    assert prune(short, estimate=estimate, settings=SMALL).messages == tuple(short)


def test_prune_turns_long_old_results_into_one_line_naming_the_call() -> None:
    text = "line one of the file\n" + "more text\n" * 300
    messages = [user("read it"), calls("r1", arguments='{"path": "src/parser.py"}'), result("r1", text), *steps(1)]
    pruned = prune(messages, estimate=estimate, settings=SMALL)
    stub = pruned.messages[2].content
    assert stub is not None and "\n" not in stub and len(stub) <= 200
    assert stub.startswith('[pruned] read_file({"path": "src/parser.py"}) returned 3,021 chars in 302 lines, starting: line one of the file more text')
    assert pruned.stubbed >= 1
    assert pruned.saved_tokens == sum(map(estimate, messages)) - sum(map(estimate, pruned.messages))


def test_prune_truncates_huge_arguments_to_valid_json_and_keeps_the_pairing() -> None:
    huge = json.dumps({"path": "out.txt", "content": "z" * 20_000})
    messages = [user("write"), calls("w1", name="write_file", arguments=huge), result("w1", "written"), *steps(1)]
    pruned = prune(messages, estimate=estimate, settings=SMALL)
    call = pruned.messages[1].tool_calls[0]
    assert pruned.truncated == 1 and call.id == "w1" and call.name == "write_file"
    assert json.loads(call.arguments) == {"truncated": huge[:200], "original_chars": len(huge)}
    assert sanitize(pruned.messages) == (pruned.messages, 0)


def test_prune_never_changes_the_protected_tail_and_a_second_prune_changes_nothing() -> None:
    big = "x" * 2_000
    tail = [calls("t1", arguments=json.dumps({"data": "y" * 5_000})), result("t1", big), user("and?")]
    messages = [*steps(3, size=200), calls("d1"), result("d1", big), *tail]
    settings = CompressionSettings(tail_token_budget=1_800)  # the three tail messages cost 1,766
    pruned = prune(messages, estimate=estimate, settings=settings)
    assert pruned.messages[-3:] == tuple(tail)
    assert (pruned.deduplicated, pruned.stubbed, pruned.truncated) == (1, 9, 0) and pruned.saved_tokens > 0
    assert sanitize(pruned.messages) == (pruned.messages, 0)
    again = prune(pruned.messages, estimate=estimate, settings=settings)
    assert again.messages == pruned.messages and again.saved_tokens == 0


# ---------------------------------------------------------------- the guard


def test_two_weak_passes_in_a_row_pause_compression_until_a_forced_pass_saves_enough() -> None:
    guard = CompressionGuard()
    assert may_compress(guard, 0.0) is True
    guard = record_pass(guard, tokens_before=10_000, tokens_after=9_500)
    assert may_compress(guard, 0.0) is True
    guard = record_pass(guard, tokens_before=9_500, tokens_after=9_000)
    refused = may_compress(guard, 0.0)
    assert isinstance(refused, CompressionRefused) and refused.reason == "thrashing" and not refused
    assert "paused" in refused.describe()
    assert may_compress(guard, 0.0, forced=True) is True
    guard = record_pass(guard, tokens_before=9_000, tokens_after=4_000)
    assert guard == CompressionGuard() and may_compress(guard, 0.0) is True
    # A good pass between two weak ones resets the count.
    guard = record_pass(
        record_pass(record_pass(guard, tokens_before=100, tokens_after=95), tokens_before=100, tokens_after=50), tokens_before=100, tokens_after=95
    )
    assert may_compress(guard, 0.0) is True


def test_a_failed_summary_cools_down_sixty_seconds_then_six_hundred() -> None:
    guard = record_failure(CompressionGuard(), 1_000.0)
    assert may_compress(guard, 1_059.9) == CompressionRefused(reason="cooling_down", until=1_060.0)
    assert may_compress(guard, 1_060.0) is True
    guard = record_failure(guard, 1_060.0)
    assert guard.cooldown_until == 1_660.0 and not may_compress(guard, 1_659.0)
    assert may_compress(guard, 1_100.0, forced=True) is True
    assert record_pass(guard, tokens_before=100, tokens_after=10) == CompressionGuard()
    # No summary model to ask at all: the long cooldown at once.
    assert record_failure(CompressionGuard(), 5.0, unavailable=True).cooldown_until == 605.0


# ---------------------------------------------------------------- property


@st.composite
def transcripts(draw: st.DrawFn) -> list[ChatMessage]:
    """Well-formed transcripts: user and assistant messages and parallel call groups, any sizes."""
    units = draw(st.lists(st.tuples(st.sampled_from(["user", "assistant", "calls"]), st.integers(1, 4), st.integers(0, 800)), max_size=40))
    messages: list[ChatMessage] = []
    for n, (kind, width, size) in enumerate(units):
        if kind == "user":
            messages.append(user(f"u{n} " + "u" * size))
        elif kind == "assistant":
            messages.append(say(f"a{n} " + "a" * size))
        else:
            ids = [f"c{n}_{j}" for j in range(width)]
            messages += [calls(*ids, arguments="{" + "x" * (size // 3) + "}"), *(result(i, "r" * (size * j)) for j, i in enumerate(ids))]
    return messages


SETTINGS = st.builds(
    lambda first, budget, least, floor: CompressionSettings(
        protect_first_n=first, tail_token_budget=budget, tail_min_messages=least, summary_min_tokens=floor, summary_ceiling_tokens=floor * 3
    ),
    st.integers(0, 6),
    st.integers(0, 600),
    st.integers(0, 4),
    st.integers(1, 80),
)


@given(transcripts(), SETTINGS, st.sampled_from([None, "tests"]), st.sampled_from([None, "## Goal\nearlier"]))
def test_any_plan_assembles_into_a_sanitizer_clean_transcript_keeping_head_and_tail_verbatim(
    messages: list[ChatMessage], settings: CompressionSettings, focus: str | None, previous: str | None
) -> None:
    p = plan(messages, estimate=estimate, settings=settings, focus=focus, previous_summary=previous)
    if p is not None:
        check(messages, p)
        assert p.request[1].content is not None and (previous is None or previous in p.request[1].content)
    pruned = prune(messages, estimate=estimate, settings=settings)
    assert len(pruned.messages) == len(messages) and sanitize(pruned.messages) == (pruned.messages, 0)
    assert [(m.role, m.tool_call_id) for m in pruned.messages] == [(m.role, m.tool_call_id) for m in messages]
