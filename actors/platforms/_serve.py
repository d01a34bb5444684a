"""``hermes serve``: the runtime with the store, the sessions and the API server, until a signal.

The listening socket is bound before the runtime starts: a port in use is one line on
stderr and exit status 2 (no supervisor restarts). On SIGTERM or SIGINT the server
drains: it stops admitting turns (503 with Retry-After), lets running turns finish up to
the drain deadline, then stops the tree, which cancels and settles whatever still runs. A
second signal exits at once (:class:`actors.SignalStop`, shared with ``hermes run``). SIGHUP
reads config.yaml again and applies what may change while running (``_reload.py``).
"""

from __future__ import annotations

import functools
import gc
import logging
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from actors import HermesError, SignalStop, claim_group_ledger, use_group_ledger
from actors._version import package_version
from actors.agent import ConfigError, HubRegistry, ModelClients, SessionDeps, build_agent_runtime, hermes_home
from actors.agent._node import cluster_health
from actors.config import HermesConfig, load_config
from actors.config._env import read_dotenv
from actors.hooks import build_hooks, hooks_spec
from actors.store import HermesImportError
from actors.store._owner import StoreServedByWorkers
from supervisor import ChildSpec, Supervisor

from ._keys import KeyError_, load_or_create_key
from ._listen import Listener, ListenError, open_listener
from ._reload import Running, reloaded
from ._runtime_deps import Platform, configured_deps, gateway_deps
from ._server import API_SERVER_PATH, ApiServer, ServerSettings
from ._worker_role import PRIVATE_HOST, worker_role

log = logging.getLogger(__name__)


API_PLATFORM = Platform(name="api_server", source="api", hint="You are answering through an OpenAI-compatible API; format replies as plain Markdown.")


def _scheduler_spec(home: Path, store: str | Path, config: HermesConfig, deps: SessionDeps, platform_senders: dict[str, Any] | None = None) -> ChildSpec:
    """``/scheduler`` (issue 18): jobs run as sessions of this runtime; answers to a platform go
    through its running adapter (``platform_senders``: the gateway's table)."""
    from actors.scheduler import scheduler_spec
    from actors.scheduler._spec import scheduler_options

    def publish(session_id: str, event: Any) -> None:
        deps.hubs.get(session_id).publish(event)

    options = scheduler_options(
        home,
        store,
        config,
        hubs=deps.hubs,
        tool_names=frozenset(deps.tools),
        publish=publish,
        max_iterations=deps.config.max_iterations,
        platform_senders=platform_senders,
    )
    return scheduler_spec(options)


