"""Fixtures for session tests."""

from tests.agent.http1_kit import clients as clients  # a ModelClients closed after the test
from tests.agent.session_kit import agent as agent  # the started store + sessions
