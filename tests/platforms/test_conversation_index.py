"""The conversation index: a chat history continues a session only when it is exactly what that session showed."""

from __future__ import annotations

from actors.platforms._conversations import Chain, ConversationIndex
from protocols import ChatMessage, ToolCall

HI = ChatMessage(role="user", content="hi")
HELLO = ChatMessage(role="assistant", content="hello")


def test_a_first_message_always_starts_a_new_session() -> None:
    index = ConversationIndex()
    index.advance("s1", Chain("key", None).after(HI, HELLO))
    assert index.take(Chain("key", None)) == (None, None)


def test_the_exact_history_continues_once_and_a_second_taker_branches() -> None:
    index = ConversationIndex()
    index.advance("s1", Chain("key", None).after(HI, HELLO))
    history = Chain("key", None).extend([HI, HELLO])
    assert index.take(history) == ("s1", None)
    assert index.take(Chain("key", None).extend([HI, HELLO])) == (None, "s1")  # taken until its turn completes


def test_another_api_key_or_system_prompt_never_finds_the_session() -> None:
    index = ConversationIndex()
    index.advance("s1", Chain("key-a", "be brief").after(HI, HELLO))
    assert index.take(Chain("key-b", "be brief").extend([HI, HELLO])) == (None, None)
    assert index.take(Chain("key-a", "be long").extend([HI, HELLO])) == (None, None)


def test_an_older_state_of_a_session_is_a_branch_point_not_a_continuation() -> None:
    index = ConversationIndex()
    first = Chain("k", None).after(HI, HELLO)
    index.advance("s1", first)
    later = Chain("k", None).extend([HI, HELLO]).after(ChatMessage(role="user", content="more"), ChatMessage(role="assistant", content="ok"))
    index.advance("s1", later)
    assert index.take(Chain("k", None).extend([HI, HELLO])) == (None, "s1")


def test_client_tool_calls_are_part_of_what_was_shown() -> None:
    index = ConversationIndex()
    call = ToolCall(id="c1", name="lookup", arguments="{}")
    index.advance("s1", Chain("k", None).after(HI, ChatMessage(role="assistant", content=None, tool_calls=(call,))))
    echoed = ChatMessage(role="assistant", content="", tool_calls=(call,))  # a client echoes null content as ""
    assert index.take(Chain("k", None).extend([HI, echoed])) == ("s1", None)


def test_old_keys_are_forgotten_beyond_the_bound_and_deleted_sessions_are_forgotten() -> None:
    index = ConversationIndex(max_keys=2)
    for n in range(3):
        index.advance(f"s{n}", Chain("k", None).after(ChatMessage(role="user", content=str(n)), HELLO))
    assert len(index) == 2
    assert index.take(Chain("k", None).extend([ChatMessage(role="user", content="0"), HELLO])) == (None, None)
    index.forget("s2")
    assert index.take(Chain("k", None).extend([ChatMessage(role="user", content="2"), HELLO])) == (None, None)
