"""Issue 16 in the core: versions of a turn, search, export and import, fork, delete,
/copy's code blocks, profiles and switching the model.

A real store, audit log and session against the fake Ollama on 127.0.0.1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.support.fakes import FakeOllama, reply, text, thinking, tool_call
from tests.support.home import write_config
from wisp.core import events as ev
from wisp.core.commands import run_command
from wisp.core.config import Config, ConfigError, theme_names
from wisp.core.context.facts import FactBook
from wisp.core.context.summary import SummaryBook
from wisp.core.conversations import (
    ArchiveError,
    code_blocks,
    fork,
    gather,
    load_export,
    parse_fork,
    remove,
    restore,
    to_json,
    to_markdown,
)
from wisp.core.session import Session, SessionOptions
from wisp.core.store import fts_query


@pytest.fixture
def home(wisp_home: Path):
    with FakeOllama(models=["wisp-fake:latest", "qwen3:8b", "llama3.2:latest"]) as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake:latest", "model.timeout_s": 5, "model.load_wait_s": 5})
        yield wisp_home, srv


async def open_session(workdir: Path, **opts) -> Session:
    s = await Session.open(SessionOptions(workdir=workdir, **opts))
    assert await s.connect(), s.endpoint_error
    return s


async def run(s: Session, prompt: str, supersedes: int | None = None) -> list:
    return [e async for e in s.run_turn(prompt, supersedes=supersedes)]


def sent_text(body: dict) -> str:
    return json.dumps(body["messages"])


# --- retry and edit: nothing is overwritten -------------------------------------------


async def test_retry_keeps_the_old_reply_and_the_request_holds_only_the_new(home, tmp_path: Path) -> None:
    _, srv = home
    srv.push(reply("The capital is Lyon."), reply("The capital is Paris."), reply("Noted."))
    async with await open_session(tmp_path) as s:
        await run(s, "capital of France?")
        result = await run_command(s, "/retry")
        assert result.action == "retry" and result.data == {"turn": 1, "prompt": "capital of France?"}
        events = await run(s, result.data["prompt"], supersedes=result.data["turn"])
        started = events[0]
        assert isinstance(started, ev.TurnStarted) and started.turn == 2 and started.supersedes == 1
        # the old reply stays, its turn marked superseded
        every = await s.store.turns(s.conversation_id, versions=True)
        assert [(t.number, t.superseded_by) for t in every] == [(1, 2), (2, None)]
        old = await s.store.entries(s.conversation_id, every[0].id)
        assert [e.content for e in old if e.kind == "reply"] == ["The capital is Lyon."]
        assert await s.store.turn_versions(s.conversation_id) == {2: [1, 2]}
        # the retry's request and every later one compose only the current version
        assert "Lyon" not in sent_text(srv.chat_bodies[1])
        await run(s, "thanks")
        assert "Paris" in sent_text(srv.chat_bodies[2]) and "Lyon" not in sent_text(srv.chat_bodies[2])
        composed = await s.context.compose(s.conversation_id)
        assert "Lyon" not in composed.text() and "Paris" in composed.text()
        audit = [e for e in s.audit.iter_events() if e["kind"] == "turn.superseded"]
        assert audit and audit[0]["payload"] == {"turn": 1, "by": 2}


async def test_edit_gives_the_prompt_back_and_supersedes_that_turn(home, tmp_path: Path) -> None:
    _, srv = home
    async with await open_session(tmp_path) as s:
        await run(s, "wrong question")
        result = await run_command(s, "/edit")
        assert result.action == "edit" and result.data["prompt"] == "wrong question"
        await run(s, "right question", supersedes=result.data["turn"])
        assert "wrong question" not in sent_text(srv.chat_bodies[-1])
        assert [t.number for t in await s.store.turns(s.conversation_id)] == [2]


async def test_retry_with_nothing_to_ask_again_says_so(home, tmp_path: Path) -> None:
    async with await open_session(tmp_path) as s:
        result = await run_command(s, "/retry")
        assert result.error and "send a prompt first" in result.text


async def test_a_turn_is_superseded_once_and_never_while_open(home, tmp_path: Path) -> None:
    from wisp.core.store import StoreError

    async with await open_session(tmp_path) as s:
        await run(s, "one")
        await run(s, "one again", supersedes=1)
        with pytest.raises(StoreError, match="already replaced by turn 2"):
            await s.store.begin_turn(s.conversation_id, supersedes=1)
        t = await s.store.begin_turn(s.conversation_id)
        with pytest.raises(StoreError, match="still running"):
            await s.store.begin_turn(s.conversation_id, supersedes=t.number)


# --- search ----------------------------------------------------------------------------


async def test_search_finds_prompts_and_replies_of_every_conversation(home, tmp_path: Path) -> None:
    _, srv = home
    srv.push(reply("The deploy key lives in the vault."), reply("Tokyo is sunny."))
    async with await open_session(tmp_path) as s:
        await run(s, "where is the deploy key?")
    async with await open_session(tmp_path) as s:
        await run(s, "weather in Tökyo")
        hits = await s.store.search("tokyo")
        assert [(h.kind, h.conversation_id) for h in hits] == [("reply", 2), ("prompt", 2)]
        assert "[Tökyo]" in hits[1].snippet  # accents folded, the match marked
        assert [h.kind for h in await s.store.search("deplo KEY")] == ["reply", "prompt"]  # prefixes, any case
        assert await s.store.search("deploy", conversation_id=2) == []
        for weird in ('"', "AND", "NEAR(", "*", "a:b", "-x", "''", "\x00"):
            await s.store.search(weird)  # never a syntax error


@given(st.text(max_size=40))
def test_every_text_is_a_safe_fts_query(text_: str) -> None:
    import sqlite3

    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    db.execute("INSERT INTO t VALUES ('hello world')")
    query = fts_query(text_)
    if query:
        db.execute("SELECT * FROM t WHERE t MATCH ?", (query,)).fetchall()


# --- export, import, fork, delete ---------------------------------------------------------


async def _rich_conversation(s: Session, srv: FakeOllama, workdir: Path) -> int:
    (workdir / "a.txt").write_text("apples\n")
    srv.push(reply(thinking("Read it first."), tool_call("read_file", {"path": "a.txt"}), finish="tool_calls"),
             reply("It says ```apples```.\n\n```python\nprint('apples')\n```"),
             reply("first answer"), reply("second answer"))
    await run(s, "what is in a.txt?")
    await run_command(s, "/fact entity release codename = BLUE HERON")
    await run(s, "and then?")
    await run(s, "and then?", supersedes=2)
    await run_command(s, "/fact entity release codename = RED KITE")
    await SummaryBook(s.store, s.audit).record(s.conversation_id, "They read a.txt.", [1], turn=3)
    return s.conversation_id


def _without_ids(data: dict) -> dict:
    data = json.loads(json.dumps(data))
    for key in ("exported_at", "audit_events"):
        data.pop(key)
    for key in ("id", "updated_at"):
        data["conversation"].pop(key)
    for item in data["entries"] + data["facts"]:
        item.pop("id")
    return data


async def test_export_import_export_gives_the_same_content(home, tmp_path: Path) -> None:
    _, srv = home
    async with await open_session(tmp_path) as s:
        cid = await _rich_conversation(s, srv, tmp_path)
        first = await gather(s.store, s.audit, cid)
        assert {e["kind"] for e in first["entries"]} >= {"prompt", "thinking", "tool_call", "tool_result", "reply"}
        assert all(e["audit_event_id"] for e in first["entries"])
        assert [f["value"] for f in first["facts"]] == ["BLUE HERON", "RED KITE"] or len(first["facts"]) >= 2
        assert first["summaries"][0]["text"] == "They read a.txt." and first["audit_events"]
        new = await restore(s.store, s.audit, load_export(to_json(first)))
        assert new != cid
        second = await gather(s.store, s.audit, new)
        assert _without_ids(second) == _without_ids(first)
        assert {e["id"] for e in second["entries"]}.isdisjoint({e["id"] for e in first["entries"]})
        imported = [e for e in s.audit.iter_events() if e["kind"] == "conversation.imported"]
        assert imported and imported[-1]["conversation"] == new


async def test_markdown_folds_thinking_tools_and_earlier_versions(home, tmp_path: Path) -> None:
    _, srv = home
    async with await open_session(tmp_path) as s:
        cid = await _rich_conversation(s, srv, tmp_path)
        md = to_markdown(await gather(s.store, s.audit, cid))
    assert md.startswith("# what is in a.txt?")
    assert "<details><summary>Thinking</summary>" in md
    assert "<details><summary>Tool call: read_file" in md and "<details><summary>Tool result: read_file" in md
    assert "````\n1\tapples" in md or "```\n1\tapples" in md
    assert "## Turn 3 (version 2 of 2)" in md and "<details><summary>Earlier version: turn 2, replaced</summary>" in md
    assert md.index("first answer") < md.index("second answer")
    assert "## Facts" in md and "RED KITE" in md and "## Running summary (s1, turns 1)" in md


_MARKDOWN_BITS = st.sampled_from(["```", "````", "~~~", "~~~~~", "```py", "~~~ text", "`", "~", "\n", "\n\n", "\r\n",
                                  "    ", "  ", "\t", "> ", "- ", "1. ", "* ", "#", "## a heading", "</details>",
                                  "<details>", "<!--", "-->", "<pre>", "</pre>", "<?", "?>", "<!A", "<![CDATA[",
                                  "<div>", "<script>", "\\", "x", "code", "\0"])
_ANY_TEXT = st.lists(st.one_of(_MARKDOWN_BITS, st.text(max_size=5)), max_size=14).map("".join)


def _export_of(texts: list[str]) -> dict:
    """An export's data with one turn per text: its prompt, thinking and reply hold the text."""
    turns, entries = [], []
    for n, t in enumerate(texts, 1):
        turns.append({"number": n, "state": "done", "started_at": "2026-01-01T00:00:00Z", "superseded_by": None})
        entries += [{"turn": n, "kind": kind, "content": t} for kind in ("prompt", "thinking", "reply")]
    return {"conversation": {"id": 1, "title": "t", "workdir": "/w", "created_at": "2026"}, "wisp": "0",
            "turns": turns, "entries": entries, "facts": [],
            "summaries": [{"version": 1, "text": texts[-1], "covers": [1]}]}


