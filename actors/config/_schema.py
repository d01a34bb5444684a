"""config.yaml as one typed value: :class:`HermesConfig`, in Hermes's layout and names.

The sections this build reads are typed in detail (``_schema_model.py`` for the model and its
providers, and here ``compression``, ``approvals``, ``api_server``, ``toolsets``, ``agent``,
``terminal``, ``memory``, ``delegation``, ``platforms``, ``cron``, ``timezone``, ``hooks``,
``mcp_servers``). Sections typed for validation but not applied (none at present; see
``_known.NOT_APPLIED``) hold only a few of Hermes's keys, with Hermes's types, so that a value
Hermes accepts is accepted here; they are reported as ignored when set. Defaults are what this
build does when a key is unset (Hermes's own where the build has no equivalent).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from ._schema_model import FallbackEntry, ModelSection, PoolKey, Price, ProviderEntry, Seconds, Strategy, TimeoutsSection


class CompressionSection(msgspec.Struct, frozen=True, kw_only=True):
    enabled: bool = True
    threshold: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.5
    """Share of the context window at which a pass starts."""
    summary_model: str = ""
    """The model that writes summaries; empty: the session's."""


class PromptCachingSection(msgspec.Struct, frozen=True, kw_only=True):
    """``prompt_caching:``, cache breakpoints in requests to Claude models."""

    enabled: bool | Literal["auto"] = "auto"
    """``auto``: Claude models only."""
    cache_ttl: Literal["5m", "1h"] = "5m"


class ApprovalsSection(msgspec.Struct, frozen=True, kw_only=True):
    mode: Literal["manual", "smart", "off"] | bool = "manual"
    """``manual`` asks a person; ``off`` (YAML may read it as false) never asks; ``smart`` is read as ``manual``."""
    timeout: Seconds = 300.0
    """Seconds a request waits for an answer; then it is denied."""
    deny: list[str] = []
    """Command globs that never run, whatever the mode."""


class ApiServerSection(msgspec.Struct, frozen=True, kw_only=True):
    """``api_server:``, what ``hermes serve`` listens on and shows."""

    host: str = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 8642
    cors_origins: list[str] = []
    model_name: str = "hermes-agent"
    plain_model_name: str = ""
    max_concurrent: Annotated[int, msgspec.Meta(gt=0)] = 10_000
    access_log: bool = False
    tool_progress: bool = False
    workers: Annotated[int, msgspec.Meta(ge=1, le=64)] = 1
    """``hermes serve`` processes on the one port (``--workers``); 1: one process, no cluster node."""


class AgentSection(msgspec.Struct, frozen=True, kw_only=True):
    """``agent:``, the turn loop's limits."""

    max_turns: int | str | None = None
    """Tool-calling iterations a turn may take (unset: 90); 0, -1 or ``unlimited``: no cap (the turn's deadline still holds)."""
    api_max_retries: Annotated[int, msgspec.Meta(ge=0, le=20)] | None = None
    """Retries of a failed model call before the turn moves on to the next provider (unset: 4)."""
    disabled_toolsets: list[str] = []
    """Toolsets (or single tools) taken out of every session's tools."""


class TerminalSection(msgspec.Struct, frozen=True, kw_only=True):
    """``terminal:``, where commands run. Only the local backend is built."""

    backend: Literal["local"] = "local"
    cwd: str = ""
    """A session's first working directory (``~`` expands; relative to where hermes started); empty: where hermes started."""
    timeout: Annotated[float, msgspec.Meta(gt=0, le=600)] = 180.0
    """Seconds a command may run when the model does not say (at most 600)."""


class MemorySection(msgspec.Struct, frozen=True, kw_only=True):
    """``memory:``, the built-in memory files (MEMORY.md, USER.md)."""

    memory_enabled: bool = True
    """False: no MEMORY.md in the prompt, and the memory tool refuses it."""
    user_profile_enabled: bool = True
    """False: no USER.md in the prompt, and the memory tool refuses it."""
    memory_char_limit: Annotated[int, msgspec.Meta(gt=0)] = 2200
    user_char_limit: Annotated[int, msgspec.Meta(gt=0)] = 1375
    nudge_interval: Annotated[int, msgspec.Meta(ge=0)] = 10
    """User turns between two background memory reviews; 0: none."""
    flush_min_turns: Annotated[int, msgspec.Meta(ge=0)] = 6
    """User turns a session must have had before its first memory review."""
    skill_nudge_interval: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """Older spelling of ``skills.creation_nudge_interval`` (which wins when both are set)."""
    provider: str = ""
    """The external memory provider run beside the built-in one under ``/memory`` (``store``: facts in
    the session store, recalled by relevance); empty: the built-in memory only."""
    prefetch_timeout: Annotated[float, msgspec.Meta(gt=0, le=60)] = 0.5
    """Seconds a turn waits for the providers' recalled context before going on without it."""


