"""`/inspect context` shows the tool layer as it is sent, and says how each figure was counted
(issue "Real models, real work": "shows the tool layer as it was actually sent"; "Exact tokens":
"says which way each figure was got: exact, calibrated, or estimated")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.fakes import FakeOpenAI, reply, text
from tests.support.home import write_config
from wisp.core.context.inspect import inspect_context
from wisp.core.session import Session, SessionOptions

WISP = str(Path(sys.executable).parent / "wisp")


async def test_a_server_that_drops_tools_gets_them_in_the_system_message_and_inspect_shows_that(
        wisp_home: Path, tmp_path: Path) -> None:
    with FakeOpenAI(drops_tools=True, tokenize="llama-cpp-python") as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url, "model.name": "m",
                                 "model.timeout_s": 5, "tools.enabled": ["read_file"]})
        srv.push(reply(text("Hello there.")))
        async with await Session.open(SessionOptions(workdir=tmp_path)) as session:
            assert await session.connect()
            [e async for e in session.run_turn("hi")]
            report = await inspect_context(session.context, session.conversation_id)
            texts = {layer.key: layer.text for layer in (await session.context.compose(session.conversation_id)).layers}
        sent = srv.chat_bodies[-1]
    assert report.tool_mode == "prompted" and report.tools == [] and "tools" not in sent
    system = report.messages[0]["content"]
    assert "read_file" in system  # the tools are written where the server reads them
    assert sent["messages"][0]["content"].startswith(system.split("\n")[0])
    assert "read_file" in sent["messages"][0]["content"]
    rows = {r.key: r for r in report.rows}
    assert rows["tools"].hint.startswith("written into the system message")
    # the fake's tokenizer counts words: the layers with a text of their own are counted exactly
    assert rows["tools"].how == "exact" and rows["tools"].tokens == len(texts["tools"].split())
    assert rows["system"].how == "exact" and rows["system"].tokens == len(texts["system"].split())
    assert rows["current"].how in ("calibrated", "estimated")
    assert report.counted() == "partly exact" and "exact (the server's tokenizer)" in report.headline()
    assert report.total == sum(r.tokens for r in report.rows)
    assert report.tokens_left == report.budget - report.total


def test_wisp_inspect_context_shows_the_prompted_layer_the_config_asks_for(wisp_home: Path, tmp_path: Path) -> None:
    with FakeOpenAI() as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url, "model.name": "m",
                                 "model.timeout_s": 5, "tools.enabled": ["read_file"]})
        srv.push(reply(text("Hi.")))
        env = os.environ.copy()
        assert subprocess.run([WISP, "ask", "hi"], cwd=tmp_path, env=env, capture_output=True, timeout=60).returncode == 0
        native = json.loads(subprocess.run([WISP, "inspect", "context", "--json"], cwd=tmp_path, env=env,
                                           capture_output=True, text=True, timeout=60).stdout)
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url, "model.name": "m",
                                 "model.timeout_s": 5, "tools.enabled": ["read_file"], "model.tool_mode": "prompted"})
        prompted = json.loads(subprocess.run([WISP, "inspect", "context", "--json"], cwd=tmp_path, env=env,
                                             capture_output=True, text=True, timeout=60).stdout)
    # model.tool_mode auto, and nothing connected from a shell: the mode is unknown and the row says so
    # (a new user saw "native" here and the prompted layer in the TUI)
    assert native["tool_mode"] == "unknown" and [t["function"]["name"] for t in native["request"]["tools"]] == \
        ["read_file"]
    auto_row = {layer["key"]: layer for layer in native["layers"]}["tools"]
    assert auto_row["hint"].startswith("not connected, so counted as schemas")
    assert prompted["tool_mode"] == "prompted" and prompted["request"]["tools"] == []
    assert "read_file" in prompted["request"]["messages"][0]["content"]
    tools = {layer["key"]: layer for layer in prompted["layers"]}["tools"]
    assert tools["how"] == "estimated" and prompted["counted"] == "estimated"
    # the prompted layer (text and worked examples) is counted as sent, not as the schemas' JSON
    assert tools["tokens"] != {layer["key"]: layer for layer in native["layers"]}["tools"]["tokens"]


def test_wisp_ask_json_reports_the_prompt_tokens_the_server_evaluated(wisp_home: Path, tmp_path: Path) -> None:
    """Issue "Real models, real work": "Report the prompt-eval tokens per turn in --json usage"."""
    with FakeOpenAI() as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url, "model.name": "m",
                                 "model.timeout_s": 5})
        srv.push(reply(text("One."), usage=(900, 3)), reply(text("Two."), usage=(950, 3, 880)))
        env = os.environ.copy()
        first = subprocess.run([WISP, "ask", "one", "--json"], cwd=tmp_path, env=env, capture_output=True,
                               text=True, timeout=60)
        second = subprocess.run([WISP, "ask", "--continue", "two", "--json"], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=60)
    [u1] = [json.loads(line) for line in first.stdout.splitlines() if '"usage"' in line]
    [u2] = [json.loads(line) for line in second.stdout.splitlines() if '"usage"' in line]
    assert (u1["prompt"], u1["cached"], u1["evaluated"]) == (900, None, 900)  # no cache said: all evaluated
    assert (u2["prompt"], u2["cached"], u2["evaluated"]) == (950, 880, 70)



async def test_after_a_paste_over_the_window_inspect_says_what_sending_will_do_first(wisp_home: Path,
                                                                                    tmp_path: Path) -> None:
    """A 25 KB paste, answered: the record as it stands is over the budget, so the request /inspect
    context composes is not the one sending gives. It says so, and what sending does first; then the
    request sent does fit."""
    log = "\n".join(f"2026-12-03 10:{i // 60:02}:{i % 60:02} worker-{i % 7} processed batch {i} in {i * 7 % 900} ms"
                    for i in range(400))
    with FakeOpenAI() as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url, "model.name": "m",
                                 "model.timeout_s": 5, "model.context_window": 4096, "tools.enabled": []})
        srv.push(reply(text("Looks like steady batches.")), reply(text("Yes.")))
        async with await Session.open(SessionOptions(workdir=tmp_path)) as session:
            assert await session.connect()
            [e async for e in session.run_turn("Here is the log:\n" + log + "\nWhat stands out?")]
            report = await inspect_context(session.context, session.conversation_id)
            assert report.tokens_left < 0, report.headline()
            assert "when you send, wisp fits this first" in report.headline()
            assert f"over the budget by {-report.tokens_left:,} tokens" in report.to_text()
            assert report.to_dict()["fitting"] == report.fitting()
            [e async for e in session.run_turn("and the slowest batch?")]
    sent = srv.chat_bodies[-1]
    assert len(json.dumps(sent)) < len(log)  # the request sent was fitted: the paste did not go whole
