"""Compaction you can see and trust (issue "Compaction you can see and trust"), against a fake Ollama:

- the running summary asks for its sections with a schema and reads them back as text; a server
  that ignored the schema answers in prose, taken as it is; the prompt is told the task and the focus;
- ``/compact`` previews without recording (turns leaving with their tokens, the summary with the
  identifiers it keeps and misses, the facts and the task that stay, tokens before and after);
  applying records one version and the turns leave the window, never deleted; a stale preview is
  refused; ``/compact undo`` restores the previous version, down to none;
- the task is its own layer: it is never summarised away;
- ``wisp compact --dry-run --json`` prints the preview; ``wisp compact`` applies it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from wisp.core.commands import run_command
from wisp.core.context.compaction import CompactError, CompactPreview, apply_compaction, focus_text
from wisp.core.context.coverage import Item, is_present
from wisp.core.context.summariser import SUMMARY_SCHEMA, read_summary
from wisp.core.context.summary import summary_layer_text
from wisp.core.session import Session, SessionOptions
from tests.support.context_fakes import CountingOllama
from tests.support.home import write_config
from tests.support.sidecalls import ScriptedSideCall, SummarisingSideCall

WISP = str(Path(sys.executable).parent / "wisp")


@pytest.fixture
def srv():
    with CountingOllama() as s:
        yield s


def configure(home: Path, srv: CountingOllama, **more: Any) -> None:
    values = {"model.provider": "ollama", "model.endpoint": srv.base_url, "model.name": "wisp-fake:latest",
              "model.timeout_s": 5, "model.load_wait_s": 1}
    values.update(more)
    write_config(home, values)


async def opened(workdir: Path, side: Any) -> Session:
    s = await Session.open(SessionOptions(workdir=workdir, tools=[], side_call=side))
    assert await s.connect(), s.endpoint_error
    return s


async def chat(s: Session, prompts: list[str]) -> None:
    for prompt in prompts:
        async for _ in s.run_turn(prompt):
            pass


PROMPTS = [
    "We'll fix the payment bug in src/pay/charge.py first.",
    "The failing test is tests/test_pay.py::test_refund_rounding, error PAY-402.",
    "Look at commit 3f9a2c1b, it changed the rounding.",
    "Let's keep amounts in cents from now on.",
    "And the invoice layout in docs/invoice.md can wait.",
]


# --- the running summary's sections ------------------------------------------------------------------------


def test_read_summary_renders_the_sections_and_takes_prose_as_it_is() -> None:
    shaped = json.dumps({"summary": "Fixing the payment bug.", "decisions": ["amounts in cents"],
                         "open": ["docs/invoice.md"]})
    assert read_summary(shaped) == "Fixing the payment bug.\nDecisions:\n- amounts in cents\nOpen:\n- docs/invoice.md"
    assert read_summary('{"summary": "cut sho') == "cut sho"  # a reply at its token limit keeps what it wrote
    assert read_summary("The person fixes the payment bug.") == "The person fixes the payment bug."
    assert read_summary('{"summary": "", "decisions": [], "open": []}') == ""


async def test_the_summary_side_call_asks_for_sections_and_is_told_the_task(wisp_home: Path, srv,
                                                                             tmp_path: Path) -> None:
    configure(wisp_home, srv, **{"model.context_window": 1200, "context.reserve": 200})
    side = SummarisingSideCall()
    async with await opened(tmp_path, side) as s:
        await run_command(s, "/task fix the payment bug; objective: tests/test_pay.py passes")
        await chat(s, [p + " " + "padding " * 90 for p in PROMPTS * 2])
        versions = await s.context.summaries.versions(s.conversation_id)
        layers = [summary_layer_text(v, s.context.flags)[0] for v in versions]
    assert side.calls and all(c.schema == SUMMARY_SCHEMA for c in side.calls)
    assert "The conversation's task (it stays in its own layer; keep what serves it): fix the payment bug" \
        in side.calls[0].prompt
    # the fake answered JSON (as a constrained endpoint would): the version holds its text, not the JSON
    assert versions and not versions[-1].text.lstrip().startswith("{")
    # every version passes the coverage check (its summary layer: the text and the references)
    for v, layer in zip(versions, layers):
        for turn in v.covers:
            for key in v.items.get(turn, []):
                kind, _, value = key.partition(":")
                assert is_present(Item(kind, value), layer), (v.version, key)


async def test_a_summary_in_prose_from_a_server_that_ignored_the_schema_is_kept(wisp_home: Path, srv,
                                                                                 tmp_path: Path) -> None:
    configure(wisp_home, srv, **{"model.context_window": 1200, "context.reserve": 200})
    side = SummarisingSideCall(shaped=False)
    async with await opened(tmp_path, side) as s:
        await chat(s, [p + " " + "padding " * 90 for p in PROMPTS * 2])
        latest = await s.context.summaries.latest(s.conversation_id)
    assert latest is not None and latest.model_part.startswith("T1:")


# --- /compact ----------------------------------------------------------------------------------------------


def test_focus_text() -> None:
    assert focus_text("focus on the payment bug") == "the payment bug"
    assert focus_text("  Focus: refunds ") == "refunds"
    assert focus_text("the invoices") == "the invoices"
    assert focus_text("") is None


async def test_compact_previews_without_recording_then_applies(wisp_home: Path, srv, tmp_path: Path) -> None:
    configure(wisp_home, srv)
    side = SummarisingSideCall()
    async with await opened(tmp_path, side) as s:
        await run_command(s, "/task fix the payment bug; objective: tests/test_pay.py passes")
        await run_command(s, "/fact decision amounts = cents")
        await chat(s, PROMPTS)
        conv = s.conversation_id
        before = await s.context.compose(conv)
        result = await run_command(s, "/compact focus on the payment bug")
        preview = result.data
        assert isinstance(preview, CompactPreview) and not result.error
        # nothing recorded yet: no summary version, every turn still in the window
        assert await s.context.summaries.versions(conv) == []
        assert [t.number for t in (await s.context.compose(conv)).turns] == [1, 2, 3, 4, 5]
        # what would leave, with tokens; the newest turn stays whole
        tokens = {t.number: t.tokens for t in before.turns}
        assert preview.leaving == [(n, tokens[n]) for n in (1, 2, 3, 4)] and preview.staying == [5]
        assert preview.leaving_tokens == sum(tokens[n] for n in (1, 2, 3, 4))
        # the summary proposed: what it keeps, what the model missed (wisp completed it)
        d = preview.draft
        assert d is not None and d.model == "wisp-fake:latest" and d.covers == (1, 2, 3, 4)
        for ident in ("src/pay/charge.py", "tests/test_pay.py::test_refund_rounding", "PAY-402", "3f9a2c1b"):
            assert ident in d.kept and ident in d.text
        assert set(d.completed) <= set(d.kept)
        # the focus and the task went into the prompt
        prompt = side.calls[-1].prompt
        assert "focus on: the payment bug" in prompt and "fix the payment bug" in prompt
        # the facts and the task stay
        assert preview.task.startswith("fix the payment bug; objective: tests/test_pay.py passes")
        assert any("amounts = cents" in f for f in preview.facts)
        assert preview.tokens_before == before.total and preview.tokens_after > 0
        assert "## Compaction preview" in result.text and "turn 1:" in result.text
        calls = len(side.calls)
        # apply: one version, origin compact, the focus kept
        version = await apply_compaction(s.context, preview)
        assert len(side.calls) == calls  # applying costs no model call
        assert (version.version, version.origin, version.focus, version.covers) == (1, "compact", "the payment bug",
                                                                                     (1, 2, 3, 4))
        after = await s.context.compose(conv)
        assert [t.number for t in after.turns] == [5] and after.left == [1, 2, 3, 4]
        # the task is its own layer still, never summarised away
        assert "Task (set by the person): fix the payment bug" in after.messages[-1]["content"]  # before the next prompt
        assert after.layer("task").text in after.messages[-1]["content"]
        # never destructive: the turns stay in the store
        assert [t.number for t in await s.store.turns(conv)] == [1, 2, 3, 4, 5]
        shown = await run_command(s, "/show turn 2")
        assert "PAY-402" in shown.text
    recorded = [e for e in s.audit.iter_events() if e["kind"] == "summary.recorded"]
    assert recorded[-1]["payload"]["origin"] == "compact" and recorded[-1]["payload"]["focus"] == "the payment bug"


async def test_a_stale_preview_is_refused(wisp_home: Path, srv, tmp_path: Path) -> None:
    configure(wisp_home, srv)
    async with await opened(tmp_path, SummarisingSideCall()) as s:
        await chat(s, PROMPTS[:3])
        preview = (await run_command(s, "/compact")).data
        await chat(s, ["one more turn"])
        with pytest.raises(CompactError, match="changed since this preview"):
            await apply_compaction(s.context, preview)
        assert await s.context.summaries.versions(s.conversation_id) == []


async def test_nothing_to_compact_says_so(wisp_home: Path, srv, tmp_path: Path) -> None:
    configure(wisp_home, srv)
    side = SummarisingSideCall()
    async with await opened(tmp_path, side) as s:
        result = await run_command(s, "/compact")
        assert result.error and "no turn" in result.text
        await chat(s, PROMPTS[:1])
        result = await run_command(s, "/compact")
        assert result.data.draft is None and "Nothing to compact" in result.text
        with pytest.raises(CompactError):
            await apply_compaction(s.context, result.data)
    assert side.calls == []  # nothing to summarise: no model call


async def test_a_failed_side_call_previews_wisps_summary_alone(wisp_home: Path, srv, tmp_path: Path) -> None:
    configure(wisp_home, srv)
    async with await opened(tmp_path, SummarisingSideCall("fail")) as s:
        await chat(s, PROMPTS)
        preview = (await run_command(s, "/compact")).data
    assert preview.failed and "HTTP 500" in preview.failed
    d = preview.draft
    assert d.model is None and d.model_part == "" and d.completion == d.text
    assert "src/pay/charge.py" in d.text and "PAY-402" in d.text


@pytest.mark.parametrize("empty", ["", '{"summary": "", "decisions": [], "open": []}', "  \n"])
async def test_an_empty_summary_is_asked_again_then_written_by_wisp(wisp_home: Path, srv, tmp_path: Path,
                                                                    empty: str) -> None:
    """The fallback for an empty reply (issue "Compaction you can see and trust", "Structured side calls"):
    asked once more, then wisp's part stands alone and keeps every identifier; nothing is dropped."""
    configure(wisp_home, srv)
    side = ScriptedSideCall(default=lambda record: empty)
    async with await opened(tmp_path, side) as s:
        await chat(s, PROMPTS)
        preview = (await run_command(s, "/compact")).data
        version = await apply_compaction(s.context, preview)
    assert len(side.calls) == 2  # the first answer and the one retry
    d = preview.draft
    assert d.model is None and d.model_part == "" and d.completion == d.text
    for ident in ("src/pay/charge.py", "tests/test_pay.py::test_refund_rounding", "PAY-402", "3f9a2c1b"):
        assert ident in d.text and ident in version.text, ident
    assert "We'll fix the payment bug in src/pay/charge.py first." in d.text  # the person's own decision


