"""The ``chat`` and ``attach`` subcommands: arguments, defaults, and the API key for attach."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from actors.platforms.tui import SetupFailed, add_parsers, attach_main, chat_main
from actors.platforms.tui._cli import DEFAULT_URL, server_key


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="hermes")
    add_parsers(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_chat_takes_a_question_plain_mode_a_session_to_resume_and_yolo() -> None:
    args = parse("chat", "-q", "what is 6x7?", "--resume", "sess_1", "--yolo", "--home", "/tmp/h")
    assert args.handler is chat_main
    assert (args.query, args.resume, args.yolo, args.home, args.plain) == ("what is 6x7?", "sess_1", True, Path("/tmp/h"), False)
    assert parse("chat", "--plain").plain


def test_attach_takes_a_session_id_and_defaults_to_the_local_server() -> None:
    args = parse("attach", "sess_9")
    assert args.handler is attach_main
    assert (args.session_id, args.url, args.key) == ("sess_9", DEFAULT_URL, None)
    assert parse("attach", "--url", "http://h:1", "--key", "k", "s").url == "http://h:1"


def test_the_attach_key_comes_from_the_flag_the_environment_or_hermes_home(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("API_SERVER_KEY=from-the-dotenv-file\n")
    assert server_key("given", tmp_path, {}) == "given"
    assert server_key(None, tmp_path, {"API_SERVER_KEY": "from-env"}) == "from-env"
    assert server_key(None, tmp_path, {}) == "from-the-dotenv-file"
    with pytest.raises(SetupFailed, match="pass --key, or set API_SERVER_KEY"):
        server_key(None, tmp_path / "elsewhere", {})
