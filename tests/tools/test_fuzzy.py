"""The fuzzy find-and-replace chain, as pure functions of strings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.tools._escapes import escape_difference, real_controls, unescape
from actors.tools._fold import fold, line_keys
from actors.tools._fuzzy import STRATEGIES, Text, find
from actors.tools._reindent import fits_file, reindent
from actors.tools._replace import PatchRefused, fuzzy_replace

TOTAL = "def total(items):\n    s = 0\n    for i in items:\n        s += i.price\n    return s\n"
SUM = "def total(items):\n    return sum(i.price for i in items)"

# strategy -> (file content, old_string, new_string, expected content afterwards).
# In each case every strategy before the named one finds nothing.
FIRST_MATCHES = {
    "exact": ("a = 1\nb = 2\n", "b = 2", "b = 3", "a = 1\nb = 3\n"),
    "line_trimmed": (
        "def f():\n    x = 1   \n    return x\n",
        "def f():\n    x = 1\n    return x",
        "def f():\n    x = 2\n    return x",
        "def f():\n    x = 2\n    return x\n",
    ),
    "whitespace_normalized": ("total = price  *  count\n", "total = price * count", "total = price * qty", "total = price * qty\n"),
    "indentation_flexible": (
        "class A:\n    def f(self):\n        return 1\n",
        "def f(self):\n    return 1",
        "def f(self):\n    return 2",
        "class A:\n    def f(self):\n        return 2\n",
    ),
    "escape_normalized": ('print("hi")\nx = 1\n', 'print(\\"hi\\")', 'print(\\"bye\\")', 'print("bye")\nx = 1\n'),
    "trimmed_boundary": ("a = 1\nfoo()\nb = 2\n", "\n\nfoo()\n\n", "\n\nbar()\n\n", "a = 1\nbar()\nb = 2\n"),
    "unicode_normalized": ("msg = \u201chello\u201d \u2013 world\n", 'msg = "hello" - world', 'msg = "bye" - world', 'msg = "bye" - world\n'),
    "block_anchor": (TOTAL, TOTAL.replace("i.price", "i.cost").rstrip("\n"), SUM, SUM + "\n"),
    "context_aware": (TOTAL, TOTAL.replace("total(items)", "total(things)").rstrip("\n"), SUM, SUM + "\n"),
}


def test_the_chain_has_nine_strategies_in_the_documented_order() -> None:
    assert tuple(FIRST_MATCHES) == STRATEGIES


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_strategy_is_the_first_to_match_its_own_kind_of_drift(strategy: str) -> None:
    content, old, new, expected = FIRST_MATCHES[strategy]
    earlier = STRATEGIES[: STRATEGIES.index(strategy)]
    assert find(Text(content), old, new, strategies=earlier) is None, "a stricter strategy matched first"
    patched = fuzzy_replace(content, old, new)
    assert (patched.strategy, patched.text) == (strategy, expected)


def test_several_matches_are_refused_with_their_lines_unless_replace_all() -> None:
    content = "x = 1\ny = 2\nx = 1\n"
    with pytest.raises(PatchRefused) as refused:
        fuzzy_replace(content, "x = 1", "x = 9")
    message = str(refused.value)
    assert message.startswith("Found 2 matches for old_string (at lines 1, 3; strategy exact)")
    assert "add surrounding lines to make it unique, or set replace_all" in message
    patched = fuzzy_replace(content, "x = 1", "x = 9", replace_all=True)
    assert patched.text == "x = 9\ny = 2\nx = 9\n" and patched.lines == (1, 3)


def test_ambiguity_is_judged_by_the_strategy_that_matched_not_by_exact_alone() -> None:
    content = "x = 1  \ny\nx = 1   \ny\n"
    with pytest.raises(PatchRefused, match=r"Found 2 matches for old_string \(at lines 1, 3; strategy line_trimmed\)"):
        fuzzy_replace(content, "x = 1\ny", "x = 2\ny")
    assert fuzzy_replace(content, "x = 1\ny", "x = 2\ny", replace_all=True).text == "x = 2\ny\nx = 2\ny\n"


def test_identical_and_empty_old_strings_are_refused() -> None:
    with pytest.raises(PatchRefused, match="identical"):
        fuzzy_replace("a\n", "a", "a")
    with pytest.raises(PatchRefused, match="old_string is empty"):
        fuzzy_replace("a\n", "", "b")


def test_whitespace_only_old_string_is_matched_exactly_or_not_at_all() -> None:
    with pytest.raises(PatchRefused, match="not found"):
        fuzzy_replace("a\tb\n", "   ", "_")
    assert fuzzy_replace("a   b\n", "   ", " ").text == "a b\n"


def test_not_found_names_every_strategy_and_points_at_the_most_similar_lines() -> None:
    content = "".join(f"line {i}\n" for i in range(40)) + TOTAL
    old = "def total(stuff):\n    t = 0\n    for x in stuff:\n        t += x.cost\n    return t"
    with pytest.raises(PatchRefused) as refused:
        fuzzy_replace(content, old, "pass")
    message = str(refused.value)
    assert "tried: " + ", ".join(STRATEGIES) in message
    assert "most similar text is at lines 41-45" in message and "    41|def total(items):" in message


def test_escape_drift_is_undone_when_the_model_escaped_both_strings() -> None:
    content = "lines = [\n    'a',\n]\nsep = ','\n"
    old = "lines = [\\n    'a',\\n]"
    patched = fuzzy_replace(content, old, "lines = [\\n    'a',\\n    'b',\\n]")
    assert patched.strategy == "escape_normalized"
    assert patched.text == "lines = [\n    'a',\n    'b',\n]\nsep = ','\n"


def test_real_newlines_for_escapes_in_the_file_are_written_back_as_escapes() -> None:
    content = 'msg = "one\\ntwo"\n'
    patched = fuzzy_replace(content, 'msg = "one\ntwo"', 'msg = "one\nthree"')
    assert patched.strategy == "escape_normalized"
    assert patched.text == 'msg = "one\\nthree"\n'


def test_a_loose_match_may_not_introduce_escape_sequences_the_file_never_had() -> None:
    content = "def f():\n    x = 1   \n    return x\n"
    old = "def f():\n    x = 1\n    return x"
    with pytest.raises(PatchRefused, match=r"strategy line_trimmed\): this looks like escape drift"):
        fuzzy_replace(content, old, 'def f():\n    x = "a\\nb"\n    return x')
    with pytest.raises(PatchRefused, match=r"escape drift"):
        fuzzy_replace(content, old, "def f():\n    x = 'it\\'s'\n    return x")


def test_escape_sequences_are_allowed_where_the_file_or_old_string_already_has_them() -> None:
    exact = fuzzy_replace("x = 1\n", "x = 1", 'x = "a\\nb"')
    assert exact.text == 'x = "a\\nb"\n'  # an exact match is trusted
    has_one = 'a = "p\\nq"\nb = 2   \nc = 3\n'
    assert fuzzy_replace(has_one, "b = 2\nc = 3", 'b = "r\\ns"\nc = 3').strategy == "line_trimmed"
    had = 'x = "a\\tb"   \ny = 1\n'
    with pytest.raises(PatchRefused, match="escape drift"):
        fuzzy_replace(had, 'x = "a\\tb"\ny = 1', 'x = "a\\nb"\ny = 1')  # \n: neither file nor old_string has it
    assert fuzzy_replace(had, 'x = "a\\tb"\ny = 1', 'x = "a\\tc"\ny = 1').text == 'x = "a\\tc"\ny = 1\n'


def test_reindent_moves_new_lines_by_the_shift_between_old_string_and_the_file() -> None:
    assert reindent("if x:\n    y()\n\nz()", ["if x:", "    y()"], ["        if x:", "            y()"]) == "        if x:\n            y()\n\n        z()"
    assert reindent("a\n    b", ["    a"], ["    a"]) == "a\n    b"


def test_reindent_maps_a_different_indentation_unit_and_extrapolates_deeper_levels() -> None:
    old = ["if x:", "  y()"]
    found = ["    if x:", "        y()"]
    assert reindent("if x:\n  y()\n  if z:\n    w()", old, found) == "    if x:\n        y()\n        if z:\n            w()"
    tabs = ["if x:", "\ty()"]
    assert reindent("if x:\n    y()", ["if x:", "    y()"], tabs) == "if x:\n\ty()"
    conflicting = reindent("a\n  b", ["a", "  b", "  c"], ["  a", "    b", "  c"])
    assert conflicting == "  a\n    b"  # "  " maps to two indentations: only the common shift ("" -> "  ") applies


def test_unescape_handles_the_sequences_a_serializer_adds() -> None:
    assert unescape("a\\nb\\tc\\\"d\\'e\\\\f") == "a\nb\tc\"d'e\\f"


def test_line_strategies_keep_the_trailing_newline_rule_of_old_string() -> None:
    content = "a = 1   \nb = 2\n"
    assert fuzzy_replace(content, "a = 1\n", "a = 9\n").text == "a = 9\nb = 2\n"
    assert fuzzy_replace(content, "a = 1 \nb = 2", "c = 3").text == "c = 3\n"


def test_block_anchor_refuses_a_middle_that_is_too_different() -> None:
    old = "def total(items):\n    completely = different()\n    nothing = alike()\n    return s"
    with pytest.raises(PatchRefused, match="not found"):
        fuzzy_replace(TOTAL, old, SUM)


def test_crowded_lookalike_blocks_are_ambiguous_for_the_loosest_strategies() -> None:
    block = "def f():\n    a = 1\n    b = 2\n    return a\n"
    content = block + "\n" + block
    with pytest.raises(PatchRefused, match="Found 2 matches .*block_anchor"):
        fuzzy_replace(content, "def f():\n    a = 1\n    b = 3\n    return a", "pass")


def test_folding_maps_every_span_back_to_the_original_and_refuses_half_an_expanded_character() -> None:
    original = "a \u2014 b\u2026 \u201cc\u201d"
    folded = fold(original)
    assert folded.text == 'a -- b... "c"'
    at = folded.text.index('"c"')
    assert folded.original(at, at + 3) == (original.index("\u201c"), len(original))
    assert folded.original(0, 4) == (0, 3)  # "a --" is "a \u2014"
    assert folded.original(0, 3) is None  # "a -" is half the em dash
    assert fold(original, "-").text == 'a - b... "c"'


def test_line_keys_fold_look_alikes_and_dash_runs_so_both_spellings_agree() -> None:
    assert line_keys("  x = \u2018a\u2019 \u2014 b  \nnext") == ["x = 'a' - b", "next"]
    assert line_keys("x = 'a' -- b") == line_keys("x = 'a' - b") == ["x = 'a' - b"]


def test_unicode_normalized_combines_with_trailing_whitespace_and_indentation() -> None:
    content = "class A:\n    def f(self):\n        return \u2018x\u2019   \n"
    patched = fuzzy_replace(content, "def f(self):\n    return 'x'", "def f(self):\n    return 'y'")
    assert (patched.strategy, patched.text) == ("unicode_normalized", "class A:\n    def f(self):\n        return 'y'\n")


def test_the_similarity_strategies_see_typographic_lines_as_ascii() -> None:
    content = "def f():\n    a = \u201cx\u201d\n    b = 2\n    return \u2018done\u2019\n"
    patched = fuzzy_replace(content, "def f():\n    a = \"x\"\n    b = 3\n    return 'done'", "pass")
    assert (patched.strategy, patched.text) == ("block_anchor", "pass\n")


def test_fits_file_tells_new_string_in_the_files_indentation_from_one_in_old_strings() -> None:
    old, found = ["def f():", "    return 1"], ["    def f():", "        return 1"]
    assert fits_file("    def f():\n        return 2", old, found)
    assert not fits_file("def f():\n    return 2", old, found)
    assert fits_file("    x = 1\n    y = 2", old, found)  # no shared line: the common indentation decides
    assert reindent("    def f():\n        return 2", old, found) == "    def f():\n        return 2"


def test_escape_difference_names_the_sequence_and_which_side_has_it() -> None:
    assert escape_difference('print(\\"hi\\")', 'print("hi")') == ('\\"', True)
    assert escape_difference('s = "a\nb"', 's = "a\\nb"') == ("\\n", False)
    assert escape_difference('s = "a\\nb"', 's = "a\\nb"') is None
    assert escape_difference('log("done")', 'log("done\\n")') is None  # a missing escape, not a drifted one


def test_real_controls_converts_only_leading_tabs_and_line_ending_crs_where_the_file_uses_them() -> None:
    tabbed = "a:\n\tb\n"
    assert real_controls("\\t\\tx \\t y\n\t\\tz", tabbed, crlf=False) == "\t\tx \\t y\n\t\tz"
    assert real_controls("\\tx", "a:\n    b\n", crlf=False) == "\\tx"
    assert real_controls("\\tx", "a:\n\tb\n\\tc\n", crlf=False) == "\\tx"  # the file has literal \t lines too
    assert real_controls('x\\r\ny "\\r\\n"', "a\n", crlf=True) == 'x\r\ny "\\r\\n"'
    assert real_controls("x\\r\ny", "a\n", crlf=False) == "x\\r\ny"


@given(st.text(alphabet="ab -.'\"\n\u2014\u2013\u2026\u201c\u201d\u2018\u2019\u00a0", max_size=30), st.data())
def test_every_folded_span_maps_back_to_the_original_text_it_came_from(text: str, data: st.DataObject) -> None:
    for em_dash in ("--", "-"):
        folded = fold(text, em_dash)
        start = data.draw(st.integers(0, len(folded.text)))
        end = data.draw(st.integers(start, len(folded.text)))
        span = folded.original(start, end)
        if span is not None:
            assert fold(text[span[0] : span[1]], em_dash).text == folded.text[start:end]