async def test_compact_undo_restores_the_previous_version_down_to_none(wisp_home: Path, srv, tmp_path: Path) -> None:
    configure(wisp_home, srv)
    async with await opened(tmp_path, SummarisingSideCall()) as s:
        await chat(s, PROMPTS[:3])
        v1 = await apply_compaction(s.context, (await run_command(s, "/compact")).data)
        await chat(s, PROMPTS[3:])
        v2 = await apply_compaction(s.context, (await run_command(s, "/compact focus on rounding")).data)
        conv = s.conversation_id
        assert (v1.covers, v2.covers, v2.base) == ((1, 2), (1, 2, 3, 4), 1)
        undo = await run_command(s, "/compact undo")
        assert not undo.error and "restores version 1" in undo.text
        latest = await s.context.summaries.latest(conv)
        assert (latest.version, latest.origin, latest.restores, latest.covers) == (3, "undo", 1, (1, 2))
        assert latest.text == v1.text
        assert [t.number for t in (await s.context.compose(conv)).turns] == [3, 4, 5]
        undo = await run_command(s, "/compact undo")
        assert "no running summary is in effect" in undo.text
        assert await s.context.summaries.latest(conv) is None
        assert [t.number for t in (await s.context.compose(conv)).turns] == [1, 2, 3, 4, 5]
        again = await run_command(s, "/compact undo")
        assert again.error and "no running summary to undo" in again.text
        # every version is kept
        assert [v.origin for v in await s.context.summaries.versions(conv)] == ["compact", "compact", "undo", "undo"]
        panel = await s.context.panel_state(conv)
        assert panel.summary is None and [v.version for v in panel.summaries] == [4, 3, 2, 1]