def _top_headings(md: str) -> list[str]:
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(md)
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == "h2"]


def test_a_reply_with_an_unclosed_fence_keeps_the_next_turn_outside_it() -> None:
    md = to_markdown(_export_of(["```python\nprint('median')", "~~~~\n~~~\nstill code", "next"]))
    assert _top_headings(md) == ["Turn 1", "Turn 2", "Turn 3", "Running summary (s1, turns 1)"]
    assert "print('median')\n```\n" in md and "still code\n~~~~\n" in md
    assert code_blocks(md)[0] == ("python", "print('median')")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ANY_TEXT, min_size=1, max_size=3))
def test_no_text_in_an_export_takes_the_next_turns_heading_into_a_block(texts: list[str]) -> None:
    """Whatever a prompt, thinking, reply or summary holds (fences of backticks or tildes of any
    length, left open, in lists or quotes, indented code, HTML that only its own end ends), each
    turn's heading and the summary's are headings of the export."""
    md = to_markdown(_export_of(texts))
    assert [h for h in _top_headings(md) if h.startswith(("Turn ", "Running summary ("))] == \
        [f"Turn {n}" for n in range(1, len(texts) + 1)] + ["Running summary (s1, turns 1)"]


async def test_fork_holds_the_turns_up_to_there_with_facts_and_summary_as_they_stood(home, tmp_path: Path) -> None:
    _, srv = home
    async with await open_session(tmp_path) as s:
        cid = await _rich_conversation(s, srv, tmp_path)
        new = await fork(s.store, s.audit, cid, 1)
        data = await gather(s.store, s.audit, new)
        assert [t["number"] for t in data["turns"]] == [1]
        assert {e["turn"] for e in data["entries"]} == {1}
        facts = FactBook(s.store)
        current = await facts.current(new)
        assert [f.value for f in current if f.name == "release codename"] == ["BLUE HERON"]  # as it stood then
        assert data["summaries"] == []  # written after turn 3 began
        conv = await s.store.get_conversation(new)
        assert conv.title.endswith(f"(fork of #{cid} at turn 1)")
        # a fork at the replaced turn makes it current again
        at2 = await gather(s.store, s.audit, await fork(s.store, s.audit, cid, 2))
        assert [(t["number"], t["superseded_by"]) for t in at2["turns"]] == [(1, None), (2, None)]
        whole = await gather(s.store, s.audit, await fork(s.store, s.audit, cid))
        assert len(whole["summaries"]) == 1 and len(whole["turns"]) == 3
        with pytest.raises(ArchiveError, match="has no turn 9"):
            await fork(s.store, s.audit, cid, 9)


