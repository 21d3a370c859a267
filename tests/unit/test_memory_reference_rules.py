"""The memory tool's small rules as the reference states them, each on a real store and audit log.

wisp-memory-tool.txt, "recall": "A turn's own entries are not stored until it ends; the model has
them whole until then", so a miss line names only what earlier turns stored; ``[end of file]`` is
read_file's own last line and ends nothing else. "note": the result line is ``noted: tests ci =
green``; a noted fact's history names where it came from. "Audit": a condense names its target, and
a failure when it had no question.
"""

from __future__ import annotations

import re
from pathlib import Path

from wisp.core.context.facts import FactBook
from tests.support.memory_harness import make_harness

PROPOSAL = " (a proposal until the person keeps it)"


# -- miss lines count only the turns that ended ---------------------------------------------------


async def test_a_miss_in_turn_1_says_nothing_is_stored_however_many_entries_the_turn_has(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    await h.record("prompt", "read the files")
    for i in range(4):
        await h.tool_output("read_file", {"path": f"f{i}.txt"}, f"1\tline {i}\n[end of file]")
    first = await h.ask("recall turn 9")
    await h.record("reply", "read them")
    second = await h.ask("recall entry 99")
    for answer in (first, second):
        assert "nothing is stored yet: this is the first turn" in answer, answer
        assert "entries 1" not in answer and "turns 1" not in answer, answer
    await h.close()


async def test_a_miss_during_turn_3_names_turns_1_and_2_and_does_not_grow(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    for turn in (1, 2):
        await h.begin()
        await h.record("prompt", f"prompt {turn}")
        await h.tool_output("run_command", {"command": "make"}, "ok")
        await h.record("reply", f"reply {turn}")
        await h.end()
    # turns 1 and 2 hold entries 1–8
    await h.begin()
    await h.record("prompt", "prompt 3")
    answers = []
    for k in range(3):
        await h.tool_output("run_command", {"command": f"step {k}"}, "ok")
        answers.append(await h.ask("recall turn 9"))
        answers.append(await h.ask("recall entry 99"))
        answers.append(await h.ask("summarise entry 99"))
        answers.append(await h.ask("nothing-like-this-anywhere"))
    for answer in answers:
        assert "entries 1–8 and turns 1–2 are stored" in answer, answer
        assert "turns 1–3" not in answer and "entries 1–9" not in answer
    await h.end()
    # once turn 3 has ended it is stored, and the line says so
    await h.begin()
    assert "entries 1–15 and turns 1–3 are stored" in await h.ask("recall turn 9")
    await h.close()


# -- [end of file] belongs to files ---------------------------------------------------------------


async def test_only_a_file_ends_with_end_of_file(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    await h.record("prompt", "look")
    file = await h.tool_output("read_file", {"path": "a.txt"}, "1\talpha\n2\tbeta\n[end of file]")
    command = await h.tool_output("run_command", {"command": "ls"}, "a.txt\nb.txt\n[exit status 0]")
    reply = await h.record("reply", "There are two files.\nBoth are small.")
    await h.end()
    await h.begin()
    got = {}
    for name, entry in (("file", file), ("command", command), ("reply", reply)):
        got[name] = (await h.ask(f"recall entry {entry.number}")).splitlines()
    assert got["file"][-3:] == ["2\tbeta", "[end of file]", "[end of what recall found]"]
    assert got["command"][-3:] == ["2\tb.txt", "3\t[exit status 0]", "[end of what recall found]"]
    assert got["reply"][-3:] == ["1\tThere are two files.", "2\tBoth are small.", "[end of what recall found]"]
    for name in ("command", "reply"):
        assert "[end of file]" not in got[name], got[name]
    # a whole turn: each entry ends with its own end marker, only the file's has [end of file]
    turn = (await h.ask("recall turn 1")).splitlines()
    assert turn.count("[end of file]") == 1
    assert turn[turn.index("[end of file]") + 1] == f"[end of entry {file.number}]"
    assert turn[turn.index(f"[end of entry {reply.number}]") - 1] == "2\tBoth are small."
    await h.close()


async def test_a_command_whose_last_line_says_end_of_file_is_shown_as_its_numbered_line(tmp_path: Path) -> None:
    """A program may print ``[end of file]`` itself: for a command it is a line of the output."""
    h = await make_harness(tmp_path)
    await h.begin()
    out = await h.tool_output("run_command", {"command": "cat notes"}, "one\n[end of file]")
    await h.end()
    await h.begin()
    lines = (await h.ask(f"recall entry {out.number}")).splitlines()
    assert lines[-3:] == ["1\tone", "2\t[end of file]", "[end of what recall found]"]
    await h.close()


# -- a noted fact names its call's entry ----------------------------------------------------------


async def test_a_noted_facts_event_and_history_name_the_entry_of_its_call(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    await h.record("prompt", "keep it green")
    call, answer = await h.call("note tests ci = green")
    assert answer == "noted: tests ci = green" + PROPOSAL
    await h.end()
    recorded = [e["payload"] for e in h.audit.iter_events() if e["kind"] == "fact.recorded"]
    assert [(p["subject"], p["name"], p["entries"]) for p in recorded] == [("tests", "ci", [call])]
    await h.begin()
    history = (await h.ask("recall fact ci")).splitlines()
    assert re.match(rf"^- c1 \[model, noted, turn 1, entry {call}\] at \d\d:\d\d:\d\d: green; current, a proposal until the person keeps it$",
                    history[2]), history
    assert history[-2] == 'memory "recall entry N" shows what a fact came from.'
    # and that entry is there to recall: the call that noted it
    shown = await h.ask(f"recall entry {call}")
    assert shown.splitlines()[0].startswith(f"entry {call}: memory call, turn 1 at ")
    assert "note tests ci = green" in shown
    # the facts layer keeps the reference's short form
    fact = (await FactBook(h.store, h.audit).current(h.conversation))[0]
    assert fact.source_label(in_facts_layer=True) == "model, noted, turn 1"
    await h.close()


async def test_a_proposed_task_names_the_entry_of_its_call(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    call, answer = await h.call("task ship 1.0; objective: the tag is pushed")
    assert answer == "noted the task: ship 1.0; objective: the tag is pushed"
    await h.end()
    recorded = [e["payload"] for e in h.audit.iter_events() if e["kind"] == "fact.recorded"]
    assert [(p["subject"], p["entries"]) for p in recorded] == [("task", [call])]
    await h.close()


# -- the proposal is said once a conversation -----------------------------------------------------


async def test_the_proposal_is_said_once_a_conversation(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    # a refused note tells the model nothing about proposals
    assert (await h.ask("note weather today = sunny")).startswith("error: no subject weather")
    assert await h.ask("note entity release codename = BLUE HERON") == \
        "noted: entity release codename = BLUE HERON" + PROPOSAL
    assert await h.ask("note tests ci = green") == "noted: tests ci = green"
    await h.end()
    await h.begin()
    assert await h.ask("note branch = main") == "noted: branch = main"
    await h.end()
    # a later session over the same conversation: its noted facts say the model was told
    from wisp.core.context.notes import ModelNotes

    fresh = ModelNotes.over(h.store, h.audit)
    outcome = await fresh.note(h.conversation, 3, "decision", "db", "sqlite")
    assert outcome.line == "noted: decision db = sqlite"
    # another conversation is told once, on its own first note
    other = await h.store.create_conversation(str(tmp_path))
    outcome = await fresh.note(other.id, 1, "decision", "db", "sqlite")
    assert outcome.line == "noted: decision db = sqlite" + PROPOSAL
    await h.close()


# -- condense with no question names its target ---------------------------------------------------


async def test_condense_with_no_question_names_its_target_in_the_audit(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    out = await h.tool_output("run_command", {"command": "make"}, "cc -c a.c\nerror: boom")
    await h.end()
    await h.begin()
    answer = await h.ask(f"condense entry {out.number}")
    assert answer.startswith("error: write condense entry N: QUESTION"), answer
    event = h.memory_events()[-1]
    assert event["action"] == "condense"
    assert event["target"] == {"kind": "entry", "entry": out.number}
    assert event["failure"] == "no question"
    assert event["chunks_read"] == 0 and event["chunks_failed"] == 0
    short = out.audit_event_id[3:11]
    await h.ask(f"condense output {short}:   ")
    event = h.memory_events()[-1]
    assert event["target"] == {"kind": "output", "output": short} and event["failure"] == "no question"
    # a request that names no output has no target to name
    await h.ask("condense")
    assert "target" not in h.memory_events()[-1]
    await h.close()
