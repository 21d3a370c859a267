"""edit_file through the agent loop, against the fake endpoints on 127.0.0.1, with a real store and
audit log: each case asserts the file's bytes and what the model is told (the tool message of the
next request). Then the attacks: paths with .., links in and out, links swapped while the approval
is open, big files, bytes that are not UTF-8, CRLF files, search texts of only whitespace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.edits import Asker, audit_events, edit_turn, told
from tests.support.fakes import FakeOllama, FakeOpenAI, reply, text
from tests.support.home import write_config
from wisp.core import events as ev
from wisp.core.config import Config
from wisp.core.session import Session, SessionOptions


async def open_session(workdir: Path, ask=None, **opts) -> Session:
    session = await Session.open(SessionOptions(workdir=workdir, tools=["read_file", "edit_file"], ask=ask, **opts))
    assert await session.connect(), session.endpoint_error
    return session


async def run(session: Session, prompt: str) -> list:
    return [item async for item in session.run_turn(prompt)]


def results(events: list) -> list[ev.ToolResult]:
    return [e for e in events if isinstance(e, ev.ToolResult)]


@pytest.fixture(params=["ollama", "openai"])
def any_home(request, wisp_home: Path):
    cls = FakeOllama if request.param == "ollama" else FakeOpenAI
    with cls() as srv:
        write_config(wisp_home, {"model.provider": request.param, "model.endpoint": srv.base_url,
                                 "model.timeout_s": 5, "model.load_wait_s": 10})
        yield wisp_home, srv


@pytest.fixture
def work(tmp_path: Path) -> Path:
    d = tmp_path / "project"
    d.mkdir()
    return d


APP = "def answer():\n    return 41\n\n\ndef question():\n    return 'six by nine'\n"


# --- the edits themselves ---------------------------------------------------------------------------


async def test_one_replacement_is_asked_with_its_diff_made_recorded_and_told(any_home, work: Path) -> None:
    home, srv = any_home
    (work / "app.py").write_text(APP)
    srv.push(*edit_turn({"path": "app.py", "search": "    return 41", "replace": "    return 42"}))
    ask = Asker("once")
    async with await open_session(work, ask) as s:
        events = await run(s, "make answer() return 42")
        assert (work / "app.py").read_text() == APP.replace("41", "42")
        # the person was asked with the change itself
        (request,) = ask.requests
        assert request.tool == "edit_file" and request.path == "app.py" and (request.added, request.removed) == (1, 1)
        assert "--- a/app.py\n+++ b/app.py\n@@ -1,5 +1,5 @@\n def answer():\n-    return 41\n+    return 42" \
            in request.diff
        # what the model is told: what changed, where, and the diff
        (said,) = told(srv.chat_bodies[1])
        assert said.startswith("edited app.py: 1 replacement (line 2), 1 line added, 1 removed.\n--- a/app.py")
        assert "-    return 41\n+    return 42" in said
        (result,) = results(events)
        assert result.ok and result.meta["edit"]["path"] == "app.py" and result.meta["changed_files"] == ["app.py"]
        # recorded: the call and result as entries with audit events, the bytes before and after in the store
        entries = await s.store.entries(s.conversation_id)
        call = next(e for e in entries if e.kind == "tool_call")
        assert call.arguments == {"path": "app.py", "search": "    return 41", "replace": "    return 42"}
        assert s.audit.read(call.audit_ref)["kind"] == "tool.call"
        (edit,) = await s.edits.edits(s.conversation_id)
        assert edit.state == "applied" and edit.before == APP.encode() and edit.after == APP.replace("41", "42").encode()
        assert edit.turn == 1 and edit.call_entry == call.number
    (applied,) = audit_events(home, "edit.applied")
    assert applied["payload"]["before_sha256"] == edit.before_sha256 and applied["payload"]["path"] == "app.py"
    (approval,) = audit_events(home, "approval")
    assert approval["payload"]["choice"] == "once" and approval["payload"]["path"] == "app.py"


async def test_several_replacements_apply_in_order_all_or_none(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "app.py").write_text(APP)
    srv.push(*edit_turn({"path": "app.py", "edits": [{"search": "return 41", "replace": "return 42"},
                                                     {"search": "'six by nine'", "replace": "'six by seven'"}]}),
             *edit_turn({"path": "app.py", "edits": [{"search": "return 42", "replace": "return 43"},
                                                     {"search": "no such line", "replace": "x"}]}, call_id="c2"))
    async with await open_session(work, Asker("once", "once")) as s:
        await run(s, "two changes")
        assert (work / "app.py").read_text() == APP.replace("41", "42").replace("six by nine", "six by seven")
        (said,) = told(srv.chat_bodies[1])
        assert said.startswith("edited app.py: 2 replacements (line 2, line 6), 2 lines added, 2 removed.")
        await run(s, "two more, one wrong")
        # the second edit matched nothing, so the first was not made either
        assert (work / "app.py").read_text() == APP.replace("41", "42").replace("six by nine", "six by seven")
        said = told(srv.chat_bodies[3])[-1]
        assert said.startswith("error: edit 2 of 2: the search text matches nothing in app.py; nothing was "
                               "changed (no edit of this call was made).")
        assert [e.state for e in await s.edits.edits(s.conversation_id)] == ["applied"]


async def test_no_match_is_told_the_closest_lines(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "app.py").write_text(APP)
    srv.push(*edit_turn({"path": "app.py", "search": "def answr():\n    return 14", "replace": "x"}),
             *edit_turn({"path": "app.py", "search": "def answer():\n  return 41", "replace": "x"}, call_id="c2"))
    async with await open_session(work, Asker()) as s:
        await run(s, "a typo")
        said = told(srv.chat_bodies[1])[0]
        assert said.startswith("error: the search text matches nothing in app.py; nothing was changed. "
                               "The closest lines are 1-3:\n1\tdef answer():\n2\t    return 41\n")
        await run(s, "other spacing")
        said = told(srv.chat_bodies[3])[-1]
        assert "The same text is at line 1 with other spacing or indentation:\n1\tdef answer():\n2\t    return 41" \
            in said
    assert (work / "app.py").read_text() == APP and audit_events(home, "approval") == []  # never asked


async def test_two_matches_are_refused_naming_where(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "app.py").write_text(APP)
    srv.push(*edit_turn({"path": "app.py", "search": "    return", "replace": "    yield"}))
    async with await open_session(work, Asker("once")) as s:
        await run(s, "ambiguous")
    said = told(srv.chat_bodies[1])[0]
    assert said.startswith("error: the search text matches 2 times in app.py (at lines 2, 6); nothing was changed. "
                           "Include more of the lines around the one to change, so that it matches once:\n"
                           "2\t    return 41\n6\t    return 'six by nine'")
    assert (work / "app.py").read_text() == APP


async def test_a_new_file_with_its_directories_and_content_never_overwrites(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "app.py").write_text(APP)
    srv.push(*edit_turn({"path": "notes/todo.md", "content": "# To do\n- ship it\n"}),
             *edit_turn({"path": "app.py", "content": "print('all new')\n"}, call_id="c2"))
    ask = Asker("once", "once")
    async with await open_session(work, ask) as s:
        await run(s, "make a todo")
        assert (work / "notes" / "todo.md").read_text() == "# To do\n- ship it\n"
        assert ask.requests[0].new_file and "--- /dev/null\n+++ b/notes/todo.md" in ask.requests[0].diff
        assert told(srv.chat_bodies[1]) == ["created notes/todo.md: 2 lines, 18 bytes."]
        assert oct((work / "notes" / "todo.md").stat().st_mode & 0o777) == oct(0o666 & ~_umask())
        await run(s, "overwrite app.py")
        assert told(srv.chat_bodies[3])[-1].startswith("error: app.py exists already; content only creates a new "
                                                        "file. Change it with search and replace")
        assert (work / "app.py").read_text() == APP and len(ask.requests) == 1


def _umask() -> int:
    from wisp.core.tools.file_write import current_umask

    return current_umask()


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink", "hardlink", "dir-symlink"])
async def test_a_file_outside_the_directory_is_refused_however_named(ollama_home, work: Path, how: str) -> None:
    home, srv = ollama_home
    outside = work.parent / "outside.txt"
    outside.write_text("secret = 1\n")
    path = {"dotdot": "../outside.txt", "absolute": str(outside), "symlink": "link.txt",
            "hardlink": "hard.txt", "dir-symlink": "elsewhere/outside.txt"}[how]
    if how == "symlink":
        (work / "link.txt").symlink_to(outside)
    elif how == "hardlink":
        os.link(outside, work / "hard.txt")
    elif how == "dir-symlink":
        (work / "elsewhere").symlink_to(work.parent, target_is_directory=True)
    srv.push(*edit_turn({"path": path, "search": "secret = 1", "replace": "secret = 2"}))
    ask = Asker("once")
    async with await open_session(work, ask) as s:
        await run(s, "change it")
    said = told(srv.chat_bodies[1])[0]
    if how == "hardlink":
        assert said == ("error: hard.txt has 2 hard links, so it may be a file outside the working directory under "
                        "another name; edit_file does not change it")
    else:
        assert said.startswith(f"error: {path} is outside the working directory {work.resolve()} (it resolves to "
                               f"{outside.resolve()}); edit_file changes only files inside it")
    assert outside.read_text() == "secret = 1\n" and ask.requests == []


async def test_a_binary_file_and_gits_own_files_are_refused(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text("[core]\n\tbare = false\n")
    srv.push(*edit_turn({"path": "logo.png", "search": "PNG", "replace": "GIF"}),
             *edit_turn({"path": ".git/config", "search": "bare = false", "replace": "fsmonitor = ./x"}, call_id="c2"))
    async with await open_session(work, Asker("once", "once")) as s:
        await run(s, "edit the logo")
        assert told(srv.chat_bodies[1]) == ["error: logo.png is a binary file (a NUL byte at byte 8); edit_file edits "
                                            "text"]
        await run(s, "edit git's config")
        assert told(srv.chat_bodies[3])[-1].startswith("error: .git/config is inside .git, the repository's own "
                                                        "machinery")
    assert (work / "logo.png").read_bytes().startswith(b"\x89PNG") and "fsmonitor" not in (work / ".git" / "config").read_text()


async def test_a_file_changed_while_the_approval_is_open_is_not_overwritten(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "app.py").write_text(APP)
    srv.push(*edit_turn({"path": "app.py", "search": "return 41", "replace": "return 42"}))

    def someone_saves(request) -> None:  # the person's editor saves the file while the modal is open
        (work / "app.py").write_text(APP + "# saved meanwhile\n")

    async with await open_session(work, Asker("once", before=someone_saves)) as s:
        events = await run(s, "change it")
        assert [e.state for e in await s.edits.edits(s.conversation_id)] == ["failed"]
    assert (work / "app.py").read_text() == APP + "# saved meanwhile\n"
    assert told(srv.chat_bodies[1]) == ["error: app.py was not changed: its content changed after the edit was shown. "
                                        "Nothing was written; read the file again and make the edit again if it is "
                                        "still wanted."]
    assert "edit" not in results(events)[0].meta  # no reference may say it was made


async def test_a_link_swapped_in_while_the_approval_is_open_is_never_followed(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "app.py").write_text(APP)
    outside = work.parent / "victim.py"
    outside.write_text(APP)  # the same bytes: only the link check can stop it
    srv.push(*edit_turn({"path": "app.py", "search": "return 41", "replace": "return 42"}),
             *edit_turn({"path": "sub/app.py", "search": "return 41", "replace": "return 42"}, call_id="c2"))
    (work / "sub").mkdir()
    (work / "sub" / "app.py").write_text(APP)

    def swap_file(request) -> None:
        if request.path == "app.py":
            (work / "app.py").unlink()
            (work / "app.py").symlink_to(outside)
        else:  # the directory above it becomes a link out
            os.rename(work / "sub", work / "sub-old")
            (work / "sub").symlink_to(work.parent, target_is_directory=True)
            (work.parent / "app.py").write_text(APP)

    async with await open_session(work, Asker("once", "once", before=swap_file)) as s:
        await run(s, "change it")
        assert told(srv.chat_bodies[1])[0].startswith("error: app.py was not changed: it now resolves")
        await run(s, "change the other")
        assert told(srv.chat_bodies[3])[-1].startswith("error: sub/app.py was not changed: it now resolves")
    assert outside.read_text() == APP and (work.parent / "app.py").read_text() == APP


async def test_denied_and_no_one_to_ask(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "app.py").write_text(APP)
    srv.push(*edit_turn({"path": "app.py", "search": "return 41", "replace": "return 42"}),
             *edit_turn({"path": "app.py", "search": "return 41", "replace": "return 42"}, call_id="c2"))
    async with await open_session(work, Asker("deny")) as s:
        await run(s, "change it")
    assert told(srv.chat_bodies[1]) == ["The person denied the edit of app.py; it was not made. Do not make it again "
                                        "unless the person asks you to; say what you wanted it for, or go on another "
                                        "way."]
    async with await open_session(work, None, continue_last=True) as s:  # wisp ask: no one to ask
        await run(s, "change it")
    assert told(srv.chat_bodies[3])[-1].startswith("The edit of app.py was not made: edits need the person's "
                                                    "approval, and no one can give it here (wisp ask without "
                                                    "--allow-edits).")
    assert (work / "app.py").read_text() == APP
    assert [e["payload"]["choice"] for e in audit_events(home, "approval")] == ["deny", "needs_approval"]


async def test_always_for_this_file_holds_for_the_conversation_only(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "a.txt").write_text("one\n")
    (work / "b.txt").write_text("one\n")
    srv.push(*edit_turn({"path": "a.txt", "search": "one", "replace": "two"}),
             *edit_turn({"path": "a.txt", "search": "two", "replace": "three"}, call_id="c2"),
             *edit_turn({"path": "b.txt", "search": "one", "replace": "two"}, call_id="c3"))
    ask = Asker("always", "deny")
    async with await open_session(work, ask) as s:
        for prompt in ("a", "a again", "b"):
            await run(s, prompt)
    assert (work / "a.txt").read_text() == "three\n" and (work / "b.txt").read_text() == "one\n"
    assert [r.path for r in ask.requests] == ["a.txt", "b.txt"]  # the second edit of a.txt was not asked
    assert [(e["payload"]["choice"], e["payload"]["source"]) for e in audit_events(home, "approval")] == [
        ("always", "person"), ("allow_list", "conversation"), ("deny", "person")]


async def test_the_config_key_allows_edits_without_asking(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    Config.load().set("tools.edit_file.allow", "on")
    (work / "a.txt").write_text("one\n")
    srv.push(*edit_turn({"path": "a.txt", "search": "one", "replace": "two"}))
    async with await open_session(work, None) as s:
        await run(s, "change it")
    assert (work / "a.txt").read_text() == "two\n"
    assert [e["payload"]["source"] for e in audit_events(home, "approval")] == ["config"]


# --- attacks on the bytes ---------------------------------------------------------------------------


async def test_crlf_lines_stay_crlf(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    (work / "win.txt").write_bytes(b"first\r\nsecond\r\nthird\r\n")
    srv.push(*edit_turn({"path": "win.txt", "search": "first\nsecond", "replace": "first\nnew\nsecond"}),
             *edit_turn({"path": "win.txt", "search": "third", "replace": "3rd\n4th"}, call_id="c2"))
    async with await open_session(work, Asker("once", "once")) as s:
        await run(s, "add a line")
        assert (work / "win.txt").read_bytes() == b"first\r\nnew\r\nsecond\r\nthird\r\n"
        assert "\r" not in told(srv.chat_bodies[1])[0]  # the diff shows lines, not carriage returns
        await run(s, "split the last")
    assert (work / "win.txt").read_bytes() == b"first\r\nnew\r\nsecond\r\n3rd\r\n4th\r\n"


async def test_bytes_that_are_not_utf8_are_kept(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    latin = "café = 1\nname = 'x'\n".encode("latin-1")
    (work / "old.cfg").write_bytes(latin)
    srv.push(*edit_turn({"path": "old.cfg", "search": "name = 'x'", "replace": "name = 'y'"}),
             *edit_turn({"path": "old.cfg", "search": "name = 'y'", "replace": "name = 'ÿ'"}, call_id="c2"))
    async with await open_session(work, Asker("once", "once")) as s:
        await run(s, "rename")
        assert (work / "old.cfg").read_bytes() == "café = 1\nname = 'y'\n".encode("latin-1")
        assert told(srv.chat_bodies[1])[0].endswith("[the file is not UTF-8: its other bytes were kept as they were]")
        await run(s, "a non-ASCII name")
        assert told(srv.chat_bodies[3])[-1].startswith("error: old.cfg is not UTF-8 text, so only a replacement of "
                                                        "ASCII characters can go in it")
    assert (work / "old.cfg").read_bytes() == "café = 1\nname = 'y'\n".encode("latin-1")


async def test_sizes_are_capped_before_and_after(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    Config.load().set("tools.edit_file.max_bytes", "1000")
    (work / "big.txt").write_text("x" * 1001)
    (work / "small.txt").write_text("seed\n")
    srv.push(*edit_turn({"path": "big.txt", "search": "xx", "replace": "y"}),
             *edit_turn({"path": "small.txt", "search": "seed", "replace": "z" * 1200}, call_id="c2"))
    async with await open_session(work, Asker("once", "once")) as s:
        await run(s, "big")
        assert told(srv.chat_bodies[1]) == ["error: big.txt is 1,001 bytes, over the 1,000 that edit_file edits "
                                            "(config tools.edit_file.max_bytes); change it another way"]
        await run(s, "grow")
        assert told(srv.chat_bodies[3])[-1].startswith("error: small.txt would be 1,201 bytes, over the 1,000 that "
                                                        "edit_file writes")
    assert (work / "small.txt").read_text() == "seed\n"


@pytest.mark.parametrize("search", ["", "   ", "\n\t\n"])
async def test_a_search_text_of_only_whitespace_says_nothing_about_where(ollama_home, work: Path, search: str) -> None:
    home, srv = ollama_home
    (work / "a.txt").write_text("a b\n")
    srv.push(*edit_turn({"path": "a.txt", "search": search, "replace": "x"}))
    async with await open_session(work, Asker("once")) as s:
        await run(s, "edit")
    what = "empty" if not search else "only whitespace"
    assert told(srv.chat_bodies[1]) == [f"error: search is {what}: it must be exact text of the file, such as a "
                                        "whole line, so that it says where the change goes"]
    assert (work / "a.txt").read_text() == "a b\n"


# --- the prompted protocol (the embedded model's) ---------------------------------------------------


async def test_the_prompted_protocol_carries_the_tool_and_its_call(wisp_home: Path, work: Path) -> None:
    from wisp.core.model.prompted import render_call

    (work / "app.py").write_text(APP)
    with FakeOpenAI(drops_tools=True) as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url, "model.timeout_s": 5,
                                 "model.tool_mode": "prompted"})
        block = render_call("edit_file", {"path": "app.py", "search": "return 41", "replace": "return 42"})
        srv.push(reply(text(block)), reply(text("It returns 42 now.")))
        async with await open_session(work, Asker("once")) as s:
            await run(s, "make it 42")
    assert (work / "app.py").read_text() == APP.replace("41", "42")
    first, second = srv.chat_bodies
    assert "tools" not in first
    system = first["messages"][0]["content"]
    assert "## edit_file\nChange a file: search is exact text from the file (once)" in system
    assert "- search (string, optional)" in system and "- content (string, optional): a new file's text" in system
    # the result travels back as text, as the protocol sends every result
    assert any(m["role"] == "user" and m["content"].startswith("[result of edit_file]\nedited app.py: 1 replacement")
               for m in second["messages"])


# --- later requests -----------------------------------------------------------------------------------


async def test_an_edits_reference_says_what_changed_and_is_not_repeated(ollama_home, work: Path) -> None:
    home, srv = ollama_home
    body = "".join(f"line {n} of the original text\n" for n in range(40))
    (work / "long.txt").write_text(body)
    search = "".join(f"line {n} of the original text\n" for n in range(10, 14))
    srv.push(*edit_turn({"path": "long.txt", "search": search, "replace": "the middle, rewritten\n"}),
             reply(text("ok")))
    async with await open_session(work, Asker("once")) as s:
        await run(s, "shorten it")
        await run(s, "and now?")
        entries = await s.store.entries(s.conversation_id)
    result = next(e for e in entries if e.kind == "tool_result")
    later = srv.chat_bodies[2]["messages"]
    assert told(srv.chat_bodies[2]) == [
        f"[output of entry {result.number} not repeated: edit_file, turn 1; edited long.txt: 1 line added, 4 removed; "
        "the edit is made: do not make it again (the workdir fact says if /undo put it back); to see its diff: ask "
        f"the person, who can use /show entry {result.number}]"]
    call = next(c for m in later if m["role"] == "assistant" for c in m.get("tool_calls") or [])
    assert call["function"]["arguments"] == {
        "path": "long.txt", "search": f"[{len(search)} characters not repeated: the edit is made (entry "
                                      f"{result.number})]", "replace": "the middle, rewritten\n"}
    assert "line 11 of the original text" not in str(later)
    assert "changed by edits in this conversation: long.txt (turn 1)" in later[-1]["content"]  # the workdir fact


# --- the model's arguments, parsed (property-based) -----------------------------------------------

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from wisp.core.tools.edit_file import ArgumentError, EditPlan, Replacement, parse_arguments  # noqa: E402

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4), max_leaves=12)
_KEYS = st.sampled_from(["path", "search", "replace", "edits", "content", "old_string", "new_string"])


@settings(max_examples=200, deadline=None)
@given(args=st.dictionaries(_KEYS, _JSON | st.lists(st.dictionaries(st.sampled_from(["search", "replace", "x"]),
                                                                     _JSON, max_size=3), max_size=3), max_size=5))
def test_any_arguments_give_a_plan_or_a_clear_error(args) -> None:
    try:
        plan = parse_arguments(args)
    except ArgumentError as exc:  # never another exception: what the model sent is outside input
        message = str(exc)
        assert message and "\n" not in message
        return
    assert isinstance(plan, EditPlan) and plan.path and plan.path == plan.path.strip()
    if plan.content is not None:
        assert plan.replacements == () and isinstance(args["content"], str)
    else:
        assert 1 <= len(plan.replacements) <= 20
        for r in plan.replacements:
            assert r.search.strip() and r.search != r.replace and "\0" not in r.search + r.replace


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(path=_TEXT, search=_TEXT, replace=_TEXT, several=st.booleans())
def test_well_formed_arguments_parse_to_what_they_say(path: str, search: str, replace: str, several: bool) -> None:
    args = {"path": path, **({"edits": [{"search": search, "replace": replace}]} if several
                             else {"search": search, "replace": replace})}
    good = path.strip() and "\0" not in path + search + replace and search.strip() and search != replace
    if good:
        assert parse_arguments(args) == EditPlan(path.strip(), (Replacement(search, replace),))
    else:
        with pytest.raises(ArgumentError):
            parse_arguments(args)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.dictionaries(_KEYS, _JSON, max_size=4))
def test_the_tool_answers_any_arguments_without_raising(args, tmp_path: Path) -> None:
    import asyncio

    from wisp.core.tools.base import ToolContext
    from wisp.core.tools.edit_file import EditFile

    class NoBook:  # nothing gets as far as being recorded: no one approves
        async def begin(self, *a):
            raise AssertionError("an edit was recorded without an approval")

    ctx = ToolContext(workdir=tmp_path, config=None, conversation_id=1, turn=1, approve=None)
    result = asyncio.run(EditFile(NoBook()).run(args, ctx))
    assert not result.ok and result.content



def test_the_workdir_fact_names_the_newest_changed_files_and_counts_the_rest() -> None:
    from wisp.core.context.workspace import FileChange, PICTURE_FILES, workdir_picture

    assert workdir_picture("/p", []) == "/p"
    picture = workdir_picture("/p", [FileChange("a.py", "edited", (1, 3)), FileChange("n.md", "created", (2,)),
                                     FileChange("old.txt", "undone", ())])
    assert picture == ("/p; changed by edits in this conversation: a.py (turns 1, 3), n.md (created, turn 2); "
                       "put back by /undo: old.txt")
    many = [FileChange(f"f{n}.py", "edited", (n,)) for n in range(PICTURE_FILES + 3)]
    text = workdir_picture("/p", many)
    assert "f0.py" not in text and f"f{PICTURE_FILES + 2}.py" in text and text.endswith(
        "; and 3 more files (/undo list names them)")
    assert len(text) < 500  # a fact's value is cut at 500 characters: the picture stays under it


def test_the_tools_text_is_short_on_the_embedded_model() -> None:
    """What SmolLM2 reads of edit_file under the prompted protocol, counted with wisp's estimate
    (core/tokens.py: 36 for the description, 103 for its section; SmolLM2's own tokenizer counted
    33 and 92), and its worked exchange, which a small model follows far better than a rule."""
    from wisp.core.model.prompted import example_messages, parse_reply, render_tools
    from wisp.core.tokens import estimate_tokens
    from wisp.core.tools.base import tool_schema
    from wisp.core.tools.edit_file import DESCRIPTION, EditFile

    schema = tool_schema(EditFile(None))
    text = render_tools([schema])
    section = text[text.index("## edit_file"):text.index("\n\nTo call a tool")]
    assert estimate_tokens(DESCRIPTION) <= 40 and estimate_tokens(section) <= 110
    request, call, result, answer = example_messages([schema])
    assert request["content"] == "In notes.txt, change red to blue"
    assert parse_reply(call["content"])[1][0].arguments == {"path": "notes.txt", "search": "red", "replace": "blue"}
    assert parse_arguments(parse_reply(call["content"])[1][0].arguments).replacements == (Replacement("red", "blue"),)


async def test_the_next_test_run_says_whether_the_edit_helped(ollama_home, work: Path) -> None:
    """Facts follow: the tests fact of the run after an edit says it helped (real pytest, run by
    run_command in its sandbox, approved as the person would)."""
    from tests.support.fakes import tool_call

    home, srv = ollama_home
    (work / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (work / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n")
    run_tests = {"command": "python3 -m pytest -q -p no:cacheprovider test_calc.py"}
    srv.push(reply(tool_call("run_command", run_tests, id="r1"), finish="tool_calls"), reply(text("It fails.")),
             *edit_turn({"path": "calc.py", "search": "return a - b", "replace": "return a + b"}, call_id="e1"),
             reply(tool_call("run_command", run_tests, id="r2"), finish="tool_calls"), reply(text("It passes.")))
    async with await Session.open(SessionOptions(workdir=work, tools=["read_file", "edit_file", "run_command"],
                                                 ask=Asker("once", "once", "once"))) as s:
        assert await s.connect()
        await run(s, "run the tests")
        before = await s.context.facts.current_of(s.conversation_id, "tests", "pytest test_calc.py")
        assert before is not None and before.value.startswith("failed"), before
        await run(s, "fix add()")
        await run(s, "run them again")
        after = await s.context.facts.current_of(s.conversation_id, "tests", "pytest test_calc.py")
        assert after is not None and after.value.startswith("passed"), after
        workdir = await s.context.facts.current_of(s.conversation_id, "workdir")
        assert workdir.value.endswith("changed by edits in this conversation: calc.py (turn 2)")


@pytest.mark.parametrize("kind", ["fifo", "directory"])
async def test_only_regular_files_are_edited(ollama_home, work: Path, kind: str) -> None:
    home, srv = ollama_home
    if kind == "fifo":
        os.mkfifo(work / "thing")  # opening it to read could wait forever for a writer
    else:
        (work / "thing").mkdir()
    srv.push(*edit_turn({"path": "thing", "search": "a", "replace": "b"}))
    async with await open_session(work, Asker("once")) as s:
        await run(s, "edit the thing")
    said = told(srv.chat_bodies[1])[0]
    assert said == ("error: thing is a FIFO (named pipe), not a regular file; edit_file edits only regular files"
                    if kind == "fifo" else "error: thing is a directory; give the path of a file in it")
