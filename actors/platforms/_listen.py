"""The API server's listening socket, and a clear refusal when its port is taken.

``hermes serve`` binds the socket before it starts the runtime (:func:`open_listener`) and
hands it to the first :class:`ApiServer` through a :class:`Listener`. A port that is in use
(or an address that cannot be bound) is a configuration problem, not a fault that a restart
could mend: found before anything runs, it is one line and exit status 2, instead of the
supervisor restarting the server until its restart intensity gives up.
"""

from __future__ import annotations

import errno
import socket
import threading

from actors import HermesError

BACKLOG = 1024


class ListenError(HermesError):
    """The address cannot be listened on; the text says why and what to do."""

    def __init__(self, message: str, *, code: int | None) -> None:
        super().__init__(message)
        self.code = code
        """The OS error number (errno.EADDRINUSE, ...)."""


def open_listener(host: str, port: int, *, reuse_port: bool = False, listen: bool = True) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening (port 0: a free one).

    ``reuse_port``: with ``SO_REUSEPORT``, so the workers of ``hermes serve --workers`` each
    listen on the one port (the kernel spreads new connections over them); ``listen=False``
    binds without listening (the parent's reservation of the port: it gets no connection).
    """
    listener: socket.socket | None = None
    try:
        listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        listener.bind((host, port))
        if listen:
            listener.listen(BACKLOG)
    except OSError as exc:
        if listener is not None:
            listener.close()
        raise ListenError(_explain(exc, host, port), code=exc.errno) from None
    return listener


def _explain(exc: OSError, host: str, port: int) -> str:
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is already in use: stop the other server or pass --port / set api_server.port"
    if exc.errno == errno.EACCES:
        return f"port {port} on {host} needs privileges this user lacks: pick a port above 1023 with --port / api_server.port"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{host} is not an address of this machine: pass --host / set api_server.host (127.0.0.1 or 0.0.0.0)"
    return f"cannot listen on {host}:{port} ({exc.strerror or exc}): pick another address with --host / --port"


class Listener:
    """A socket bound in advance, taken once: by the first ApiServer, not by one that restarts."""

    def __init__(self, sock: socket.socket, *, reuse_port: bool = False) -> None:
        self._sock: socket.socket | None = sock
        self._lock = threading.Lock()
        self.port: int = sock.getsockname()[1]
        """The bound port: a restarted server binds it again (also when port 0 was asked for)."""
        self.reuse_port = reuse_port
        """A worker's: a restarted server binds it again with ``SO_REUSEPORT`` too."""

    def take(self) -> socket.socket | None:
        with self._lock:
            sock, self._sock = self._sock, None
            return sock

    def close(self) -> None:
        """Close the socket if no server took it."""
        sock = self.take()
        if sock is not None:
            sock.close()
