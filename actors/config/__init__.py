"""config: config.yaml as one typed value, read once, every key applied or reported.

- :func:`load_config` (``HERMES_HOME/config.yaml`` and ``.env``) / :func:`parse_config` (pure) ->
  :class:`LoadedConfig`: the :class:`HermesConfig`, the :class:`ConfigWarning` s (unknown keys
  with a "did you mean", Hermes keys this build ignores) and what used ``${NAME}``.
- The one implementation of the home (:func:`hermes_home`), ``.env`` (:func:`read_dotenv`) and
  ``${NAME}`` references (:func:`expand_references`), which every reader of the files uses.
- ``hermes config show|get|set|path``: ``_cli.py`` (imported by the command only).

Imports nothing from ``agent``, ``tools``, ``platforms``, ``memory`` (tests/test_layering.py);
``actors.cli`` imports none of it at start (``hermes --help`` stays fast).
"""

from ._env import VARIABLE_NAME as VARIABLE_NAME
from ._env import expand_references as expand_references
from ._env import has_reference as has_reference
from ._env import hermes_home as hermes_home
from ._env import read_dotenv as read_dotenv
from ._errors import ConfigError as ConfigError
from ._known import is_secret_key as is_secret_key
from ._loader import ConfigWarning as ConfigWarning
from ._loader import LoadedConfig as LoadedConfig
from ._loader import load_config as load_config
from ._loader import parse_config as parse_config
from ._schema import HermesConfig as HermesConfig
from ._schema import McpSampling as McpSampling
from ._schema import McpServer as McpServer
from ._schema import McpToolFilter as McpToolFilter

__all__ = [
    "ConfigError",
    "ConfigWarning",
    "HermesConfig",
    "LoadedConfig",
    "McpSampling",
    "McpServer",
    "McpToolFilter",
    "VARIABLE_NAME",
    "expand_references",
    "has_reference",
    "hermes_home",
    "is_secret_key",
    "load_config",
    "parse_config",
    "read_dotenv",
]