async def test_remove_says_what_goes_and_keeps_the_audit_unless_purged(home, tmp_path: Path) -> None:
    _, srv = home
    async with await open_session(tmp_path) as s:
        cid = await _rich_conversation(s, srv, tmp_path)
        other = await fork(s.store, s.audit, cid)
        versions = len(await FactBook(s.store).all(cid))
        report = await remove(s.store, s.audit, cid)
        assert (report.turns, report.facts, report.summaries) == (3, versions, 1) and report.entries > 6
        assert "The audit log keeps its" in report.text()
        assert await s.store.get_conversation(cid) is None
        assert await FactBook(s.store).all(cid) == [] and await SummaryBook(s.store).versions(cid) == []
        assert await s.store.search("apples", conversation_id=cid) == []
        kept = s.audit.event_ids(cid)
        assert kept
        refs = [e.audit_ref for e in await s.store.entries(other) if e.audit_ref is not None]
        report2 = await remove(s.store, s.audit, other, purge_audit=True)
        assert report2.audit_purged > 0 and "blanked" in report2.text()
        assert s.audit.event_ids(other) == [e for e in s.audit.event_ids(other)
                                            if s.audit.find(e)["kind"] == "conversation.deleted"]
        assert s.audit.event_ids(cid) == kept  # another conversation's events stay, at their offsets
        for ref in refs:
            assert s.audit.read(ref) is None or s.audit.read(ref)["conversation"] != other


