"""The memory tool's search of this conversation's own record, and recalls that are whole or paged in their own turn.

wisp-memory-tool.txt, "Arguments": a request with no verb is a recall, so words that name no target
(``recall port 8437``, bare ``port 8437``) search the conversation's record (SQLite FTS5, bm25); and
"recall": a page that is not the last ends ``[more: memory "…"]``, and what a recall returns is whole in
its own turn. Every test here runs on a real SQLite file (and audit log) through the memory harness or a
session against a fake endpoint.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import aiosqlite
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.fakes import FakeOllama, reply, text, tool_call
from tests.support.home import write_config
from tests.support.memory_harness import make_harness
from wisp.core.memory.request import RequestError, parse_request
from wisp.core.memory.search import describe_hit, query_words
from wisp.core.migrations import migrate
from wisp.core.store import MIGRATIONS, Store, fts_query
from wisp.core.text import fts_query as shared_fts_query

END = "[end of what recall found]"
MORE = re.compile(r'^\[more: memory "(.+)"\]$')


def hit_heads(answer: str) -> list[str]:
    """The hit header lines of a search answer (``entry N, turn T…: what``)."""
    return [line for line in answer.splitlines() if re.match(r"^entry \d+", line)]


def hit_entries(answer: str) -> list[int]:
    return [int(re.match(r"^entry (\d+)", line).group(1)) for line in hit_heads(answer)]


async def follow(h, request: str, limit: int = 50) -> list[str]:
    """Every page of ``request``, following each ``[more: memory "…"]`` line."""
    pages = []
    for _ in range(limit):
        answer = await h.ask(request)
        pages.append(answer)
        m = MORE.match(answer.splitlines()[-1])
        if not m:
            return pages
        request = m.group(1)
    raise AssertionError("the pages never ended")


# --- finding -----------------------------------------------------------------------------------------------------


async def test_bare_words_search_and_the_best_match_comes_first(tmp_path: Path) -> None:
    """bm25: an entry that says the words often, in few words, ranks above one that says them once in many."""
    h = await make_harness(tmp_path)
    await h.begin()
    await h.record("prompt", "Where do we stand?\n" + " ".join(f"filler{i}" for i in range(300))
                   + "\nthe port is 8437 somewhere in here")
    await h.record("reply", "Noted.")
    await h.end()
    await h.begin()
    best = await h.record("prompt", "The service listens on port 8437.\nport 8437, remember: port 8437.")
    await h.record("reply", "I will remember it.")
    await h.end()
    await h.begin()
    await h.record("prompt", "unrelated words about the weather")  # newer, and no match at all
    await h.record("reply", "Sunny.")
    await h.end()
    await h.begin()
    for request in ("port 8437", "recall port 8437", "search port 8437", "recall what was the port"):
        answer = await h.ask(request)
        entries = hit_entries(answer)
        assert entries[0] == best.number, (request, answer)
        assert answer.splitlines()[-1] == END
    answer = await h.ask("port 8437")
    assert answer.splitlines()[0] == 'search "port 8437": best match first, hits 1–2'
    assert hit_heads(answer)[0] == f"entry {best.number}, turn 2: the person's prompt"
    event = h.memory_events()[-1]
    assert event["action"] == "recall" and event["target"]["kind"] == "search"
    assert event["entries"] == hit_entries(answer) and event["found"] is True
    await h.close()


async def test_when_no_entry_holds_every_word_the_ones_holding_some_are_given_and_said_so(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    await h.record("prompt", "the gateway returned 502 twice")
    await h.end()
    await h.begin()
    answer = await h.ask("recall gateway timeout error")
    assert "no entry holds every word; entries holding some of them" in answer.splitlines()[0]
    assert hit_entries(answer) == [1]
    nothing = await h.ask("recall zebra quagga")
    assert nothing.startswith('memory: nothing in this conversation before this turn holds "zebra quagga"')
    await h.close()


async def test_tool_calls_with_their_arguments_and_tool_outputs_are_found(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    await h.record("prompt", "read the config")
    out = await h.tool_output("read_file", {"path": "service.toml"},
                              "1\t[server]\n2\tport = 8437\n3\thost = \"0.0.0.0\"\n4\tworkers = 4\n[end of file]")
    run = await h.tool_output("run_command", {"command": "pytest -q"}, "3 passed, 1 failed: test_gateway")
    await h.end()
    await h.begin()
    by_arg = await h.ask("recall service.toml")
    assert f"entry {out.number - 1}, turn 1: read_file call of service.toml (its output: entry {out.number})" \
        in hit_heads(by_arg)
    by_output = await h.ask("8437")  # a bare number is entry 8437; this conversation has no such entry
    assert by_output.startswith("memory: no entry 8437")
    by_output = await h.ask("port 8437")
    lines = by_output.splitlines()
    head = f"entry {out.number}, turn 1: read_file of service.toml"
    assert head in lines
    at = lines.index(head)
    assert lines[at + 1:at + 4] == ["1\t[server]", "2\tport = 8437", '3\thost = "0.0.0.0"']  # one line either side
    by_command = await h.ask("recall pytest")
    assert f'entry {run.number - 1}, turn 1: run_command call of "pytest -q" (its output: entry {run.number})' \
        in hit_heads(by_command)
    assert f'entry {run.number}, turn 1: run_command of "pytest -q"' in hit_heads(await h.ask("test_gateway"))
    await h.close()


async def test_earlier_versions_of_a_retried_turn_are_found_and_marked(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    await h.record("prompt", "which port?")
    old = await h.record("reply", "It listens on port 9000, I think.")
    await h.end()
    h.turn = await h.store.begin_turn(h.conversation, supersedes=1)  # /retry
    h.turn_number = h.turn.number
    await h.record("prompt", "which port?")
    new = await h.record("reply", "It listens on port 8437.")
    await h.end()
    await h.begin()
    answer = await h.ask("recall listens port")
    heads = hit_heads(answer)
    assert f"entry {old.number}, turn 1, an earlier version (turn 2 asked it again): your reply" in heads
    assert f"entry {new.number}, turn 2: your reply" in heads
    await h.close()


async def test_the_running_turn_and_the_memory_tool_itself_are_not_searched(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    await h.record("prompt", "the codename is heron")
    await h.end()
    await h.begin()
    await h.record("prompt", "what was the codename heron about?")
    first = await h.ask("recall heron")
    second = await h.ask("recall heron")  # the first search's own result holds "heron" too
    assert hit_entries(first) == hit_entries(second) == [1]
    await h.close()


# --- paging ------------------------------------------------------------------------------------------------------


async def test_hits_are_paged_and_every_page_names_the_next(tmp_path: Path) -> None:
    h = await make_harness(tmp_path, context_window=1024)  # a page of 300 tokens
    expected = []
    for i in range(14):
        await h.begin()
        entry = await h.record("prompt", f"note {i}: the deploy key sits in vault {i}\n" + "context line\n" * 3)
        expected.append(entry.number)
        await h.end()
    await h.begin()
    pages = await follow(h, "recall deploy key")
    assert len(pages) > 1
    for page in pages[:-1]:
        assert MORE.match(page.splitlines()[-1]), page
        assert re.match(r'^\[more: memory "recall deploy key from hit \d+"\]$', page.splitlines()[-1])
    assert pages[-1].splitlines()[-1] == END
    seen = [n for page in pages for n in hit_entries(page)]
    assert sorted(seen) == expected and len(seen) == len(set(seen))  # every hit once, none lost between pages
    from wisp.core.tokens import estimate_tokens

    assert all(estimate_tokens(page) <= 300 + 40 for page in pages)
    await h.close()


# --- line numbers that a recall lands on ----------------------------------------------------------------------------


async def test_each_hit_line_is_where_recall_entry_from_line_lands(tmp_path: Path) -> None:
    """The round trip: ``K<TAB>text`` in a hit is the first line of ``recall entry N from line K``."""
    h = await make_harness(tmp_path)
    await h.begin()
    await h.record("prompt", "\n".join(f"prompt line {i}" for i in range(1, 30)) + "\nthe vault key is here\nend")
    read = "\n".join(f"{i}\tline {i} of the file" for i in range(1, 60)) + "\n60\tvault key = abc\n[end of file]"
    await h.tool_output("read_file", {"path": "keys.txt", "offset": 1}, read)
    await h.tool_output("run_command", {"command": "grep -r vault ."},
                        "\n".join(f"./x{i}: nothing" for i in range(40)) + "\n./secrets: vault key rotated")
    await h.end()
    await h.begin()
    answer = await h.ask("recall vault key")
    checked = 0
    current = None
    for line in answer.splitlines():
        m = re.match(r"^entry (\d+)", line)
        if m:
            current = int(m.group(1))
            continue
        k = re.match(r"^(\d+)\t", line)
        if not k or current is None:
            continue
        page = (await h.ask(f"recall entry {current} from line {k.group(1)}")).splitlines()
        body = [x for x in page[1:] if not x.startswith("arguments: ")]
        assert body[0] == line, (current, line, body[0])
        checked += 1
    assert checked >= 6
    await h.close()


# --- safety ---------------------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_no_search_text_is_an_fts_syntax_error(text_: str) -> None:
    """Every text, as the store's query (every word, or any word) and as episodic memory's, is valid FTS5."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, y, tokenize = 'unicode61 remove_diacritics 2')")
    db.execute("INSERT INTO t VALUES ('hello world', 'port 8437')")
    for query in (fts_query(text_), fts_query(text_, any_word=True), shared_fts_query(text_, prefix=False),
                  fts_query(" ".join(query_words(text_)))):
        if query:
            db.execute("SELECT bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t)", (query,)).fetchall()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(st.lists(st.text(max_size=40), min_size=1, max_size=6))
