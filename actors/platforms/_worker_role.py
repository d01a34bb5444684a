"""One worker of ``hermes serve --workers N``: what makes it differ from a lone ``hermes serve``.

The parent (``_workers.py``) starts each worker as ``hermes serve`` with ``HERMES_SERVE_WORKER``
set to ``<index>:<count>:<fd>`` in its environment. A worker then:

- is a cluster node (``SessionDeps.node``) named ``<base>-w<index>`` (base: ``cluster.node_id``,
  else the host name), whatever ``cluster.enabled`` says: its sessions hold leases in the
  store and fence their writes, so two workers never answer in one session. It runs under the
  parent's claim of the store and claims nothing itself (``NodeIdentity.worker``);
- listens with ``SO_REUSEPORT`` on the port the parent reserved: the kernel spreads new
  connections over the workers; a keep-alive connection stays with the worker that took it;
- also listens on a loopback port of its own, which it advertises as its cluster address
  (unless ``cluster.advertise_address`` says otherwise): a sibling forwards a request for a
  session this worker holds there, signed with ``HERMES_CLUSTER_SECRET`` (the parent makes one
  for the run when none is configured);
- runs the chat-platform adapters and the scheduler only when it is worker 0 (one Telegram
  poller, one clock for the jobs);
- stops (SIGTERM to itself: it drains) when its parent dies: ``<fd>`` is the read end of a pipe
  whose only write end the parent holds, so end-of-file means the parent is gone, however it died.

A malformed variable is a configuration error: the process was not started by a parent.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import threading
from collections.abc import Mapping

import msgspec

from actors.agent import ConfigError, SessionDeps
from actors.agent._node import NodeIdentity
from actors.config import HermesConfig

from ._listen import Listener, open_listener

WORKER_ENV = "HERMES_SERVE_WORKER"
PRIVATE_HOST = "127.0.0.1"


@dataclasses.dataclass(frozen=True)
class WorkerRole:
    index: int
    count: int
    parent_fd: int
    """The read end of the parent's pipe (-1: none to watch)."""

    @property
    def primary(self) -> bool:
        """Worker 0 runs what must run once: the chat-platform adapters, the scheduler."""
        return self.index == 0

    def node_id(self, config: HermesConfig) -> str:
        return f"{config.cluster.node_id or socket.gethostname()}-w{self.index}"

    def apply(self, deps: SessionDeps, config: HermesConfig) -> SessionDeps:
        """``deps`` as this worker's: a cluster node under the parent's claim."""
        node = NodeIdentity(node_id=self.node_id(config), lease_ttl=config.cluster.lease_ttl, worker=True)
        return dataclasses.replace(deps, node=node)

    def gateway_config(self, config: HermesConfig) -> HermesConfig:
        """The config the gateway is loaded from: worker 0's own, no platform for the others."""
        return config if self.primary else msgspec.structs.replace(config, platforms={})

    def listener(self, host: str, port: int) -> Listener:
        """This worker's socket on the parent's port (``SO_REUSEPORT``). Raises ListenError."""
        return Listener(open_listener(host, port, reuse_port=True), reuse_port=True)

    def private_listener(self) -> Listener:
        """A socket of this worker alone, on loopback: its siblings forward a session's requests to
        it (the shared port would hand them to any worker). Raises ListenError."""
        return Listener(open_listener(PRIVATE_HOST, 0))

    def watch_parent(self) -> None:
        """Stop this process (SIGTERM: it drains) once the parent's pipe reads end-of-file."""
        if self.parent_fd < 0:
            return

        def watch() -> None:
            try:
                while os.read(self.parent_fd, 64):
                    pass
            except OSError:
                pass
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def worker_role(env: Mapping[str, str]) -> WorkerRole | None:
    """This process's role from ``HERMES_SERVE_WORKER`` (None: not a worker).

    Raises:
        ConfigError: the variable is set but is not ``<index>:<count>:<fd>``.
    """
    text = env.get(WORKER_ENV)
    if not text:
        return None
    try:
        index, count, fd = (int(part) for part in text.split(":"))
    except ValueError:
        raise ConfigError(f"{WORKER_ENV}={text!r} is not <index>:<count>:<fd>; it is set by 'hermes serve --workers N' for its workers, unset it") from None
    if not 0 <= index < count:
        raise ConfigError(f"{WORKER_ENV}={text!r}: worker index {index} is not below the count {count}; unset it")
    return WorkerRole(index=index, count=count, parent_fd=fd)
