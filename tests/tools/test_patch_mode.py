"""The patch tool's multi-file mode on real files: all or nothing, hunks found by the fuzzy chain."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import actors.tools._patch  # noqa: F401  (registers patch)
from actors.agent import ToolContext, ToolOutput, Workspace
from actors.tools import REGISTRY
from actors.tools._patch_format import UpdateFile, parse_patch
from actors.tools._patch_hunks import HunkFailed, apply_hunks

APP = """\
import os


def load(path):
    with open(path) as f:
        data = f.read()
    return data


def save(path, data):
    with open(path, "w") as f:
        f.write(data)
"""


@pytest.fixture
def call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ToolContext:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "old.txt").write_text("obsolete\n")
    (tmp_path / "util.py").write_text("def helper():\n    return 1\n")
    os.chmod(tmp_path / "util.py", 0o755)
    return ToolContext(session_id="s", turn_id="t", call_id="c", home=tmp_path / "home", workspace=Workspace(tmp_path))


async def apply(call: ToolContext, text: str) -> ToolOutput:
    return await REGISTRY.get("patch").run({"mode": "patch", "patch": text}, call)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


FOUR_FILES = """\
*** Begin Patch
*** Add File: docs/notes.md
+# Notes
+
+Written by the patch.
*** Update File: app.py
@@ def load(path):
     with open(path) as f:
-        data = f.read()
+        data = f.read().strip()
     return data
@@ def save(path, data):
-    with open(path, "w") as f:
+    with open(path, "a") as f:
         f.write(data)
*** Update File: util.py
*** Move to: lib/util.py
@@
 def helper():
-    return 1
+    return 2
*** Delete File: old.txt
*** End Patch
"""


async def test_one_patch_adds_updates_with_two_hunks_moves_and_deletes(call: ToolContext, tmp_path: Path) -> None:
    result = await apply(call, FOUR_FILES)
    assert result.ok, result.content
    assert result.content.splitlines() == [
        "Applied the patch to 4 files:",
        "  added docs/notes.md (3 lines)",
        "  updated app.py: 2 hunks at lines 5, 11",
        "  moved util.py to lib/util.py: 1 hunk at line 1",
        "  deleted old.txt",
    ]
    assert (tmp_path / "docs" / "notes.md").read_text() == "# Notes\n\nWritten by the patch.\n"
    assert (tmp_path / "app.py").read_text() == APP.replace("f.read()", "f.read().strip()").replace('"w"', '"a"')
    assert (tmp_path / "lib" / "util.py").read_text() == "def helper():\n    return 2\n"
    assert os.stat(tmp_path / "lib" / "util.py").st_mode & 0o777 == 0o755
    assert not (tmp_path / "util.py").exists() and not (tmp_path / "old.txt").exists()
    assert [p.name for p in tmp_path.rglob("*.tmp")] == []


async def test_a_failing_hunk_in_the_third_file_leaves_every_file_unchanged(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "third.py").write_text("value = 1\n")
    before = snapshot(tmp_path)
    text = """\
