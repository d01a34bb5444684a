"""The pure parts of MCP: config, names, the chosen tools, the link's life, results as text."""

from __future__ import annotations

from pathlib import Path

from mcp import types

from actors.config import LoadedConfig, parse_config
from actors.tools.mcp import mcp_settings, tool_name
from actors.tools.mcp._link_state import BACKOFF_CAP, HEALTHY_AFTER, LinkState, link_down, link_up, opening
from actors.tools.mcp._naming import chosen, traits
from actors.tools.mcp._results import result_text
from protocols import McpToolInfo

CONFIG = """
mcp_servers:
  github:
    command: npx
    args: ["-y", "@modelcontextprotocol/server-github"]
    env: {GITHUB_TOKEN: "${GH}"}
    timeout: 30
    tools: {include: [list_issues], resources: false}
    sampling: {enabled: true, max_rpm: 10}
  remote:
    url: https://mcp.example.com/mcp
    headers: {Authorization: "Bearer ${GH}"}
    connect_timeout: 5
    comand: typo
  old:
    command: x
    enabled: false
"""


def _parse(text: str) -> LoadedConfig:
    return parse_config(text, file=Path("config.yaml"), dotenv=Path(".env"), env={"GH": "tok"}, dotenv_values={})


def test_mcp_servers_are_typed_in_hermes_layout_applied_and_their_unknown_keys_reported() -> None:
    loaded = _parse(CONFIG)
    servers = mcp_settings(loaded.config.mcp_servers)
    assert [s.name for s in servers] == ["github", "remote"]  # disabled ones are not started
    github, remote = servers
    assert github.transport == "stdio" and github.args == ("-y", "@modelcontextprotocol/server-github") and github.env == {"GITHUB_TOKEN": "tok"}
    assert github.timeout == 30 and github.connect_timeout == 60 and github.include == {"list_issues"}
    assert remote.transport == "http" and remote.headers == {"Authorization": "Bearer tok"} and remote.connect_timeout == 5
    warnings = {(w.kind, w.path, w.suggestion) for w in loaded.warnings}
    assert ("unknown", "mcp_servers.remote.comand", "command") in warnings
    assert ("ignored", "mcp_servers.github.sampling.max_rpm", "") in warnings
    assert not github.resources and github.prompts and github.sampling_enabled
    assert not any(w.path == "mcp_servers" for w in loaded.warnings)


def test_an_entry_with_neither_or_both_of_command_and_url_carries_its_problem() -> None:
    loaded = _parse("mcp_servers:\n  none: {timeout: 3}\n  both: {command: x, url: 'http://h/mcp'}\n")
    none, both = mcp_settings(loaded.config.mcp_servers)
    assert "give command (a stdio server) or url" in none.problem and "not both" in both.problem


def test_tool_names_are_safe_function_names_and_unique_past_64_characters() -> None:
    assert tool_name("git-hub", "list.issues") == "mcp_git_hub_list_issues"
    long_a, long_b = tool_name("server", "x" * 80 + "a"), tool_name("server", "x" * 80 + "b")
    assert len(long_a) == 64 and long_a != long_b and long_a.startswith("mcp_server_xxx")


def _tool(name: str, read_only: bool = False) -> McpToolInfo:
    return McpToolInfo(name=name, input_schema={"type": "object"}, read_only=read_only)


def test_include_then_exclude_choose_the_tools_and_only_read_only_ones_may_run_in_parallel() -> None:
    tools = (_tool("a", read_only=True), _tool("b"), _tool("c"))
    assert [t.name for t in chosen(tools, frozenset(), frozenset({"b"}))] == ["a", "c"]
    assert [t.name for t in chosen(tools, frozenset({"a", "b"}), frozenset({"b"}))] == ["a"]
    assert traits(tools[0]).read_only and not traits(tools[1]).read_only


def test_a_link_that_never_comes_up_fails_with_growing_backoff_and_one_that_was_up_restarts() -> None:
    state = opening(LinkState())
    delays = []
    for _ in range(12):
        state, delay = link_down(state, error="boom", now=0.0)
        delays.append(delay)
        state = opening(state)
    assert state.phase == "failed" and delays[:3] == [0.25, 0.5, 1.0] and delays[-1] == BACKOFF_CAP and state.restarts == 12
    up = link_up(state, server="s 1", tools=(_tool("a"),), now=100.0)
    state, delay = link_down(up, error="exited", now=100.0 + HEALTHY_AFTER)
    assert state.phase == "restarting" and delay == 0.25 and state.tools == up.tools  # healthy: the backoff starts over
    state, _ = link_down(opening(state), error="still down", now=200.0)
    assert state.phase == "restarting" and state.error == "still down"  # its tools stay offered, answering "restarting"


def test_results_become_text_and_server_errors_become_error_results() -> None:
    ok = types.CallToolResult(content=[types.TextContent(type="text", text="one"), types.ImageContent(type="image", data="AAAA", mimeType="image/png")])
    assert result_text(ok) == ("one\n[image: image/png, 3 bytes]", True)
    failed = types.CallToolResult(content=[types.TextContent(type="text", text="no such repo")], isError=True)
    assert result_text(failed) == ("[error] no such repo", False)
    structured = types.CallToolResult(content=[], structuredContent={"n": 1})
    assert result_text(structured) == ('{"n": 1}', True)


def test_a_result_is_held_to_its_tools_output_schema() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert result_text(types.CallToolResult(content=[], structuredContent={"n": 1}), schema, "count") == ('{"n": 1}', True)
    text, ok = result_text(types.CallToolResult(content=[], structuredContent={"n": "one"}), schema, "count")
    assert not ok and text == "[error] the MCP tool count returned structured content its own outputSchema refuses: 'one' is not of type 'integer'"
    bare = types.CallToolResult(content=[types.TextContent(type="text", text="1")])
    assert result_text(bare, schema, "count") == ("[error] the MCP tool count declares an outputSchema but returned no structured content", False)
    loop = result_text(types.CallToolResult(content=[], structuredContent={"n": 1}), {"$ref": "#"}, "count")
    assert loop == ("[error] the outputSchema of the MCP tool count refers to itself without end (a $ref loop that never reaches a type); fix the $ref", False)
    failed = types.CallToolResult(content=[types.TextContent(type="text", text="no")], isError=True)
    assert result_text(failed, schema, "count") == ("[error] no", False)  # an error result is not checked
