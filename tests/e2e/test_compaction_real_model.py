"""Compaction on the real embedded SmolLM2, through the real ``wisp`` command (the `local` extra).

Issue "Compaction you can see and trust", "Real-model tests on SmolLM2":

- a scripted 80-turn chat with 200-line file reads, under the embedded model's window: every
  request fits the window, the running summary takes over the old turns, every summary version
  passes the coverage check, and the model still answers at turn 80;
- ``wisp memory refine`` on exchanges that state a decision yields at least one memory naming it;
- ``wisp compact --dry-run --json`` lists the turns that would leave and the identifiers kept.

The same chat serves issue "Real models, real work"'s long chat ("a scripted 60-turn chat with
200-line file reads never sends a request over the window, and answers at every turn", and "after a
forced overflow (a 2 MB prompt), the next turn answers"), so that CI runs one long chat, not two.

CI has two cores and 30 minutes for every real-model test together, so one chat serves every check
here: the module runs it once (:func:`chat`), through ``wisp ask --continue --json``, one process a
turn as a person's shell would, on the session's shared embedded server (``shared_embedded`` in
tests/e2e/conftest.py, started by wisp's own code with the spec every ``embedded_home`` uses). The
model's replies are short (``model.max_tokens``): what is tested is wisp's part on the real model
(fitting, the shaped side calls, the summary's coverage and wisp's completion of it, refinement's
retry), not the model's prose.

A 135M model does not call tools on cue, so each turn's read is scripted at the HTTP boundary by
:class:`tests.support.scripted_reads.ScriptedReads`: the turn's first request is answered with a
``read_file`` call of the turn's file, wisp's real tool reads it, and every other request (the
model's answer, every side call, the token counts) goes to the real server, which reports what it
counted. Memory is off for the chat but its last two turns (they state a decision), so that
refinement is one batch and not the whole chat's.

The figures are printed (``pytest -s``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.home import require_local, write_config
from tests.support.scripted_reads import ScriptedReads

pytestmark = pytest.mark.real_model
WISP = str(Path(sys.executable).parent / "wisp")
TURNS = 80
FILE_LINES = 200
#: Every this many turns, the turn reads its 200-line file (a read costs about 1,100 tokens to
#: evaluate: the line numbers alone are 700, one token a digit); the turns between give a note.
READ_EVERY = 5
#: Words in a turn's note: enough that the window fills about halfway through the chat, so the
#: running summary takes over old turns more than once.
NOTE_WORDS = 90
#: The model's replies are cut at this many tokens: the point is wisp's part, not the model's prose.
REPLY_TOKENS = 12
WORDS = ("the client keeps state in one place and every request goes through the same path so retries "
         "timeouts and errors are handled once we looked at how the session opens how tokens refresh and "
         "what happens when the server is slow").split()
#: What some turns say besides their read or note: identifiers the summary must keep (early ones leave
#: the window under the running summary; late ones are in it when ``wisp compact`` previews), decisions.
SAID = {
    2: "We'll keep the parser in src/demo/parse.py.",
    3: "The service listens on port 8437.",
    6: "The failing test is tests/test_parse.py::test_empty_line, with error PRS-101.",
    9: "Commit 9c1e4b7a broke the empty line case.",
    14: "Let's log every retry to docs/retries.md from now on.",
    76: "The failing test is tests/test_pay.py::test_refund_rounding, with error PAY-402.",
    77: "Commit 3f9a2c1b changed the rounding.",
    78: "We'll fix the payment bug in src/pay/charge.py first.",
    79: "We decided the website launch is on Friday. Please remember that.",
    80: "Also, the launch email goes out on Thursday evening.",
}
#: The turns captured for episodic memory (memory is turned on before the first of them).
CAPTURED_FROM = 79


def reads(n: int) -> bool:
    return n % READ_EVERY == 0


def prompt_for(n: int) -> str:
    """Turn ``n``'s prompt: a read of its file, or a note; and what :data:`SAID` adds."""
    if reads(n):
        head = f"Turn {n}: read docs/part{n:02}.txt and name one word in it."
    else:
        head = f"Turn {n}, a note: " + " ".join(WORDS[(n * 5 + i) % len(WORDS)] for i in range(NOTE_WORDS)) + "."
    return head + (f" {SAID[n]}" if n in SAID else "")