def test_no_search_raises_through_the_tool(tmp_path: Path, requests: list[str]) -> None:
    import asyncio
    import tempfile

    async def go() -> None:
        h = await make_harness(Path(tempfile.mkdtemp(dir=tmp_path)))
        await h.begin()
        await h.record("prompt", 'a "quoted" AND NEAR(thing) -x * : port')
        await h.end()
        await h.begin()
        for request in requests:
            answer = await h.ask(f"recall {request}")
            assert answer.strip() and not answer.startswith("memory: the request could not be carried out")
        await h.close()

    asyncio.run(go())


_NUMBER = st.integers(min_value=0, max_value=10 ** 12)
_NAME = st.from_regex(r"[A-Za-z][A-Za-z0-9_ -]{0,20}", fullmatch=True).map(str.strip).filter(bool)
_TARGETS = st.one_of(
    _NUMBER.map(lambda n: f"entry {n}"),
    st.tuples(_NUMBER, st.integers(1, 10 ** 6)).map(lambda t: f"entry {t[0]} from line {t[1]}"),
    _NUMBER.map(lambda n: f"turn {n}"),
    _NUMBER.map(str),
    st.just("summary"), st.integers(1, 10 ** 6).map(lambda n: f"summary v{n}"),
    _NAME.map(lambda n: f"fact {n}"),
    st.integers(1, 999999).map(lambda n: f"MEM-{n:06d}"),
    st.just("task"),
    st.from_regex(r"[0-9a-f]{8,16}", fullmatch=True).map(lambda x: f"output {x}"),
)