class SkillsSection(msgspec.Struct, frozen=True, kw_only=True):
    """``skills:``; this build reads the nudge interval only."""

    creation_nudge_interval: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """Tool-calling iterations between two background skill reviews (unset: 10); 0: none."""


class DelegationSection(msgspec.Struct, frozen=True, kw_only=True):
    """``delegation:``, child sessions started by ``delegate_task``."""

    max_iterations: Annotated[int, msgspec.Meta(gt=0)] = 50
    """A child turn's tool-calling iterations."""
    max_concurrent_children: Annotated[int, msgspec.Meta(gt=0, le=64)] = 3
    """Children of one session running at once."""
    max_spawn_depth: Annotated[int, msgspec.Meta(ge=0, le=8)] = 1
    """Levels of children under a top session: 1, children cannot delegate; 0, nobody can."""


# Typed for validation, not applied by this build yet (see the module docstring).


class PlatformEntry(msgspec.Struct, frozen=True, kw_only=True):
    """``platforms.<name>:`` in Hermes's layout; the gateway (``actors/platforms/gateway``) reads
    ``telegram``, ``matrix`` and ``webhook`` and types their ``extra`` there (errors name the key)."""

    enabled: bool = False
    token: str = ""
    """Usually left out: the token comes from ``.env`` (``TELEGRAM_BOT_TOKEN``)."""
    api_key: str = ""
    home_channel: str | int | dict[str, Any] | None = None
    """Hermes's default delivery target (cron); read, not used by this build yet."""
    reply_to_mode: str = ""
    extra: dict[str, Any] = {}
    """The platform's own settings (``base_url``, ``allowed_users``, ``busy_policy``, ``routes``, ...)."""


class McpToolFilter(msgspec.Struct, frozen=True, kw_only=True):
    """``mcp_servers.<name>.tools``: which of a server's tools the agent sees."""

    include: list[str] = []
    """Only these tools (the server's own names); empty: all of them."""
    exclude: list[str] = []
    """Never these tools (applied after ``include``)."""
    resources: bool = True
    """Offer ``list_resources`` / ``read_resource`` where the server has resources."""
    prompts: bool = True
    """Offer ``list_prompts`` / ``get_prompt`` where the server has prompts."""


class McpSampling(msgspec.Struct, frozen=True, kw_only=True):
    """``mcp_servers.<name>.sampling``: may the server ask our model for a completion (``sampling/createMessage``)."""

    enabled: bool = False
    """Off unless set: a server's request is refused, and the capability is not offered."""
    model: str = ""
    """The model to answer with (at the configured endpoint); empty: the configured model."""
    max_tokens_cap: Annotated[int, msgspec.Meta(gt=0)] = 4096
    """The most tokens a request may ask for (a larger ``maxTokens`` is lowered to this)."""
    timeout: Seconds = 30.0
    """Seconds a completion may take; then the server gets an error."""


