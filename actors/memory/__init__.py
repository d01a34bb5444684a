"""memory: the agent's durable knowledge and the system prompt pieces built from it.

- :class:`MemoryStore` — MEMORY.md / USER.md in ``HERMES_HOME/memories`` (``§``-separated
  entries, character limits, atomic writes, threat scan). A plain class: the actor that will
  own these files holds one.
- :class:`SkillLibrary` — ``HERMES_HOME/skills/<name>/SKILL.md`` and its extra files.
- :func:`scan_text` — the threat scan for text bound for a system prompt.
- :data:`SECRET_PATTERNS` — the one table of secret shapes: the threat scan flags them
  (:func:`find_secret`), the terminal tool hides them in output (:func:`redact_secrets`).
- Prompt pieces, each built once per session by the caller, in a worker thread (they read
  files): :func:`memory_snapshot`, :func:`skills_index`, :func:`context_files`, and
  :func:`soul_identity` (``HERMES_HOME/SOUL.md``, the identity that opens the prompt).

Imports nothing from ``actors.agent``, ``actors.tools`` or ``actors.platforms``.
"""

from ._context import CONTEXT_FILES as CONTEXT_FILES
from ._context import context_files as context_files
from ._errors import EntryAmbiguous as EntryAmbiguous
from ._errors import EntryNotFound as EntryNotFound
from ._errors import FileBusy as FileBusy
from ._errors import InvalidEntry as InvalidEntry
from ._errors import InvalidSkill as InvalidSkill
from ._errors import KnowledgeError as KnowledgeError
from ._errors import OverLimit as OverLimit
from ._errors import SkillError as SkillError
from ._errors import SkillExists as SkillExists
from ._errors import SkillNotFound as SkillNotFound
from ._errors import ThreatBlocked as ThreatBlocked
from ._errors import UnsafePath as UnsafePath
from ._files import atomic_write_text as atomic_write_text
from ._prompt import memory_snapshot as memory_snapshot
from ._prompt import skills_index as skills_index
from ._secrets import SECRET_NAME as SECRET_NAME
from ._secrets import SECRET_PATTERNS as SECRET_PATTERNS
from ._secrets import SecretFound as SecretFound
from ._secrets import SecretPattern as SecretPattern
from ._secrets import find_secret as find_secret
from ._secrets import is_secret_name as is_secret_name
from ._secrets import redact_secrets as redact_secrets
from ._skills import Skill as Skill
from ._skills import SkillLibrary as SkillLibrary
from ._skills import check_skill_name as check_skill_name
from ._soul import SOUL_FILE as SOUL_FILE
from ._soul import soul_identity as soul_identity
from ._store import MEMORY_LIMIT as MEMORY_LIMIT
from ._store import SEPARATOR as SEPARATOR
from ._store import USER_LIMIT as USER_LIMIT
from ._store import MemoryChange as MemoryChange
from ._store import MemorySettings as MemorySettings
from ._store import MemoryStore as MemoryStore
from ._store import MemoryTarget as MemoryTarget
from ._threats import Threat as Threat
from ._threats import ThreatKind as ThreatKind
from ._threats import scan_text as scan_text

__all__ = [
    "CONTEXT_FILES",
    "EntryAmbiguous",
    "EntryNotFound",
    "FileBusy",
    "InvalidEntry",
    "InvalidSkill",
    "KnowledgeError",
    "MEMORY_LIMIT",
    "MemoryChange",
    "MemorySettings",
    "MemoryStore",
    "MemoryTarget",
    "OverLimit",
    "SECRET_NAME",
    "SECRET_PATTERNS",
    "SEPARATOR",
    "SOUL_FILE",
    "SecretFound",
    "SecretPattern",
    "Skill",
    "SkillError",
    "SkillExists",
    "SkillLibrary",
    "SkillNotFound",
    "Threat",
    "ThreatBlocked",
    "ThreatKind",
    "USER_LIMIT",
    "UnsafePath",
    "atomic_write_text",
    "check_skill_name",
    "context_files",
    "find_secret",
    "is_secret_name",
    "memory_snapshot",
    "redact_secrets",
    "scan_text",
    "skills_index",
    "soul_identity",
]
