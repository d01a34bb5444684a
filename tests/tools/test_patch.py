"""The patch tool on real files: strategies reported, refusals, encodings kept, atomic writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import actors.tools._patch  # noqa: F401  (registers patch)
from actors.agent import ToolContext, ToolOutput, Workspace
from actors.tools import REGISTRY

SOURCE = """\
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
    (tmp_path / "app.py").write_text(SOURCE)
    return ToolContext(session_id="s", turn_id="t", call_id="c", home=tmp_path / "home", workspace=Workspace(tmp_path))


async def patch(call: ToolContext, **arguments: Any) -> ToolOutput:
    return await REGISTRY.get("patch").run({"path": "app.py", **arguments}, call)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


async def test_an_exact_patch_reports_the_line_the_strategy_and_a_diff(call: ToolContext, tmp_path: Path) -> None:
    result = await patch(call, old_string="        data = f.read()\n", new_string="        data = f.read().strip()\n")
    assert result.ok
    head, *diff = result.content.splitlines()
    assert head == "Patched app.py: 1 replacement at line 6 (strategy exact)."
    assert diff == ["@@ line 6 @@", "-        data = f.read()", "+        data = f.read().strip()"]
    assert (tmp_path / "app.py").read_text() == SOURCE.replace("f.read()", "f.read().strip()")
    assert leftovers(tmp_path) == []


async def test_a_fuzzy_patch_names_the_strategy_and_maps_the_indentation_unit(call: ToolContext, tmp_path: Path) -> None:
    old = "def save(path, data):\n  with open(path, 'w') as f:\n    f.write(data)"
    new = 'def save(path, data):\n  with open(path, "a") as f:\n    f.write(data)\n    f.flush()'
    result = await patch(call, old_string=old, new_string=new)
    assert result.ok, result.content
    assert result.content.startswith(
        "Patched app.py: 1 replacement at line 10 (strategy block_anchor: found by its first and last lines; lines between differed, check the diff)."
    )
    assert (tmp_path / "app.py").read_text().endswith('def save(path, data):\n    with open(path, "a") as f:\n        f.write(data)\n        f.flush()\n')


async def test_indentation_is_carried_over_when_old_string_was_dedented(call: ToolContext, tmp_path: Path) -> None:
    result = await patch(
        call,
        old_string='with open(path, "w") as f:\n    f.write(data)',
        new_string='with open(path, "w") as f:\n    f.write(data)\n    f.flush()',
    )
    assert "(strategy indentation_flexible: indentation ignored; new_string written at the file's indentation)" in result.content
    assert (tmp_path / "app.py").read_text().endswith('    with open(path, "w") as f:\n        f.write(data)\n        f.flush()\n')


async def test_an_ambiguous_old_string_is_refused_and_replace_all_changes_every_one(call: ToolContext, tmp_path: Path) -> None:
    refused = await patch(call, old_string="with open(path", new_string="with io.open(path")
    assert not refused.ok
    assert refused.content == (
        "[error] app.py was not changed: Found 2 matches for old_string (at lines 5, 11; strategy exact); "
        "add surrounding lines to make it unique, or set replace_all to change every one."
    )
    assert (tmp_path / "app.py").read_text() == SOURCE
    done = await patch(call, old_string="with open(path", new_string="with io.open(path", replace_all=True)
    assert done.ok and done.content.startswith("Patched app.py: 2 replacements at lines 5, 11 (strategy exact).")
    assert (tmp_path / "app.py").read_text().count("io.open(") == 2


async def test_identical_strings_are_refused_without_touching_the_file(call: ToolContext, tmp_path: Path) -> None:
    before = (tmp_path / "app.py").stat().st_mtime_ns
    result = await patch(call, old_string="import os", new_string="import os")
    assert not result.ok and "identical" in result.content
    assert (tmp_path / "app.py").stat().st_mtime_ns == before


async def test_escape_drift_in_both_strings_is_undone_before_writing(call: ToolContext, tmp_path: Path) -> None:
    result = await patch(
        call,
        old_string='def save(path, data):\\n    with open(path, \\"w\\") as f:',
        new_string='def save(path, data):\\n    with open(path, \\"x\\") as f:',
    )
    assert result.ok and "(strategy escape_normalized" in result.content
    text = (tmp_path / "app.py").read_text()
    assert 'with open(path, "x") as f:' in text and "\\" not in text


async def test_escape_drift_only_in_new_string_is_refused(call: ToolContext, tmp_path: Path) -> None:
    result = await patch(
        call,
        old_string="def load(path):\n    with open(path) as f:\n        data = f.read()   \n",
        new_string='def load(path):\n    with open(path) as f:\n        data = f.read().split(\\"\\\\n\\")\n',
    )
    assert not result.ok and "escape drift" in result.content
    assert (tmp_path / "app.py").read_text() == SOURCE


async def test_not_found_points_at_the_closest_lines(call: ToolContext) -> None:
    result = await patch(call, old_string="def store(path, blob):\n    with open(path, 'wb') as f:\n        f.write(blob)", new_string="x")
    assert not result.ok and "old_string was not found in the file" in result.content
    assert "most similar text is at lines 10-12" in result.content and "    10|def save(path, data):" in result.content


