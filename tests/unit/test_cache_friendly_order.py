"""Requests ordered for the server's prompt cache: what changes least first, what changes each turn last.

llama.cpp keeps only the unchanged start of the last prompt, so a layer that
changes (a fact, the task) before the turns made every turn after it
evaluate the whole prompt again (70–140 s a turn on 2 cores). These tests
send real requests to a fake OpenAI-compatible server over HTTP and check
that the next request starts with the last one up to its previous turn:
across ordinary turns, a facts change and a resume. The facts and the task
stay in every request, as data, at the start of the current turn's
prompt message (never a user message of their own before it: some chat
templates refuse two in a row); ``/inspect context`` and ``wisp inspect context --json`` show what
the server evaluated on the last turn, read from its usage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.fakes import FakeOpenAI, reply, text
from tests.support.home import write_config
from wisp.core.commands import run_command
from wisp.core.context.composer import CONTEXT_JOIN, FACTS_HEADING, SYSTEM_RULES
from wisp.core.context.inspect import inspect_context
from wisp.core.session import Session, SessionOptions

WISP = str(Path(sys.executable).parent / "wisp")


def _config(home: Path, srv: FakeOpenAI) -> None:
    write_config(home, {"model.provider": "openai", "model.endpoint": srv.base_url, "model.name": "m",
                        "model.timeout_s": 5, "tools.enabled": ["read_file"]})


def _new_at(messages: list[dict], prompt: str) -> int:
    """Where a request's new part starts: its current prompt's message, which the facts and task end."""
    return max(i for i, m in enumerate(messages) if m["role"] == "user"
               and (m["content"] == prompt or m["content"].startswith(prompt + CONTEXT_JOIN)))


def _common_chars(a: list[dict], b: list[dict]) -> int:
    """Characters of the longest common start of two requests' messages, as JSON (what a cache keeps)."""
    x, y = json.dumps(a, ensure_ascii=False), json.dumps(b, ensure_ascii=False)
    n = 0
    for p, q in zip(x, y):
        if p != q:
            break
        n += 1
    return n


def assert_kept_up_to_previous_turn(first: list[dict], second: list[dict], prompts: tuple[str, str]) -> None:
    """``second`` starts with ``first`` up to ``first``'s new part (the facts and task, and its prompt):
    what follows that shared start is the turn that just ended, then ``second``'s own facts, task and
    prompt, and nothing else differs (counted in characters too, as a cache keeps a common start)."""
    at, new_at = _new_at(first, prompts[0]), _new_at(second, prompts[1])
    assert second[:at] == first[:at]
    assert second[at] == {"role": "user", "content": prompts[0]}  # the previous turn, ended
    assert [m["role"] for m in second[at:new_at]].count("user") == 1  # and only it
    assert _common_chars(first, second) >= len(json.dumps(second[:at], ensure_ascii=False)) - 1
    assert second[0]["role"] == "system" and [m["role"] for m in second].count("system") == 1
    # never two user messages in a row: Gemma's and Mistral's chat templates refuse them
    roles = [m["role"] for m in second]
    assert not any(a == b == "user" for a, b in zip(roles, roles[1:])), roles


async def test_each_request_starts_with_the_last_one_across_turns_a_facts_change_and_a_resume(
        wisp_home: Path, tmp_path: Path) -> None:
    with FakeOpenAI() as srv:
        _config(wisp_home, srv)
        srv.push(*(reply(text(f"Answer {n}.")) for n in range(1, 6)))
        async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
            assert await s.connect()
            [e async for e in s.run_turn("first question")]
            [e async for e in s.run_turn("second question")]
            await run_command(s, "/fact decision db = SQLite")
            [e async for e in s.run_turn("third question")]
            await run_command(s, "/task ship the billing fix; objective: tests green")
            [e async for e in s.run_turn("fourth question")]
            conversation = s.conversation_id
        async with await Session.open(SessionOptions(workdir=tmp_path, resume=conversation)) as s:
            assert await s.connect()
            [e async for e in s.run_turn("fifth question")]
        bodies = [b["messages"] for b in srv.chat_bodies]
    assert len(bodies) == 5
    prompts = ["first question", "second question", "third question", "fourth question", "fifth question"]
    for i, (first, second) in enumerate(zip(bodies, bodies[1:])):
        assert_kept_up_to_previous_turn(first, second, (prompts[i], prompts[i + 1]))
    # every layer is still there: the rules first, the facts (as data) and the task just before the prompt
    last = bodies[-1]
    assert last[0]["content"].startswith(SYSTEM_RULES)
    assert "SQLite" not in last[0]["content"] and "billing fix" not in last[0]["content"]
    assert last[-1]["content"].startswith("fifth question" + CONTEXT_JOIN)
    context = last[-1]["content"].rpartition(CONTEXT_JOIN)[2]
    assert context.startswith(FACTS_HEADING) and '- decision db = "SQLite"' in context
    assert "Task (set by the person): ship the billing fix; objective: tests green" in context
    assert [m["content"] for m in last if m["role"] == "user"][:-1] == prompts[:-1]


