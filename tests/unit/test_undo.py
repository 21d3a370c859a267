"""/undo of the model's edits (the command the TUI, wisp ask and tests share), against the fake
Ollama on 127.0.0.1 with a real store and audit log: after one edit, after several, all or none,
refused after an outside change (saying how to see both), recorded; and the property that an edit
then its undo gives back the original bytes, for random files and random unique search texts."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from tests.support.edits import Asker, audit_events, edit_turn, told
from tests.support.fakes import reply, text
from wisp.core.commands import run_command
from wisp.core.session import Session, SessionOptions


async def open_session(workdir: Path, ask=None, **opts) -> Session:
    session = await Session.open(SessionOptions(workdir=workdir, tools=["read_file", "edit_file"], ask=ask, **opts))
    assert await session.connect(), session.endpoint_error
    return session


async def run(session: Session, prompt: str) -> list:
    return [item async for item in session.run_turn(prompt)]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    d = tmp_path / "project"
    d.mkdir()
    return d


async def test_undo_after_one_edit_puts_the_file_back_and_is_recorded(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "a.txt").write_text("one\ntwo\n")
    srv.push(*edit_turn({"path": "a.txt", "search": "two", "replace": "2"}), reply(text("ok")))
    async with await open_session(work, Asker("once")) as s:
        await run(s, "change it")
        assert (work / "a.txt").read_text() == "one\n2\n"
        result = await run_command(s, "/undo")
        assert not result.error and result.action == "undo"
        assert result.text.startswith("Undid turn 1's 1 edit: put back a.txt.")
        assert (work / "a.txt").read_text() == "one\ntwo\n"
        # recorded: an entry with its audit event, the edit marked undone; nothing deleted
        entry = (await s.store.entries(s.conversation_id))[-1]
        assert entry.kind == "notice" and entry.turn_id is None and entry.meta["undo"]["files"] == ["a.txt"]
        assert s.audit.read(entry.audit_ref)["kind"] == "edit.undone"
        workdir = await s.context.facts.current_of(s.conversation_id, "workdir")  # at once, not at the next request
        assert workdir.value == f"{work.resolve()}; put back by /undo: a.txt"
        (edit,) = await s.edits.edits(s.conversation_id)
        assert edit.undone_at and edit.undo_entry == entry.number and edit.after == b"one\n2\n"
        # the model is told with its next request, through the workdir fact
        await run(s, "what now?")
        assert "put back by /undo: a.txt" in srv.chat_bodies[-1]["messages"][-1]["content"]
        again = await run_command(s, "/undo")
        assert again.error and again.text == ("No edit of this conversation is left to undo (every edit it made was "
                                              "undone already: /undo list shows them).")
    (undone,) = audit_events(home, "edit.undone")
    assert undone["payload"]["turn"] == 1 and undone["payload"]["files"] == ["a.txt"]


async def test_undo_after_several_edits_goes_back_turn_by_turn(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "a.txt").write_text("v0\n")
    srv.push(*edit_turn({"path": "a.txt", "search": "v0", "replace": "v1"}),
             reply(text("Two changes."), *_calls(("c2", {"path": "a.txt", "search": "v1", "replace": "v2"}),
                                                  ("c3", {"path": "new/dir/b.txt", "content": "bee\n"})),
                   finish="tool_calls"), reply(text("Done.")))
    async with await open_session(work, Asker("once", "once", "once")) as s:
        await run(s, "first")
        await run(s, "second")
        assert (work / "a.txt").read_text() == "v2\n" and (work / "new" / "dir" / "b.txt").exists()
        listing = await run_command(s, "/undo list")
        assert [(r["turn"], r["path"], r["state"]) for r in listing.data["edits"]] == [
            (1, "a.txt", "standing"), (2, "a.txt", "standing"), (2, "new/dir/b.txt", "standing")]
        first = await run_command(s, "/undo")  # the latest turn with edits: turn 2, both files
        assert first.text.startswith("Undid turn 2's 2 edits: put back a.txt; removed new/dir/b.txt (which it had "
                                     "created).")
        assert (work / "a.txt").read_text() == "v1\n" and not (work / "new").exists()
        second = await run_command(s, "/undo 1")
        assert second.text.startswith("Undid turn 1's 1 edit: put back a.txt.")
        assert (work / "a.txt").read_text() == "v0\n"
        refused = await run_command(s, "/undo 2")
        assert refused.error and refused.text.startswith("No edit of this conversation is left to undo")


def _calls(*calls):
    from tests.support.fakes import tool_call

    return [tool_call("edit_file", args, id=cid) for cid, args in calls]


async def test_undo_is_refused_after_an_outside_change_and_says_how_to_see_both(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "a.txt").write_text("one\n")
    (work / "b.txt").write_text("bee\n")
    srv.push(reply(text("Both."), *_calls(("c1", {"path": "a.txt", "search": "one", "replace": "1"}),
                                          ("c2", {"path": "b.txt", "search": "bee", "replace": "b"})),
                   finish="tool_calls"), reply(text("Done.")))
    async with await open_session(work, Asker("once", "once")) as s:
        await run(s, "change both")
        (work / "b.txt").write_text("b\nand the person's own line\n")  # the person changes one of them
        refused = await run_command(s, "/undo")
        call = [e for e in await s.store.entries(s.conversation_id) if e.kind == "tool_call"][1]
        assert refused.error and refused.text == (
            "Nothing was undone: b.txt: its content changed since turn 1's edit (by you, a command or another "
            "program), and wisp does not overwrite a change it did not make. To see both: /undo diff 1 shows how "
            f"each file differs now from what the edit left; /show entry {call.number} shows the edit the model asked "
            "for. Put it back by hand if you want the edit's version, or keep it as it is.")
        # all or none: a.txt, which did not change, was not put back either; nothing was recorded
        assert (work / "a.txt").read_text() == "1\n" and (work / "b.txt").read_text() == "b\nand the person's own line\n"
        assert not [e for e in await s.store.entries(s.conversation_id) if e.kind == "notice"]
        diff = await run_command(s, "/undo diff 1")
        assert "- `a.txt`: unchanged since the edit (/undo 1 puts it back)" in diff.text
        assert ("--- b.txt as turn 1's edit left it\n+++ b.txt now\n@@ -1 +1,2 @@\n b\n+and the person's own line"
                in diff.text)
    assert audit_events(home, "edit.undone") == []


async def test_undo_of_an_older_turn_waits_for_the_later_edit_of_the_same_file(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "a.txt").write_text("v0\n")
    srv.push(*edit_turn({"path": "a.txt", "search": "v0", "replace": "v1"}),
             *edit_turn({"path": "a.txt", "search": "v1", "replace": "v2"}, call_id="c2"))
    async with await open_session(work, Asker("once", "once")) as s:
        await run(s, "one")
        await run(s, "two")
        refused = await run_command(s, "/undo 1")
        assert refused.text == ("Nothing was undone: a.txt was edited again in turn 2. Undo the later turn first "
                                "(/undo 2 is the newest), then this one.")
        assert (work / "a.txt").read_text() == "v2\n"


async def test_undo_never_follows_a_link_put_in_the_files_place(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "a.txt").write_text("one\n")
    outside = work.parent / "outside.txt"
    outside.write_text("1\n")  # what the edit left, so only the link check can stop it
    srv.push(*edit_turn({"path": "a.txt", "search": "one", "replace": "1"}))
    async with await open_session(work, Asker("once")) as s:
        await run(s, "change it")
        (work / "a.txt").unlink()
        (work / "a.txt").symlink_to(outside)
        refused = await run_command(s, "/undo")
        assert refused.error and refused.text.startswith("Nothing was undone: a.txt: it is gone since turn 1's edit")
    assert outside.read_text() == "1\n" and (work / "a.txt").is_symlink()


async def test_undo_usage_and_a_turn_without_edits(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "a.txt").write_text("one\n")
    srv.push(*edit_turn({"path": "a.txt", "search": "one", "replace": "1"}), reply(text("just talk")))
    async with await open_session(work, Asker("once")) as s:
        nothing = await run_command(s, "/undo")
        assert nothing.error and nothing.text == "Nothing to undo: the model has made no edit in this conversation."
        await run(s, "change it")
        await run(s, "talk")
        assert (await run_command(s, "/undo two")).text == "Usage: /undo [N] | /undo list | /undo diff [N], such as /undo 3"
        assert (await run_command(s, "/undo 2")).text == ("Turn 2 has no edit to undo: it made no edit. Turns with "
                                                          "edits standing: 1 (/undo list shows them).")
        assert (work / "a.txt").read_text() == "1\n"


# --- the property: an edit and its undo give back the original bytes -------------------------------------------

_LINE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0\r\n"), max_size=30)


@st.composite
def file_and_unique_search(draw):
    lines = draw(st.lists(_LINE, min_size=1, max_size=25))
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    data = ending.join(lines) + draw(st.sampled_from(["", ending]))
    raw = data.encode("utf-8")
    start = draw(st.integers(0, max(0, len(data) - 1)))
    length = draw(st.integers(1, 40))
    search = data[start:start + length].replace("\r\n", "\n") if ending == "\r\n" else data[start:start + length]
    assume(search.strip() and "\r" not in search)
    probe = search.encode("utf-8")
    crlf = search.replace("\n", "\r\n").encode("utf-8")
    hits = _count(raw, probe) + (0 if probe == crlf or _count(raw, probe) else _count(raw, crlf))
    assume(hits == 1)
    replace = draw(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0\r"), max_size=40))
    assume(replace != search)
    return raw, search, replace


def _count(data: bytes, needle: bytes) -> int:
    n, at = 0, data.find(needle)
    while at >= 0:
        n, at = n + 1, data.find(needle, at + 1)
    return n


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.filter_too_much])
@given(case=file_and_unique_search())
def test_an_edit_then_its_undo_gives_back_the_original_bytes(case, wisp_home: Path) -> None:
    raw, search, replace = case

    async def one() -> None:
        from wisp.core.audit import AuditLog
        from wisp.core.database import open_store
        from wisp.core.tools.approval import Approval
        from wisp.core.tools.base import ToolContext
        from wisp.core.tools.edit_file import EditFile
        from wisp.core.tools.edit_store import EditBook

        root = Path(tempfile.mkdtemp(dir=wisp_home.parent))
        work = root / "w"
        work.mkdir()
        (work / "f.txt").write_bytes(raw)
        store = await open_store(root / "db.sqlite")
        try:
            conv = await store.create_conversation(str(work))
            book = EditBook(store, AuditLog(root / "audit"))

            async def allow(request):
                return Approval(True, "once", "person")

            ctx = ToolContext(workdir=work, config=None, conversation_id=conv.id, turn=1, approve=allow)
            result = await EditFile(book).run({"path": "f.txt", "search": search, "replace": replace}, ctx)
            assert result.ok, result.content
            changed = (work / "f.txt").read_bytes()
            assert changed != raw and replace.encode() in changed.replace(b"\r\n", b"\n")
            done = await book.undo(conv.id, None, work)
            assert done.files == ["f.txt"]
            assert (work / "f.txt").read_bytes() == raw
        finally:
            await store.close()

    asyncio.run(one())


async def test_undo_waits_for_a_running_turn(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "a.txt").write_text("one\n")
    srv.push(*edit_turn({"path": "a.txt", "search": "one", "replace": "1"}))
    async with await open_session(work, Asker("once")) as s:
        await run(s, "change it")
        turn = await s.store.begin_turn(s.conversation_id)  # a turn under way (its model may be editing)
        refused = await run_command(s, "/undo")
        assert refused.error and refused.text == "Turn 2 is still running; /undo once it has ended (Esc stops it)."
        assert (work / "a.txt").read_text() == "1\n"
        await s.store.end_turn(turn.id, "done")
        assert not (await run_command(s, "/undo")).error and (work / "a.txt").read_text() == "one\n"


async def test_a_write_past_its_deadline_stays_pending_and_undo_reads_the_file(ollama_home, work: Path,
                                                                               monkeypatch) -> None:
    """A file system that hangs past the deadline: the model is told the file may or may not be
    changed, the edit stays pending (never marked failed while its thread may still write), and once
    the write lands /undo puts it back."""
    import threading

    from wisp.core.tools import edit_file

    home, srv = ollama_home
    (work / "a.txt").write_text("one\n")
    release, landed = threading.Event(), threading.Event()
    real = edit_file.replace_checked

    def hung(*args, **kwargs):
        release.wait(60)
        try:
            return real(*args, **kwargs)
        finally:
            landed.set()

    monkeypatch.setattr(edit_file, "replace_checked", hung)
    monkeypatch.setattr(edit_file, "IO_DEADLINE_S", 0.2)
    srv.push(*edit_turn({"path": "a.txt", "search": "one", "replace": "1"}))
    async with await open_session(work, Asker("once")) as s:
        await run(s, "change it")
        assert told(srv.chat_bodies[1])[0].startswith("error: writing a.txt did not finish within 0.2 s")
        assert [e.state for e in await s.edits.edits(s.conversation_id)] == ["pending"]
        release.set()
        assert await asyncio.to_thread(landed.wait, 60)
        assert (work / "a.txt").read_text() == "1\n"  # it landed after all
        done = await run_command(s, "/undo")
        assert not done.error and (work / "a.txt").read_text() == "one\n"
