"""Errors of the memory package: memory entries, skills, and the threat scan.

HermesError
└── KnowledgeError          root: a change to the agent's durable knowledge was refused
    ├── EntryNotFound         replace/remove: no entry contains the given text
    ├── EntryAmbiguous        replace/remove: several entries contain it
    ├── InvalidEntry          an entry is empty or holds the separator line
    ├── OverLimit             the change would take a file past its character limit
    ├── ThreatBlocked         the threat scan refused text bound for the system prompt
    ├── FileBusy              another thread or process held the file's lock too long
    └── SkillError            a skill operation was refused
        ├── SkillNotFound       no skill of that name
        ├── SkillExists         create: the name is taken
        ├── InvalidSkill        a bad name, frontmatter, or size
        └── UnsafePath          a file path outside the skill's folder
"""

from __future__ import annotations

from actors import HermesError


class KnowledgeError(HermesError):
    """Root of the memory package: the message says what was refused and what to do."""


class EntryNotFound(KnowledgeError):
    """No entry of the target contains the text to replace or remove."""


class EntryAmbiguous(KnowledgeError):
    """Several entries contain the text to replace or remove."""

    def __init__(self, message: str, count: int) -> None:
        super().__init__(message)
        self.count = count


class InvalidEntry(KnowledgeError):
    """The entry is empty or contains the separator line."""


class OverLimit(KnowledgeError):
    """The change would take the file past its character limit."""

    def __init__(self, message: str, over_by: int) -> None:
        super().__init__(message)
        self.over_by = over_by


class ThreatBlocked(KnowledgeError):
    """The threat scan found prompt injection, exfiltration, a secret or invisible Unicode."""


class FileBusy(KnowledgeError):
    """The file's lock was held by another writer for longer than the lock timeout."""


class SkillError(KnowledgeError):
    """A skill operation was refused."""


class SkillNotFound(SkillError):
    """There is no skill of that name."""


class SkillExists(SkillError):
    """A skill of that name exists already."""


class InvalidSkill(SkillError):
    """A bad skill name, frontmatter, or size."""


class UnsafePath(SkillError):
    """A file path that is absolute, climbs with ``..``, or leaves the skill's folder."""
