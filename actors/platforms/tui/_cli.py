"""``hermes chat`` and ``hermes attach``: their arguments and what they run.

This module is imported whenever the ``hermes`` parser is built, so it imports only the
standard library; the UI, the runtime and the HTTP client are imported when a command runs
(the full-screen UI builds the runtime in a worker thread, after its prompt is up).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8642"
EXIT_CONFIG, EXIT_CANCELLED = 2, 130


def add_parsers(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``chat`` and ``attach`` to the ``hermes`` command's subparsers."""
    chat = subparsers.add_parser(
        "chat",
        help="talk to the agent in a full-screen terminal UI (plain text with -q, --plain, or when stdout is not a terminal)",
    )
    chat.add_argument(
        "-q", "--query", default=None, metavar="TEXT", help="ask one question, print the answer and exit (0 ok, 1 failed, 2 config error, 130 cancelled)"
    )
    chat.add_argument("--plain", action="store_true", help="no full screen: each line of stdin is a question, answers go to stdout")
    chat.add_argument("--resume", default=None, metavar="SESSION_ID", help="continue a stored session")
    chat.add_argument("--home", type=Path, default=None, help="HERMES_HOME (default $HERMES_HOME or ~/.hermes)")
    chat.add_argument("--yolo", action="store_true", help="run dangerous commands without asking (the hardline blocklist still applies)")
    chat.set_defaults(handler=chat_main)
    attach = subparsers.add_parser("attach", help="follow and talk to a session of a running 'hermes serve'")
    attach.add_argument("session_id", metavar="SESSION_ID", help="the session to attach to (it need not exist yet)")
    attach.add_argument("--url", default=DEFAULT_URL, help=f"the server (default {DEFAULT_URL})")
    attach.add_argument("--key", default=None, help="API key (default API_SERVER_KEY from the environment or HERMES_HOME/.env)")
    attach.add_argument("--home", type=Path, default=None, help="HERMES_HOME, where the key is read from")
    attach.add_argument("--plain", action="store_true", help="no full screen: print the session's turns until Ctrl+C")
    attach.set_defaults(handler=attach_main)


def _home(given: Path | None, env: Mapping[str, str]) -> Path:
    # The same rule as actors.agent.hermes_home, which would import the model SDK before the
    # prompt is shown.
    return given or Path(env.get("HERMES_HOME") or Path.home() / ".hermes")


def _plain_wanted(args: argparse.Namespace) -> bool:
    """``--plain``, ``-q``, or no terminal to draw on or read keys from."""
    return bool(args.plain or getattr(args, "query", None) is not None or not sys.stdout.isatty() or not sys.stdin.isatty())


@contextmanager
def _logs_to_file(home: Path) -> Iterator[None]:
    """While the full screen is up, log records go to HERMES_HOME/logs/tui.log, not over the screen."""
    root = logging.getLogger()
    streams = [h for h in root.handlers if type(h) is logging.StreamHandler]
    for handler in streams:
        root.removeHandler(handler)
    file_handler: logging.Handler | None = None
    try:
        (home / "logs").mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(home / "logs" / "tui.log", encoding="utf-8")
        file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(file_handler)
    except OSError:
        pass  # no log file: records are dropped rather than drawn over the UI
    try:
        yield
    finally:
        if file_handler is not None:
            root.removeHandler(file_handler)
            file_handler.close()
        for handler in streams:
            root.addHandler(handler)


def _run_app(app: Any, home: Path) -> int:
    with _logs_to_file(home):
        code = app.run()
    failure = getattr(app, "failure", None)
    if failure:
        print(f"hermes: {failure}", file=sys.stderr)
    return int(code if code is not None else app.exit_code)


