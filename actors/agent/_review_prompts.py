"""What a background review session is asked (the user message of its one turn); pure.

Written from the facts of Hermes's review prompts: a memory review looks for what the user
revealed about themselves and how they want the agent to work; a skill review looks for a
non-trivial approach found by trial and error, to update an existing skill or save a new
reusable one; a combined review does both. Nothing worth keeping: say so and stop.
"""

from __future__ import annotations

from ._nudges import ReviewKind

_MEMORY = (
    "Look back over the conversation above and decide whether anything belongs in memory.\n"
    "Look for two things:\n"
    "1. What the user told you about themselves: who they are, what they want, their preferences and personal details worth keeping.\n"
    "2. What the user expects of you: how you should behave, how they like to work, the way they want things done.\n"
    "If something qualifies, save it with the memory tool (facts about the user go to the 'user' target, your own notes to 'memory').\n"
)
_SKILLS = (
    "Look back over the conversation above and decide whether a skill should be saved or updated.\n"
    "Look for a non-trivial way of getting the task done that took trial and error, or a change of course "
    "prompted by what you found along the way.\n"
    "If a skill for it already exists (skills_list, skill_view), update it with what you learned; "
    "otherwise, if the approach would help again, create a new skill with skill_manage.\n"
)
_END = "If nothing is worth keeping, answer 'Nothing to save.' and stop. Do not answer the user: this review is not part of their conversation.\n"


def review_prompt(kind: ReviewKind) -> str:
    """The review turn's message for a memory, skill or combined review."""
    if kind == "memory":
        return _MEMORY + _END
    if kind == "skills":
        return _SKILLS + _END
    return "This review has two parts.\n\n" + _MEMORY + "\n" + _SKILLS + "\n" + _END