class McpServer(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of ``mcp_servers:``: a stdio server (``command``) or a streamable HTTP one (``url``)."""

    command: str = ""
    args: list[str] = []
    env: dict[str, str] = {}
    """Variables added to the server's environment (``${NAME}`` is expanded from .env and the environment)."""
    cwd: str = ""
    url: str = ""
    headers: dict[str, str] = {}
    timeout: Seconds = 120.0
    """Seconds a tool call may take; then it is cancelled (a stdio server is restarted)."""
    connect_timeout: Seconds = 60.0
    """Seconds to start (or reach) the server and list its tools."""
    tools: McpToolFilter = McpToolFilter()
    sampling: McpSampling = McpSampling()
    enabled: bool = True


class HookEntry(msgspec.Struct, frozen=True, kw_only=True):
    command: str = ""
    matcher: str = ""
    timeout: float | None = None


class CronSection(msgspec.Struct, frozen=True, kw_only=True):
    """``cron:``, applied by the scheduler (``actors.scheduler``)."""

    catch_up_missed: bool = True
    """An occurrence missed while the server was down fires at start if within its grace window (false: recorded missed)."""
    model: str = ""
    """The model of job runs that name none (empty: the server's)."""
    max_parallel_jobs: int | None = None
    """Job runs at once (None: 3); the others wait their turn."""


class SessionResetSection(msgspec.Struct, frozen=True, kw_only=True):
    """``session_reset:`` (Hermes's block), applied by the gateway (``actors/platforms/gateway/_resets.py``):
    when a chat's next message starts a fresh session; ``platforms.<name>.extra.session_reset`` per platform."""

    mode: Literal["idle", "daily", "both", "none"] = "both"
    idle_minutes: Annotated[int, msgspec.Meta(ge=1)] = 1440
    """``idle``: a message after this many minutes without one starts a fresh session."""
    at_hour: Annotated[int, msgspec.Meta(ge=0, le=23)] = 4
    """``daily``: the first message after this hour (local time, or ``timezone:``) starts a fresh session."""
    notify: bool = True
    """Tell the chat when the policy started a fresh session (a notice before the answer)."""


class DatabaseSection(msgspec.Struct, frozen=True, kw_only=True):
    """``database:``, the session store (``actors.store``); ``HERMES_DATABASE_URL`` wins over it."""

    url: str = ""
    """A ``postgresql://`` URL: the store is that Postgres database (empty: ``state.db`` in HERMES_HOME)."""


class ClusterSection(msgspec.Struct, frozen=True, kw_only=True):
    """``cluster:`` (ours), several processes serving one store (``actors.agent._node``); off by default."""

    enabled: bool = False
    """Sessions hold a lease in the store and fence their writes with it."""
    node_id: str = ""
    """This process's name among the nodes (empty: the host name); unique per process."""
    lease_ttl: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    """Seconds a session lease lasts unless renewed (renewed every third of it)."""
    advertise_address: str = ""
    """The base URL other nodes forward this node's sessions' requests to (empty: the API
    listener's ``http://host:port``, the host name when it listens on every interface)."""


class HermesConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The whole of config.yaml, file values over defaults."""

    model: ModelSection = ModelSection()
    providers: dict[str, ProviderEntry] = {}
    custom_providers: list[ProviderEntry] = []
    fallback_providers: list[FallbackEntry] = []
    fallback_model: FallbackEntry | list[FallbackEntry] | None = None
    """Hermes's older form of ``fallback_providers`` (one entry or a list), tried after it."""
    credential_pool: dict[str, list[PoolKey]] = {}
    credential_pool_strategies: dict[str, Strategy | None] = {}
    timeouts: TimeoutsSection = TimeoutsSection()
    pricing: dict[str, Price] = {}
    compression: CompressionSection = CompressionSection()
    prompt_caching: PromptCachingSection = PromptCachingSection()
    approvals: ApprovalsSection = ApprovalsSection()
    command_allowlist: list[str] = []
    """Pattern keys approved for good (ours, or Hermes's descriptions)."""
    api_server: ApiServerSection = ApiServerSection()
    toolsets: list[str] = msgspec.field(default_factory=lambda: ["hermes-cli"])
    """The toolsets of ``hermes chat`` sessions (the ``cli`` platform)."""
    platform_toolsets: dict[str, list[str]] = {}
    """Per platform (``cli``, ``api_server``, ...): its toolsets, instead of the default (``toolsets`` for ``cli``)."""
    agent: AgentSection = AgentSection()
    terminal: TerminalSection = TerminalSection()
    memory: MemorySection = MemorySection()
    skills: SkillsSection = SkillsSection()
    delegation: DelegationSection = DelegationSection()
    platforms: dict[str, PlatformEntry] = {}
    mcp_servers: dict[str, McpServer] = {}
    hooks: dict[str, list[HookEntry]] = {}
    """Shell hooks per event (``actors.hooks``): each entry's command runs without a shell."""
    hooks_auto_accept: bool = False
    """Allow every shell hook without asking (as ``--accept-hooks``)."""
    cron: CronSection = CronSection()
    session_reset: SessionResetSection = SessionResetSection()
    database: DatabaseSection = DatabaseSection()
    cluster: ClusterSection = ClusterSection()
    timezone: str = ""
