"""``hermes serve``: the runtime with the store, the sessions and the API server, until a signal.

The listening socket is bound before the runtime starts: a port in use is one line on
stderr and exit status 2 (no supervisor restarts). On SIGTERM or SIGINT the server
drains: it stops admitting turns (503 with Retry-After), lets running turns finish up to
the drain deadline, then stops the tree, which cancels and settles whatever still runs. A
second signal exits at once (:class:`actors.SignalStop`, shared with ``hermes run``).
"""

from __future__ import annotations

import dataclasses
import gc
import importlib.metadata
import logging
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from actors import HermesError, SignalStop, claim_group_ledger, use_group_ledger
from actors.agent import (
    ConfigError,
    HubRegistry,
    MachineConfig,
    ModelClients,
    SessionDeps,
    build_agent_runtime,
    hermes_home,
    load_approval_settings,
    reader_opener,
)
from actors.agent._compression_settings import load_compression
from actors.agent._config import read_config
from actors.agent._providers import primary_settings, with_chain
from actors.agent._tokens import tools_size
from actors.config import load_config
from actors.credentials._settings import load_providers
from supervisor import ChildSpec, Supervisor

from ._keys import KeyError_, load_or_create_key
from ._listen import Listener, ListenError, open_listener
from ._server import API_SERVER_PATH, ApiServer, ServerSettings

log = logging.getLogger(__name__)


def _version() -> str:
    try:
        return importlib.metadata.version("hermes-actors")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _tools() -> dict[str, Any]:
    import actors.tools as tools_package  # importing registers the tools

    names = tools_package.resolve_toolsets(["hermes-api-server"])
    return tools_package.REGISTRY.specs(names)


def _yes(value: object) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes", "on")


def run_serve(*, host: str | None, port: int | None, home: Path | None, drain_timeout: float, env: Mapping[str, str] | None = None, yolo: bool = False) -> int:
    env = dict(os.environ if env is None else env)
    home = home or hermes_home(env)
    try:
        loaded = load_config(home, env)
        chain = load_providers(home, env=env)
        model = primary_settings(chain, home, env)
        approvals = load_approval_settings(home, env=env, yolo=yolo)
        compression = load_compression(home, model.model)
        key, created = load_or_create_key(home, env)
        section = read_config(home).get("api_server") or {}
    except (ConfigError, KeyError_) as exc:
        print(f"hermes serve: {exc}", flush=True)
        return 2
    for line in loaded.warning_lines():  # once, at start: keys that have no effect
        print(f"hermes serve: {line}", file=sys.stderr, flush=True)
    origins = frozenset(section.get("cors_origins") or ())
    host = host or str(section.get("host") or "127.0.0.1")
    port = port if port is not None else int(section.get("port") or 8642)
    try:  # before anything starts: a taken port is one line, not a supervisor giving up
        listener = Listener(open_listener(host, port))
    except ListenError as exc:
        print(f"hermes serve: {exc}", file=sys.stderr, flush=True)
        return 2
    if _yes(section.get("access_log")):
        logging.getLogger("hermes.access").setLevel(logging.INFO)
    clients = ModelClients()
    settings = ServerSettings(
        host=host,
        port=port,
        key=key,
        model_name=str(section.get("model_name") or "hermes-agent"),
        version=_version(),
        allowed_origins=origins,
        max_concurrent=int(section.get("max_concurrent") or 10_000),
        store_file=home / "state.db",
        tool_progress=_yes(section.get("tool_progress")),
        plain_model_name=str(section["plain_model_name"]) if section.get("plain_model_name") else None,
        upstream=model,
        clients=clients,
        listener=listener,
    )
    store = home / "state.db"
    tools: Mapping[str, Any] = _tools()
    traits: Mapping[str, Any] = {name: spec.traits for name, spec in tools.items()}
    mcp = None
    if any(server.enabled for server in loaded.config.mcp_servers.values()):
        from ._serve_mcp import with_mcp  # the mcp SDK loads only where servers are configured

        tools, traits, mcp = with_mcp(tools, loaded.config.mcp_servers, model)
        settings = dataclasses.replace(settings, health_sections={"mcp": mcp.catalog.statuses})
    hubs = HubRegistry()
    deps = SessionDeps(
        hubs=hubs,
        open_reader=reader_opener(store),
        model=model,
        clients=clients,
        tools=tools,
        config=MachineConfig(
            traits=traits,
            compression=compression.settings,
            context_length=compression.context_length,
            summary_model=compression.summary_model,
            tools_size=tools_size([spec.schema() for spec in tools.values()]),
        ),
        source="api",
        platform_hint="You are answering through an OpenAI-compatible API; format replies as plain Markdown.",
        home=home,
        store_file=store,
        approvals=approvals,
    )
    deps = with_chain(deps, chain)
    api = ChildSpec(id="api", actor=ApiServer, args=(settings, hubs))
    extra = (ChildSpec(id="platforms", actor=Supervisor, args=((api,),)), *((mcp.tree,) if mcp is not None else ()))
    reaped = claim_group_ledger(home / "run" / "groups")
    if reaped:
        commands = "; ".join(" ".join(r.argv) for r in reaped)
        print(f"hermes serve: stopped {len(reaped)} command(s) a killed hermes had left running: {commands}", flush=True)
    with SignalStop("hermes serve") as stop:
        runtime = build_agent_runtime(store, deps, extra=extra)
        stop.follow(runtime)
        try:
            runtime.start()
            server = runtime.lookup(API_SERVER_PATH)
            try:
                bound = server.ask("port", timeout=10)
            except (HermesError, TimeoutError) as exc:
                runtime.stop(timeout=10)
                print(f"hermes serve: the API server did not start: {runtime.exit_reason or exc}", flush=True)
                return 1
            # Everything imported and built so far lives as long as the process: keep it out of
            # the collector's way (a full collection over it stalled every thread for ~100 ms).
            gc.collect()
            gc.freeze()
            if mcp is not None:  # before announcing: each server up, or its failure said
                mcp.wait_started()
            url = f"http://{settings.host}:{bound}/v1"
            print(f"hermes serve {_version()}: listening on {url} (model {model.model} at {model.base_url})", flush=True)
            if approvals.yolo:
                print(
                    f"hermes serve: WARNING: approvals are off ({approvals.source}): dangerous commands run without asking anyone; "
                    "the hardline list still never runs",
                    flush=True,
                )
            if created:
                print(f"A new API key was made and saved in {home / '.env'} (API_SERVER_KEY):\n  {key}", flush=True)
            if mcp is not None:
                for line in mcp.lines():
                    print(f"hermes serve: {line}", flush=True)
            print(f"Try: curl -H 'Authorization: Bearer <key>' {url}/models   (Ctrl+C or SIGTERM stops it)", flush=True)

            stop.wait()
            if runtime.failed:
                print(f"hermes serve: the runtime stopped: {runtime.exit_reason}", flush=True)
                return 1
            print(f"hermes serve: {stop.received or 'stop'}: draining (up to {drain_timeout:g} s)", flush=True)
            server.tell("drain")
            deadline = time.monotonic() + drain_timeout
            while time.monotonic() < deadline and server.ask("active", timeout=5) > 0:
                time.sleep(0.1)  # the main thread only: no actor waits here
            stopped = runtime.stop(timeout=60, reason="hermes serve stopping")
            print("hermes serve: stopped cleanly" if stopped else "hermes serve: stopped, but some actors had to be abandoned", flush=True)
            return 0 if stopped else 1
        finally:
            if not runtime.wait(0):
                runtime.stop(timeout=30)
            listener.close()  # when no server took it
            use_group_ledger(None)
