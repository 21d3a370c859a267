"""recall, note and task through the memory tool, on a real store and audit log."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from tests.support.home import DATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wisp.core.context.facts import FactBook
from wisp.core.context.summary import SummaryBook
from wisp.core.context.task import TaskBook
from tests.support.memory_harness import make_harness

HEADER = re.compile(r"^entry (\d+): (.+?), turn (\d+) at \d\d:\d\d:\d\d, from (the audit log|the conversation's store)$")


async def test_recall_entry_reads_the_audit_event_and_shows_the_references_format(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    await h.record("prompt", "read the overview")
    body = "\n".join(f"{i}\t{'# harbour sync: design overview' if i == 1 else f'line {i}'}" for i in range(1, 78))
    out = await h.tool_output("read_file", {"path": "/work/harbour/docs/overview.md"}, body + "\n[end of file]")
    await h.end()
    await h.begin()
    text = await h.ask(f"recall entry {out.number}")
    lines = text.splitlines()
    m = HEADER.match(lines[0])
    assert m and m.group(2) == "read_file output" and m.group(3) == "1" and m.group(4) == "the audit log"
    assert lines[1] == 'arguments: {"path": "/work/harbour/docs/overview.md"}'
    assert lines[2] == "1\t# harbour sync: design overview"
    assert lines[-3] == "77\tline 77"
    assert lines[-2:] == ["[end of file]", "[end of what recall found]"]
    event = h.memory_events()[-1]
    assert event["action"] == "recall" and event["target"]["entry"] == out.number
    assert event["entries"] == [out.number] and event["source"] == "audit"
    assert event["audit_events"] == [out.audit_event_id]
    await h.close()


async def test_entry_alone_is_a_recall_and_the_copied_phrase_works(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    out = await h.tool_output("run_command", {"command": "make"}, "cc -c a.c\nok")
    await h.end()
    await h.begin()
    a = await h.ask(f"entry {out.number}")
    b = await h.ask(f'memory "recall entry {out.number}"')
    assert a == b and a.startswith(f"entry {out.number}: run_command output, turn 1 at ")
    await h.close()


async def test_paging_round_trips_a_10000_line_output_exactly(tmp_path: Path) -> None:
    rnd = random.Random(4)
    words = ["alpha", "β-beta", "tab\there", "", "  indented", "x" * 300, "[end of file]", "ümlaut ✓", "}"]
    original = "\n".join(f"{rnd.choice(words)} {i}" if i % 7 else rnd.choice(words) for i in range(10_000))
    h = await make_harness(tmp_path, context_window=8192)
    await h.begin()
    out = await h.tool_output("run_command", {"command": "gen"}, original)
    await h.end()
    await h.begin()
    request = f"recall entry {out.number}"
    got: dict[int, str] = {}
    pages = 0
    while True:
        pages += 1
        text = await h.ask(request)
        lines = text.splitlines()
        assert HEADER.match(lines[0])
        assert lines[1] == 'arguments: {"command": "gen"}'
        body = lines[2:-1]
        for line in body:
            number, _, rest = line.partition("\t")
            assert int(number) not in got
            got[int(number)] = rest
        last = lines[-1]
        if last == "[end of what recall found]":
            # a command's output ends with its own last line: [end of file] belongs to files
            assert lines[-2].startswith("10000\t")
            break
        m = re.fullmatch(r'\[more: memory "(recall entry \d+ from line (\d+))"\]', last)
        assert m, last
        assert int(m.group(2)) == max(got) + 1
        request = m.group(1)
        assert pages < 1000
    assert pages > 10
    assert sorted(got) == list(range(1, 10_001))
    assert "\n".join(got[i] for i in range(1, 10_001)) == original
    await h.close()


async def test_a_page_fits_the_budget(tmp_path: Path) -> None:
    from wisp.core.tokens import estimate_tokens
    from wisp.core.memory.limits import page_budget

    h = await make_harness(tmp_path, context_window=2048)
    await h.begin()
    out = await h.tool_output("run_command", {"command": "seq"}, "\n".join(f"row {i} " * 6 for i in range(3000)))
    await h.end()
    await h.begin()
    text = await h.ask(f"recall entry {out.number} from line 100")
    assert estimate_tokens(text) <= page_budget(2048)
    assert text.splitlines()[2].startswith("100\t")
    assert text.splitlines()[-1].startswith(f'[more: memory "recall entry {out.number} from line ')
    await h.close()


async def test_recall_from_a_rotated_away_event_falls_back_to_the_store_and_says_so(tmp_path: Path) -> None:
    h = await make_harness(tmp_path, max_bytes=2000, keep=1)
    await h.begin()
    out = await h.tool_output("run_command", {"command": "pytest"}, "collected 3 items\n3 passed")
    first_file = out.audit_file
    for i in range(40):  # push the audit log past its files
        h.audit.write("notice", {"text": "x" * 200}, conversation=h.conversation)
    assert not (tmp_path / "audit" / first_file).exists()
    await h.end()
    await h.begin()
    text = await h.ask(f"recall entry {out.number}")
    assert text.splitlines()[0].endswith(", from the conversation's store")
    assert "1\tcollected 3 items" in text and "2\t3 passed" in text
    assert h.memory_events()[-1]["source"] == "store"
    await h.close()


async def test_audit_off_reads_the_store(tmp_path: Path) -> None:
    h = await make_harness(tmp_path, audit_enabled=False)
    await h.begin()
    out = await h.tool_output("read_file", {"path": "a.txt"}, "1\thello\n[end of file]")
    await h.end()
    await h.begin()
    text = await h.ask(f"recall entry {out.number}")
    assert text.splitlines()[0].endswith("from the conversation's store")
    assert text.splitlines()[-3:] == ["1\thello", "[end of file]", "[end of what recall found]"]
    await h.close()


async def test_nothing_matches_gives_one_memory_line(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    await h.record("prompt", "hi")
    first = await h.ask("recall entry 1")
    assert first.startswith("memory: entry 1 is from this turn (turn 1), which is in view whole; nothing from an "
                            "earlier turn is stored yet: this is the first turn, and all of it is in view")
    await h.record("reply", "hello")
    await h.end()
    await h.begin()
    await h.record("prompt", "again")
    # turn 2's own prompt (entry 3) is not stored until the turn ends: entries 1–2 and turn 1 are
    for request, start in [("recall entry 99", "memory: no entry 99; entries 1–2 and turns 1–1 are stored"),
                           ("recall turn 9", "memory: no turn 9; entries 1–2 and turns 1–1 are stored"),
                           ("recall turn 2", "memory: turn 2 is this turn, which is in view whole; earlier turns "
                                             "hold entries 1–2"),
                           ("recall entry 2 from line 40", "memory: entry 2 has 1 line; line 40 is past its end"),
                           ("recall fact codename", 'memory: no fact "codename"; the conversation knows: no facts yet'),
                           ("recall task", "memory: no task is set; propose one with task THE TASK; objective:"),
                           ("recall summary", "memory: there is no running summary yet"),
                           ("summarise entry 42", "memory: no entry 42;"),
                           ("recall output 0badc0de", "memory: no stored output 0badc0de")]:
        answer = await h.ask(request)
        assert answer.startswith(start), (request, answer)
        assert "\n" not in answer
    await h.close()


async def test_recall_turn_shows_its_entries_and_pages_across_them(tmp_path: Path) -> None:
    h = await make_harness(tmp_path, context_window=1200)
    await h.begin()
    await h.record("prompt", "run the tests")
    await h.record("thinking", "hmm")
    out = await h.tool_output("run_command", {"command": "pytest"}, "\n".join(f"test line {i}" for i in range(200)))
    await h.record("reply", "two failed")
    await h.end()
    await h.begin()
    text = await h.ask("recall turn 1")
    lines = text.splitlines()
    assert lines[0].startswith("turn 1 at ") and lines[0].endswith(": entries 1–5")
    assert lines[1].startswith("entry 1: prompt, turn 1 at ")
    assert "hmm" not in text  # thinking is not the turn's
    assert "[end of entry 1]" in lines
    m = re.fullmatch(r'\[more: memory "(recall turn 1 from entry (\d+) line (\d+))"\]', lines[-1])
    assert m and int(m.group(2)) == out.number
    rest = await h.ask(m.group(1))
    assert rest.splitlines()[1].startswith(f"entry {out.number}: run_command output")
    assert rest.splitlines()[2].startswith(f"{m.group(3)}\t")
    final = rest
    while not final.endswith("[end of what recall found]"):
        nxt = re.fullmatch(r'\[more: memory "(.+)"\]', final.splitlines()[-1])
        assert nxt
        final = await h.ask(nxt.group(1))
    assert "two failed" in final
    assert h.memory_events()[-1]["source"] == "audit"
    await h.close()


async def test_fact_task_and_summary_recall(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    facts = FactBook(h.store, h.audit)
    await h.begin()
    out1 = await h.tool_output("run_command", {"command": "make ci"}, "failed")
    await facts.record(h.conversation, "tests", "ci", "failed (exit status 1)", source="tool", tool="run_command",
                       turn=1, entries=[out1.number])
    await h.end()
    await h.begin()
    out2 = await h.tool_output("run_command", {"command": "make ci"}, "ok")
    await facts.record(h.conversation, "tests", "ci", "passed", source="tool", tool="run_command", turn=2,
                       entries=[out2.number])
    await TaskBook(facts).set(h.conversation, "fix the CI build; objective: make ci passes", turn=2)
    await SummaryBook(h.store, h.audit).record(h.conversation, "Turn 1 ran make ci, which failed.", [1], model="m")
    await h.end()
    await h.begin()
    text = (await h.ask("recall fact ci")).splitlines()
    assert text[0] == 'fact "ci": 1 subject'
    assert text[1] == "tests ci: 2 versions, oldest first:"
    assert re.match(r"^- c1 \[tool run_command, turn 1, entry 2\] at \d\d:\d\d:\d\d: failed \(exit status 1\); "
                    r"superseded by c2$", text[2]), text[2]
    assert re.match(r"^- c2 \[tool run_command, turn 2, entry 4\] at \d\d:\d\d:\d\d: passed; current$", text[3])
    assert text[-2:] == ['memory "recall entry N" shows what a fact came from.', "[end of what recall found]"]
    assert h.memory_events()[-1]["facts"] == ["c1", "c2"]
    task = await h.ask("task")
    assert task.startswith("task (c3, set by the person, turn 2 at ") and task.endswith(
        "): fix the CI build; objective: make ci passes\n[end of what recall found]")
    assert task == await h.ask("recall task")
    summary = await h.ask("recall summary")
    assert summary.startswith("running summary v1 of 1 (covers turns 1")
    assert "Turn 1 ran make ci, which failed." in summary
    assert h.memory_events()[-1]["summary_versions"] == [1]
    assert (await h.ask("recall summary v4")).startswith("memory: no summary v4; versions v1–v1 exist")
    await h.close()


async def test_notes_are_kept_as_proposals_when_the_turn_ends(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    facts = FactBook(h.store, h.audit)
    await h.begin()
    assert await h.ask("note entity release codename = BLUE HERON") == \
        "noted: entity release codename = BLUE HERON (a proposal until the person keeps it)"
    # the reference's result line; the proposal part is said once a conversation, on its first note
    assert await h.ask("remember tests: ci = green") == "noted: tests ci = green"
    assert await facts.current(h.conversation) == []  # not before the turn ends
    await h.end()
    current = {f.label: f for f in await facts.current(h.conversation)}
    assert current["entity release codename"].value == "BLUE HERON"
    f = current["entity release codename"]
    assert (f.source, f.method, f.proposal, f.turn) == ("model", "noted", True, 1)
    assert f.source_label() == "model, noted, turn 1"
    recorded = [e["payload"] for e in h.audit.iter_events() if e["kind"] == "fact.recorded"]
    assert [(p["subject"], p["method"]) for p in recorded] == [("entity", "noted"), ("tests", "noted")]
    events = [e for e in h.memory_events() if e["action"] == "note"]
    assert events[0] == {"request": "note entity release codename = BLUE HERON", "action": "note",
                         "subject": "entity", "name": "release codename", "value": "BLUE HERON", "class": "model",
                         "kept": True}
    await h.close()


async def test_at_most_12_notes_a_turn_tasks_included(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    assert (await h.ask("task ship 1.0; objective: tagged")).startswith("noted the task: ")
    for i in range(11):
        assert (await h.ask(f"note entity thing {i} = v{i}")).startswith("noted: ")
    assert await h.ask("note entity thing 12 = v12") == "error: at most 12 notes a turn; the rest were not kept"
    assert await h.ask("task again") == "error: at most 12 notes a turn; the rest were not kept"
    assert h.memory_events()[-2]["kept"] is False
    await h.end()
    await h.begin()
    assert (await h.ask("note entity thing 12 = v12")).startswith("noted: ")  # a new turn, a new count
    await h.close()


async def test_a_task_the_person_set_is_never_replaced(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await TaskBook(FactBook(h.store, h.audit)).set(h.conversation, "fix the CI build")
    await h.begin()
    answer = await h.ask("task rewrite it in Rust; objective: it compiles")
    assert answer == "error: the person set the task, and it stays: fix the CI build"
    event = h.memory_events()[-1]
    assert event["kept"] is False and event["pinned"] is True
    await h.end()
    assert (await TaskBook(FactBook(h.store, h.audit)).current(h.conversation)).value == "fix the CI build"
    await h.close()


async def test_a_note_never_replaces_the_persons_fact(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await FactBook(h.store, h.audit).record(h.conversation, "entity", "release codename", "RED KITE", source="person")
    await h.begin()
    answer = await h.ask("note entity release codename = BLUE HERON")
    assert answer == "error: the person set entity release codename, and it stays: RED KITE"
    await h.close()


def test_no_memory_tool_is_made_unbound() -> None:
    """Issue "One core, built once": the memory tool is made with its session's
    binding, so the 'not attached' answer of resumed conversations cannot happen."""
    from wisp.core.tools.registry import build_registry

    with pytest.raises(ValueError, match="binding"):
        build_registry(["read_file", "memory"])


async def test_summarise_through_the_tool_cites_the_stored_numbering(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    text = (DATA / "summarise" / "gcc_make_errors.txt").read_text()
    out = await h.tool_output("run_command", {"command": "make"}, text, meta={"exit_status": 2})
    await h.end()
    await h.begin()
    s = await h.ask(f"summarise entry {out.number}")
    assert s.splitlines()[0].endswith("exit status 2 (failed)")
    cited = int(re.search(r"^L(\d+) ", s, re.MULTILINE).group(1))
    page = await h.ask(f"recall entry {out.number} from line {cited}")
    assert page.splitlines()[2].startswith(f"{cited}\trequest.c:77:17: error:")
    event = [e for e in h.memory_events() if e["action"] == "summarise"][-1]
    assert event["target"] == {"kind": "entry", "entry": out.number} and event["summary"] == "notable"
    assert event["chunks_read"] == 0 and event["chunks_failed"] == 0
    o = await h.ask(f"summarise entry {out.number} overview")
    assert o.startswith("overview (exact readers, no model): ")
    await h.close()


async def test_an_output_id_names_an_entry(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    out = await h.tool_output("run_command", {"command": "ls"}, "a\nb")
    await h.end()
    await h.begin()
    short = out.audit_event_id[3:11]
    text = await h.ask(f"recall output {short}")
    assert text.startswith(f"entry {out.number}: run_command output")
    assert h.memory_events()[-1]["target"]["output"] == short
    await h.close()


async def test_episodic_verbs_go_to_episodic_memory(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    listed = await h.ask("memories deploy since 7d")
    assert listed.startswith("memory: ") and "memories" in listed
    assert h.memory_events()[-1]["action"] == "memories"
    one = await h.ask("recall MEM-000001")
    assert one.startswith("memory: no memory MEM-000001")
    assert h.memory_events()[-1]["target"] == {"kind": "memory", "memory": "MEM-000001"}
    await h.close()


_FRAGMENTS = st.sampled_from(["recall", "note", "remember", "task", "summarise", "condense", "entry", "turn",
                              "fact", "summary", "v1", "from", "line", "1", "2", "999", "=", ":", ";",
                              "objective:", "entity", "tests", "x", '"', "memory", "overview", "output",
                              "ab12cd34", "MEM-000001", "memories", "🙂", "\t"])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.text(max_size=60), st.lists(_FRAGMENTS, max_size=8).map(" ".join)),
                min_size=1, max_size=25))
def test_no_request_to_the_tool_raises(tmp_path: Path, requests: list[str]) -> None:
    import asyncio
    import tempfile

    from wisp.core.memory.request import RequestError, parse_request

    async def go() -> None:
        h = await make_harness(Path(tempfile.mkdtemp(dir=tmp_path)))
        await h.begin()
        await h.tool_output("run_command", {"command": "make"}, "src/a.c:1:2: error: boom\nmake: *** Error 1")
        await h.end()
        await h.begin()
        for request in requests:
            answer = await h.ask(request)
            assert isinstance(answer, str) and answer.strip()
            try:
                parse_request(request)
            except RequestError as exc:
                assert answer == exc.line
                assert answer.startswith(("error: ", "memory: "))
        assert len(h.memory_events()) == len(requests)
        await h.close()

    asyncio.run(go())
