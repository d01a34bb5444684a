"""The ``hermes`` command line.

``hermes serve`` runs the OpenAI-compatible API server over the agent runtime (the main
job). ``hermes run`` starts the bare kernel (supervision tree and reactor), shows the tree,
and stops cleanly on Ctrl+C / SIGTERM (or after ``--for`` seconds); a second signal forces
the exit (``actors._signals``). ``chat``, ``attach`` and ``chaos`` arrive with their issues.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors._version import package_version

if TYPE_CHECKING:
    from protocols import NodeSnapshot, TreeSnapshot

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _Version(argparse.Action):
    """``--version``, looked up only when asked for (``hermes --help`` stays fast)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **_: Any) -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help="show program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        print(f"{parser.prog} {package_version()}")
        parser.exit()


def render_tree(snapshot: TreeSnapshot) -> str:
    """The tree as indented text lines, one node per line."""
    lines: list[str] = []

    def walk(node: NodeSnapshot, depth: int) -> None:
        name = node.path if depth == 0 else node.path.rsplit("/", 1)[1]
        lines.append(f"{'  ' * depth}{name:<24} {node.kind:<10} {node.state:<10} restarts={node.restarts} mailbox={node.mailbox} up={node.uptime_s:.1f}s")
        for child in node.children:
            walk(child, depth + 1)

    walk(snapshot.root, 0)
    lines.append(f"reactor: lag {snapshot.reactor_lag_ms:.2f} ms (max {snapshot.reactor_lag_max_ms:.2f}), waits {snapshot.reactor_waits}")
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    from actors._signals import SignalStop
    from protocols import to_json
    from supervisor import Runtime  # the kernel starts threads: import only when running

    with SignalStop("hermes run") as stop:
        runtime = Runtime()
        stop.follow(runtime)
        runtime.start()
        snapshot = runtime.snapshot()
        if args.json:
            print(to_json(snapshot).decode(), flush=True)
        else:
            print(f"hermes {package_version()}: runtime up. Ctrl+C or SIGTERM stops it.", flush=True)
            print(render_tree(snapshot), flush=True)
        stop.wait(args.seconds)
        started = time.monotonic()
        stopped = runtime.stop(timeout=args.shutdown_timeout, reason=f"signal {stop.received}" if stop.received else "hermes run ended")
    took = (time.monotonic() - started) * 1000
    if runtime.failed:
        print(f"hermes: the runtime stopped: {runtime.exit_reason}", file=sys.stderr)
        return EXIT_FAILED
    leftover = [t.name for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive() and not t.name.startswith("Trio thread")]
    if not stopped or leftover:
        print(
            f"hermes: shutdown did not finish within {args.shutdown_timeout} s; still running: {', '.join(leftover) or 'none'}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(f"hermes: stopped cleanly in {took:.1f} ms", flush=True)
    return EXIT_OK


def _parser(*, full: bool = False) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hermes",
        description="An actor-model runtime for AI agents: supervised actors, one trio reactor, typed messages.",
    )
    parser.add_argument("--version", action=_Version)
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = commands.add_parser("run", help="start the runtime kernel and show its supervision tree until stopped")
    run.add_argument(
        "--for", dest="seconds", type=float, default=None, metavar="SECONDS", help="stop after this many seconds (default: until Ctrl+C / SIGTERM)"
    )
    run.add_argument("--json", action="store_true", help="print the tree snapshot as JSON")
    run.add_argument("--shutdown-timeout", type=float, default=30.0, metavar="SECONDS", help="how long an orderly shutdown may take (default 30)")
    run.set_defaults(handler=_run)
    commands.add_parser(
        "chaos",
        help="fault injection: a deterministic simulator (sim, replay), fault plans (plan), a real chaos run (run); see hermes chaos --help",
        add_help=False,
    )
    serve = commands.add_parser("serve", help="run the OpenAI-compatible API server over the agent runtime")
    serve.add_argument("--host", default=None, help="interface to listen on (default 127.0.0.1, or api_server.host in config.yaml)")
    serve.add_argument("--port", type=int, default=None, help="port (default 8642, or api_server.port); 0 picks a free one")
    serve.add_argument("--home", type=Path, default=None, help="HERMES_HOME (default $HERMES_HOME or ~/.hermes)")
    serve.add_argument(
        "--workers", type=int, default=None, metavar="N", help="N worker processes on the one port, sharing the store (default 1, or api_server.workers)"
    )
    serve.add_argument("--drain-timeout", type=float, default=30.0, metavar="SECONDS", help="how long running turns may finish on SIGTERM (default 30)")
    serve.add_argument("--yolo", action="store_true", help="run dangerous commands without asking (the hardline blocklist still applies)")
    serve.add_argument(
        "--accept-hooks", action="store_true", help="allow every shell hook of config.yaml without asking (recorded in shell-hooks-allowlist.json)"
    )
    serve.set_defaults(handler=_serve)
    hooks = commands.add_parser("hooks", help="the shell hooks of config.yaml, plugins and gateway hooks: list, test, doctor")
    hook_actions = hooks.add_subparsers(dest="hooks_action", metavar="ACTION", required=True)
    for name, text in (
        ("list", "every configured hook and whether it is allowed"),
        ("doctor", "check each shell hook: script, consent, edits since consent, a dry run"),
    ):
        hook_actions.add_parser(name, help=text).add_argument("--home", type=Path, default=None, help="HERMES_HOME")
    hook_test = hook_actions.add_parser("test", help="run the shell hooks of EVENT on a synthetic payload and print what they answer")
    hook_test.add_argument("event")
    hook_test.add_argument("--for-tool", default=None, help="the tool name the payload names (for matchers)")
    hook_test.add_argument("--payload-file", type=Path, default=None, help="JSON with tool_input and extra to send")
    hook_test.add_argument("--home", type=Path, default=None, help="HERMES_HOME")
    hooks.set_defaults(handler=_hooks)
    doctor = commands.add_parser("doctor", help="check the home, its config, the store, the model endpoint and every key; each problem with its fix")
    doctor.add_argument("--home", type=Path, default=None, help="HERMES_HOME (default $HERMES_HOME or ~/.hermes)")
    doctor.add_argument("--offline", action="store_true", help="skip the checks that call the model endpoint and the keys")
    doctor.set_defaults(handler=_doctor)
    setup = commands.add_parser("setup", help="find a model (local servers, OpenRouter, OpenAI, a URL), check it with one call, save it")
    setup.add_argument("--home", type=Path, default=None, help="HERMES_HOME (default $HERMES_HOME or ~/.hermes)")
    setup.add_argument("--non-interactive", action="store_true", help="take the choice from the flags below; no prompts")
    setup.add_argument("--provider", choices=["local", "openrouter", "openai", "custom"], default=None, help="where the model is (default: a local server)")
    setup.add_argument("--base-url", default=None, help="the OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    setup.add_argument("--model", default=None, help="the model name (default for a local server: the first it lists)")
    setup.add_argument("--api-key", default=None, help="the key (else OPENROUTER_API_KEY / OPENAI_API_KEY from the environment); saved in .env")
    setup.add_argument("--skip-check", action="store_true", help="save without the test call")
    setup.set_defaults(handler=_setup)
    sessions = commands.add_parser("sessions", help="the session store: list, show, export, delete, prune, stats")
    sessions.add_argument("--home", type=Path, default=None, help="HERMES_HOME (default $HERMES_HOME or ~/.hermes)")
    actions = sessions.add_subparsers(dest="action", metavar="ACTION")
    listing = actions.add_parser("list", help="the latest sessions")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--source", default=None, help="only this source (api, cli, ...)")
    actions.add_parser("show", help="one session's transcript").add_argument("session_id")
    actions.add_parser("export", help="one session as JSON (every segment, its turns) on stdout").add_argument("session_id")
    actions.add_parser("stats", help="how many sessions, messages and tokens the store holds")
    removing = actions.add_parser("delete", help="delete sessions (refused while a runtime serves the store)")
    removing.add_argument("session_ids", nargs="+", metavar="SESSION_ID")
    pruning = actions.add_parser("prune", help="delete sessions started more than --older-than days ago")
    pruning.add_argument("--older-than", type=float, required=True, metavar="DAYS")
    pruning.add_argument("--source", default=None, help="only sessions of this source")
    pruning.add_argument("--dry-run", action="store_true", help="list what would be deleted")
    sessions.set_defaults(handler=_sessions)
    _cron_parser(commands)
    db = commands.add_parser("db", help="the session store's database: migrate a SQLite home into Postgres")
    db_actions = db.add_subparsers(dest="db_action", metavar="ACTION", required=True)
    migrate = db_actions.add_parser("migrate", help="copy the home's state.db into an empty Postgres database (row counts checked)")
    migrate.add_argument("--home", type=Path, default=None, help="HERMES_HOME (default $HERMES_HOME or ~/.hermes)")
    migrate.add_argument("--from", dest="source", type=Path, default=None, help="the SQLite store to copy (default: HOME/state.db)")
    migrate.add_argument("--to", dest="target", default=None, help="the postgresql:// URL (default: HERMES_DATABASE_URL or database.url)")
    db.set_defaults(handler=_db)
    pairing = commands.add_parser("pairing", help="chat users who asked to talk to the agent: list, approve a code, revoke")
    pairing.add_argument("--home", type=Path, default=None, help="HERMES_HOME (default $HERMES_HOME or ~/.hermes)")
    steps = pairing.add_subparsers(dest="pairing_action", metavar="ACTION", required=True)
    steps.add_parser("list", help="codes waiting for approval, and the users approved")
    approving = steps.add_parser("approve", help="let the user who holds CODE talk to the agent")
    approving.add_argument("platform")
    approving.add_argument("code")
    revoking = steps.add_parser("revoke", help="take an approved user out again")
    revoking.add_argument("platform")
    revoking.add_argument("user_id")
    pairing.set_defaults(handler=_pairing)
    mcp = commands.add_parser("mcp", help="the MCP servers of config.yaml: list them, or test one (connect and list its tools)")
    mcp_home = argparse.ArgumentParser(add_help=False)
    mcp_home.add_argument("--home", type=Path, default=None, help="HERMES_HOME (default $HERMES_HOME or ~/.hermes)")
    mcp_actions = mcp.add_subparsers(dest="mcp_action", metavar="ACTION", required=True)
    mcp_actions.add_parser("list", parents=[mcp_home], help="the configured servers")
    mcp_actions.add_parser("test", parents=[mcp_home], help="start or reach one server and list its tools").add_argument("name")
    mcp.set_defaults(handler=_mcp)
    _config_parser(commands)
    if full:
        from actors.platforms.tui._cli import add_parsers  # imports the platforms package: only when used

        add_parsers(commands)
    else:
        commands.add_parser("chat", help="talk to the agent in a full-screen terminal UI (hermes chat --help for more)")
        commands.add_parser("attach", help="follow and talk to a session of a running 'hermes serve' (hermes attach --help)")
    return parser


def _config_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    home = argparse.ArgumentParser(add_help=False)
    home.add_argument("--home", type=Path, default=None, help="HERMES_HOME (default $HERMES_HOME or ~/.hermes)")
    config = commands.add_parser("config", help="show, get or set config.yaml values (comments are kept), or print where the files are")
    actions = config.add_subparsers(dest="config_action", metavar="ACTION", required=True)
    actions.add_parser("path", parents=[home], help="print the paths of config.yaml and .env")
    actions.add_parser("show", parents=[home], help="print the effective configuration (file values over defaults), secrets redacted")
    get = actions.add_parser("get", parents=[home], help="print one value, such as compression.threshold")
    get.add_argument("key", metavar="KEY")
    put = actions.add_parser("set", parents=[home], help="set one value (YAML scalar or [list]); checked before it is written")
    put.add_argument("key", metavar="KEY")
    put.add_argument("value", metavar="VALUE")
    config.set_defaults(handler=_config)


def _cron_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cron = commands.add_parser("cron", help="scheduled jobs of a running 'hermes serve': list, add, edit, pause, resume, run, remove, status")
    cron.add_argument("--home", type=Path, default=None, help="HERMES_HOME (default $HERMES_HOME or ~/.hermes)")
    cron.add_argument("--url", default=None, help="the server (default: api_server host and port from config.yaml)")
    actions = cron.add_subparsers(dest="cron_action", metavar="ACTION", required=True)
    actions.add_parser("list", help="every job, its schedule, state and next run")
    actions.add_parser("status", help="the scheduler: jobs, next run, last outcomes")
    add = actions.add_parser("add", help="add a job: SCHEDULE ('30m', 'every 2h', '0 8 * * 1-5', an ISO time) and PROMPT")
    add.add_argument("schedule")
    add.add_argument("prompt")
    edit = actions.add_parser("edit", help="change a job's fields")
    edit.add_argument("job_id")
    for action in (add, edit):
        if action is edit:
            action.add_argument("--schedule", default=None)
            action.add_argument("--prompt", default=None)
        action.add_argument("--name", default=None)
        action.add_argument("--deliver", default=None, help="local, <platform>:<chat_id>, or a webhook URL")
        action.add_argument("--timezone", default=None)
        action.add_argument("--repeat", type=int, default=None)
        action.add_argument("--model", default=None)
        action.add_argument("--skills", default=None, help="comma-separated skills whose SKILL.md each run follows")
        action.add_argument(
            "--script", default=None, help="a script under HERMES_HOME/scripts/ run before each run, its output the run's context ('' removes it)"
        )
    for name, text in (("pause", "pause a job"), ("resume", "resume a paused job"), ("run", "run a job now"), ("remove", "remove a job")):
        actions.add_parser(name, help=text).add_argument("job_id")
    cron.set_defaults(handler=_cron)


def _cron(args: argparse.Namespace) -> int:
    from actors.scheduler._cli import run_cron  # httpx and the config: only when used

    return run_cron(args)


def _config(args: argparse.Namespace) -> int:
    from actors.config._cli import run_config  # YAML and the schema: only when used

    return run_config(args.config_action, home=args.home, key=getattr(args, "key", ""), value=getattr(args, "value", ""))


def _serve(args: argparse.Namespace) -> int:
    from actors.platforms._workers import run_serve_command

    return run_serve_command(
        workers=args.workers, host=args.host, port=args.port, home=args.home, drain_timeout=args.drain_timeout, yolo=args.yolo, accept_hooks=args.accept_hooks
    )


def _hooks(args: argparse.Namespace) -> int:
    from actors.hooks._cli import run_hooks_cli  # the config loader and trio: only when used

    return run_hooks_cli(
        args.hooks_action,
        home=args.home,
        event=getattr(args, "event", ""),
        tool=getattr(args, "for_tool", None),
        payload_file=getattr(args, "payload_file", None),
    )


def _doctor(args: argparse.Namespace) -> int:
    from actors.platforms._doctor import run_doctor

    return run_doctor(args.home, network=not args.offline)


def _setup(args: argparse.Namespace) -> int:
    from actors.platforms._setup import run_setup

    flags = {"provider": args.provider, "base_url": args.base_url, "model": args.model, "api_key": args.api_key}
    return run_setup(args.home, interactive_mode=not args.non_interactive, flags=flags, skip_check=args.skip_check)


def _sessions(args: argparse.Namespace) -> int:
    from actors.platforms._sessions_cli import run_sessions

    return run_sessions(args)


def _db(args: argparse.Namespace) -> int:
    from actors.store._db_cli import run_db  # the store, and psycopg when the target is reached

    return run_db(args)


def _pairing(args: argparse.Namespace) -> int:
    from actors.platforms.gateway._pairing_cli import run_pairing

    return run_pairing(
        args.pairing_action, home=args.home, platform=getattr(args, "platform", ""), value=getattr(args, "code", "") or getattr(args, "user_id", "")
    )


def _mcp(args: argparse.Namespace) -> int:
    from actors.tools.mcp._cli import run_mcp  # the mcp SDK: only when used

    return run_mcp(args.mcp_action, home=args.home, name=getattr(args, "name", ""))


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] == "chaos":
        from actors.chaos._chaos_cli import main as chaos  # its own parser: sim, replay, plan, run

        return chaos(arguments[1:])
    parser = _parser(full=bool(arguments) and arguments[0] in ("chat", "attach"))
    args = parser.parse_args(arguments)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if getattr(args, "seconds", None) is not None and args.seconds < 0:
        parser.error("--for needs a number of seconds >= 0")
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return int(args.handler(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
