"""Real client libraries against a running API server (the ``api`` fixture of tests/platforms)."""

from tests.platforms.server_kit import api as api  # a running API server
