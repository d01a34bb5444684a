"""What the loader knows beyond the typed schema: Hermes's keys that this build does not
support, the typed sections it does not apply yet, and which keys hold secrets.

Hermes's key names are facts about its configuration file (its defaults and documented extras),
listed so that a config.yaml written for Hermes is reported key by key as "ignored: not
supported by this build" instead of "unknown". Keys starting with ``_`` (``_config_version``)
are Hermes's bookkeeping and pass silently.
"""

from __future__ import annotations

import re


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


HERMES_ROOT_KEYS = _words(
    """
    agent approvals attachments auxiliary bedrock bot_mode browser checkpoints code_execution
    command_allowlist compression computer_use context context_file_max_chars
    context_file_read_timeout credential_pool_strategies cron curator custom_providers dashboard
    database delegation desktop discord display doctor fallback_model fallback_providers
    file_read_max_chars gateway goals honcho hooks hooks_auto_accept human_delay image_gen kanban
    local_runtime logging loops lsp matrix mattermost max_concurrent_sessions max_live_sessions mcp
    mcp_discovery_timeout mcp_servers mcp_single_query_discovery_timeout memory moa model
    model_catalog model_overrides models_dev monitoring network nous onboarding openrouter
    paste_collapse_char_threshold paste_collapse_threshold paste_collapse_threshold_fallback
    personalities platform_hints platform_toolsets platforms plugins prefill_messages_file privacy
    prompt_caching providers proxy quick_commands runtime secrets security session sessions skills
    slack smart_model_routing streaming stt telegram telemetry terminal timeouts timezone
    tool_gateway_declined_tools tool_loop_guardrails tool_output tools toolsets tts updates vault
    vertex video_gen voice wake_word web whatsapp x_search known_plugin_toolsets
    known_builtin_toolsets group_sessions_per_user thread_sessions_per_user stt_echo_transcripts
    reset_triggers always_log_local filter_silence_narration multiplex_profiles profile_routes
    require_mention unauthorized_dm_behavior signal session_reset
    """
)
"""Every top-level key Hermes reads."""

HERMES_SECTION_KEYS: dict[str, frozenset[str]] = {
    "ModelSection": _words("api_mode auth_mode entra ollama_num_ctx reasoning_echo reasoning_effort extra_body session_affinity_header"),
    "ProviderEntry": _words(
        "api_mode models context_length rate_limit_delay extra_body ssl_ca_cert ssl_verify "
        "request_timeout_seconds stale_timeout_seconds session_affinity_header"
    ),
    "FallbackEntry": _words("api_mode reasoning_echo extra_body context_length"),
    "CompressionSection": _words(
        "checkpoint_required progress_notices threshold_tokens target_ratio tail_mode protect_last_n "
        "min_tail_user_messages max_attempts proactive_prune_tokens proactive_prune_min_result_chars "
        "proactive_prune_min_reclaim_tokens micro_compact micro_compact_every_n_turns "
        "micro_compact_defrag_threshold_tokens hygiene_hard_message_limit hygiene_timeout_seconds "
        "hygiene_total_ceiling_seconds hygiene_failure_cooldown_seconds hygiene_max_turn_hold_seconds "
        "context_timeout_seconds context_total_ceiling_seconds protect_first_n abort_on_summary_failure "
        "codex_gpt55_autoraise codex_gpt55_autoraise_notice codex_app_server_auto codex_responses_native "
        "codex_responses_compact_threshold in_place model_thresholds idle_compact_after_seconds"
    ),
    "PromptCachingSection": _words("long_lived_prefix long_lived_ttl"),
    "AgentSection": _words(
        "gateway_timeout tool_use_enforcement turn_liveness reasoning_effort verbose quiet_mode save_trajectories "
        "system_prompt personalities ephemeral_system_prompt prefill_messages max_tokens temperature"
    ),
    "TerminalSection": _words(
        "env_passthrough docker_image singularity_image modal_image daytona_image container_cpu container_memory "
        "container_disk container_persistent docker_volumes docker_mount_cwd_to_workspace docker_forward_env "
        "persistent_shell lifetime_seconds ssh_host ssh_user ssh_port ssh_key sudo_password"
    ),
    "SkillsSection": _words("external_dirs disabled platform_disabled write_approval template_vars inline_shell config"),
    "DelegationSection": _words("model provider base_url api_key reasoning_effort toolsets"),
    "CronSection": _words("output_retention"),
    "DatabaseSection": _words("journal_mode wal_autocheckpoint journal_size_limit"),
    "McpServer": _words("auth oauth client_id client_secret scope"),
    "McpSampling": _words("max_rpm allowed_models max_tool_rounds log_level"),
    "ApprovalsSection": _words(
        "cron_mode single_query_mode unattended_mode smart_policy denial_breaker_threshold mcp_reload_confirm destructive_slash_confirm"
    ),
}
"""Hermes's keys inside a section this build types, by the section's struct, that the build does not type."""

NOT_APPLIED: frozenset[str] = frozenset()
"""Top-level sections typed (a wrong value is an error) but not read by the runtime yet: reported as ignored when set."""

_SECRET_NAME = re.compile(r"(^|_)(api_key|key|token|secret|password|access_token)$", re.IGNORECASE)
_SECRET_MAPS = frozenset({"default_headers", "extra_headers", "headers", "env"})


def is_secret_key(name: str) -> bool:
    """Whether a key's value is a credential (``api_key``, ``token``, ``*_secret``, ...)."""
    return _SECRET_NAME.search(name) is not None and not name.endswith("_env")


def holds_secrets(name: str) -> bool:
    """Whether a mapping's values are credentials (request headers, a server's environment)."""
    return name in _SECRET_MAPS