*** Begin Patch
*** Add File: brand_new.py
+x = 1
*** Update File: app.py
@@ def load(path):
-        data = f.read()
+        data = f.read().strip()
*** Update File: third.py
@@
-value = 1
+value = 2
@@
-missing = True
+missing = False
*** Delete File: old.txt
*** End Patch
"""
    result = await apply(call, text)
    assert not result.ok
    first = result.content.splitlines()[0]
    assert first.startswith(
        "[error] the patch was not applied (no file changed): third.py, hunk 2 of 2 (at 'missing = True', patch line 12): "
        "its context and '-' lines were not found after hunk 1"
    )
    assert snapshot(tmp_path) == before


async def test_a_malformed_patch_gets_a_clear_error_with_the_format(call: ToolContext, tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    result = await apply(call, "*** Begin Patch\n*** Update File: app.py\n-import os\n+import sys\n")
    assert not result.ok
    assert result.content.startswith("[error] the patch was not applied (no file changed): malformed patch, line 4: the patch has no '*** End Patch' line")
    assert "*** Add File: <path>" in result.content
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("*** Add File: app.py\n+x", "cannot add app.py: it exists already; to change it, use '*** Update File: app.py'."),
        ("*** Update File: nope.py\n-x\n+y", "nope.py: no such file."),
        ("*** Delete File: gone.txt", "cannot delete gone.txt: no such file."),
        ("*** Update File: util.py\n*** Move to: app.py", "cannot move util.py to app.py: app.py exists already"),
        ("*** Delete File: old.txt\n*** Delete File: ./old.txt", "old.txt is named in two sections of the patch"),
        ("*** Update File: util.py\n*** Move to: first.py", "first.py is named in two sections of the patch"),
        ("*** Update File: util.py\n*** Move to: user/.bashrc", "write refused: user/.bashrc is protected: a shell start-up file"),
        ("*** Delete File: user/.ssh/id_rsa", "write refused: user/.ssh/id_rsa is protected: SSH keys"),
    ],
)
async def test_a_patch_naming_a_missing_existing_protected_or_repeated_file_changes_nothing(call: ToolContext, tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "user" / ".ssh").mkdir(parents=True)
    (tmp_path / "user" / ".ssh" / "id_rsa").write_text("key\n")
    (tmp_path / "first.py").write_text("import os\n")
    before = snapshot(tmp_path)
    result = await apply(call, f"*** Begin Patch\n*** Update File: first.py\n-import os\n+import sys\n{text}\n*** End Patch")
    assert not result.ok and message in result.content, result.content
    assert snapshot(tmp_path) == before


async def test_an_escape_drifted_hunk_is_refused_like_a_replacement(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "greet.py").write_text('def greet(name):\n    message = "Hello, " + name   \n    print(message)\n    return message\n')
    before = snapshot(tmp_path)
    text = (
        "*** Begin Patch\n*** Update File: greet.py\n@@\n def greet(name):\n"
        '-    message = \\"Hello, \\" + name\n+    message = \\"Hi, \\" + name\n     print(message)\n     return message\n'
        "*** End Patch"
    )
    result = await apply(call, text)
    assert not result.ok
    assert (
        "greet.py, hunk 1 of 1" in result.content
        and "the hunk's text to find (its ' ' and '-' lines) has the escape sequence \\\" where the file has a plain \"" in result.content
    )
    assert snapshot(tmp_path) == before


async def test_a_write_failing_part_way_puts_back_the_files_already_written(call: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(tmp_path)

    def no_rename(src: str, dst: str) -> None:
        raise OSError(13, "Permission denied")

    monkeypatch.setattr("actors.tools._patch_files.os.rename", no_rename)
    result = await apply(call, FOUR_FILES)
    assert not result.ok
    assert "could not remove util.py: Permission denied; no file was changed." in result.content
    assert snapshot(tmp_path) == before


async def test_replace_mode_arguments_and_patch_mode_arguments_do_not_mix(call: ToolContext) -> None:
    patch = REGISTRY.get("patch")
    mixed = await patch.run({"mode": "patch", "patch": FOUR_FILES, "path": "app.py"}, call)
    assert not mixed.ok and "mode 'patch' takes only 'patch'; leave out path" in mixed.content
    missing = await patch.run({"path": "app.py", "old_string": "import os"}, call)
    assert not missing.ok and "mode 'replace' needs path, old_string and new_string (missing: new_string)" in missing.content
    unasked = await patch.run({"patch": FOUR_FILES}, call)
    assert not unasked.ok and "set mode to 'patch'" in unasked.content


def test_the_schema_describes_both_modes_and_every_field() -> None:
    parameters = REGISTRY.get("patch").spec().parameters
    properties = parameters["properties"]
    assert set(properties) == {"mode", "path", "old_string", "new_string", "replace_all", "patch"}
    assert all(field.get("description") for field in properties.values())
    assert set(properties["mode"]["enum"]) == {"replace", "patch"} and properties["mode"]["default"] == "replace"
    assert "*** Begin Patch" in properties["patch"]["description"]
    assert parameters.get("required", []) == []


# -- hunks, as pure functions of the text -----------------------------------------------------------


def hunks_of(body: str) -> UpdateFile:
    (update,) = parse_patch(f"*** Begin Patch\n*** Update File: f\n{body}\n*** End Patch")
    assert isinstance(update, UpdateFile)
    return update


def test_hunks_are_found_in_file_order_after_their_at_at_lines() -> None:
    content = "def a():\n    return 0\n\ndef b():\n    return 0\n"
    applied = apply_hunks(content, hunks_of("@@ def b():\n-    return 0\n+    return 2").hunks)
    assert applied.text == "def a():\n    return 0\n\ndef b():\n    return 2\n"
    two = apply_hunks(content, hunks_of("@@\n-    return 0\n+    return 1\n@@\n-    return 0\n+    return 2").hunks)
    assert two.text == "def a():\n    return 1\n\ndef b():\n    return 2\n" and two.lines == (2, 5)


def test_a_hunk_matches_whole_lines_and_can_be_pinned_to_the_end_of_the_file() -> None:
    content = "total = 10\ntotal = 1\nx = 1\n"
    assert apply_hunks(content, hunks_of("-total = 1\n+total = 2").hunks).text == "total = 10\ntotal = 2\nx = 1\n"
    repeated = "x = 1\ny = 2\nx = 1\n"
    assert apply_hunks(repeated, hunks_of("-x = 1\n+x = 3\n*** End of File").hunks).text == "x = 1\ny = 2\nx = 3\n"


def test_an_added_only_hunk_goes_after_its_at_at_line_or_at_the_end_and_a_missing_final_newline_stays_missing() -> None:
    content = "[a]\nk = 1\n[b]\nk = 2"
    after_anchor = apply_hunks(content, hunks_of("@@ [a]\n+new = 0").hunks)
    assert after_anchor.text == "[a]\nnew = 0\nk = 1\n[b]\nk = 2"
    at_end = apply_hunks(content, hunks_of("@@\n+[c]").hunks)
    assert at_end.text == "[a]\nk = 1\n[b]\nk = 2\n[c]"
    edited = apply_hunks(content, hunks_of("-k = 2\n+k = 3").hunks)
    assert edited.text == "[a]\nk = 1\n[b]\nk = 3"


def test_hunks_use_the_fuzzy_chain_and_report_the_strategy() -> None:
    content = "def f():\n    x = \u201cquoted\u201d   \n    return x\n"
    applied = apply_hunks(content, hunks_of(' def f():\n-    x = "quoted"\n+    x = "plain"\n     return x').hunks)
    assert applied.text == 'def f():\n    x = "plain"\n    return x\n' and applied.strategies == ("unicode_normalized",)


def test_a_hunk_whose_at_at_line_is_missing_names_it() -> None:
    with pytest.raises(HunkFailed) as failed:
        apply_hunks("a = 1\n", hunks_of("@@ def nowhere():\n-a = 1\n+a = 2").hunks)
    assert failed.value.index == 1 and str(failed.value) == "its @@ line 'def nowhere():' was not found."


def test_an_escaped_tab_in_added_lines_is_a_tab_in_a_tab_indented_file() -> None:
    makefile = "app:\n\tcc app.c\n"
    applied = apply_hunks(makefile, hunks_of(" app:\n-\tcc app.c\n+\\tcc -O2 app.c").hunks)
    assert applied.text == "app:\n\tcc -O2 app.c\n"


async def test_neither_mode_may_change_the_agents_own_configuration(call: ToolContext) -> None:
    config = call.home / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("approvals:\n  mode: manual\n")
    before = config.read_bytes()
    replaced = await REGISTRY.get("patch").run({"path": str(config), "old_string": "mode: manual", "new_string": "mode: off"}, call)
    patched = await apply(call, f"*** Begin Patch\n*** Update File: {config}\n@@\n-  mode: manual\n+  mode: off\n*** End Patch\n")
    for result in (replaced, patched):
        assert not result.ok and "HERMES_HOME" in result.content
    assert config.read_bytes() == before