def test_load_export_refuses_what_is_not_an_export() -> None:
    for text_, why in (("nope", "not JSON"), ("[]", "not a wisp conversation export"),
                       ('{"format": "wisp-conversation", "version": 99}', "newer"),
                       ('{"format": "wisp-conversation", "version": 1}', "no 'conversation'")):
        with pytest.raises(ArchiveError, match=why):
            load_export(text_)


def test_parse_fork() -> None:
    assert parse_fork("3") == (3, None) and parse_fork("3:5") == (3, 5)
    for bad in ("", "x", "3:", ":5", "3:5:6", "-1"):
        with pytest.raises(ArchiveError):
            parse_fork(bad)


# --- /copy, /title ---------------------------------------------------------------------


def test_code_blocks() -> None:
    md = "a\n```python\nx = 1\n```\ntext ``` inline\n~~~\nraw\n~~~~\n````sh\necho ```\n````\n```\nopen"
    assert code_blocks(md) == [("python", "x = 1"), ("", "raw"), ("sh", "echo ```"), ("", "open")]


@given(st.text(max_size=200))
def test_code_blocks_never_raise(md: str) -> None:
    assert isinstance(code_blocks(md), list)


async def test_copy_and_title_commands(home, tmp_path: Path) -> None:
    _, srv = home
    srv.push(reply("Two ways:\n\n```python\nprint(1)\n```\n\nor\n\n```sh\necho 2\n```"))
    async with await open_session(tmp_path) as s:
        assert (await run_command(s, "/copy")).error
        await run(s, "how to print?")
        whole = await run_command(s, "/copy")
        assert whole.action == "copy" and whole.data["text"].startswith("Two ways:")
        last = await run_command(s, "/copy code")
        assert last.data["text"] == "echo 2" and "code block 2 of 2 (sh)" in last.text
        assert (await run_command(s, "/copy code 1")).data["text"] == "print(1)"
        assert "1 to 2" in (await run_command(s, "/copy code 3")).text
        for bad in ("/copy code ²", "/copy code 1234567", "/copy cod", "/fork ²", "/fork 1 2", "/fork x"):
            result = await run_command(s, bad)
            assert result.error and "Usage" in result.text  # a Unicode digit is no number here
        conv = await s.store.get_conversation(s.conversation_id)
        assert conv.title == "how to print?"  # from the first prompt
        renamed = await run_command(s, "/title Printing in two languages")
        assert not renamed.error
        assert (await s.store.get_conversation(s.conversation_id)).title == "Printing in two languages"
        md = await run_command(s, "/export")
        assert not md.error and Path(md.data["path"]) == tmp_path / f"wisp-conversation-{s.conversation_id}.md"
        assert Path(md.data["path"]).read_text().startswith("# Printing in two languages")
        missing = await run_command(s, "/export json sub/out.json")  # wisp makes no directory
        assert missing.error and "does not exist" in missing.text and not (tmp_path / "sub").exists()
        (tmp_path / "sub").mkdir()
        js = await run_command(s, "/export sub/out.json")  # .json: json
        assert not js.error and js.data["format"] == "json"
        assert json.loads((tmp_path / "sub" / "out.json").read_text())["format"] == "wisp-conversation"
        assert (await run_command(s, "/export json a b")).error
        nul = await run_command(s, "/export \x00")  # found by the command fuzz: a ValueError escaped
        assert nul.error and "Name another file" in nul.text


