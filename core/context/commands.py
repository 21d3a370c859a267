"""Slash commands of the layered context: ``/fact``, ``/task``, ``/show``, ``/inspect``, ``/compact``.

Listed in :data:`wisp.core.commands.COMMANDS`. None of them calls the model
(issue "Layered context", "Seeing it, at no model cost") but ``/compact``,
whose preview asks the model for the summary it proposes (issue
"Compaction you can see and trust"); applying it, cancelling it and
``/compact undo`` cost nothing more. Each returns a
:class:`~wisp.core.command_base.CommandResult` whose ``data`` carries the
material (a :class:`~wisp.core.context.show.ShowMaterial`, a
:class:`~wisp.core.context.inspect.ContextReport`, facts as dicts) so that
the TUI can open a view for it.
"""

from __future__ import annotations

from typing import Any

from ..command_base import CommandResult
from .compaction import CompactError, focus_text, preview_compaction, undo_compaction
from .facts import FactError, fact_line, parse_assignment
from .inspect import inspect_context
from .show import ShowError, show_entry, show_fact, show_turn
from .summary import turn_ranges
from .task import describe_task

FACT_USAGE = ("Usage: /fact · /fact SUBJECT [NAME] = VALUE · /fact history NAME · /fact forget ID · "
              "/fact keep ID (subjects: task, decision, preference, entity, tests, workdir, branch)")
TASK_USAGE = "Usage: /task · /task THE TASK; objective: WHAT DONE LOOKS LIKE · /task clear"
SHOW_USAGE = "Usage: /show entry N · /show turn N · /show fact NAME"
COMPACT_USAGE = "Usage: /compact · /compact focus on WHAT TO KEEP · /compact undo"


def _manager(session: Any) -> Any:
    return session.context


async def _turn_now(session: Any, conversation: int) -> int:
    """The turn a person's change is recorded under: the last turn begun (0 before any)."""
    return await session.store.count_turns(conversation)


def _source_mark(fact: Any) -> str:
    marks = {"person": "you", "tool": f"tool {fact.tool or ''}".strip(), "model": "model"}
    mark = marks.get(fact.source, fact.source)
    if fact.proposal:
        mark += ", **proposal**"
    elif fact.kept_at:
        mark += ", kept"
    return mark


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


async def fact_command(session: Any, words: list[str], rest: str) -> CommandResult:
    manager = _manager(session)
    conversation = session.conversation_id
    if not rest:
        if conversation is None:
            return CommandResult("No facts yet. Set one: `/fact decision http library = httpx`.", title="facts",
                                 data=[])
        facts = await manager.facts.current(conversation)
        if not facts:
            return CommandResult("No facts yet. Set one: `/fact decision http library = httpx`.", title="facts",
                                 data=[])
        rows = [f"| {f.vid} | {f.subject} | {_escape(f.name)} | {_escape(f.value)} | {_source_mark(f)} |"
                for f in facts]
        proposals = [f.vid for f in facts if f.proposal]
        tail = f"\n\nProposals wait for `/fact keep ID`: {', '.join(proposals)}." if proposals else ""
        return CommandResult("| id | subject | name | value | source |\n|---|---|---|---|---|\n" + "\n".join(rows)
                             + tail, title="facts", data=[f.to_dict() for f in facts])
    verb = words[0].lower() if words else ""
    if verb == "history" and "=" not in rest:
        name = rest.split(None, 1)[1].strip() if len(rest.split(None, 1)) == 2 else ""
        if not name:
            return CommandResult("Usage: /fact history NAME", error=True)
        if conversation is None:
            return CommandResult("No facts yet in this conversation.", error=True)
        text = await manager.recall_fact(conversation, name, for_model=False)
        if text.startswith("memory:"):
            return CommandResult(text.replace("memory: ", "", 1), error=True)
        groups = await manager.facts.history(conversation, name)
        return CommandResult(f"```text\n{text}\n```", title="fact history",
                             data=[[f.to_dict() for f in versions] for _, versions in groups])
    if verb in ("forget", "keep") and "=" not in rest:
        if len(words) != 2:
            return CommandResult(f"Usage: /fact {verb} ID (ids look like c7; /fact lists them)", error=True)
        if conversation is None:
            return CommandResult("No facts yet in this conversation.", error=True)
        turn = await _turn_now(session, conversation)
        try:
            if verb == "forget":
                fact = await manager.facts.forget(conversation, words[1], turn=turn)
                text = (f"Forgot {fact.vid} ({fact.label} = {fact.value}): it is superseded, with nothing "
                        f"in its place. `/fact history {fact.name or fact.subject}` still shows it.")
            else:
                fact = await manager.facts.keep(conversation, words[1], turn=turn)
                text = f"Kept {fact.vid}: {fact.label} = {fact.value} is now as if you had set it."
        except FactError as exc:
            return CommandResult(str(exc), error=True)
        return CommandResult(text, title="facts", data=fact.to_dict())
    try:
        subject, name, value = parse_assignment(rest, command="/fact")
    except FactError as exc:
        return CommandResult(f"{exc}. {FACT_USAGE}", error=True)
    conversation = await session.ensure_conversation()
    turn = await _turn_now(session, conversation)
    if subject == "task":
        try:  # a task without what it is, or an empty objective: a clear line, as /task gives
            result = await manager.tasks.set(conversation, value, source="person", turn=turn)
        except FactError as exc:
            return CommandResult(f"{exc}. {TASK_USAGE}", error=True)
        return CommandResult(f"Task set ({result.fact.vid if result.fact else ''}): {result.fact.value if result.fact else value}. "
                             "It is shown with every request from the next turn on.", title="task",
                             data=result.fact.to_dict() if result.fact else None)
    outcome = await manager.facts.record(conversation, subject, name, value, source="person", method="set",
                                         turn=turn)
    if outcome.unchanged and outcome.fact:
        return CommandResult(f"Already so: {fact_line(outcome.fact)}.", title="facts", data=outcome.fact.to_dict())
    fact = outcome.fact
    assert fact is not None
    replaced = f" It supersedes {outcome.superseded.vid} ({outcome.superseded.value})." if outcome.superseded else ""
    return CommandResult(f"Set {fact.vid}: {fact.label} = {fact.value}.{replaced}", title="facts",
                         data=fact.to_dict())


