"""Config ``mcpServers`` and MCP names (issue 15): property-based tests of the
parser of outside input (what people paste), the tool-name rule, the names
wisp gives servers' tools, and the rendering of what servers answer."""

from __future__ import annotations

import json
import re
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wisp.core.config import Config, ConfigError, parse_value
from wisp.core.mcp import RemoteTool, render_result, wisp_names
from wisp.core.mcp.connection import stdio_environment
from wisp.core.mcp_config import (HttpServer, McpConfigError, MissingVariable, StdioServer, expand_env, fingerprint,
                                  parse_mcp_servers)
from wisp.core.tool_names import API_TOOL_NAME, mcp_parts, tool_name_problem
from tests.support.mcp_strategies import MCP_SERVERS, SERVER_NAMES

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(MCP_SERVERS)
def test_valid_entries_parse_and_keep_their_shape(servers: dict) -> None:
    parsed = parse_mcp_servers(servers)
    assert list(parsed) == [n for n, e in servers.items() if not e.get("disabled")]
    for name, spec in parsed.items():
        entry = servers[name]
        if "command" in entry:
            assert isinstance(spec, StdioServer) and spec.command == entry["command"].strip()
            assert spec.args == tuple(entry.get("args", [])) and dict(spec.env) == entry.get("env", {})
        else:
            assert isinstance(spec, HttpServer) and spec.url == entry["url"]
            assert dict(spec.headers) == entry.get("headers", {})
        assert re.fullmatch(r"[0-9a-f]{16}", fingerprint(spec))
    # as config: stored as written, read back the same, and never crashing `wisp config`
    assert parse_value("mcpServers", servers, from_text=False) == servers
    assert parse_value("mcpServers", json.dumps(servers)) == servers


@settings(max_examples=500, deadline=None)
@given(JSON)
def test_any_json_is_parsed_or_refused_in_one_line_never_crashes(value) -> None:
    try:
        parse_mcp_servers(value)
    except McpConfigError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("mcpServers")
    try:
        parse_value("mcpServers", value, from_text=False)
    except ConfigError as exc:
        assert "\n" not in str(exc) and "mcpServers" in str(exc)


_MUTATIONS = [
    (lambda e: {**e, "args": "not-a-list"}, "args expects a list of strings"),
    (lambda e: {**e, "comand": "x"}, "did you mean 'command'"),
    (lambda e: {**e, "url": "https://x.org/mcp"}, "has both command and url"),
    (lambda e: {k: v for k, v in e.items() if k != "command"}, "needs command"),
    (lambda e: {**e, "env": {"BAD NAME": "x"}}, "is not a variable name"),
    (lambda e: {**e, "env": {"OK": 3}}, "env.OK expects a string"),
    (lambda e: {**e, "type": "sse"}, "retired"),
    (lambda e: {**e, "headers": {"A": "b"}}, "headers is for a remote server"),
    (lambda e: {**e, "command": "   "}, "command expects a non-empty string"),
    (lambda e: {**e, "args": ["ok", "nul\x00"]}, "NUL"),
    (lambda e: {**e, "disabled": "yes"}, "disabled expects true or false"),
]


@settings(max_examples=200, deadline=None)
@given(SERVER_NAMES, st.sampled_from(range(len(_MUTATIONS))))
def test_a_broken_entry_names_its_key_and_what_it_expects(name: str, which: int) -> None:
    mutate, words = _MUTATIONS[which]
    entry = mutate({"command": "uvx", "args": ["mcp-server-git"]})
    with pytest.raises(McpConfigError) as info:
        parse_mcp_servers({name: entry})
    assert f"mcpServers.{name}" in str(info.value) and words in str(info.value)


@pytest.mark.parametrize("name", ["", "a__b", "_a", "a_", "with space", "dots.in", "x" * 33, "é"])
def test_server_names_that_cannot_make_tool_names_are_refused(name: str) -> None:
    with pytest.raises(McpConfigError, match="server name"):
        parse_mcp_servers({name: {"command": "uvx"}})