# --- models and profiles ------------------------------------------------------------------


async def test_model_lists_and_switches_from_the_next_request(home, tmp_path: Path) -> None:
    _, srv = home
    async with await open_session(tmp_path) as s:
        await run(s, "hello")
        assert s.context_window == 8192
        srv.context_length = 32768  # the next model's window: read again on the switch
        listing = await run_command(s, "/model")
        assert listing.action == "pick-model" and listing.data["models"] == ["wisp-fake:latest", "qwen3:8b",
                                                                              "llama3.2:latest"]
        assert listing.data["current"] == "wisp-fake:latest"
        switched = await run_command(s, "/model llama3.2")
        assert not switched.error and "wisp-fake:latest → llama3.2:latest" in switched.text
        assert s.link.model == "llama3.2:latest" and s.context_window == 32768
        await run(s, "again")
        assert srv.chat_bodies[-1]["model"] == "llama3.2:latest"
        assert (await s.store.get_conversation(s.conversation_id)).model == "llama3.2:latest"
        event = [e for e in s.audit.iter_events() if e["kind"] == "model.switched"][-1]
        assert event["payload"]["from"] == "wisp-fake:latest" and event["payload"]["to"] == "llama3.2:latest"
        bad = await run_command(s, "/model nope")
        assert bad.error and "qwen3:8b" in bad.text  # the models there are
        await s.connect()  # a reconnect keeps the choice
        assert s.link.model == "llama3.2:latest"


async def test_calibration_is_kept_per_model(home, tmp_path: Path) -> None:
    _, srv = home
    async with await open_session(tmp_path) as s:
        await s.context.calibration.observe("wisp-fake:latest", 2000, 1000)
        await run_command(s, "/model qwen3:8b")
        assert (await s.context.compose(s.conversation_id or 0)).ratio == 1.0
        await run_command(s, "/model wisp-fake:latest")
        assert (await s.context.compose(s.conversation_id or 0)).ratio > 1.0


async def test_ask_model_option_is_for_this_session_only(home, tmp_path: Path) -> None:
    _, srv = home
    async with await open_session(tmp_path, model="qwen3:8b") as s:
        await run(s, "hi")
    assert srv.chat_bodies[-1]["model"] == "qwen3:8b"
    assert Config.load().get("model.name") == "wisp-fake:latest"