async def task_command(session: Any, words: list[str], rest: str) -> CommandResult:
    manager = _manager(session)
    conversation = session.conversation_id
    if not rest:
        fact = await manager.tasks.current(conversation) if conversation is not None else None
        return CommandResult(describe_task(fact), title="task", data=fact.to_dict() if fact else None)
    if rest.strip().lower() == "clear":
        if conversation is None:
            return CommandResult("There is no task to clear.", title="task")
        cleared = await manager.tasks.clear(conversation, turn=await _turn_now(session, conversation))
        if cleared is None:
            return CommandResult("There is no task to clear.", title="task")
        return CommandResult(f"Cleared the task ({cleared.vid}: {cleared.value}).", title="task",
                             data=cleared.to_dict())
    conversation = await session.ensure_conversation()
    try:
        result = await manager.tasks.set(conversation, rest, source="person", method="set",
                                         turn=await _turn_now(session, conversation))
    except FactError as exc:
        return CommandResult(f"{exc}. {TASK_USAGE}", error=True)
    fact = result.fact
    cut = " (cut to 300 characters)" if fact and fact.value.endswith("…") else ""
    return CommandResult(f"Task set ({fact.vid if fact else ''}){cut}: {fact.value if fact else ''}\n\n"
                         "It is shown with every request from the next turn on.", title="task",
                         data=fact.to_dict() if fact else None)


async def show_command(session: Any, words: list[str], rest: str) -> CommandResult:
    if len(words) < 2:
        return CommandResult(SHOW_USAGE, error=True)
    what = words[0].lower()
    conversation = session.conversation_id
    try:
        if what in ("entry", "turn"):
            try:
                number = int(words[1])
            except ValueError:
                return CommandResult(f"/show {what} takes a number, such as /show {what} 3", error=True)
            if what == "entry":
                material = await show_entry(session.store, session.audit, conversation, number)
            else:
                material = await show_turn(session.store, session.audit, conversation, number)
        elif what == "fact":
            material = await show_fact(_manager(session), conversation, rest.split(None, 1)[1].strip())
        else:
            return CommandResult(SHOW_USAGE, error=True)
    except ShowError as exc:
        return CommandResult(str(exc), error=True)
    return CommandResult(material.to_markdown(), title="show", data=material)


async def inspect_command(session: Any, words: list[str], rest: str) -> CommandResult:
    if words and words[0].lower() != "context":
        return CommandResult("Usage: /inspect context", error=True)
    report = await inspect_context(_manager(session), session.conversation_id or 0)
    if session.conversation_id is None:
        report.conversation = None
    return CommandResult(report.to_markdown(), title="inspect context", data=report)


async def compact_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/compact [focus]``: a preview of the running summary the model would
    write now (data: a :class:`~wisp.core.context.compaction.CompactPreview`,
    which the TUI shows before anything is applied); ``/compact undo``: the
    previous summary version restored."""
    conversation = session.conversation_id
    if conversation is None:
        return CommandResult("Nothing to compact yet: this conversation has no turn.", error=True)
    if words and words[0].lower() == "undo":
        if len(words) > 1:
            return CommandResult(COMPACT_USAGE, error=True)
        try:
            version, restored = await undo_compaction(_manager(session), conversation)
        except CompactError as exc:
            return CommandResult(str(exc), error=True)
        if restored is None:
            text = (f"Undone: no running summary is in effect now (version {version.version} clears it). "
                    "Every turn is back in the window whole; turns leave it again only when the window needs it.")
        else:
            text = (f"Undone: version {version.version} restores version {restored.version}, which covers turns "
                    f"{turn_ranges(restored.covers)}. Every version stays; F4 lists them.")
        return CommandResult(text, title="compact", data=version)
    if words and words[0].lower() in ("help", "-h", "--help"):
        return CommandResult(COMPACT_USAGE)
    preview = await preview_compaction(_manager(session), conversation, focus_text(rest))
    return CommandResult(preview.to_markdown(), title="compact", data=preview)
