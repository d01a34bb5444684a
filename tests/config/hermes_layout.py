"""A config.yaml as a Hermes user has it, in Hermes's layout, with Hermes's documented defaults
(written for these tests from the facts of its configuration: section and key names, nesting,
default values), plus the settings this build applies."""

from __future__ import annotations

HERMES_CONFIG = """\
_config_version: 45
# The model: a local OpenAI-compatible server
model:
  default: qwen3-32b
  provider: custom:local
  api_mode: chat_completions
  context_length: 32768
providers: {}
custom_providers:
  - name: local
    base_url: http://127.0.0.1:8000/v1
    api_key: ${LOCAL_KEY}
    rate_limit_delay: 0
fallback_providers:
  - {provider: openrouter, model: anthropic/claude-sonnet-4}
credential_pool_strategies: {openrouter: round_robin}
toolsets: [hermes-cli]
database: {journal_mode: wal, wal_autocheckpoint: null, journal_size_limit: null}
runtime: {nofile_soft_limit: 4096}
max_concurrent_sessions: null
max_live_sessions: 16
session: {terminal_continue: true}
agent:
  max_turns: null
  api_max_retries: 3
  gateway_timeout: 1800
  tool_use_enforcement: auto
  disabled_toolsets: []
  turn_liveness: {timeout_s: 600.0, poll_s: 15.0}
terminal:
  backend: local
  cwd: "."
  timeout: 180
  docker_image: nikolaik/python-nodejs:python3.14-nodejs22
  env_passthrough: []
  persistent_shell: true
web: {backend: "", extract_char_limit: 15000, keyless_fallback: true}
browser: {inactivity_timeout: 120, command_timeout: 30, headed: false}
checkpoints: {enabled: false, max_snapshots: 20}
file_read_max_chars: 100000
tool_output: {max_bytes: 50000, max_lines: 2000, max_line_length: 2000}
compression:
  enabled: true
  threshold: 0.50
  target_ratio: 0.20
  protect_last_n: 20
  max_attempts: 3
  in_place: true
prompt_caching: {cache_ttl: 5m}
auxiliary:
  compression: {provider: auto, model: "", base_url: "", api_key: "", timeout: 120}
display: {compact: false, skin: default, show_cost: false}
tts: {provider: edge, edge: {voice: en-US-AriaNeural}}
stt: {enabled: true, language: en}
memory:
  memory_enabled: true
  user_profile_enabled: true
  memory_char_limit: 2200
  user_char_limit: 1375
  nudge_interval: 10
  provider: ""
delegation:
  model: ""
  provider: ""
  max_iterations: 250
  max_concurrent_children: 10
  max_spawn_depth: 1
skills: {external_dirs: [], template_vars: true}
timezone: ""
approvals:
  mode: smart
  timeout: 300
  cron_mode: deny
  single_query_mode: deny
  deny: []
command_allowlist: [recursive delete]
quick_commands: {}
hooks: {}
hooks_auto_accept: false
security: {redact_secrets: true, tirith_enabled: true}
cron: {catch_up_missed: true, model: "", max_parallel_jobs: null, output_retention: 50}
logging: {level: INFO, max_size_mb: 5, backup_count: 3}
gateway: {api_server: {max_concurrent_runs: 10}}
streaming: {enabled: false}
sessions: {auto_prune: true, retention_days: 90}
updates: {check: true}
platforms:
  telegram: {enabled: false, token: "", extra: {}}
mcp_servers:
  files: {command: npx, args: ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"], timeout: 60}
timeouts: {turn: 600}
api_server: {port: 8643}
pricing:
  qwen3-32b: {input: 0.1, output: 0.3}
"""
