"""The configuration's one error.

::

    HermesError
      └── ConfigError   config.yaml (or .env, auth.json) cannot be read or holds a value that is not allowed
"""

from __future__ import annotations

from actors import HermesError


class ConfigError(HermesError):
    """The configuration is missing something or cannot be read; the message says what to do."""