def write_files(root: Path) -> None:
    """``docs/partNN.txt``: :data:`FILE_LINES` lines of a word each (the read numbers them: about
    four tokens a line, so 80 reads stay quick to evaluate on two cores)."""
    (root / "docs").mkdir(parents=True, exist_ok=True)
    for n in range(1, TURNS + 1):
        lines = [WORDS[(n * 7 + i * 3) % len(WORDS)] for i in range(FILE_LINES)]
        (root / "docs" / f"part{n:02}.txt").write_text("\n".join(lines) + "\n")


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@dataclass
class Chat:
    """The module's one chat: its home and environment, the proxy's records, each turn's events and
    wall time, and the server's window (``n_ctx``, tokens)."""

    home: Path
    work: Path
    env: dict[str, str]
    proxy: ScriptedReads
    model: str
    n_ctx: int
    turns: dict[int, list[dict]] = field(default_factory=dict)
    seconds: dict[int, float] = field(default_factory=dict)
    elapsed: float = 0.0

    def wisp(self, *args: str, timeout: float = 1800, stdin: str | None = None) -> subprocess.CompletedProcess:
        """Run the real ``wisp`` command in the chat's home and working directory."""
        return subprocess.run([WISP, *args], capture_output=True, text=True, cwd=self.work, env=self.env,
                              timeout=timeout, input=stdin)

    def ask(self, prompt: str, stdin: str | None = None) -> list[dict]:
        """One more turn of the chat (``wisp ask --continue --json``): its events."""
        r = self.wisp("ask", "--continue", "--tool", "read_file", "--json", prompt, stdin=stdin)
        assert r.returncode == 0, r.stderr[-3000:]
        return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]

    def wisp_json(self, *args: str) -> Any:
        r = self.wisp(*args)
        assert r.returncode == 0, (args, r.stderr[-3000:])
        return json.loads(r.stdout)

    @property
    def conversation(self) -> int:
        return int(self.turns[1][0]["conversation"])


async def _shared_server(data_dir: Path) -> tuple[str, str, int]:
    """The session's shared embedded server, found or started by wisp's own code with the spec every
    ``embedded_home`` uses: its base URL, model name and window (tokens)."""
    from wisp.core.model.embedded import SharedServer, default_gguf_path
    from wisp.core.model.resolve import EndpointSettings, resolve_endpoint

    resolved = await resolve_endpoint(EndpointSettings(provider="auto", endpoint=dead_url(),
                                                       gguf=str(default_gguf_path()), embedded_idle_s=900,
                                                       data_dir=str(data_dir)))
    try:
        assert isinstance(resolved.embedded, SharedServer)
        endpoint = resolved.endpoint
        return endpoint.base_url, endpoint.model, int(await endpoint.context_length())
    finally:
        await resolved.aclose()


@pytest.fixture(scope="module")
def chat(shared_embedded: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chat]:
    """Run the 80-turn chat once for the module (see the module doc)."""
    require_local()
    root = tmp_path_factory.mktemp("compaction-chat")
    home, work = root / "wisp-home", root / "work"
    home.mkdir()
    write_files(work)
    env = {k: v for k, v in os.environ.items() if k != "WISP_WORKSPACE"}
    env.update(WISP_HOME=str(home), HOME=str(root / "user"), XDG_DATA_HOME=str(root / "user" / "data"))
    base_url, model, n_ctx = asyncio.run(_shared_server(shared_embedded))
    with ScriptedReads(base_url) as proxy:
        # wisp talks to the proxy as to any OpenAI-compatible server; the tools go in the system prompt
        # and calls come back as blocks, as wisp does on the embedded server (whose template drops tools)
        write_config(home, {"model.provider": "openai", "model.endpoint": proxy.base_url, "model.name": model,
                            "model.context_window": n_ctx, "model.tool_mode": "prompted",
                            "model.max_tokens": REPLY_TOKENS, "model.timeout_s": 900,
                            "model.reply_timeout_s": 3600, "memory.enabled": False})
        c = Chat(home, work, env, proxy, model, n_ctx)
        started = time.monotonic()
        for n in range(1, TURNS + 1):
            if n == CAPTURED_FROM:
                r = c.wisp("config", "set", "memory.enabled", "true")
                assert r.returncode == 0, r.stderr
            prompt = prompt_for(n)
            if reads(n):
                proxy.reads[prompt] = f"docs/part{n:02}.txt"
            t0 = time.monotonic()
            r = c.wisp("ask", *(["--continue"] if n > 1 else []), "--tool", "read_file", "--json", prompt)
            c.seconds[n] = time.monotonic() - t0
            assert r.returncode == 0, (n, r.stderr[-3000:])
            c.turns[n] = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
        c.elapsed = time.monotonic() - started
        yield c


