"""Whatever an endpoint streams, a turn ends with an event and nothing raises (issue "Nothing runs,
leaks, hangs or is lost that shouldn't be", "Nothing crashes"): hypothesis writes NDJSON lines
(Ollama) and server-sent events (OpenAI) -- odd types, huge numbers, broken JSON, tool calls with
garbage, early ends -- and a real fake server sends them to a real session, turn after turn."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wisp.core import events as ev
from wisp.core.session import Session, SessionOptions
from tests.support.fakes import make_server, raw
from tests.support.home import write_config

scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.just(2 ** 64 + 1), st.just(-(10 ** 30)),
                   st.floats(allow_nan=False), st.text(max_size=10),
                   st.sampled_from(["\ud800", "a\udfffb", "\x00", "\x1b]52;c;eA==\x07", "<think>", "</think>"]))
anything = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                        max_leaves=8)
TOOLS = ["read_file", "system_info", "nope", "", "read_file\x00"]
arguments = st.one_of(anything, st.fixed_dictionaries({}, optional={
    "path": st.one_of(st.sampled_from(["notes.txt", "../../etc/passwd", "/dev/zero", "", "."]), anything),
    "offset": st.one_of(st.integers(), anything), "limit": st.one_of(st.integers(), anything),
    "from_byte": st.integers()}))
function = st.fixed_dictionaries({}, optional={"name": st.one_of(st.sampled_from(TOOLS), anything),
                                              "arguments": st.one_of(arguments, arguments.map(json.dumps))})


# --- Ollama: NDJSON ----------------------------------------------------------------------------------

ollama_call = st.fixed_dictionaries({}, optional={"function": st.one_of(function, anything), "id": anything})
ollama_message = st.fixed_dictionaries({}, optional={
    "role": anything, "content": st.one_of(st.text(max_size=20), anything, st.just("\udc80")),
    "thinking": st.one_of(st.text(max_size=10), anything),
    "tool_calls": st.one_of(st.lists(ollama_call, max_size=2), anything)})
ollama_object = st.fixed_dictionaries({}, optional={
    "message": st.one_of(ollama_message, anything), "done": st.one_of(st.booleans(), anything),
    "done_reason": st.one_of(st.sampled_from(["stop", "length", "tool_calls"]), anything),
    "prompt_eval_count": st.one_of(st.integers(), anything), "eval_count": st.one_of(st.integers(), anything),
    "error": st.one_of(st.none(), anything)})
#: Text as a model might send it: plain, or with lone surrogates, NULs, control sequences, think tags.
piece = st.one_of(st.text(max_size=20), st.sampled_from(["\ud800", "a\udfffb", "\x00", "\x1b]52;c;eA==\x07",
                                                         "<think>", "</think>", "\u202e", "\r\n"]))
ollama_good = st.builds(lambda c, t: json.dumps({"message": {"role": "assistant", "content": c, "thinking": t},
                                                 "done": False}), piece, piece)
ollama_line = st.one_of(ollama_good, ollama_good, ollama_object.map(json.dumps), anything.map(json.dumps),
                        st.text(max_size=30), st.sampled_from(["", " ", "{", "null", '{"done": true}', "[]"]))


# --- OpenAI: server-sent events ---------------------------------------------------------------------

openai_call = st.fixed_dictionaries({}, optional={"index": st.one_of(st.integers(0, 3), anything),
                                                  "id": anything, "type": anything,
                                                  "function": st.one_of(function, anything)})
delta = st.fixed_dictionaries({}, optional={
    "content": st.one_of(st.text(max_size=20), anything), "reasoning_content": anything,
    "reasoning": anything, "tool_calls": st.one_of(st.lists(openai_call, max_size=2), anything)})
choice = st.fixed_dictionaries({}, optional={"index": anything, "delta": st.one_of(delta, anything),
                                             "finish_reason": st.one_of(st.sampled_from(["stop", "length",
                                                                                         "tool_calls"]), anything),
                                             "message": anything})
openai_object = st.fixed_dictionaries({}, optional={
    "choices": st.one_of(st.lists(choice, max_size=2), anything),
    "usage": st.one_of(st.fixed_dictionaries({}, optional={"prompt_tokens": anything,
                                                           "completion_tokens": anything}), anything),
    "error": st.one_of(st.none(), anything)})
openai_good = st.builds(lambda c, r: "data: " + json.dumps({"choices": [{"index": 0, "delta": {
    "content": c, "reasoning_content": r}, "finish_reason": None}]}), piece, piece)
openai_line = st.one_of(openai_good, openai_good,
                        openai_object.map(lambda o: "data: " + json.dumps(o)), anything.map(lambda o: "data: " + json.dumps(o)),
                        st.sampled_from(["data: [DONE]", ": keep-alive", "event: message", "id: 3", "retry: 10",
                                         "data:", "data: {", "", "garbage"]),
                        st.text(max_size=30))


def entries(lines: list[str], ending: str) -> list[dict]:
    """The script entry that sends ``lines`` and then ends the way ``ending`` says."""
    steps = [raw(line) for line in lines]
    if ending == "finish":
        return [{"steps": steps, "finish": "stop", "usage": {"prompt": 5, "completion": 2}}]
    return [{"fault": "disconnect", "steps": steps, "clean": ending == "clean"}]


@pytest.mark.parametrize("protocol,line", [("ollama", ollama_line), ("openai", openai_line)])
def test_fuzzed_streams_end_every_turn_with_an_event(protocol: str, line, wisp_home: Path, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("a note\n")
    stats = {"turns": 0, "errors": 0, "unhandled": 0, "done": 0}
    with make_server(protocol) as srv:
        write_config(wisp_home, {"model.provider": protocol, "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake", "model.timeout_s": 5, "model.reply_timeout_s": 20,
                                 "agent.max_steps": 3})
        loop = asyncio.new_event_loop()
        session = loop.run_until_complete(Session.open(SessionOptions(workdir=tmp_path,
                                                                      tools=["read_file", "system_info"])))
        assert loop.run_until_complete(session.connect())

        async def turn() -> list:
            return [item async for item in session.run_turn("go")]

        @settings(max_examples=150, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
        @given(lines=st.lists(line, max_size=8), ending=st.sampled_from(["finish", "clean", "drop"]))
        def one(lines: list[str], ending: str) -> None:
            srv.script.clear()
            srv.push(*entries(lines, ending))
            stats["turns"] += 1
            try:
                items = loop.run_until_complete(asyncio.wait_for(turn(), 60))
            except BaseException:
                stats["unhandled"] += 1
                raise
            assert items and isinstance(items[-1], ev.TurnEnded), items[-3:]
            assert items[-1].state in ("done", "cut", "error")
            stats["errors"] += items[-1].state == "error"
            stats["done"] += items[-1].state == "done"
            for item in items:  # every event can be printed as wisp ask --json prints it
                json.dumps(ev.event_to_dict(item), ensure_ascii=False).encode("utf-8")

        try:
            one()
            ok = loop.run_until_complete(session.store.db.execute_fetchall("PRAGMA integrity_check"))
            assert ok[0][0] == "ok"
        finally:
            print(f"\n{protocol} stream fuzz: {stats}")
            loop.run_until_complete(session.close())
            loop.close()
    assert stats["unhandled"] == 0 and stats["turns"] >= 140 and stats["done"] and stats["errors"]