async def test_inspect_context_shows_what_the_server_evaluated_on_the_last_turn(
        wisp_home: Path, tmp_path: Path) -> None:
    """The usage a real HTTP stream reports (``prompt_tokens`` and ``prompt_tokens_details.cached_tokens``)
    becomes /inspect context's figure for the last turn, in the TUI's report and in the CLI's JSON."""
    with FakeOpenAI() as srv:
        _config(wisp_home, srv)
        srv.push(reply(text("One.")), reply(text("Two."), usage=(950, 4, 880)))
        async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
            assert await s.connect()
            [e async for e in s.run_turn("one")]
            first = await inspect_context(s.context, s.conversation_id)
            [e async for e in s.run_turn("two")]
            report = await inspect_context(s.context, s.conversation_id)
            shown = (await run_command(s, "/inspect context")).data
        env = os.environ.copy()
        cli = json.loads(subprocess.run([WISP, "inspect", "context", "--json"], cwd=tmp_path, env=env,
                                        capture_output=True, text=True, timeout=60).stdout)
    assert first.last_turn is not None and (first.last_turn.turn, first.last_turn.cached) == (1, None)
    assert first.last_turn.evaluated == 10  # the fake's default usage, no cache said: all of it evaluated
    assert "it does not say what its cache served" in first.headline()
    got = report.last_turn
    assert got is not None and (got.turn, got.requests, got.prompt, got.cached, got.evaluated) == (2, 1, 950, 880, 70)
    line = "last turn 2: the server evaluated 70 prompt tokens; its last request 950, 880 of them from its cache"
    assert line in report.headline()
    assert f"next request ≈ {report.total:,} tokens" in report.headline()  # beside the request's size
    assert report.to_dict()["last_turn"] == {"turn": 2, "requests": 1, "prompt_tokens": 950, "cached_tokens": 880,
                                             "evaluated_tokens": 70}
    assert shown is not None and line in shown.headline()
    assert cli["last_turn"] == report.to_dict()["last_turn"]


async def test_side_calls_send_the_chats_rules_first_and_their_own_instruction_last(
        wisp_home: Path, tmp_path: Path) -> None:
    """The running summary's side call and the fact distiller start with the start of the chat's own
    system message (its rules), so the server's cache serves it; their own rules come after it."""
    from wisp.core.context.bookkeeping import DISTILL_RULES
    from wisp.core.context.summariser import SUMMARY_RULES
    from tests.support.sidecalls import SummarisingSideCall

    side = SummarisingSideCall()
    with FakeOpenAI() as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url, "model.name": "m",
                                 "model.timeout_s": 5, "model.context_window": 1200, "context.reserve": 200,
                                 "context.distill": True, "tools.enabled": []})
        async with await Session.open(SessionOptions(workdir=tmp_path, side_call=side, tools=[])) as s:
            assert await s.connect()
            for n in range(8):
                [e async for e in s.run_turn(f"We decided question {n} uses port 84{n}0. " + "padding " * 60)]
        chat_system = srv.chat_bodies[-1]["messages"][0]["content"]
    summaries = [c for c in side.calls if SUMMARY_RULES in c.prompt]
    distilled = [c for c in side.calls if DISTILL_RULES in c.prompt]
    assert summaries and distilled
    for call in summaries + distilled:
        system, user = call.messages
        assert system["role"] == "system" and system["content"].startswith(SYSTEM_RULES)
        assert chat_system.startswith(system["content"])  # the chat's own start, to the character
        assert user["role"] == "user"
    assert all(c.prompt.startswith(SUMMARY_RULES + "\n\n") for c in summaries)
    assert "New turns to add:\nTurn 1:" in summaries[0].prompt
    assert all(c.prompt.startswith(DISTILL_RULES + "\n\nThe person (entry ") for c in distilled)
