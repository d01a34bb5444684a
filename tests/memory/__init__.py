"""Tests of actors.memory: the memory store, skills, the threat scan and prompt pieces."""
