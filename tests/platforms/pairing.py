"""Checks that tool calls and their results stay paired, in what a session stores and what a model is sent."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

CALL_MARK = re.compile(r"^\[calls [^,\]]+, call ([^\]]+)\] ", re.MULTILINE)
RESULT_MARK = re.compile(r"^\[result of [^,\]]+, call ([^\]]+)\]$", re.MULTILINE)
"""How the summary request writes a call and a result (``_compress._serialize``)."""


def pairing_problems(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """What breaks the rule "every tool call is followed by exactly one result, and every result
    follows its call" in OpenAI-shaped ``messages`` (empty: none)."""
    problems: list[str] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        calls = [c["id"] for c in message.get("tool_calls") or ()]
        if message.get("role") == "tool":
            problems.append(f"message {i}: a result of call {message.get('tool_call_id')} without its call just before")
            i += 1
            continue
        i += 1
        results: list[str] = []
        while i < len(messages) and messages[i].get("role") == "tool":
            results.append(str(messages[i].get("tool_call_id")))
            i += 1
        if sorted(results) != sorted(calls):
            problems.append(f"message before {i}: calls {calls} answered by results {results}")
    return problems


def summary_request_problems(body: Mapping[str, Any]) -> list[str]:
    """A summary request's split pairs: a call written without its result, or a result without its call."""
    text = "\n".join(str(m.get("content") or "") for m in body["messages"])
    calls, results = CALL_MARK.findall(text), RESULT_MARK.findall(text)
    problems = [f"call {c} without its result" for c in calls if results.count(c) != 1]
    problems += [f"result of call {r} without its call" for r in results if calls.count(r) != 1]
    return problems
