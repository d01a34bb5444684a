"""read_file and write_file on real files: paging, caps, binary detection, the denylist, atomic writes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import actors.tools._files
import actors.tools._patch
import actors.tools._search  # noqa: F401  (registers search_files)
from actors.agent import ToolContext, ToolOutput, Workspace
from actors.tools import REGISTRY
from actors.tools._files import MAX_LINE_CHARS, MAX_OUTPUT_CHARS
from actors.tools._paths import write_refusal

FILE_TOOLS = ("read_file", "write_file", "patch", "search_files")


@pytest.fixture
def call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ToolContext:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # ~ is a scratch home: the denylist is tested there
    (tmp_path / "user").mkdir()
    return ToolContext(session_id="s", turn_id="t", call_id="c", home=tmp_path / "home", workspace=Workspace(tmp_path))


async def run(name: str, arguments: dict[str, Any], call: ToolContext) -> ToolOutput:
    return await REGISTRY.get(name).run(arguments, call)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# -- registration and schemas --------------------------------------------------------------------


@pytest.mark.parametrize("name", FILE_TOOLS)
def test_every_file_tool_emits_a_json_object_schema_with_type_object(name: str) -> None:
    spec = REGISTRY.get(name).spec()
    params = spec.parameters
    assert params["type"] == "object"
    assert "path" in params["properties"] and "$ref" not in str(params)
    assert spec.schema()["function"]["parameters"]["type"] == "object"
    assert REGISTRY.get(name).toolset == "file"


def test_reads_are_read_only_and_writes_are_scoped_to_their_path() -> None:
    traits = {name: REGISTRY.get(name).traits for name in FILE_TOOLS}
    assert traits["read_file"].read_only and traits["search_files"].read_only
    assert not traits["write_file"].read_only and not traits["patch"].read_only
    assert {t.path_argument for t in traits.values()} == {"path"}


# -- read_file -----------------------------------------------------------------------------------


async def test_read_file_numbers_lines_and_resolves_relative_paths_against_the_workspace(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("alpha\r\nbeta\ngamma")
    result = await run("read_file", {"path": "notes.txt"}, call)
    assert result.ok and result.content == "     1|alpha\n     2|beta\n     3|gamma"


async def test_read_file_pages_with_offset_and_limit_and_says_how_to_continue(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("".join(f"row {i}\n" for i in range(1, 3001)))
    first = await run("read_file", {"path": "long.txt"}, call)
    assert first.content.splitlines()[-2] == "   500|row 500"
    assert first.content.endswith("[showing lines 1-500 of 3,000; continue with offset=501]")
    page = await run("read_file", {"path": "long.txt", "offset": 2990, "limit": 5}, call)
    assert page.content.splitlines() == [f"  {n}|row {n}" for n in range(2990, 2995)] + ["[showing lines 2,990-2,994 of 3,000; continue with offset=2995]"]
    capped = await run("read_file", {"path": "long.txt", "limit": 100_000}, call)
    assert "[showing lines 1-2,000 of 3,000; continue with offset=2001]" in capped.content
    tail = await run("read_file", {"path": "long.txt", "offset": "2999"}, call)
    assert tail.content == "  2999|row 2999\n  3000|row 3000"


async def test_read_file_past_the_end_is_an_error_that_gives_the_length(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "short.txt").write_text("a\nb\n")
    result = await run("read_file", {"path": "short.txt", "offset": 10}, call)
    assert not result.ok and result.content == "[error] offset 10 is past the end of short.txt (it has 2 lines)."


async def test_read_file_cuts_long_lines_and_caps_the_output_with_a_note(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text("x" * (MAX_LINE_CHARS + 500) + "\nshort\n")
    wide = await run("read_file", {"path": "wide.txt"}, call)
    assert "… [500 more characters on this line]" in wide.content and "     2|short" in wide.content
    assert "1 line(s) longer than 2,000 characters were cut" in wide.content
    (tmp_path / "big.txt").write_text(("y" * 1000 + "\n") * 300)
    big = await run("read_file", {"path": "big.txt"}, call)
    assert len(big.content) < MAX_OUTPUT_CHARS + 500
    assert f"output is capped at {MAX_OUTPUT_CHARS:,} characters; continue with offset=80]" in big.content


async def test_read_file_refuses_binary_files_clearly(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02" + bytes(range(256)))
    (tmp_path / "photo.png").write_bytes(b"not really a png")
    blob = await run("read_file", {"path": "blob.bin"}, call)
    assert not blob.ok and "blob.bin is a binary file (263 bytes; it contains NUL bytes)" in blob.content
    png = await run("read_file", {"path": "photo.png"}, call)
    assert not png.ok and "its .png name says binary" in png.content


async def test_read_file_on_a_missing_file_suggests_similar_names(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("a: 1\n")
    typo = await run("read_file", {"path": "confg.yaml"}, call)
    assert not typo.ok and typo.content.startswith("[error] confg.yaml: no such file.")
    assert f"Did you mean: {tmp_path / 'config.yaml'}?" in typo.content
    nodir = await run("read_file", {"path": "missing/dir/file.txt"}, call)
    assert f"The directory {tmp_path / 'missing'} does not exist." in nodir.content


async def test_read_file_on_a_directory_an_empty_file_or_a_fifo_says_what_it_is(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    os.mkfifo(tmp_path / "pipe")
    assert (await run("read_file", {"path": "empty.txt"}, call)).content == "[empty.txt is empty]"
    folder = await run("read_file", {"path": "."}, call)
    assert not folder.ok and "is a directory; list it with search_files" in folder.content
    fifo = await run("read_file", {"path": "pipe"}, call)
    assert not fifo.ok and "not a regular file" in fifo.content


async def test_read_file_expands_the_home_directory(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "user" / "todo.md").write_text("- ship it\n")
    assert (await run("read_file", {"path": "~/todo.md"}, call)).content == "     1|- ship it"


# -- write_file ----------------------------------------------------------------------------------


async def test_write_file_creates_parent_directories_and_leaves_no_temporary_file(call: ToolContext, tmp_path: Path) -> None:
    result = await run("write_file", {"path": "deep/er/new.txt", "content": "one\ntwo\n"}, call)
    assert result.ok and result.content == "Created deep/er/new.txt: 8 bytes, 2 lines."
    assert (tmp_path / "deep/er/new.txt").read_text() == "one\ntwo\n"
    again = await run("write_file", {"path": "deep/er/new.txt", "content": "three"}, call)
    assert again.content == "Replaced deep/er/new.txt: 5 bytes, 1 lines."
    assert (tmp_path / "deep/er/new.txt").read_text() == "three"
    assert leftovers(tmp_path / "deep/er") == []


async def test_write_file_keeps_the_permission_bits_of_the_file_it_replaces(call: ToolContext, tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o750)
    await run("write_file", {"path": "run.sh", "content": "echo new\n"}, call)
    assert script.read_text() == "echo new\n" and (script.stat().st_mode & 0o777) == 0o750


async def test_a_failed_write_leaves_the_original_intact_and_no_temporary_file(call: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "keep.txt"
    target.write_text("precious\n")

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("actors._atomic.os.fsync", broken_fsync)
    result = await run("write_file", {"path": "keep.txt", "content": "replacement\n"}, call)
    assert not result.ok and result.content == "[error] could not write keep.txt: Input/output error; the file is unchanged."
    assert target.read_text() == "precious\n" and leftovers(tmp_path) == []


async def test_write_file_through_a_symlink_changes_the_target_and_keeps_the_link(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("old")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    result = await run("write_file", {"path": "link.txt", "content": "new"}, call)
    assert result.ok and "through the symlink" in result.content
    assert (tmp_path / "link.txt").is_symlink() and (tmp_path / "real.txt").read_text() == "new"


@pytest.mark.parametrize(
    "path",
    [
        "~/.ssh/authorized_keys",
        "user/.ssh/id_ed25519",
        "sub/../user/.ssh/authorized_keys",
        "~/.aws/credentials",
        "~/.bashrc",
        "home/.env",
        "home/../home/auth.json",
        "elsewhere/.gnupg/pubring.kbx",
    ],
)
async def test_write_file_refuses_protected_paths_however_they_are_spelled(call: ToolContext, tmp_path: Path, path: str) -> None:
    result = await run("write_file", {"path": path, "content": "ssh-ed25519 AAAA attacker"}, call)
    assert not result.ok and result.content.startswith("[error] write refused:")
    assert "is protected" in result.content and "ask the user" in result.content
    assert not (tmp_path / "user/.ssh").exists() and not (tmp_path / "home").exists()


async def test_write_file_refuses_a_symlink_that_leads_into_a_protected_place(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    env = tmp_path / "home" / ".env"
    env.write_text("OPENAI_API_KEY=sk-real\n")
    (tmp_path / "innocent.txt").symlink_to(env)
    ssh = tmp_path / "user" / ".ssh"
    ssh.mkdir()
    (tmp_path / "keys").symlink_to(ssh)
    via_file = await run("write_file", {"path": "innocent.txt", "content": "OPENAI_API_KEY=stolen\n"}, call)
    assert not via_file.ok and f"(it resolves to {env})" in via_file.content and "HERMES_HOME/.env" in via_file.content
    via_dir = await run("write_file", {"path": "keys/authorized_keys", "content": "ssh-rsa attacker"}, call)
    assert not via_dir.ok and "SSH keys" in via_dir.content
    patched = await run("patch", {"path": "innocent.txt", "old_string": "sk-real", "new_string": "stolen"}, call)
    assert not patched.ok and "write refused" in patched.content
    assert env.read_text() == "OPENAI_API_KEY=sk-real\n" and list(ssh.iterdir()) == []


@pytest.mark.parametrize("path", ["home/config.yaml", "home/approved_patterns.txt", "home/skills/new/SKILL.md", "sub/../home/x", "home"])
async def test_write_file_refuses_everything_under_hermes_home_and_says_to_ask_the_user(call: ToolContext, tmp_path: Path, path: str) -> None:
    result = await run("write_file", {"path": path, "content": "approvals:\n  mode: off\n"}, call)
    assert not result.ok and result.content.startswith("[error] write refused:")
    assert "the agent's own configuration (HERMES_HOME" in result.content and "ask the user" in result.content
    assert not (tmp_path / "home").exists()


async def test_write_file_refuses_a_symlink_into_hermes_home_and_still_writes_beside_it(call: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "config-link.yaml").symlink_to(tmp_path / "home" / "config.yaml")
    via_link = await run("write_file", {"path": "config-link.yaml", "content": "x"}, call)
    assert not via_link.ok and "HERMES_HOME" in via_link.content
    assert not (tmp_path / "home" / "config.yaml").exists()
    beside = await run("write_file", {"path": "home-notes.md", "content": "fine\n"}, call)
    assert beside.ok and (tmp_path / "home-notes.md").read_text() == "fine\n"


def test_system_account_files_are_refused_by_any_spelling(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for path in ("/etc/shadow", "/etc/passwd", "/etc/sudoers", "/etc/sudoers.d/90-agent", "/tmp/../etc/shadow", "/etc/./gshadow"):
        assert write_refusal(Path(path), home) is not None, path
    assert write_refusal(Path("/etc/hostname.bak"), home) is None
    assert write_refusal(tmp_path / "project" / "ssh_notes.md", home) is None
    assert write_refusal(home / "config.yaml", home) is None


# -- secrets in what the file tools show -------------------------------------------------------------


async def test_read_file_and_search_hide_secret_values_as_terminal_output_does_and_patch_explains_the_mask(call: ToolContext, tmp_path: Path) -> None:
    key = "sk-proj-" + "Q7f2" * 12
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={key}\nDEBUG=true\n")
    shown = await run("read_file", {"path": ".env"}, call)
    assert key not in shown.content and "[REDACTED]" in shown.content and "     2|DEBUG=true" in shown.content
    found = await run("search_files", {"pattern": "OPENAI", "target": "content"}, call)
    assert found.ok and key not in found.content and "OPENAI_API_KEY=" in found.content
    masked_line = shown.content.splitlines()[0].split("|", 1)[1]
    refused = await run("patch", {"path": ".env", "old_string": masked_line, "new_string": "OPENAI_API_KEY=new"}, call)
    assert not refused.ok and "hide secret values" in refused.content
    assert (tmp_path / ".env").read_text().startswith(f"OPENAI_API_KEY={key}\n")  # nothing written
