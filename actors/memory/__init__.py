"""memory: the agent's durable knowledge and the system prompt pieces built from it.

- :class:`MemoryStore` — MEMORY.md / USER.md in ``HERMES_HOME/memories`` (``§``-separated
  entries, character limits, atomic writes, threat scan). A plain class: the built-in
  provider's actor ``/memory/builtin`` holds one.
- :class:`SkillLibrary` — ``HERMES_HOME/skills/<name>/SKILL.md`` and its extra files.
- :func:`scan_text` — the threat scan for text bound for a system prompt.
- :data:`SECRET_PATTERNS` — the one table of secret shapes: the threat scan flags them
  (:func:`find_secret`), the terminal tool hides them in output (:func:`redact_secrets`).
- Prompt pieces, each built once per session by the caller, in a worker thread (they read
  files): :func:`memory_snapshot`, :func:`skills_index`, :func:`context_files`, and
  :func:`soul_identity` (``HERMES_HOME/SOUL.md``, the identity that opens the prompt).

- ``/memory`` (issue 21): :class:`MemoryProvider` (the interface of seed 000 §13), its actor
  :class:`ProviderActor`, :func:`memory_spec` (the built-in provider, :class:`BuiltinProvider`,
  the one owner of MEMORY.md / USER.md, and at most one external one, ``memory.provider``:
  :data:`PROVIDERS`, ``store`` = :class:`StoreFactsProvider`), and the reactor-side asks
  (:func:`ask_provider`, :func:`prefetch_all` under one deadline, :func:`memory_context_block`).

Imports nothing from ``actors.agent``, ``actors.tools`` or ``actors.platforms``.
"""

from ._actor import ProviderActor as ProviderActor
from ._builtin import BuiltinProvider as BuiltinProvider
from ._builtin import render_change as render_change
from ._client import ask_provider as ask_provider
from ._client import collect_prefetch as collect_prefetch
from ._client import pre_compress_all as pre_compress_all
from ._client import prefetch_all as prefetch_all
from ._client import system_prompt_blocks as system_prompt_blocks
from ._client import tell_providers as tell_providers
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
from ._facts import StoreFactsProvider as StoreFactsProvider
from ._files import atomic_write_text as atomic_write_text
from ._health import MemoryHealth as MemoryHealth
from ._prompt import memory_snapshot as memory_snapshot
from ._prompt import skills_index as skills_index
from ._provider import MemoryProvider as MemoryProvider
from ._provider import PrefetchResult as PrefetchResult
from ._provider import ProviderEnv as ProviderEnv
from ._provider import ProviderError as ProviderError
from ._provider import StoreWrite as StoreWrite
from ._provider import block_of as block_of
from ._provider import kept_note as kept_note
from ._provider import memory_context_block as memory_context_block
from ._provider import missed as missed
from ._provider import prefetch_result as prefetch_result
from ._provider import skipped as skipped
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
from ._tree import BUILTIN_PATH as BUILTIN_PATH
from ._tree import DEFAULT_PREFETCH_TIMEOUT as DEFAULT_PREFETCH_TIMEOUT
from ._tree import MEMORY_PATH as MEMORY_PATH
from ._tree import PROVIDERS as PROVIDERS
from ._tree import MemoryOptions as MemoryOptions
from ._tree import check_provider as check_provider
from ._tree import memory_spec as memory_spec
from ._tree import register_provider as register_provider

__all__ = [
    "BUILTIN_PATH",
    "BuiltinProvider",
    "CONTEXT_FILES",
    "DEFAULT_PREFETCH_TIMEOUT",
    "EntryAmbiguous",
    "EntryNotFound",
    "FileBusy",
    "InvalidEntry",
    "InvalidSkill",
    "KnowledgeError",
    "MEMORY_LIMIT",
    "MEMORY_PATH",
    "MemoryChange",
    "MemoryHealth",
    "MemoryOptions",
    "MemoryProvider",
    "MemorySettings",
    "MemoryStore",
    "MemoryTarget",
    "OverLimit",
    "PROVIDERS",
    "PrefetchResult",
    "ProviderActor",
    "ProviderEnv",
    "ProviderError",
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
    "StoreFactsProvider",
    "StoreWrite",
    "Threat",
    "ThreatBlocked",
    "ThreatKind",
    "USER_LIMIT",
    "UnsafePath",
    "ask_provider",
    "atomic_write_text",
    "block_of",
    "check_provider",
    "check_skill_name",
    "collect_prefetch",
    "context_files",
    "find_secret",
    "is_secret_name",
    "kept_note",
    "memory_context_block",
    "memory_snapshot",
    "memory_spec",
    "missed",
    "pre_compress_all",
    "prefetch_all",
    "prefetch_result",
    "redact_secrets",
    "register_provider",
    "render_change",
    "scan_text",
    "skills_index",
    "skipped",
    "soul_identity",
    "system_prompt_blocks",
    "tell_providers",
]