def reply_of(events: list[dict]) -> str:
    return "".join(e["text"] for e in events if e["event"] == "text_delta")


def answered(events: list[dict], scripted: int = 0) -> bool:
    """The model answered the turn: it generated tokens, and they showed as text or as a tool call (run,
    or cut at the 12-token limit and quoted by the cut notice: a CI run saw SmolLM2 begin a read_file
    block after the 2 MB paste, which nobody saw before wisp quoted cut calls). The first ``scripted``
    calls were the proxy's, not the model's."""
    completion = sum(e["completion"] or 0 for e in events if e["event"] == "usage")
    calls = [e for e in events if e["event"] == "tool_call"][scripted:]
    calls += [e for e in events if e["event"] == "notice" and "not run:" in e["text"]]
    return bool(completion) and bool(reply_of(events).strip() or calls)


async def summary_state(c: Chat) -> tuple[list[Any], Any, str, set[tuple[int, str]]]:
    """The conversation's summary versions, its composition now (no model call), the facts' text, and
    which of the versions' identifiers a search of the conversation finds in their turn (``(turn, text)``:
    the store's search, which ``/search`` and the memory tool's bare-word recall use)."""
    from wisp.core.context.composer import facts_layer_text
    from wisp.core.session import Session, SessionOptions

    session = await Session.open(SessionOptions(workdir=c.work, resume=c.conversation, tools=["read_file"]))
    async with session:
        versions = await session.context.summaries.versions(c.conversation)
        final = await session.context.compose(c.conversation)
        wanted = {(turn, key.partition(":")[2]) for v in versions for turn in v.covers for key in v.items.get(turn, [])}
        found = set()
        for turn, text in sorted(wanted):
            hits = await session.store.search(text, conversation_id=c.conversation, limit=200)
            if any(h.turn == turn for h in hits):
                found.add((turn, text))
        return versions, final, facts_layer_text(final.facts, final.flags), found


from wisp.core.context.summariser import DROPPED_FOR_ROOM  # noqa: E402  (the summariser's own words)


def dropped_for_room(layer: str, turn: int) -> bool:
    """Whether ``turn``'s line of wisp's "Kept by wisp" list is one its cap left out: the layer says it
    left older lines out, and ``turn`` is no newer than the oldest line it kept (the newest are kept)."""
    if DROPPED_FOR_ROOM not in layer:
        return False
    kept_turns = [int(m.group(1)) for m in re.finditer(r'^- turn (\d+)(?:, entry \d+)?: (?!"|the person asked)', layer.split(DROPPED_FOR_ROOM, 1)[1], re.M)]
    return not kept_turns or turn <= min(kept_turns)


def coverage_failures(versions: list[Any], flags: Any, facts_text: str,
                      searchable: set[tuple[int, str]]) -> list[str]:
    """Every identifier a version's covered turns hold that neither its summary layer (its text and
    references) nor the facts hold: the coverage check, run on what was recorded. One exception, the
    summariser's own (its part is capped): an identifier of an old turn whose line the cap left out, said
    so in the layer, passes if a search of the conversation finds it in that turn (``searchable``)."""
    from wisp.core.context.coverage import Item, is_present
    from wisp.core.context.summary import summary_layer_text

    out = []
    for v in versions:
        layer, _ = summary_layer_text(v, flags)
        haystack = layer + "\n" + facts_text
        for turn in v.covers:
            for key in v.items.get(turn, []):
                kind, _, text = key.partition(":")
                if is_present(Item(kind, text), haystack):
                    continue
                if dropped_for_room(layer, turn) and (turn, text) in searchable:
                    continue
                out.append(f"version {v.version}, turn {turn}: {key}")
    return out


