"""The patch tool on real files: strategies reported, refusals, encodings kept, atomic writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import actors.tools._patch  # noqa: F401  (registers patch)
from actors.agent import ToolCall, ToolOutput, Workspace
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
def call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ToolCall:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "app.py").write_text(SOURCE)
    return ToolCall(session_id="s", turn_id="t", call_id="c", home=tmp_path / "home", workspace=Workspace(tmp_path))


async def patch(call: ToolCall, **arguments: Any) -> ToolOutput:
    return await REGISTRY.get("patch").run({"path": "app.py", **arguments}, call)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


async def test_an_exact_patch_reports_the_line_the_strategy_and_a_diff(call: ToolCall, tmp_path: Path) -> None:
    result = await patch(call, old_string="        data = f.read()\n", new_string="        data = f.read().strip()\n")
    assert result.ok
    head, *diff = result.content.splitlines()
    assert head == "Patched app.py: 1 replacement at line 6 (strategy exact)."
    assert diff == ["@@ line 6 @@", "-        data = f.read()", "+        data = f.read().strip()"]
    assert (tmp_path / "app.py").read_text() == SOURCE.replace("f.read()", "f.read().strip()")
    assert leftovers(tmp_path) == []


async def test_a_fuzzy_patch_names_the_strategy_and_maps_the_indentation_unit(call: ToolCall, tmp_path: Path) -> None:
    old = "def save(path, data):\n  with open(path, 'w') as f:\n    f.write(data)"
    new = 'def save(path, data):\n  with open(path, "a") as f:\n    f.write(data)\n    f.flush()'
    result = await patch(call, old_string=old, new_string=new)
    assert result.ok, result.content
    assert result.content.startswith(
        "Patched app.py: 1 replacement at line 10 (strategy block_anchor: found by its first and last lines; "
        "lines between differed, check the diff)."
    )
    assert (tmp_path / "app.py").read_text().endswith(
        'def save(path, data):\n    with open(path, "a") as f:\n        f.write(data)\n        f.flush()\n'
    )


async def test_indentation_is_carried_over_when_old_string_was_dedented(call: ToolCall, tmp_path: Path) -> None:
    result = await patch(
        call,
        old_string='with open(path, "w") as f:\n    f.write(data)',
        new_string='with open(path, "w") as f:\n    f.write(data)\n    f.flush()',
    )
    assert "(strategy indentation_flexible: indentation ignored; new_string re-indented to match the file)" in result.content
    assert (tmp_path / "app.py").read_text().endswith('    with open(path, "w") as f:\n        f.write(data)\n        f.flush()\n')


async def test_an_ambiguous_old_string_is_refused_and_replace_all_changes_every_one(call: ToolCall, tmp_path: Path) -> None:
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


async def test_identical_strings_are_refused_without_touching_the_file(call: ToolCall, tmp_path: Path) -> None:
    before = (tmp_path / "app.py").stat().st_mtime_ns
    result = await patch(call, old_string="import os", new_string="import os")
    assert not result.ok and "identical" in result.content
    assert (tmp_path / "app.py").stat().st_mtime_ns == before


async def test_escape_drift_in_both_strings_is_undone_before_writing(call: ToolCall, tmp_path: Path) -> None:
    result = await patch(
        call,
        old_string='def save(path, data):\\n    with open(path, \\"w\\") as f:',
        new_string='def save(path, data):\\n    with open(path, \\"x\\") as f:',
    )
    assert result.ok and "(strategy escape_normalized" in result.content
    text = (tmp_path / "app.py").read_text()
    assert 'with open(path, "x") as f:' in text and "\\" not in text


async def test_escape_drift_only_in_new_string_is_refused(call: ToolCall, tmp_path: Path) -> None:
    result = await patch(
        call,
        old_string="def load(path):\n    with open(path) as f:\n        data = f.read()   \n",
        new_string='def load(path):\n    with open(path) as f:\n        data = f.read().split(\\"\\\\n\\")\n',
    )
    assert not result.ok and "escape drift" in result.content
    assert (tmp_path / "app.py").read_text() == SOURCE


async def test_not_found_points_at_the_closest_lines(call: ToolCall) -> None:
    result = await patch(call, old_string="def store(path, blob):\n    with open(path, 'wb') as f:\n        f.write(blob)", new_string="x")
    assert not result.ok and "old_string was not found in the file" in result.content
    assert "most similar text is at lines 10-12" in result.content and "    10|def save(path, data):" in result.content


async def test_crlf_line_ends_and_a_byte_order_mark_survive_a_patch(call: ToolCall, tmp_path: Path) -> None:
    windows = tmp_path / "win.txt"
    windows.write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n")
    result = await REGISTRY.get("patch").run({"path": "win.txt", "old_string": "two\nthree", "new_string": "2\n3\n3.5"}, call)
    assert result.ok, result.content
    assert windows.read_bytes() == b"\xef\xbb\xbfone\r\n2\r\n3\r\n3.5\r\n"


async def test_patch_refuses_binary_and_missing_files_with_a_hint(call: ToolCall, tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"abc\x00def")
    binary = await REGISTRY.get("patch").run({"path": "data.bin", "old_string": "abc", "new_string": "xyz"}, call)
    assert not binary.ok and "cannot patch data.bin: it is a binary file (it contains NUL bytes)" in binary.content
    missing = await REGISTRY.get("patch").run({"path": "ap.py", "old_string": "a", "new_string": "b"}, call)
    assert not missing.ok and "Did you mean" in missing.content and "use write_file" in missing.content


async def test_a_failed_patch_write_keeps_the_original_and_no_temporary_file(
    call: ToolCall, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("actors.tools._atomic.os.replace", full_disk)
    result = await patch(call, old_string="import os", new_string="import sys")
    assert not result.ok and "No space left on device; the file is unchanged" in result.content
    assert (tmp_path / "app.py").read_text() == SOURCE and leftovers(tmp_path) == []


async def test_patch_refuses_protected_files_spelled_with_dot_dot(call: ToolCall, tmp_path: Path) -> None:
    rc = tmp_path / "user" / ".bashrc"
    rc.parent.mkdir()
    rc.write_text("export PATH=/usr/bin\n")
    result = await REGISTRY.get("patch").run(
        {"path": "user/../user/.bashrc", "old_string": "/usr/bin", "new_string": "/tmp/evil:/usr/bin"}, call
    )
    assert not result.ok and "write refused" in result.content and "shell start-up file" in result.content
    assert rc.read_text() == "export PATH=/usr/bin\n"


async def test_a_patch_that_changes_nothing_writes_nothing(call: ToolCall, tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text("keep = 1   \n")
    before = (tmp_path / "t.txt").stat().st_mtime_ns
    result = await REGISTRY.get("patch").run({"path": "t.txt", "old_string": "keep = 1\n", "new_string": "keep = 1   \n"}, call)
    assert result.ok and "already reads that way" in result.content
    assert (tmp_path / "t.txt").stat().st_mtime_ns == before