@settings(max_examples=400)
@given(_TARGETS, st.sampled_from(["", "recall ", "Recall ", 'memory "recall ']))
@example("1000000000000", "")  # a number alone longer than an entry number can be: an error, not a search
def test_a_real_target_is_never_taken_for_a_search(target: str, prefix: str) -> None:
    request = prefix + target + ('"' if prefix.startswith("memory") else "")
    try:
        req = parse_request(request)
    except RequestError as exc:  # a target the tool refuses is still not a search
        assert exc.line.startswith(("error:", "memory:"))
        return
    assert req.target is not None and req.target.kind != "search", (request, req.target)


def test_words_that_name_no_target_are_a_search() -> None:
    for request, words in [("recall port", "port"), ("recall gateway error", "gateway error"),
                           ("port 8437", "port 8437"), ("8437 port", "8437 port"),
                           ("search service.toml", "service.toml"), ("recall the weather", "the weather")]:
        target = parse_request(request).target
        assert (target.kind, target.name, target.from_hit) == ("search", words, None), request
    target = parse_request('memory "recall port 8437 from hit 4"').target
    assert (target.kind, target.name, target.from_hit) == ("search", "port 8437", 4)
    for malformed in ("entry seven", "recall turn 3 sideways", "recall ???"):
        with pytest.raises(RequestError):
            parse_request(malformed)


def test_what_a_hit_was_is_said_in_words() -> None:
    assert describe_hit("prompt", None, None) == "the person's prompt"
    assert describe_hit("reply", None, None) == "your reply"
    assert describe_hit("tool_result", "read_file", {"path": "service.toml"}) == "read_file of service.toml"
    assert describe_hit("tool_call", "run_command", {"command": "pytest -q"}) == 'run_command call of "pytest -q"'
    assert describe_hit("tool_result", "system_info", {}) == "system_info output"


# --- the index: triggers and the migration of an old database -------------------------------------------------------