def test_every_request_of_the_80_turn_chat_fits_and_the_model_answers_at_turn_80(chat: Chat) -> None:
    real = chat.proxy.forwarded
    side = [r for r in real if r.shaped]
    largest = max((r.prompt_tokens or 0) + (r.max_tokens or 0) for r in real)
    slowest = max(chat.seconds, key=chat.seconds.__getitem__)
    cut = [n for n, events in chat.turns.items()
           if any(e["event"] == "notice" and e.get("key") == "fit" and "head and tail" in e["text"] for e in events)]
    calls = sum(e["event"] == "tool_call" for events in chat.turns.values() for e in events)
    silent = [n for n, events in chat.turns.items() if not answered(events, scripted=int(reads(n)))]
    print(f"\n80-turn chat on {chat.model} (window {chat.n_ctx:,} tokens) through `wisp ask --continue`: "
          f"{chat.elapsed:.0f} s ({chat.elapsed / TURNS:.1f} s a turn; slowest turn {slowest}, "
          f"{chat.seconds[slowest]:.0f} s); {len(real)} requests to the model ({len(side)} shaped side calls, "
          f"{sum(r.seconds for r in side):.0f} s), {chat.proxy.scripted} reads scripted; largest request "
          f"{largest:,} tokens counted by the server with its reply's room; turns whose read went cut to fit: {cut}; "
          f"tool calls parsed {calls}; turns the model said nothing {len(silent)}")
    errors = [(n, e) for n, events in chat.turns.items() for e in events if e["event"] == "error"]
    assert not errors, errors[:5]
    # no request failed, but a shaped side call refused once: a server that does not take json_schema
    # (llama-cpp-python's takes json_object) is asked the next way, and that is remembered for the endpoint
    refused = [r for r in real if r.status != 200]
    assert all(r.shaped for r in refused) and len(refused) <= 1, refused
    ends = {n: events[-1] for n, events in chat.turns.items()}
    assert all(e["event"] == "turn_ended" and e["state"] in ("done", "cut") for e in ends.values()), ends
    # the reads: each read its 200-line file with wisp's real read_file
    read_turns = [n for n in chat.turns if reads(n)]
    assert chat.proxy.scripted == len(read_turns) == TURNS // READ_EVERY
    for n in read_turns:
        results = [e for e in chat.turns[n] if e["event"] == "tool_result"]
        assert results and results[0]["ok"] and f"{FILE_LINES}\t" in results[0]["content"], (n, results[:1])
    # every request fit the window: the server's own count, with the room for its reply (a refused
    # request has no usage: the server answered 400 before evaluating it)
    accepted = [r for r in real if r.status == 200]
    assert all(r.prompt_tokens for r in accepted), [r for r in accepted if not r.prompt_tokens][:3]
    assert largest <= chat.n_ctx, largest
    # the model still answers at turn 80, and in all but a few turns (a 135M model may say nothing now and
    # then, which is its answer, not wisp's failure)
    assert answered(chat.turns[TURNS], scripted=int(reads(TURNS))), \
        [e for e in chat.turns[TURNS] if e["event"] != "text_delta"]
    assert len(silent) <= TURNS // 10, silent
    # fitting steps in the order: a read that fits beside the fixed layers makes old turns leave, and
    # is not cut (issue "Real models, real work"; a 200-line read is a sixth of the window)
    assert not cut, cut


