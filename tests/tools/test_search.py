"""search_files on a real tree, with ripgrep and with the Python fallback: same results, same format."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

import actors.tools._search  # noqa: F401  (registers search_files)
from actors.agent import ToolContext, ToolOutput, Workspace
from actors.tools import REGISTRY, _search_rg
from actors.tools._search import expand_braces
from tests.conftest import DEADLINE
from tests.processes import live_processes_with

HAVE_RG = shutil.which("rg") is not None
needs_rg = pytest.mark.skipif(not HAVE_RG, reason="ripgrep is not installed")

TREE: dict[str, str | bytes] = {
    "src/app.py": "import os\n\n\ndef needle():\n    return 'needle'\n",
    "src/util.py": "x = 1\n# NEEDLE in capitals\ny = 2\n",
    "src/web/page.ts": "const needle = 1;\n",
    "docs/readme.md": "Find the needle here.\n",
    "a.txt": "needle at the top\n",
    "a/b.txt": "needle one level down\n",
    ".hidden.txt": "a hidden needle\n",
    ".git/config": "needle in version control\n",
    "node_modules/lib/index.js": "needle in a package\n",
    "image.bin": b"needle\x00\x01\x02binary",
    "hay.txt": "".join(f"{'needle' if i % 3 == 0 else 'straw'} {i}\n" for i in range(1, 31)),
}


@pytest.fixture
def call(tmp_path: Path) -> ToolContext:
    for name, content in TREE.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return ToolContext(session_id="s", turn_id="t", call_id="c", home=tmp_path / "home", workspace=Workspace(tmp_path))


@pytest.fixture(params=["python", "ripgrep"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with the Python fallback and, when installed, with ripgrep."""
    if request.param == "python":
        monkeypatch.setattr(_search_rg, "ripgrep", lambda: None)
    elif not HAVE_RG:
        pytest.skip("ripgrep is not installed")
    return str(request.param)


async def search(call: ToolContext, **arguments: Any) -> ToolOutput:
    return await REGISTRY.get("search_files").run(arguments, call)


async def test_content_search_walks_in_path_order_and_skips_vcs_packages_and_binaries(call: ToolContext, backend: str) -> None:
    result = await search(call, pattern="needle", file_glob="*.{txt,md}")
    assert result.ok
    assert result.content.splitlines()[:5] == [
        ".hidden.txt:1:a hidden needle",
        "a/b.txt:1:needle one level down",
        "a.txt:1:needle at the top",
        "docs/readme.md:1:Find the needle here.",
        "hay.txt:3:needle 3",
    ]
    assert result.content.endswith("[14 matches in 5 files]")
    everything = await search(call, pattern="needle")
    assert ".git" not in everything.content and "node_modules" not in everything.content
    assert "image.bin" not in everything.content and "src/app.py:4:def needle():" in everything.content


async def test_case_context_and_the_limit_note(call: ToolContext, backend: str) -> None:
    caps = await search(call, pattern="needle", path="src", ignore_case=True, file_glob="*.py")
    assert caps.content.splitlines() == [
        "src/app.py:4:def needle():",
        "src/app.py:5:    return 'needle'",
        "src/util.py:2:# NEEDLE in capitals",
        "[3 matches in 2 files]",
    ]
    context = await search(call, pattern="needle (3|6|12)$", path="hay.txt", context=1)
    assert context.content.splitlines() == [
        "hay.txt-2-straw 2",
        "hay.txt:3:needle 3",
        "hay.txt-4-straw 4",
        "hay.txt-5-straw 5",
        "hay.txt:6:needle 6",
        "hay.txt-7-straw 7",
        "--",
        "hay.txt-11-straw 11",
        "hay.txt:12:needle 12",
        "hay.txt-13-straw 13",
        "[3 matches in 1 file]",
    ]
    capped = await search(call, pattern="needle", path="hay.txt", limit=2, context=2)
    lines = capped.content.splitlines()
    assert lines[:-1] == ["hay.txt-1-straw 1", "hay.txt-2-straw 2", "hay.txt:3:needle 3", "hay.txt-4-straw 4", "hay.txt-5-straw 5",
                          "hay.txt:6:needle 6", "hay.txt-7-straw 7", "hay.txt-8-straw 8"]  # fmt: skip
    assert lines[-1] == "[2 matches in 1 file; stopped at limit=2, there are more: narrow the pattern, path or file_glob, or raise limit (at most 1,000)]"


async def test_file_name_search_by_glob_and_by_path_glob(call: ToolContext, backend: str) -> None:
    names = await search(call, target="files", pattern="*.py")
    assert names.content == "src/app.py\nsrc/util.py"
    nested = await search(call, target="files", pattern="src/*/*.ts")
    assert nested.content == "src/web/page.ts"
    capped = await search(call, target="files", pattern="*.txt", limit=2)
    assert capped.content.splitlines() == [
        ".hidden.txt",
        "a/b.txt",
        "[showing the first 2 files; more match: narrow the pattern or path, or raise limit (at most 1,000)]",
    ]
    none = await search(call, target="files", pattern="*.rs")
    assert none.ok and none.content == "No files matching '*.rs' under the working directory."