def chat_main(args: argparse.Namespace) -> int:
    """``hermes chat``: the agent runtime in this process, full screen or plain."""
    env = dict(os.environ)
    home = _home(args.home, env)
    yolo = bool(args.yolo)
    if not _config_checked(home, env):
        return EXIT_CONFIG
    if _plain_wanted(args):
        return _chat_plain(args, home, env, yolo)
    from ._app import ChatApp, default_history

    def connect() -> Any:
        from ._local import open_local_session

        return open_local_session(home, env=env, yolo=yolo)

    app = ChatApp(connect, session_id=args.resume, resume=args.resume is not None, history=default_history(home))
    try:
        return _run_app(app, home)
    finally:
        # The runtime stops even if the UI ended abnormally, or before the runtime was up.
        handle = app.finish_connecting(timeout=60)
        if handle is not None and hasattr(handle, "close"):
            handle.close()


def _config_checked(home: Path, env: Mapping[str, str]) -> bool:
    """Read config.yaml once before the screen is taken: its errors end the command, and keys
    that have no effect (unknown, or Hermes's that this build ignores) are said once on stderr."""
    from actors.config import ConfigError, load_config

    try:
        loaded = load_config(home, env)
    except ConfigError as exc:
        print(f"hermes chat: {exc}", file=sys.stderr)
        return False
    for line in loaded.warning_lines():
        print(f"hermes chat: {line}", file=sys.stderr)
    return True


def _chat_plain(args: argparse.Namespace, home: Path, env: dict[str, str], yolo: bool) -> int:
    from ._handle import SetupFailed
    from ._local import open_local_session
    from ._plain import run_plain, stdin_reader

    try:
        handle = open_local_session(home, env=env, yolo=yolo)
    except SetupFailed as exc:
        print(f"hermes chat: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    session_id = args.resume or f"sess_{uuid.uuid4().hex[:24]}"
    interactive = sys.stdin.isatty()
    questions = [args.query] if args.query is not None else stdin_reader(sys.stdin)
    ask = stdin_reader(sys.stdin) if interactive else None
    try:
        return asyncio.run(run_plain(handle, session_id, questions, out=sys.stdout, err=sys.stderr, ask=ask))
    except KeyboardInterrupt:  # before the turn could take Ctrl+C over
        return EXIT_CANCELLED
    finally:
        handle.close()


def server_key(given: str | None, home: Path, env: Mapping[str, str]) -> str:
    """The API key for ``hermes attach``: ``--key``, else API_SERVER_KEY from the environment or HERMES_HOME/.env."""
    from actors.agent._config import read_dotenv

    from .._keys import ENV_NAME
    from ._handle import SetupFailed

    key = given or env.get(ENV_NAME) or read_dotenv(home / ".env").get(ENV_NAME)
    if not key:
        msg = f"no API key for the server: pass --key, or set {ENV_NAME} in the environment or in {home / '.env'} (hermes serve writes it there)"
        raise SetupFailed(msg)
    return key


def attach_main(args: argparse.Namespace) -> int:
    """``hermes attach``: a session of a running server, over HTTP."""
    env = dict(os.environ)
    home = _home(args.home, env)
    if _plain_wanted(args):
        return _attach_plain(args, home, env)
    from ._app import ChatApp, default_history

    def connect() -> Any:
        from ._remote import RemoteSession

        return RemoteSession(args.url, server_key(args.key, home, env))

    app = ChatApp(connect, session_id=args.session_id, resume=True, history=default_history(home))
    return _run_app(app, home)


def _attach_plain(args: argparse.Namespace, home: Path, env: dict[str, str]) -> int:
    from ._handle import SetupFailed
    from ._plain import run_plain, stdin_reader
    from ._remote import RemoteSession

    try:
        handle = RemoteSession(args.url, server_key(args.key, home, env))
    except SetupFailed as exc:
        print(f"hermes attach: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    ask = stdin_reader(sys.stdin) if sys.stdin.isatty() else None
    try:
        return asyncio.run(run_plain(handle, args.session_id, None, out=sys.stdout, err=sys.stderr, ask=ask))
    except KeyboardInterrupt:
        return EXIT_CANCELLED