# --- wisp compact ------------------------------------------------------------------------------------------


async def test_wisp_compact_dry_run_json_then_apply(wisp_home: Path, srv, tmp_path: Path) -> None:
    configure(wisp_home, srv)
    async with await opened(tmp_path, SummarisingSideCall()) as s:
        await chat(s, PROMPTS)
        conv = s.conversation_id
    # the shell's side call is the endpoint's: the fake Ollama answers with its default echo
    env = os.environ.copy()
    r = subprocess.run([WISP, "compact", "--dry-run", "--json", "--focus", "the payment bug"], capture_output=True,
                       text=True, env=env, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["dry_run"] is True and data["applied"] is None
    preview = data["preview"]
    assert preview["conversation"] == conv and preview["focus"] == "the payment bug"
    assert [t["turn"] for t in preview["leaving"]] == [1, 2, 3, 4] and all(t["tokens"] > 0 for t in preview["leaving"])
    assert "PAY-402" in preview["summary"]["kept"] and "src/pay/charge.py" in preview["summary"]["kept"]
    # every identifier kept is in the summary layer the next request would carry (text or references)
    layer = preview["summary"]["layer"]
    assert layer.startswith("Running summary of turns 1–4") and preview["summary"]["text"].strip() in layer
    assert all(k in layer for k in preview["summary"]["kept"]), preview["summary"]["kept"]
    assert preview["tokens"]["before"] > 0 and preview["tokens"]["after"] > 0
    chat_bodies = [b for b in srv.chat_bodies if b.get("format")]
    assert chat_bodies and chat_bodies[-1]["format"] == SUMMARY_SCHEMA  # asked with its schema
    r = subprocess.run([WISP, "compact", "--conversation", str(conv)], capture_output=True, text=True, env=env,
                       timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Applied: running summary version 1 covers turns 1–4" in r.stdout
    # the newest conversation of this directory, as `wisp ask --continue` takes it (issue 16)
    r = subprocess.run([WISP, "compact", "--undo", "--json"], capture_output=True, text=True, env=env, timeout=60,
                       cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["restored"] is None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = subprocess.run([WISP, "compact", "--undo"], capture_output=True, text=True, env=env, timeout=60,
                       cwd=elsewhere)
    assert r.returncode == 2 and "no conversation" in r.stderr
    r = subprocess.run([WISP, "compact", "--conversation", "999", "--dry-run"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 2 and "no conversation 999" in r.stderr