def test_config_file_errors_name_the_key(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"mcpServers": {"remote": {"url": "ftp://x"}}}))
    with pytest.raises(ConfigError, match=r'mcpServers.remote.url expects an http:// or https:// URL'):
        Config.load(path)
    cfg = Config.load(tmp_path / "other.json")
    with pytest.raises(ConfigError, match="mcpServers expects a JSON object"):
        cfg.set("mcpServers", "[1, 2]")
    cfg.set("mcpServers", '{"git": {"command": "uvx", "args": ["mcp-server-git"]}}')
    assert Config.load(tmp_path / "other.json").get("mcpServers") == {"git": {"command": "uvx",
                                                                               "args": ["mcp-server-git"]}}
    with pytest.raises(ConfigError, match="tools.mcp.allow expects MCP tool names"):
        cfg.set("tools.mcp.allow", "read_file")
    cfg.set("tools.enabled", '["read_file","mcp__git__status","mcp__git"]')


def test_the_tool_name_rule() -> None:
    assert mcp_parts("mcp__git__status") == ("git", "status")
    assert mcp_parts("mcp__git") == ("git", None)
    assert mcp_parts("mcp__git__a__b") == ("git", "a__b")
    assert mcp_parts("read_file") is None and mcp_parts("mcp__") is None and mcp_parts("mcp__a__") is None
    assert tool_name_problem("read_file") is None
    assert tool_name_problem("mcp__git__x", ["git"]) is None
    assert "does not have" in tool_name_problem("mcp__gti__x", ["git"])
    assert "not an MCP tool name" in tool_name_problem("mcp__a b")
    assert "not a wisp tool" in tool_name_problem("shell")


@settings(max_examples=300, deadline=None)
@given(SERVER_NAMES.filter(lambda s: len(s) <= 32), st.lists(st.text(min_size=0, max_size=120), max_size=12))
def test_wisp_names_fit_both_chat_apis_are_unique_and_stable(server: str, remote: list[str]) -> None:
    names = wisp_names(server, remote)
    assert len(names) == len(remote) and sorted(names.values()) == sorted(remote)
    for name in names:
        assert API_TOOL_NAME.fullmatch(name) and name.startswith(f"mcp__{server}__")
        assert mcp_parts(name) is not None and mcp_parts(name)[0] == server
    assert wisp_names(server, remote) == names


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_a_servers_tool_listing_and_answers_never_crash(value) -> None:
    tool = RemoteTool.from_dict(value)
    if tool is not None:
        assert tool.input_schema["type"] == "object" and isinstance(tool.input_schema["properties"], dict)
        assert RemoteTool.from_dict(tool.to_dict()) == tool
    rendered = render_result(value if isinstance(value, dict) else {"content": value}, 200)
    assert isinstance(rendered.text, str) and len(rendered.text.encode()) < 200 + 200


def test_results_text_kept_other_types_named_with_their_size_and_cut() -> None:
    result = {"content": [{"type": "text", "text": "hello"}, {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                          {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
                          {"type": "resource_link", "uri": "file:///b", "name": "b"}], "isError": False}
    rendered = render_result(result, 1000)
    assert rendered.text == ("hello\n[audio/wav audio, 3 bytes; not shown]\n[resource file:///a]\nbody\n"
                             "[resource link file:///b: b]")
    assert rendered.ok and rendered.kinds == {"text": 1, "audio": 1, "resource": 1, "resource_link": 1}
    long = render_result({"content": [{"type": "text", "text": "é" * 100}]}, 11)
    assert long.text.startswith("ééééé\n[cut: the result was 200 bytes")
    assert not render_result({"content": [], "isError": True, "structuredContent": {"a": 1}}, 100).ok


def test_env_holds_only_the_safe_set_and_what_config_names() -> None:
    spec = StdioServer("git", "uvx", env=(("TOKEN", "${MY_TOKEN}"), ("PLAIN", "v")))
    environ = {"PATH": "/bin", "HOME": "/h", "LANG": "C.UTF-8", "MY_TOKEN": "t0k", "OPENAI_API_KEY": "sk-x",
               "AWS_SECRET_ACCESS_KEY": "a"}
    assert stdio_environment(spec, environ) == {"PATH": "/bin", "HOME": "/h", "LANG": "C.UTF-8", "TOKEN": "t0k",
                                                "PLAIN": "v"}
    with pytest.raises(MissingVariable):
        stdio_environment(StdioServer("git", "uvx", env=(("T", "${NOPE}"),)), environ)
    assert expand_env("Bearer ${env:MY_TOKEN}", environ) == "Bearer t0k"


@settings(max_examples=200, deadline=None)
@given(st.text(string.printable, max_size=40))
def test_expand_env_fills_or_names_the_missing_variable(text: str) -> None:
    try:
        out = expand_env(text, {"A": "1"})
    except MissingVariable as exc:
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", exc.args[0])
    else:
        assert "${A}" not in out
