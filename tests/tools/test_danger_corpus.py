"""The corpus of real-world commands (``danger_corpus``): each gets the verdict written beside it."""

from __future__ import annotations

import pytest

from actors.tools._danger import check_command

from .danger_corpus import CORPUS, CWD, HARDLINE, HERMES_HOME, HOME, ORDINARY, Expected
from .danger_corpus_dangerous import DANGEROUS


@pytest.mark.parametrize(("command", "expected", "key"), CORPUS, ids=[repr(c)[:60] for c, _, _ in CORPUS])
def test_each_corpus_command_gets_its_verdict_and_key_with_one_line_reasons(command: str, expected: Expected, key: str | None) -> None:
    verdict = check_command(command, home=HOME, cwd=CWD, hermes_home=HERMES_HOME)
    assert verdict.status == expected, verdict
    if key is not None:
        assert key in verdict.keys, verdict
    assert len(verdict.reasons) == len(verdict.keys)
    assert all(reason and "\n" not in reason for reason in verdict.reasons), verdict.reasons


def test_the_corpus_covers_each_class_at_the_size_the_issue_asks() -> None:
    assert len(HARDLINE) >= 120 and len(DANGEROUS) >= 180 and len(ORDINARY) >= 100
    assert len(CORPUS) >= 400
    commands = [command for command, _, _ in CORPUS]
    assert len(set(commands)) == len(commands), "a command is listed twice"
