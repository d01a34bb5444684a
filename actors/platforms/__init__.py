"""platforms: the edges of the tree where the outside world talks to sessions (the API server)."""

from ._keys import load_or_create_key as load_or_create_key
from ._server import ApiServer as ApiServer
from ._server import ServerSettings as ServerSettings

__all__ = ["ApiServer", "ServerSettings", "load_or_create_key"]
