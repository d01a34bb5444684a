"""The multi-file patch text: parsed into operations, or refused with the line at fault."""

from __future__ import annotations

import pytest

from actors.tools._patch_format import AddFile, DeleteFile, Hunk, MalformedPatch, UpdateFile, parse_patch

FULL = """\
*** Begin Patch
*** Add File: docs/new.md
+# Title
+
+body
*** Update File: src/app.py
*** Move to: src/main.py
@@ class App:
@@ -10,3 +10,3 @@ def run(self):
     start()
-    wait()
+    wait(timeout=5)

@@
-last = 1
+last = 2
*** End of File
*** Delete File: old.txt
*** End Patch
"""


def test_a_full_patch_parses_into_add_update_with_move_and_delete() -> None:
    add, update, delete = parse_patch(FULL)
    assert add == AddFile(path="docs/new.md", lines=("# Title", "", "body"), line=2)
    assert delete == DeleteFile(path="old.txt", line=18)
    assert isinstance(update, UpdateFile) and (update.path, update.move_to) == ("src/app.py", "src/main.py")
    first, second = update.hunks
    assert first == Hunk(
        anchors=("class App:", "def run(self):"),
        lines=((" ", "    start()"), ("-", "    wait()"), ("+", "    wait(timeout=5)")),
        at_end=False,
        line=8,
    )
    assert (first.old, first.new) == (["    start()", "    wait()"], ["    start()", "    wait(timeout=5)"])
    assert second.anchors == ("",) and second.at_end and second.old == ["last = 1"]


def test_a_first_hunk_may_leave_out_its_at_at_line_and_an_empty_row_is_an_empty_context_line() -> None:
    (update,) = parse_patch("*** Begin Patch\n*** Update File: a.py\n x = 1\n\n-y = 2\n*** End Patch")
    assert isinstance(update, UpdateFile)
    assert update.hunks[0].lines == ((" ", "x = 1"), (" ", ""), ("-", "y = 2"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("*** Update File: a.py\n-x\n+y\n*** End Patch", "line 1: a patch starts with the line '*** Begin Patch'"),
        ("*** Begin Patch\n*** Update File: a.py\n-x\n+y\n", "the patch has no '*** End Patch' line"),
        ("*** Begin Patch\n*** Update File: a.py\n-x\n?y\n*** End Patch", "line 4: in the hunk of a.py, every line starts with ' '"),
        ("*** Begin Patch\n*** Add File: n.txt\nhello\n*** End Patch", "line 3: every line of an added file starts with '+'"),
        ("*** Begin Patch\n*** Update File: a.py\n*** End Patch", "line 2: *** Update File: a.py has no hunks"),
        ("*** Begin Patch\n*** Update File: a.py\n@@ def f():\n@@\n*** End Patch", "line 3: a hunk of a.py has no lines"),
        ("*** Begin Patch\n*** Add File:\n+x\n*** End Patch", "line 2: '*** Add File:' needs a file path"),
        ("*** Begin Patch\n*** Rename File: a.py\n*** End Patch", "line 2: expected '*** Add File: <path>'"),
        ("*** Begin Patch\n*** End Patch", "the patch is empty"),
        ("*** Begin Patch\n*** Delete File: a\n*** End Patch\nmore", "line 4: nothing may follow '*** End Patch'"),
    ],
)
def test_a_malformed_patch_is_refused_naming_the_line_and_what_was_expected(text: str, message: str) -> None:
    with pytest.raises(MalformedPatch) as refused:
        parse_patch(text)
    assert message in str(refused.value)