async def test_crlf_line_ends_and_a_byte_order_mark_survive_a_patch(call: ToolContext, tmp_path: Path) -> None:
    windows = tmp_path / "win.txt"
    windows.write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n")
    result = await REGISTRY.get("patch").run({"path": "win.txt", "old_string": "two\nthree", "new_string": "2\n3\n3.5"}, call)
    assert result.ok, result.content
    assert windows.read_bytes() == b"\xef\xbb\xbfone\r\n2\r\n3\r\n3.5\r\n"


async def test_patch_refuses_binary_and_missing_files_with_a_hint(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"abc\x00def")
    binary = await REGISTRY.get("patch").run({"path": "data.bin", "old_string": "abc", "new_string": "xyz"}, call)
    assert not binary.ok and "cannot patch data.bin: it is a binary file (it contains NUL bytes)" in binary.content
    missing = await REGISTRY.get("patch").run({"path": "ap.py", "old_string": "a", "new_string": "b"}, call)
    assert not missing.ok and "Did you mean" in missing.content and "use write_file" in missing.content


async def test_a_failed_patch_write_keeps_the_original_and_no_temporary_file(call: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full_disk(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("actors._atomic.os.replace", full_disk)
    result = await patch(call, old_string="import os", new_string="import sys")
    assert not result.ok and "No space left on device; the file is unchanged" in result.content
    assert (tmp_path / "app.py").read_text() == SOURCE and leftovers(tmp_path) == []


async def test_patch_refuses_protected_files_spelled_with_dot_dot(call: ToolContext, tmp_path: Path) -> None:
    rc = tmp_path / "user" / ".bashrc"
    rc.parent.mkdir()
    rc.write_text("export PATH=/usr/bin\n")
    result = await REGISTRY.get("patch").run({"path": "user/../user/.bashrc", "old_string": "/usr/bin", "new_string": "/tmp/evil:/usr/bin"}, call)
    assert not result.ok and "write refused" in result.content and "shell start-up file" in result.content
    assert rc.read_text() == "export PATH=/usr/bin\n"


async def test_a_patch_that_changes_nothing_writes_nothing(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text("keep = 1   \n")
    before = (tmp_path / "t.txt").stat().st_mtime_ns
    result = await REGISTRY.get("patch").run({"path": "t.txt", "old_string": "keep = 1\n", "new_string": "keep = 1   \n"}, call)
    assert result.ok and "already reads that way" in result.content
    assert (tmp_path / "t.txt").stat().st_mtime_ns == before


# -- fidelity: typographic text, indentation kept, escape drift, escaped tabs and CRs --------------

TYPOGRAPHIC = (
    "TITLE = \u201cHermes \u2014 the agent\u201d\n"
    "def greet(name):\n"
    "    note = \u2018it\u2019s ready\u2026\u2019   \n"
    "    return f\u201cHi\u00a0{name} \u2013 welcome\u201d\n"
)


async def run_patch(call: ToolContext, path: str, old: str, new: str) -> ToolOutput:
    return await REGISTRY.get("patch").run({"path": path, "old_string": old, "new_string": new}, call)


async def test_an_ascii_old_string_matches_typographic_text_and_only_its_span_is_replaced(call: ToolContext, tmp_path: Path) -> None:
    target = tmp_path / "typo.py"
    target.write_bytes(TYPOGRAPHIC.encode())
    result = await run_patch(call, "typo.py", "    note = 'it's ready...'\n    return f\"Hi {name} - welcome\"", '    return f"Hello {name}"')
    assert result.ok, result.content
    assert "(strategy unicode_normalized" in result.content
    lines = TYPOGRAPHIC.splitlines(keepends=True)
    assert target.read_bytes() == (lines[0] + lines[1] + '    return f"Hello {name}"\n').encode()


async def test_an_ascii_double_hyphen_matches_an_em_dash_and_the_rest_of_the_file_keeps_its_bytes(call: ToolContext, tmp_path: Path) -> None:
    target = tmp_path / "typo.py"
    target.write_bytes(TYPOGRAPHIC.encode())
    result = await run_patch(call, "typo.py", 'TITLE = "Hermes -- the agent"', 'TITLE = "Hermes"')
    assert result.ok, result.content
    assert target.read_bytes() == TYPOGRAPHIC.replace("\u201cHermes \u2014 the agent\u201d", '"Hermes"').encode()


async def test_a_typographic_old_string_matches_ascii_text(call: ToolContext, tmp_path: Path) -> None:
    target = tmp_path / "plain.py"
    target.write_text('msg = "done -- really..."  \nother = 1\n')
    result = await run_patch(call, "plain.py", "msg = \u201cdone \u2014 really\u2026\u201d\n", 'msg = "done"\n')
    assert result.ok, result.content
    assert target.read_text() == 'msg = "done"\nother = 1\n'


async def test_new_string_already_in_the_files_indentation_is_written_as_given(call: ToolContext, tmp_path: Path) -> None:
    target = tmp_path / "cls.py"
    target.write_text("class A:\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n")
    result = await run_patch(call, "cls.py", "def f(self):\n    return 1\n", "    def f(self):\n        return 10\n")
    assert result.ok and "(strategy indentation_flexible" in result.content
    assert target.read_text() == "class A:\n    def f(self):\n        return 10\n\n    def g(self):\n        return 2\n"


async def test_a_loose_block_match_keeps_new_string_when_both_already_use_the_files_indentation(call: ToolContext, tmp_path: Path) -> None:
    target = tmp_path / "cls.py"
    target.write_text("class A:\n    def f(self):\n        x = 1\n        y = 2\n        return x\n")
    old = "    def f(self):\n        x = 1\n        y = 3\n        return x"
    result = await run_patch(call, "cls.py", old, "    def f(self):\n        return 0")
    assert result.ok and "(strategy block_anchor" in result.content
    assert target.read_text() == "class A:\n    def f(self):\n        return 0\n"


async def test_new_string_in_old_strings_indentation_is_still_reindented(call: ToolContext, tmp_path: Path) -> None:
    target = tmp_path / "cls.py"
    target.write_text("class A:\n    def f(self):\n        return 1\n")
    result = await run_patch(call, "cls.py", "def f(self):\n    return 1", "def f(self):\n    if self:\n        return 2\n    return 1")
    assert result.ok, result.content
    assert target.read_text() == "class A:\n    def f(self):\n        if self:\n            return 2\n        return 1\n"


GREET = 'def greet(name):\n    message = "Hello, " + name   \n    print(message)\n    return message\n'


@pytest.mark.parametrize(
    ("strategy", "content", "old", "new"),
    [
        (
            "block_anchor",
            GREET,
            'def greet(name):\n    message = \\"Hello, \\" + name\n    print(message)\n    return message',
            'def greet(name):\n    message = \\"Hi, \\" + name\n    print(message)\n    return message',
        ),
        ("context_aware", 'x = 1\ny = f("a")  \nz = 3\nw = 4\n', 'x = 1\ny = f(\\"a\\")\nz = 3\nw = 5', 'x = 1\ny = f(\\"b\\")\nz = 3\nw = 5'),
        ("block_anchor", "def f():\n    s = 'it'   \n    t = 1\n    return s\n", "def f():\n    s = \\'it\\'\n    t = 2\n    return s", "pass"),
    ],
)
async def test_an_escape_drifted_old_string_found_only_by_similarity_is_refused_and_the_file_kept_byte_for_byte(
    call: ToolContext, tmp_path: Path, strategy: str, content: str, old: str, new: str
) -> None:
    target = tmp_path / "drift.py"
    target.write_text(content)
    before = target.read_bytes()
    result = await run_patch(call, "drift.py", old, new)
    assert not result.ok
    message = result.content.removeprefix("[error] drift.py was not changed: ")
    assert "\n" not in message
    assert message.startswith("old_string has the escape sequence ") and f"(strategy {strategy})" in message
    assert "escape drift" in message and "copy old_string from it exactly" in message
    assert target.read_bytes() == before


async def test_an_escaped_tab_leading_a_line_is_written_as_a_tab_in_a_tab_indented_file(call: ToolContext, tmp_path: Path) -> None:
    makefile = tmp_path / "Makefile"
    makefile.write_text("all: app\n\napp: app.c\n\tcc -o app app.c\n")
    result = await run_patch(call, "Makefile", "\tcc -o app app.c\n", '\\tcc -O2 -o app app.c\n\\tprintf "built\\tok"\n')
    assert result.ok, result.content
    assert makefile.read_text() == 'all: app\n\napp: app.c\n\tcc -O2 -o app app.c\n\tprintf "built\\tok"\n'


async def test_an_escaped_tab_is_left_alone_in_a_space_indented_file(call: ToolContext, tmp_path: Path) -> None:
    script = tmp_path / "fmt.py"
    script.write_text("def row(a, b):\n    return a + b\n")
    result = await run_patch(call, "fmt.py", "    return a + b\n", "    return a + '\\t' + b\n\\t# note\n")
    assert result.ok, result.content
    assert script.read_text() == "def row(a, b):\n    return a + '\\t' + b\n\\t# note\n"


async def test_an_escaped_carriage_return_ending_a_line_is_real_in_a_crlf_file_only(call: ToolContext, tmp_path: Path) -> None:
    windows = tmp_path / "win.bat"
    windows.write_bytes(b"@echo off\r\necho one\r\n")
    result = await run_patch(call, "win.bat", "echo one", "echo one\\r\necho two")
    assert result.ok, result.content
    assert windows.read_bytes() == b"@echo off\r\necho one\r\necho two\r\n"
    unix = tmp_path / "run.sh"
    unix.write_bytes(b"echo one\n")
    result = await run_patch(call, "run.sh", "echo one", "echo one\\r\necho two")
    assert unix.read_bytes() == b"echo one\\r\necho two\n"
