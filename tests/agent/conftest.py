"""Fixtures for session tests."""

from tests.agent.session_kit import agent as agent  # the started store + sessions
