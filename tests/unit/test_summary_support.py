"""A model's summary must be about the conversation: one that the turns it covers do not support (a
small model's summary about something else) is dropped, wisp's own summary stands in its place, and the
notice, the version and ``/compact``'s preview say why; the person's plain statements ride in every
request after the summary, whatever the model wrote. Real sessions against a fake Ollama on 127.0.0.1,
real SQLite and audit log."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, strategies as st

from wisp.core import events as ev
from wisp.core.context.compaction import preview_compaction
from wisp.core.context.support import SUPPORT_MIN, support
from tests.support.context_fakes import CountingOllama
from tests.support.fakes import reply, text
from tests.support.sidecalls import ScriptedSideCall
from tests.unit.test_context_session import make_home, open_session, run

DOCKER = ("Docker Desktop is installed on Windows and macOS and runs containers in a lightweight virtual "
          "machine. Images are pulled from Docker Hub; the dashboard shows volumes, networks and Kubernetes "
          "clusters, and the whale icon in the menu bar restarts the engine after an upgrade.")

TURNS = ("We are tuning the ingest service of the billing pipeline. The service listens on port 8437.",
         "The ingest workers read batches from the queue and write invoices to the ledger table.",
         "Retries of a failed batch wait thirty seconds, then the batch goes to the dead letter queue.")


def test_an_off_topic_summary_is_not_supported_and_a_faithful_one_is() -> None:
    sources = "\n".join(TURNS) + "\n" + "The assistant said the ledger table has an index on invoice_id."
    off = support(DOCKER, sources)
    assert not off.supported and off.share < SUPPORT_MIN
    assert "docker" in " ".join(off.unknown).lower() and "content words occur" in off.reason()
    assert "Docker" in off.reason(words=True) and "Docker" not in off.reason()
    faithful = support("The person tunes the ingest service (port 8437); its workers read queue batches and "
                       "write invoices to the ledger table; failed batches are retried, then dead-lettered.",
                       sources)
    assert faithful.supported and faithful.share >= 0.7
    # invented identifiers count against a summary
    invented = support("Ingest service on port 9999 reads src/other/module.py and batches from the queue.", sources)
    assert invented.share < faithful.share
    # too short to judge: taken as it is
    assert support("Ingest tuning.", sources).supported


def _side(answer: str) -> ScriptedSideCall:
    return ScriptedSideCall(default=lambda record: json.dumps({"summary": answer, "decisions": [], "open": []}))


async def test_an_off_topic_model_summary_is_dropped_and_the_statement_rides_along(wisp_home: Path,
                                                                                  tmp_path: Path) -> None:
    side = _side(DOCKER)
    with CountingOllama() as srv:
        make_home(wisp_home, srv, **{"model.context_window": 1500, "context.reserve": 300})
        async with await open_session(tmp_path, tools=[], side_call=side) as s:
            notices: list[ev.Notice] = []
            prompts = [*TURNS, *(f"Next, about the ledger part {n}: " + "more words on the same work " * 14
                                 for n in range(4, 14))]
            for prompt in prompts:
                srv.push(reply(text("Understood. " + "A long reply about the ingest service. " * 12)))
                notices += [e for e in await run(s, prompt) if isinstance(e, ev.Notice)]
            latest = await s.context.summaries.latest(s.conversation_id)
            assert latest is not None and 1 in latest.covers, "no summary covered the first turns"
            assert side.calls, "the model was never asked"
            # the model's summary was dropped, and said so: in the version (F4 shows it) and a notice
            assert "Docker" not in latest.text and latest.model is None
            assert "the model's summary was not used: only" in latest.completion
            assert any("was not used" in n.text and "content words" in n.text and "Docker" in n.text for n in notices)
            events = [e for e in s.audit.iter_events() if e["kind"] == "summary.failed"]
            assert any("not used" in e["payload"]["reason"] for e in events)
            # the person's plain statement of turn 1 is in the request after the summary, with its entry
            last = srv.chat_bodies[-1]
            system = last["messages"][0]["content"]
            assert '- turn 1, entry 1: "The service listens on port 8437."' in system
            assert "Docker" not in json.dumps(last)
            # /compact's preview says why, too
            preview = await preview_compaction(s.context, s.conversation_id)
            if preview.draft is not None:
                assert preview.draft.dropped and "not used" in preview.to_markdown()


async def test_a_faithful_model_summary_is_used(wisp_home: Path, tmp_path: Path) -> None:
    side = _side("The person tunes the ingest service of the billing pipeline; workers read queue batches "
                 "and write invoices to the ledger table; failed batches wait, then go to the dead letter queue.")
    with CountingOllama() as srv:
        make_home(wisp_home, srv, **{"model.context_window": 1500, "context.reserve": 300})
        async with await open_session(tmp_path, tools=[], side_call=side) as s:
            for prompt in [*TURNS, *(f"Next, about the ledger part {n}: " + "more words on the same work " * 14
                                     for n in range(4, 14))]:
                srv.push(reply(text("Understood. " + "A long reply about the ingest service. " * 12)))
                await run(s, prompt)
            latest = await s.context.summaries.latest(s.conversation_id)
            assert latest is not None and latest.model is not None
            assert "dead letter queue" in latest.model_part and "not used" not in latest.completion
            assert '"The service listens on port 8437."' in latest.completion  # the floor, beside it


#: A small model's summary that echoes the side call's own instructions, not the turns: the instructions'
#: words ("keep", "written", "running summary", "words", "new turns") may not back it.
ECHO = ("Keep these exactly as written. Write the running summary in words. Summary so far: none yet. New turns "
        "to add. Keep exactly as written; write the running summary of the turns to add, at most words.")


async def test_a_summary_backed_only_by_the_side_calls_own_instructions_is_dropped(wisp_home: Path,
                                                                                   tmp_path: Path) -> None:
    side = _side(ECHO)
    with CountingOllama() as srv:
        make_home(wisp_home, srv, **{"model.context_window": 1500, "context.reserve": 300})
        async with await open_session(tmp_path, tools=[], side_call=side) as s:
            for prompt in [*TURNS, *(f"Next, about the ledger part {n}: " + "more words on the same work " * 14
                                     for n in range(4, 14))]:
                srv.push(reply(text("Understood. " + "A long reply about the ingest service. " * 12)))
                await run(s, prompt)
            latest = await s.context.summaries.latest(s.conversation_id)
            assert latest is not None and side.calls
            assert latest.model is None and "the model's summary was not used: only" in latest.completion
            assert "exactly as written" not in latest.text


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40), min_size=1, max_size=4),
       st.integers(min_value=0, max_value=200))
def test_a_summary_object_is_read_whatever_a_small_model_wrote_in_its_strings(notes: list[str], cut: int) -> None:
    """SmolLM2 writes raw newlines (a code block's) inside the object's strings, or stops mid-object: the
    summary is the object's text, never its braces and keys (they reached the summary layer and the
    next request)."""
    from wisp.core.context.summariser import read_summary

    body = json.dumps({"summary": "\n".join(notes), "decisions": notes[:2], "open": ["```python\nx = 1\n```"]})
    raw = body.replace("\\n", "\n")  # the newlines written raw, as the model does
    for reply_text in (raw, raw[:max(12, len(raw) - cut)]):
        got = read_summary(reply_text)
        assert '"summary"' not in got and '"decisions"' not in got and '"open"' not in got, got
    assert " ".join("\n".join(notes).split())[:20] in " ".join(read_summary(raw).split())


def test_wisps_part_says_the_models_summary_was_not_used_not_that_there_was_none() -> None:
    """A new user read "Kept by wisp (the model wrote no summary of these turns)" under "the model's
    summary was not used: only 8 of its 20 content words occur …": the model had written one."""
    from wisp.core.context.coverage import Item
    from wisp.core.context.summariser import complete_summary

    missing = {2: [Item("path", "src/app.py")]}
    sources = {(2, "path:src/app.py"): 5}
    dropped = complete_summary(missing, sources, [], model_text="", asked=['turn 2: the person asked "x"'],
                               dropped="only 8 of its 20 content words occur in the turns")
    assert "Written by wisp (the model's summary was not used: only 8" in dropped
    assert "Kept by wisp (the model's summary was not used):" in dropped and "wrote no summary" not in dropped
    none = complete_summary(missing, sources, [], model_text="", asked=['turn 2: the person asked "x"'])
    assert "Kept by wisp (the model wrote no summary of these turns):" in none