async def test_an_entry_is_indexed_once_it_stops_streaming(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    e = await h.store.add_entry(h.conversation, h.turn.id, "tool_result", "building zebra", tool_name="run_command",
                                meta={"streaming": True})
    assert await h.store.search("zebra", conversation_id=h.conversation) == []
    await h.store.update_entry(e.id, content="building zebra\ndone", meta={"streaming": None})
    assert [x.entry for x in await h.store.search("zebra", conversation_id=h.conversation)] == [e.number]
    await h.store.update_entry(e.id, content="rewritten")
    assert await h.store.search("zebra", conversation_id=h.conversation) == []
    assert [x.entry for x in await h.store.search("rewritten", conversation_id=h.conversation)] == [e.number]
    await h.store.delete_conversation(h.conversation)
    assert await h.store.search("rewritten") == []
    await h.store.db.execute("INSERT INTO entries_fts (entries_fts) VALUES ('integrity-check')")
    await h.close()


async def test_an_old_database_migrates_and_its_tool_outputs_are_found(tmp_path: Path) -> None:
    """A database made with the steps before the search index (prompts and replies only) is migrated on open:
    its tool calls and outputs are found, its streaming entries are not, and the triggers keep the new index."""
    path = tmp_path / "old.db"
    old_steps = [m for m in MIGRATIONS if m.name != "m006_entries_search"]
    assert len(old_steps) == len(MIGRATIONS) - 1
    db = await aiosqlite.connect(path, isolation_level=None)
    await migrate(db, path, old_steps)
    now = "2025-01-31T14:05:12.000000Z"
    await db.execute("INSERT INTO conversations (id, workdir, created_at, updated_at) VALUES (1, '/w', ?, ?)",
                     (now, now))
    await db.execute("INSERT INTO turns (id, conversation_id, number, state, started_at) VALUES (1, 1, 1, 'done', ?)",
                     (now,))
    rows = [(1, "prompt", "read service.toml please", None, None, "{}"),
            (2, "tool_call", '{"path": "service.toml"}', "read_file", '{"path": "service.toml"}', "{}"),
            (3, "tool_result", "1\tport = 8437\n[end of file]", "read_file", None, "{}"),
            (4, "tool_result", "still streaming quagga", "run_command", None, '{"streaming": true}'),
            (5, "reply", "It listens on port 8437.", None, None, "{}")]
    for number, kind, content, tool, args, meta in rows:
        await db.execute("INSERT INTO entries (conversation_id, turn_id, number, kind, content, tool_name, arguments,"
                         " meta, created_at) VALUES (1, 1, ?, ?, ?, ?, ?, ?, ?)",
                         (number, kind, content, tool, args, meta, now))
    old_hits = await db.execute_fetchall("SELECT rowid FROM entries_fts WHERE entries_fts MATCH '8437'")
    assert len(old_hits) == 1  # before: the reply alone
    await db.close()

    store = await Store.open(path)
    try:
        assert "store.m006_entries_search" in await store.migrations()
        assert sorted(h.entry for h in await store.search("8437", conversation_id=1)) == [3, 5]
        assert [(h.entry, h.kind) for h in await store.search("service.toml", conversation_id=1, order="rank")][:2] \
            and {h.entry for h in await store.search("service.toml", conversation_id=1)} == {1, 2}
        assert [h.tool_name for h in await store.search("read_file", conversation_id=1)] == ["read_file", "read_file"]
        assert await store.search("quagga", conversation_id=1) == []
        e = await store.add_entry(1, 1, "tool_result", "pelican sighted", tool_name="run_command")
        assert [h.entry for h in await store.search("pelican")] == [e.number]
        await store.db.execute("INSERT INTO entries_fts (entries_fts) VALUES ('integrity-check')")
    finally:
        await store.close()


# --- the summary paged, not cut -------------------------------------------------------------------------------------


async def test_a_summary_too_long_for_the_page_is_paged_to_its_end(tmp_path: Path) -> None:
    """A cut summary ended ``[cut at 772 of 1,024 characters]`` with nothing to page on; now every page but the
    last ends with the ``[more: …]`` line of the next, which starts where it stopped."""
    from wisp.core.context.summary import SummaryBook

    h = await make_harness(tmp_path, context_window=1024)
    words = [f"w{i}" for i in range(900)]
    body = "Turn 1 set up the service. " + " ".join(words) + " The end."
    await h.begin()
    await h.record("prompt", "hello")
    await h.end()
    await SummaryBook(h.store, h.audit).record(h.conversation, body, [1])
    await h.begin()
    pages = await follow(h, "recall summary")
    assert len(pages) > 1
    assert all(MORE.match(p.splitlines()[-1]) for p in pages[:-1]) and pages[-1].splitlines()[-1] == END
    assert not any("[cut at" in p for p in pages)
    shown = [re.sub(r"^\d+\t", "", line) for p in pages for line in p.splitlines()[1:-1]]
    assert " ".join(shown).split() == body.split()  # every word once, in order: nothing lost between pages
    await h.close()


# --- a recall in its own turn, through a session at a 2,048-token window ----------------------------------------------


@pytest.fixture
def small(wisp_home: Path):
    with FakeOllama(context_length=2048) as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url, "model.timeout_s": 5,
                                 "model.load_wait_s": 2, "context.memory": True})
        yield wisp_home, srv