def run_serve(
    *,
    host: str | None,
    port: int | None,
    home: Path | None,
    drain_timeout: float,
    env: Mapping[str, str] | None = None,
    yolo: bool = False,
    accept_hooks: bool = False,
) -> int:
    env = dict(os.environ if env is None else env)
    home = home or hermes_home(env)
    hubs, clients = HubRegistry(), ModelClients()
    try:
        loaded = load_config(home, env)
        hooks, hook_lines = build_hooks(home, loaded.config.hooks, env=env, accept=accept_hooks, auto_accept=loaded.config.hooks_auto_accept)
        deps = configured_deps(home, env, loaded, API_PLATFORM, yolo=yolo, hubs=hubs, clients=clients, hooks=hooks)
        key, created = load_or_create_key(home, env)
        if (role := worker_role(env)) is not None:  # one of 'hermes serve --workers N' (_workers.py)
            deps = role.apply(deps, loaded.config)
    except (ConfigError, KeyError_) as exc:
        print(f"hermes serve: {exc}", flush=True)
        return 2
    for line in [*loaded.warning_lines(), *hook_lines]:  # once, at start: keys that have no effect, hooks
        print(f"hermes serve: {line}", file=sys.stderr, flush=True)
    section = loaded.config.api_server
    model, approvals, store = deps.model, deps.approvals, deps.store_file or home / "state.db"
    host = host or section.host
    port = port if port is not None else section.port
    try:  # before anything starts: a taken port is one line, not a supervisor giving up
        listener = role.listener(host, port) if role is not None else Listener(open_listener(host, port))
        private = role.private_listener() if role is not None else None
    except ListenError as exc:
        print(f"hermes serve: {exc}", file=sys.stderr, flush=True)
        return 2
    try:  # cluster mode: the shared secret, the address other nodes forward to, the heartbeat
        from ._cluster import cluster_setup

        reached = (PRIVATE_HOST, private.port) if private is not None else (host, listener.port)
        cluster = cluster_setup(loaded.config, {**read_dotenv(home / ".env"), **env}, deps.node, store, *reached)
    except ConfigError as exc:
        listener.close()
        if private is not None:
            private.close()
        print(f"hermes serve: {exc}", file=sys.stderr, flush=True)
        return 2
    if section.access_log:
        logging.getLogger("hermes.access").setLevel(logging.INFO)
    try:  # the gateway's adapters (platforms: in config.yaml, tokens in .env)
        from .gateway import load_gateway

        gateway = load_gateway(
            role.gateway_config(loaded.config) if role is not None else loaded.config, {**read_dotenv(home / ".env"), **env}, home=home, hubs=hubs, hooks=hooks
        )
    except ConfigError as exc:
        print(f"hermes serve: {exc}", flush=True)
        return 2
    for line in gateway.notes:
        print(f"hermes serve: {line}", file=sys.stderr, flush=True)
    mcp = None
    if any(server.enabled for server in loaded.config.mcp_servers.values()):
        from ._serve_mcp import with_mcp  # the mcp SDK loads only where servers are configured

        deps, mcp = with_mcp(deps, loaded.config.mcp_servers)
    try:  # each chat platform's sessions: its toolset, its system-prompt line, its source
        platform_deps = gateway_deps(home, env, loaded, (spec.id for spec in gateway.specs), deps, yolo=yolo)
    except ConfigError as exc:
        listener.close()
        print(f"hermes serve: {exc}", flush=True)
        return 2
    settings = ServerSettings(
        host=host,
        port=port,
        key=key,
        model_name=section.model_name,
        version=package_version(),
        allowed_origins=frozenset(section.cors_origins),
        max_concurrent=section.max_concurrent,
        store_file=store,
        tool_progress=section.tool_progress,
        plain_model_name=section.plain_model_name or None,
        upstream=model,
        clients=clients,
        listener=listener,
        private=private,
        hook_statistics=hooks.statistics if hooks is not None else None,
        health_sections={
            "memory": deps.memory.health.statuses,
            "cluster": cluster.view.health if cluster is not None else functools.partial(cluster_health, deps.node),
            **({"mcp": mcp.catalog.statuses} if mcp is not None else {}),
        },
        cluster=cluster.router if cluster is not None else None,
    )
    api = ChildSpec(id="api", actor=ApiServer, args=(settings, hubs))
    extra = (ChildSpec(id="platforms", actor=Supervisor, args=((api,),)), *((mcp.tree,) if mcp is not None else ()))
    reaped = claim_group_ledger(home / "run" / "groups")
    if reaped:
        commands = "; ".join(" ".join(r.argv) for r in reaped)
        print(f"hermes serve: stopped {len(reaped)} command(s) a killed hermes had left running: {commands}", flush=True)
    running = Running(loaded=loaded, deps=deps, platform=API_PLATFORM, yolo=yolo, gateway=platform_deps)
    scheduler = (_scheduler_spec(home, store, loaded.config, deps, gateway.senders),) if role is None or role.primary else ()
    platforms = ChildSpec(id="platforms", actor=Supervisor, args=((api, *gateway.specs),), kwargs=gateway.supervisor_options())
    hooks_tree = (hooks_spec(),) if hooks is not None else ()
    extra = (*hooks_tree, *((cluster.spec,) if cluster is not None else ()), platforms, *scheduler, *((mcp.tree,) if mcp is not None else ()))
    with SignalStop("hermes serve", reload=True) as stop:
        try:
            runtime = build_agent_runtime(store, deps, extra=extra, platforms=platform_deps, announce=lambda line: print(f"hermes serve: {line}", flush=True))
        except (HermesImportError, StoreServedByWorkers) as exc:
            listener.close()
            print(f"hermes serve: {exc}", file=sys.stderr, flush=True)
            return 2
        stop.follow(runtime)
        if cluster is not None:
            runtime.reactor.at_stop(cluster.router.readers.aclose)
        if role is not None:
            role.watch_parent()
        try:
            runtime.start()
            if hooks is not None:
                hooks.bind(runtime.registry, runtime.reactor)
                hooks.fire_soon("gateway:startup", {"platforms": ["api", *(spec.id for spec in gateway.specs)]})
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
            print(f"hermes serve {package_version()}: listening on {url} (model {model.model} at {model.base_url})", flush=True)
            for spec in gateway.specs:  # after the first line (tests read it first)
                try:
                    port = runtime.lookup(f"/platforms/{spec.id}").ask("port", timeout=10)
                except (HermesError, TimeoutError) as exc:
                    print(f"hermes serve: gateway: the {spec.id} adapter did not start ({exc}); it is retried with backoff", flush=True)
                    continue
                where = f" on http://{host}:{port}/webhooks/" if spec.id == "webhook" else ""
                own = platform_deps.get(spec.id)
                tools = f"; its sessions' tools: {', '.join(sorted(own.tools)) or 'none'}" if own is not None else ""
                print(f"hermes serve: gateway: {spec.id} adapter started{where}{tools}", flush=True)
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

            while stop.wait() and stop.take_reload():  # SIGHUP: read config.yaml again
                running, lines = reloaded(home, env, running, runtime)
                for line in lines:
                    print(f"hermes serve: {line}", flush=True)
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
