"""Hypothesis strategies for config ``mcpServers`` (issue 15): valid entries in
the shape Claude Desktop, Cursor and oterm use, to round-trip and to mutate."""

from __future__ import annotations

from hypothesis import strategies as st

SERVER_NAMES = st.from_regex(r"[A-Za-z0-9-]{1,8}(_[A-Za-z0-9-]{1,6}){0,2}", fullmatch=True)
_ENV_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)
_HEADER_NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,12}", fullmatch=True)
_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20)
_LINE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r\n"), max_size=20)

STDIO_ENTRIES = st.fixed_dictionaries(
    {"command": st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                        min_size=1, max_size=20).filter(lambda s: s.strip())},
    optional={"args": st.lists(_TEXT, max_size=4), "env": st.dictionaries(_ENV_NAMES, _TEXT, max_size=3),
              "type": st.just("stdio"), "disabled": st.booleans()})
HTTP_ENTRIES = st.fixed_dictionaries(
    {"url": st.builds(lambda h, p: f"http{'s' if p % 2 else ''}://{h}:{p}/mcp",
                      st.from_regex(r"[a-z][a-z0-9.-]{0,12}", fullmatch=True), st.integers(1, 65535))},
    optional={"headers": st.dictionaries(_HEADER_NAMES, _LINE, max_size=3),
              "type": st.sampled_from(["http", "streamable-http", "streamableHttp"]), "disabled": st.booleans()})
MCP_SERVERS = st.dictionaries(SERVER_NAMES, st.one_of(STDIO_ENTRIES, HTTP_ENTRIES), max_size=4)
MCP_ALLOW = st.lists(st.builds(lambda s, t: f"mcp__{s}" + (f"__{t}" if t else ""), SERVER_NAMES,
                               st.one_of(st.none(), st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True))),
                     max_size=3)