async def test_a_recall_in_its_own_turn_at_2048_tokens_is_whole_or_paged_never_a_reference(small,
                                                                                             tmp_path: Path) -> None:
    """The recall is the oldest output of a turn whose outputs do not fit the window: the older outputs may
    stand as references, the recall never does (a reference would name the recall again: the loop)."""
    from wisp.core.session import Session, SessionOptions
    from tests.support.sidecalls import SummarisingSideCall

    _, srv = small
    (tmp_path / "notes.md").write_text("\n".join(f"note {i}: the gateway answered 502 at step {i}"
                                                 for i in range(1, 120)) + "\n")
    for i in range(3):
        (tmp_path / f"big{i}.txt").write_text("\n".join(f"big {i} line {k} " + "x" * 60 for k in range(300)) + "\n")
    srv.push(reply(tool_call("read_file", {"path": "notes.md"}), finish="tool_calls", usage=None),
             reply(text("Read it."), usage=None))
    side = SummarisingSideCall("faithful")  # the running summary's side calls take no scripted reply
    async with await Session.open(SessionOptions(workdir=tmp_path, side_call=side)) as s:
        assert await s.connect(), s.endpoint_error
        assert "memory" in s.tool_names
        first = [e async for e in s.run_turn("read notes.md")]
        read_entry = next(e.entry for e in first if type(e).__name__ == "ToolResult" and e.name == "read_file")
        before = len(srv.chat_bodies)
        srv.push(reply(tool_call("memory", {"request": f"recall entry {read_entry}"}), finish="tool_calls",
                       usage=None),
                 *[reply(tool_call("read_file", {"path": f"big{i}.txt"}), finish="tool_calls", usage=None)
                   for i in range(3)],
                 reply(text("Done."), usage=None))
        second = [e async for e in s.run_turn("what did the notes say about the gateway?")]
        assert not [e for e in second if type(e).__name__ == "Error"]
        recall = next(e for e in second if type(e).__name__ == "ToolResult" and e.name == "memory")
        assert recall.content.startswith(f"entry {read_entry}: read_file output, turn 1")
        sent_after = srv.chat_bodies[before + 1:]  # every request of the turn after the recall
        assert len(sent_after) == 4
        for body in sent_after:
            tool_msgs = [m.get("content") or "" for m in body["messages"] if m.get("role") == "tool"]
            mine = [m for m in tool_msgs if m.startswith(f"entry {read_entry}: read_file output")
                    or f"output of entry {recall.entry} not repeated" in m]
            assert len(mine) == 1, [m[:80] for m in tool_msgs]
            assert f"output of entry {recall.entry} not repeated" not in mine[0]
            last = mine[0].splitlines()[-1]
            assert last == END or re.match(rf'^\[more: memory "recall entry ({recall.entry}|{read_entry}) from line '
                                           rf'\d+"\]$', last), last
        # the three big reads did not fit beside it: the older ones stand as references
        last_sent = [m.get("content") or "" for m in srv.chat_bodies[-1]["messages"] if m.get("role") == "tool"]
        assert any("not repeated" in m for m in last_sent[-3:])


async def test_a_page_of_an_entry_of_this_turn_is_given_so_a_cut_result_can_be_continued(tmp_path: Path) -> None:
    """A result the request sent cut ends ``[more: memory "recall entry N from line K"]`` with N in this turn:
    that page is given (the entry was not sent whole), where a bare ``recall entry N`` of this turn says it is
    in view."""
    h = await make_harness(tmp_path)
    await h.begin()
    await h.record("prompt", "hello")
    await h.end()
    await h.begin()
    result = await h.tool_output("memory", {"request": "recall entry 1"}, "\n".join(f"row {i}" for i in range(1, 9)))
    assert (await h.ask(f"recall entry {result.number}")).startswith(f"memory: entry {result.number} is from this turn")
    page = (await h.ask(f"recall entry {result.number} from line 5")).splitlines()
    assert page[0].startswith(f"entry {result.number}: memory output, turn 2")
    assert page[2:6] == ["5\trow 5", "6\trow 6", "7\trow 7", "8\trow 8"] and page[-1] == END
    await h.close()