async def test_the_running_summary_takes_over_and_every_version_passes_the_coverage_check(
        chat: Chat, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("WISP_HOME", "HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(key, chat.env[key])
    versions, final, facts_text, searchable = await summary_state(chat)
    changed = [e for events in chat.turns.values() for e in events if e["event"] == "summary_changed"]
    completed = [v for v in versions if v.completion and v.model]
    print(f"\nrunning summary: {len(versions)} versions ({len(completed)} with a part wisp completed, "
          f"{sum(1 for v in versions if not v.model)} by wisp alone); turns out of the window at the end: "
          f"{final.left[:1]}..{final.left[-1:]}; the last request's layers {final.total:,} tokens; "
          f"the latest keeps {len(versions[-1].kept) if versions else 0} identifiers")
    assert versions and changed, "no running summary was written: the chat never filled the window"
    # the summary took over the old turns: they left the window, and the person's first prompt with them
    assert final.left and 1 in final.left and all(t.number not in final.left for t in final.turns)
    first = prompt_for(1)
    assert not any(first in str(m.get("content")) for m in final.messages)
    # every version passes the coverage check, the early identifiers kept as the turns left
    assert not coverage_failures(versions, final.flags, facts_text, searchable)
    latest = versions[-1]
    for ident in ("src/demo/parse.py", "tests/test_parse.py::test_empty_line", "PRS-101", "9c1e4b7a"):
        assert ident in latest.kept and ident in latest.text, ident
    # the side calls asked for the summary's sections with a schema (the form the server took is kept)
    assert any(r.shaped for r in chat.proxy.forwarded)


async def test_the_persons_plain_statement_survives_the_summaries_and_no_off_topic_summary_rides_along(
        chat: Chat, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue "Everything the conversation established stays within the model's reach": a statement in
    plain words in turn 3 ("The service listens on port 8437.": no decision, no identifier) is in the
    request at the end, after the running summary took turn 3 out of the window more than once; and no
    model-written summary about something else is in it (every model part recorded is supported by the
    chat: its words occur in what was said and read)."""
    from wisp.core.context.support import support

    for key in ("WISP_HOME", "HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(key, chat.env[key])
    versions, final, _, _ = await summary_state(chat)
    said = SAID[3]
    # two summaries or more took turn 3 over, and the statement is in the next request, with its turn
    assert len([v for v in versions if 3 in v.covers]) >= 2, [v.covers for v in versions]
    system = final.messages[0]["content"]
    assert 3 in final.left and said in system, system[-3000:]
    assert re.search(r"- turn 3, entry \d+: \"" + re.escape(said), system), system[-3000:]
    # and in the last request the real server was sent
    last = [r for r in chat.proxy.forwarded if not r.shaped and r.status == 200][-1]
    assert said in last.system, last.system[-2000:]
    # every model part recorded is about the chat; what was not is not in any version's text
    chat_text = "\n".join([*(prompt_for(n) for n in chat.turns), *(reply_of(e) for e in chat.turns.values()),
                           *((chat.work / "docs" / f"part{n:02}.txt").read_text() for n in chat.turns if reads(n))])
    model_parts = [v for v in versions if v.model and v.model_part.strip()]
    dropped = [v.version for v in versions if "model's summary was not used" in v.completion]
    print(f"\nstatement of turn 3 in the last request: yes; versions {len(versions)}, with a model part "
          f"{len(model_parts)}, model summaries dropped as not about the chat: {dropped}")
    for v in model_parts:
        backing = support(v.model_part, chat_text)
        assert backing.supported, (v.version, backing.reason(), v.model_part[:500])


def test_wisp_memory_refine_keeps_the_decision_the_chat_stated(chat: Chat) -> None:
    started = time.monotonic()
    report = chat.wisp_json("memory", "refine", "--json")
    seconds = time.monotonic() - started
    memories = chat.wisp_json("memory", "list", "--json", "--limit", "20")["memories"]
    texts = [chat.wisp_json("memory", "show", m["id"], "--json")["summary"] for m in memories]
    status = chat.wisp("memory", "status")
    print(f"\nwisp memory refine: {seconds:.0f} s; {report}; memories: {texts}")
    assert report["memories"] and not report["errors"], report
    # "at least one memory naming it" (issue 13): the two exchanges state two decisions (turn 79:
    # the launch is on Friday; turn 80: the email goes out on Thursday evening). Which one a 135M
    # model sampled at refinement's temperature 0.2 names varies from run to run (CI at 428dd6f
    # named Thursday's; CI at d6dc5b6 named neither, only "Read docs/part80.txt and name one word in it");
    # wisp's part is that a memory names a decision the exchanges state: what the model's memories leave
    # out is kept beside them in the person's words.
    assert any("friday" in t.lower() or "thursday" in t.lower() for t in texts), texts
    assert status.returncode == 0 and "Fell back:" in status.stdout, status.stdout


def test_wisp_compact_dry_run_json_lists_the_turns_leaving_and_the_identifiers_kept(chat: Chat) -> None:
    before = chat.wisp_json("inspect", "context", "--json")
    started = time.monotonic()
    data = chat.wisp_json("compact", "--dry-run", "--json", "--focus", "the payment bug")
    seconds = time.monotonic() - started
    preview = data["preview"]
    leaving = [t["turn"] for t in preview["leaving"]]
    summary = preview["summary"]
    print(f"\nwisp compact --dry-run --json: {seconds:.0f} s, {preview['side_calls']} side calls; turns leaving "
          f"{preview['leaving_text']} ({preview['leaving_tokens']:,} tokens); tokens {preview['tokens']}; "
          f"{len(summary['kept'])} identifiers kept, {len(summary['missed'])} of them missed by the model and "
          f"completed by wisp; the model's part: {summary['model_part'][:300]!r}")
    assert data["dry_run"] is True and data["applied"] is None and preview["conversation"] == chat.conversation
    assert not preview["failed"], preview["failed"]
    # the turns that would leave: those in the window but the newest, each with its tokens
    in_window = [n for n in range(1, TURNS + 1) if n not in before["left_window"]]
    assert leaving == in_window[:-1] and in_window[-1] == TURNS, (leaving, in_window)
    assert all(t["tokens"] > 0 for t in preview["leaving"])
    # the identifiers kept: the late turns' (in the window until now) and the earlier summary's, each in
    # the summary layer the next request would carry (a read's path is kept by its output's reference)
    def in_layer(ident: str) -> bool:  # a commit hash counts by its first seven characters, as the check does
        return ident in summary["layer"] or bool(re.fullmatch(r"[0-9a-f]{8,40}", ident)) and ident[:7] in summary["layer"]

    for ident in ("tests/test_pay.py::test_refund_rounding", "PAY-402", "3f9a2c1b", "src/pay/charge.py",
                  "docs/part75.txt", "src/demo/parse.py", "PRS-101"):
        assert ident in summary["kept"] and in_layer(ident), ident
    # except the oldest lines wisp's capped part had no room for, said so in the layer: each a search away
    # (the conversation's own search finds it in a turn whose line the cap left out)
    def searched(ident: str) -> bool:
        hits = chat.wisp_json("conversations", "search", ident, "--json", "--limit", "200")["hits"]
        return any(h["conversation"] == chat.conversation and h["turn"] is not None
                   and dropped_for_room(summary["layer"], h["turn"]) for h in hits)

    # an identifier a fact holds is in the request by the facts layer, as the summariser's check counts it
    last = str(before["request"]["messages"][-1].get("content") or "")  # between turns: the facts' own message
    facts = last if last.startswith("Facts (") else ""
    # (a function named as code, ``workdir()``, is held by its name as the summariser's own check reads it:
    # coverage.is_present, the one rule; CI saw ``workdir()`` kept where the facts layer says ``workdir:``)
    from wisp.core.context.coverage import Item, is_present

    def held(ident: str, text: str) -> bool:
        return is_present(Item("symbol", ident), text) if ident.endswith("()") else ident in text

    unlisted = [k for k in summary["kept"] if not in_layer(k) and not held(k, summary["layer"])
                and not held(k, facts)]
    assert all(searched(k) for k in unlisted), [k for k in unlisted if not searched(k)]
    # the model's part, or none: a 135M model under a grammar may answer with empty sections (a CI run saw
    # it), and then the summary is wisp's alone and says so; wisp's part holds either way
    assert summary["model"] in (chat.model, None), summary["model"]
    if summary["model"] is None:
        assert summary["completion"] == summary["text"] and not summary["model_part"].strip()
    assert preview["tokens"]["after"] < preview["tokens"]["before"]
    # a dry run changes nothing
    after = chat.wisp_json("inspect", "context", "--json")
    assert after == before


def test_after_a_forced_overflow_of_2_mb_the_next_turn_answers(chat: Chat) -> None:
    """Issue "Real models, real work": "after a forced overflow (a 2 MB prompt), the next turn answers".
    It runs last: it adds two turns to the chat the other checks read.

    The paste is base64 (a binary dump, 76 characters a line), text SmolLM2's tokenizer counts at about
    1.4 × wisp's estimate: wisp cuts it to its estimate, the server may count the request over its
    window, and then wisp fits it again to the server's count (a new user's 108 kB base64 paste failed
    every time before that)."""
    import base64
    import hashlib

    blob = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(2_000_000 // 43 + 1))
    encoded = base64.b64encode(blob).decode()
    paste = "".join(encoded[i:i + 76] + "\n" for i in range(0, len(encoded), 76))
    assert len(paste) >= 2_000_000
    sent = len(chat.proxy.forwarded)
    overflow = chat.ask("-", stdin=f"What is in this paste?\n{paste}")
    after = chat.ask("Say hello in one short sentence.")
    every = chat.proxy.forwarded[sent:]
    def over(r: Any) -> bool:  # refused as over the window (in the stream, as the embedded server does, or a 400)
        return not r.shaped and bool(r.overflow or r.status == 400)

    refused = [r for r in every if over(r)]
    requests = [r for r in every if not over(r)]
    largest = max((r.prompt_tokens or 0) + (r.max_tokens or 0) for r in requests if r.status == 200)
    fit = [e["text"] for e in overflow if e["event"] == "notice" and e.get("key") == "fit"]
    refits = [t for events in (overflow, after) for t in (e["text"] for e in events if e["event"] == "notice")
              if t.startswith("The server counted")]
    print(f"\nafter a 2 MB paste: {len(every)} requests, the largest {largest:,} tokens with its reply's room "
          f"(window {chat.n_ctx:,}); {fit[:1]}; refused by the server as over its window {len(refused)}, "
          f"fitted again: {refits}")
    # a request the server counted over its window was fitted again to its count (once), and that one fit
    assert len(refits) == len(refused) <= 2, (refits, refused)
    for events in (overflow, after):
        assert not [e for e in events if e["event"] == "error"], events[-5:]
        assert events[-1]["event"] == "turn_ended" and events[-1]["state"] in ("done", "cut"), events[-1]
    assert fit and "head and tail" in fit[0]  # the paste went cut, and the person was told in one line
    assert all(r.prompt_tokens for r in requests if r.status == 200) and largest <= chat.n_ctx
    assert answered(after), \
        ("after the overflow the model said nothing", [e for e in after if e["event"] != "text_delta"])


def test_a_200_kb_paste_of_two_long_lines_then_five_more_turns_every_turn_answers(chat: Chat) -> None:
    """Issue "Everything the conversation established stays within the model's reach": "A paste can end
    the conversation": a 200 KB prompt of two long lines (no spaces: a minified JSON line and a
    base64 line) was quoted whole by wisp's own summary, and every later turn failed. Runs last: it adds
    six turns to the chat. Every turn answers, and the running summary the last request carries stays
    within its shares of the budget (wisp's own part, the statements and the model's part)."""
    import base64
    import hashlib

    minified = json.dumps([{"id": i, "sku": f"SKU-{i:06d}", "qty": i % 7, "tag": "abcdef"[i % 6] * 5}
                           for i in range(2500)], separators=(",", ":"))[:100_000]
    blob = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(75_000 // 32 + 1))
    line2 = base64.b64encode(blob).decode()[:100_000]
    paste = minified + "\n" + line2
    assert len(paste) >= 200_000 and paste.count("\n") == 1
    turns = [chat.ask("-", stdin=paste)]
    for n in range(5):
        turns.append(chat.ask(f"Say hello in one short sentence ({n + 1} of 5)."))
    for events in turns:
        assert not [e for e in events if e["event"] == "error"], [e for e in events if e["event"] == "error"]
        assert events[-1]["event"] == "turn_ended" and events[-1]["state"] in ("done", "cut"), events[-1]
    assert answered(turns[-1]), [e for e in turns[-1] if e["event"] != "text_delta"]
    data = chat.wisp_json("inspect", "context", "--json")
    layers = {layer["key"]: layer for layer in data["layers"]}
    summary_tokens = layers["summary"]["tokens"]
    print(f"\nafter a 200 KB paste of two lines and five turns: every turn answered; the summary layer "
          f"{summary_tokens:,} tokens of a {data['budget']:,}-token budget")
    assert summary_tokens <= data["budget"] // 2, summary_tokens
