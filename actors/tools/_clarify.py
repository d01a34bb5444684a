"""``clarify``: ask the person attached to the session a question (never in parallel)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from actors.agent import ToolContext, ToolOutput, ToolTraits

from ._registry import tool

CLARIFY_TIMEOUT = 600.0


class ClarifyArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    question: Annotated[str, msgspec.Meta(min_length=1, description="One clear question for the user.")]
    choices: Annotated[list[str], msgspec.Meta(max_length=8, description="Optional answers to pick from.")] = []


@tool(
    name="clarify",
    toolset="clarify",
    description="Ask the user a question when the task is ambiguous and you cannot proceed well without the answer.",
    traits=ToolTraits(exclusive=True),
)
async def clarify(context: ToolContext, args: ClarifyArgs) -> ToolOutput:
    clarifier = context.workspace.clarifier
    if clarifier is None:
        return ToolOutput(content="[error] nobody can be asked here; decide yourself and say what you assumed", ok=False)
    answer = await clarifier.ask(turn_id=context.turn_id, call_id=context.call_id, question=args.question, choices=tuple(args.choices), timeout=CLARIFY_TIMEOUT)
    if answer is None:
        return ToolOutput(
            content="[no answer] nobody answered (the session is unattended or the question timed out); decide yourself and say what you assumed", ok=False
        )
    return ToolOutput(content=answer)
