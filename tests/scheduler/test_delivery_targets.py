"""Where ``deliver: origin`` goes: back to the chat a job was made in, else to its session."""

from __future__ import annotations

import pytest

from actors.platforms.gateway._session_key import session_key
from actors.scheduler._delivery import Target, parse_target, resolve


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        (session_key("telegram", "dm", "42"), "telegram:42"),
        (session_key("telegram", "group", "-1001234", "7"), "telegram:-1001234:7"),
        ("telegram:42", "telegram:42"),
        ("api-session-1", "session api-session-1"),
    ],
)
def test_origin_is_the_chat_of_a_gateway_session_else_the_session(origin: str, expected: str) -> None:
    assert resolve(parse_target("origin"), origin).describe() == expected


def test_a_target_that_is_not_origin_is_kept() -> None:
    target = Target(kind="webhook", url="https://example.org/hook")
    assert resolve(target, session_key("telegram", "dm", "42")) is target
