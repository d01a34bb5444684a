"""Webhook approvals, pure: the decision body, the receiver's book of pending approvals, the
event sent out, and a route's ``max_chars`` in config.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.agent import ConfigError, HubRegistry
from actors.config import HermesConfig
from actors.config._schema import PlatformEntry
from actors.platforms.gateway import load_gateway
from actors.platforms.gateway._webhook_approvals import Pending, approval_event, choice_of
from protocols import ApprovalRequested


def test_a_decision_names_its_choice_and_repeats_the_request_id() -> None:
    assert choice_of({"decision": "approve", "request_id": "c:1"}, "c:1") == ("once", "")
    assert choice_of({"decision": "always", "request_id": "c:1"}, "c:1") == ("always", "")
    assert choice_of({"decision": "deny", "request_id": "c:1"}, "c:1") == ("deny", "")
    assert choice_of({"decision": "yes", "request_id": "c:1"}, "c:1")[1].startswith("'decision' must be one of")
    assert "repeat the request id" in choice_of({"decision": "approve"}, "c:1")[1]
    assert "JSON object" in choice_of(["approve"], "c:1")[1]


def test_the_pending_book_answers_each_request_once_for_its_route_until_it_times_out_or_its_turn_ends() -> None:
    book = Pending()
    book.expect("c:1", "ops", "s-1", until=100.0)
    book.expect("c:2", "ops", "s-1", until=100.0)
    book.expect("c:3", "ops", "s-2", until=100.0)
    book.expect("c:4", "ops", "s-2", until=10.0)
    assert not book.take("c:1", "ci", now=0.0)  # another route's decision
    assert book.take("c:1", "ops", now=0.0) and not book.take("c:1", "ops", now=0.0)  # once
    assert not book.take("c:4", "ops", now=11.0)  # timed out
    book.forget("s-1")
    assert not book.take("c:2", "ops", now=0.0) and book.take("c:3", "ops", now=0.0)


def test_the_approval_event_says_what_and_where_to_answer() -> None:
    request = ApprovalRequested(session_id="s", turn_id="t", request_id="call x:1", call_id="call x", command="rm -rf /w", reasons=("deletes",), timeout_s=60.0)
    event = approval_event("ops", "d-1", "s", request)
    assert event["type"] == "approval" and event["command"] == "rm -rf /w" and event["reasons"] == ["deletes"]
    assert event["decision_path"] == "/webhooks/ops/approvals/call%20x:1"


def test_a_route_max_chars_is_zero_or_room_for_a_piece(tmp_path: Path) -> None:
    def load(max_chars: int) -> object:
        extra = {"routes": {"ops": {"secret": "s", "max_chars": max_chars}}}
        return load_gateway(HermesConfig(platforms={"webhook": PlatformEntry(enabled=True, extra=extra)}), {}, home=tmp_path, hubs=HubRegistry())

    (spec,) = load(500).specs  # type: ignore[attr-defined]
    assert spec.kwargs["routes"]["ops"].max_chars == 500
    with pytest.raises(ConfigError, match=r"routes\.ops\.max_chars is 10; use 0 \(no limit\) or at least 64"):
        load(10)