async def test_bad_requests_get_clear_errors(call: ToolContext, backend: str) -> None:
    bad = await search(call, pattern="(unclosed")
    assert not bad.ok and bad.content.startswith("[error] invalid regular expression '(unclosed':")
    missing = await search(call, pattern="x", path="srcc")
    assert not missing.ok and "srcc: no such file or directory. Did you mean" in missing.content
    binary = await search(call, pattern="x", path="image.bin")
    assert not binary.ok and "image.bin is a binary file" in binary.content
    glob = await search(call, pattern="x", file_glob="src/*.py")
    assert not glob.ok and "file_glob matches file names only" in glob.content
    nothing = await search(call, pattern="haystack")
    assert nothing.ok and nothing.content == "No matches for 'haystack' in the working directory."


async def test_look_around_patterns_work_on_both_backends(call: ToolContext, backend: str) -> None:
    result = await search(call, pattern=r"needle(?= \d)", path="hay.txt", limit=1)
    assert result.content.splitlines()[0] == "hay.txt:3:needle 3"


@needs_rg
async def test_forcing_the_python_fallback_gives_exactly_what_ripgrep_gives(call: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "crlf.txt").write_bytes(b"needle\r\nstraw\r\n")
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfneedle with a bom\n")
    (tmp_path / "latin1.txt").write_bytes(b"needle caf\xe9\n")
    (tmp_path / "link.txt").symlink_to(tmp_path / "a.txt")
    queries: list[dict[str, Any]] = [
        {"pattern": "needle"},
        {"pattern": "needle$"},
        {"pattern": "NEEDLE", "ignore_case": True, "context": 2},
        {"pattern": "needle", "limit": 5, "context": 1},
        {"pattern": "needle", "path": "hay.txt", "limit": 4, "context": 3},
        {"pattern": "^s", "file_glob": "*.{py,ts}"},
        {"pattern": "*.txt", "target": "files"},
        {"pattern": "*", "target": "files", "limit": 4},
    ]
    calls: list[str] = []
    real = _search_rg.stream_lines

    async def spy(argv: list[str], on_line: Any) -> tuple[int, str]:
        calls.append(argv[0])
        return await real(argv, on_line)

    monkeypatch.setattr(_search_rg, "stream_lines", spy)
    with_rg = [(await search(call, **q)).content for q in queries]
    assert len(calls) == len(queries), "ripgrep did not run for every query"
    monkeypatch.setattr(_search_rg, "ripgrep", lambda: None)
    with_python = [(await search(call, **q)).content for q in queries]
    assert len(calls) == len(queries), "ripgrep ran although the fallback was forced"
    for query, a, b in zip(queries, with_rg, with_python, strict=True):
        assert a == b, query


async def test_stopping_a_stream_early_kills_the_whole_process_group() -> None:
    marker = f"sleep 30.{os.getpid()}1"
    seen: list[bytes] = []

    def first_only(line: bytes) -> bool:
        seen.append(line)
        return False

    with trio.fail_after(DEADLINE):
        status, _ = await _search_rg.stream_lines(["bash", "-c", f"{marker} & echo ready; wait"], first_only)
    assert status < 0 and seen == [b"ready"]
    assert live_processes_with(marker) == []  # stream_lines waits until the group is gone


async def test_cancelling_a_stream_kills_the_whole_process_group() -> None:
    marker = f"sleep 30.{os.getpid()}2"
    with trio.CancelScope() as scope:

        def cancel_at_first_line(line: bytes) -> bool:
            scope.cancel()
            return True

        await _search_rg.stream_lines(["bash", "-c", f"{marker} & echo ready; wait"], cancel_at_first_line)
    assert scope.cancelled_caught
    assert live_processes_with(marker) == []  # stream_lines waits until the group is gone


def test_brace_globs_expand_like_ripgrep() -> None:
    assert expand_braces("*.{py,pyi}") == ("*.py", "*.pyi")
    assert expand_braces("{a,b}/{c,d}.txt") == ("a/c.txt", "a/d.txt", "b/c.txt", "b/d.txt")
    assert expand_braces("plain*.md") == ("plain*.md",)


def test_a_pattern_that_backtracks_for_ever_fails_the_python_search_within_its_budget(tmp_path: Path) -> None:
    """In a child process with a deadline: with ``re``, (a|aa)+$ against a line of 60 a's ran for
    hours holding the GIL (the whole server stood still, and so would this test). The look-ahead
    makes ripgrep hand such a pattern to the Python backend too."""
    (tmp_path / "notes.txt").write_text("fine\n" + "a" * 60 + "!\n")
    code = (
        "import sys, threading\n"
        "from pathlib import Path\n"
        "from actors.tools._search_walk import ContentQuery, SearchFailed, search_content\n"
        "query = ContentQuery(root=Path(sys.argv[1]), pattern='(?=a)(a|aa)+$', ignore_case=False, context=0, name_globs=(), limit=10, accept_name=lambda n: True)\n"
        "try:\n"
        "    search_content(query, threading.Event())\n"
        "except SearchFailed as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60, check=True)
    said = done.stdout.strip()
    assert said.startswith("the pattern '(?=a)(a|aa)+$' took longer than 1 s on line 2 of ") and said.endswith("; simplify it")