def test_profiles_are_validated_and_laid_over_model_settings(wisp_home: Path) -> None:
    path = write_config(wisp_home, {"model.name": "base-model", "model.context_window": 4096})
    data = json.loads(path.read_text())
    data["profiles"] = {"work": {"provider": "openai", "endpoint": "http://127.0.0.1:8000", "model": "qwen3",
                                 "api_key_env": "WORK_KEY", "context_window": 32768},
                        "home": {"provider": "ollama"}}
    path.write_text(json.dumps(data))
    cfg = Config.load()
    assert sorted(cfg.profiles) == ["home", "work"]
    cfg.use_profile("work")
    assert (cfg.get("model.provider"), cfg.get("model.name"), cfg.get("model.context_window")) == \
        ("openai", "qwen3", 32768)
    cfg.use_profile("home")  # nothing of the other profile or of model.* leaks in
    assert (cfg.get("model.provider"), cfg.get("model.name"), cfg.get("model.endpoint")) == ("ollama", None, None)
    with pytest.raises(ConfigError, match="no profile 'nope'.*home, work"):
        cfg.use_profile("nope")
    cfg.set("agent.max_steps", "5")  # writing keeps the profiles as they were
    assert json.loads(path.read_text())["profiles"] == data["profiles"]
    cfg.use_profile(None)
    assert cfg.get("model.name") == "base-model"


@pytest.mark.parametrize("profiles, why", [
    ({"work": {"modle": "x"}}, "no field 'modle'; did you mean model"),
    ({"work": {"context_window": "big"}}, "context_window expects a whole number"),
    ({"work": {"endpoint": "ftp://x"}}, "endpoint expects a base URL"),
    ({"work": {"api_key_env": "sk-123 secret"}}, r"api_key_env expects the NAME of the environment variable.*not shown"),
    ({"bad name!": {}}, "profile name"),
    ({"work": "ollama"}, "must be an object"),
    ([1, 2], "profiles must be an object"),
])
def test_bad_profiles_are_refused_with_a_line_saying_why(wisp_home: Path, profiles, why) -> None:
    (wisp_home / "config.json").write_text(json.dumps({"profiles": profiles}))
    with pytest.raises(ConfigError, match=why):
        Config.load()
    assert any(why.split(";")[0][:20] in p for p in Config.load(strict=False).problems)


def test_theme_names_match_textual_and_unknown_ones_are_refused(wisp_home: Path) -> None:
    from textual.theme import BUILTIN_THEMES

    from wisp.core.config import TEXTUAL_THEMES

    assert set(TEXTUAL_THEMES) == set(BUILTIN_THEMES)
    cfg = Config.load()
    assert cfg.get("ui.theme") == "auto"
    assert cfg.set("ui.theme", "light") == "light"
    with pytest.raises(ConfigError) as info:
        cfg.set("ui.theme", "solarised")
    assert "dark, light, auto, wisp, wisp-light" in str(info.value) and "nord" in str(info.value)
    assert len(theme_names()) == len(set(theme_names()))


_junk = st.recursive(st.none() | st.booleans() | st.integers(-3, 2 ** 70) | st.text(max_size=6),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=10)
_record = st.dictionaries(st.sampled_from(["number", "turn", "kind", "content", "state", "meta", "arguments",
                                           "subject", "source", "value", "version", "text", "covers", "tool_name"]),
                          _junk | st.sampled_from(["prompt", "reply", "done", "open", "entity", "person"]) |
                          st.integers(1, 3), max_size=8)


@given(turns=st.lists(_record, max_size=3), entries=st.lists(_record, max_size=3),
       facts=st.lists(_record, max_size=2), summaries=st.lists(_record, max_size=2))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_restoring_any_export_gives_a_conversation_or_a_clear_error(tmp_path: Path, turns, entries, facts,
                                                                     summaries) -> None:
    """``wisp import`` reads outside input: whatever the records hold, a new conversation or ArchiveError."""
    import asyncio

    from wisp.core.database import open_store

    async def go() -> None:
        store = await open_store(tmp_path / "w.db")
        try:
            data = load_export(json.dumps({"format": "wisp-conversation", "version": 1,
                                           "conversation": {"workdir": "/tmp/x"}, "turns": turns,
                                           "entries": entries, "facts": facts, "summaries": summaries}))
            try:
                new = await restore(store, None, data)
            except ArchiveError as exc:
                assert str(exc) and "\n" not in str(exc)
                return
            assert await store.get_conversation(new) is not None
        finally:
            await store.close()

    asyncio.run(go())
