"""End to end: `wisp ask` in two workspaces, `wisp memory refine`, then every `wisp memory` command, as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.episodes_util import memory_reply
from tests.support.fakes import reply

WISP = str(Path(sys.executable).parent / "wisp")


def wisp(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([WISP, *args], capture_output=True, text=True, cwd=cwd, timeout=60,
                          env={**os.environ, **(env or {})})


def ok(*args: str, **kw) -> str:
    r = wisp(*args, **kw)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def js(*args: str, **kw) -> dict:
    return json.loads(ok(*args, "--json", **kw))


@pytest.fixture
def three_conversations(ollama_home, tmp_path: Path):
    """Conversations A (2 exchanges) and B in workspace `website`, C in `personal`."""
    home, srv = ollama_home
    website, personal = tmp_path / "website", tmp_path / "personal"
    website.mkdir()
    personal.mkdir()
    assert ok("ask", "plan the website launch for Friday", cwd=website) == "You said: plan the website launch for Friday\n"
    ok("ask", "ok, and tell the team", "--continue", cwd=website)
    ok("ask", "the launch checklist still needs the DNS change", cwd=website)
    ok("ask", "remind me to buy milk", cwd=personal)
    return home, srv, website, personal


def test_capture_refine_list_search_show_forget(three_conversations) -> None:
    home, srv, website, personal = three_conversations
    asks = len(srv.chat_bodies)
    assert asks == 4
    status = js("memory", "status")
    assert status["exchanges"] == 4 and status["awaiting"] == 4 and status["memories"] == 0

    srv.push(reply(memory_reply(("1,2", "Agreed to launch the website on Friday; the person asked to tell the team."))),
             reply(memory_reply(("1", "The launch checklist still needs the DNS change: unfinished."))),
             reply("MEMORY 1\nThe person asked to be reminded to buy milk.\nEND"))
    report = js("memory", "refine")
    assert report["outcome"] == "completed" and report["batches"] == 3 and report["exchanges"] == 4
    assert report["memories"] == ["MEM-000001", "MEM-000002", "MEM-000003"]
    bodies = srv.chat_bodies[asks:]
    assert len(bodies) == 3
    first = bodies[0]["messages"][1]["content"]
    assert "plan the website launch" in first and "tell the team" in first and "milk" not in first
    assert "milk" in bodies[2]["messages"][1]["content"] and "launch" not in bodies[2]["messages"][1]["content"]

    # a second refine finds nothing new and makes no model call
    again = js("memory", "refine")
    assert again["outcome"] == "nothing new" and again["model_calls"] == 0
    assert len(srv.chat_bodies) == asks + 3
    assert "no model call" in ok("memory", "refine")

    # list: totals, workspaces, newest event first
    listing = js("memory", "list")
    assert listing["total"] == 3
    assert [m["id"] for m in listing["memories"]] == ["MEM-000003", "MEM-000002", "MEM-000001"]
    assert {m["workspace"] for m in listing["memories"]} == {"website", "personal"}
    assert all(m["transport"] == "ask" for m in listing["memories"])
    assert js("memory", "list", "--workspace", "website")["total"] == 2
    assert js("memory", "list", "--limit", "1")["total"] == 3
    assert len(js("memory", "list", "--limit", "1", "--offset", "1")["memories"]) == 1
    assert js("memory", "list", env={"WISP_WORKSPACE": "personal"})["total"] == 1
    assert js("memory", "list", "--all-workspaces", env={"WISP_WORKSPACE": "personal"})["total"] == 3
    assert js("memory", "list", "--since", "today")["total"] == 3
    assert js("memory", "list", "--until", "yesterday")["total"] == 0
    conv_a = listing["memories"][2]["channel"]
    assert js("memory", "list", "--channel", conv_a)["total"] == 1

    # search: FTS over summaries
    found = js("memory", "search", "launch")
    assert found["total"] == 2 and [m["id"] for m in found["memories"]] == ["MEM-000002", "MEM-000001"]
    assert js("memory", "search", "launch", "--workspace", "personal")["total"] == 0
    assert js("memory", "search", "milk")["total"] == 1
    text_out = ok("memory", "search", "launch")
    assert "MEM-000002" in text_out and "of 2" in text_out

    # show: the whole summary, both times, and with --sources the exchanges
    shown = ok("memory", "show", "MEM-000001", "--sources")
    for part in ("Event:", "Recorded:", "workspace website", "transport ask",
                 "Agreed to launch the website on Friday", "plan the website launch for Friday",
                 "You said: ok, and tell the team", "completed"):
        assert part in shown, part
    data = js("memory", "show", "MEM-1", "--sources")
    assert [x["request"] for x in data["source_exchanges"]] == ["plan the website launch for Friday",
                                                                "ok, and tell the team"]
    assert data["recorded_at"] >= data["event_at"]
    missing = wisp("memory", "show", "MEM-000099")
    assert missing.returncode == 2 and "no memory MEM-000099" in missing.stderr

    # forget: without --yes only the scope, and a refusal
    refused = wisp("memory", "forget", "MEM-000002")
    assert refused.returncode != 0 and "would permanently delete 1 memory and 1 source exchange" in refused.stdout
    assert "--yes" in refused.stderr
    assert js("memory", "list")["total"] == 3
    done = ok("memory", "forget", "MEM-000002", "--yes")
    assert "Forgot MEM-000002" in done and "the launch checklist still needs the DNS change" in done
    assert js("memory", "list")["total"] == 2
    assert js("memory", "status")["exchanges"] == 3

    status = ok("memory", "status")
    assert "Memories:        2" in status and "0 awaiting" in status and "memory.timezone" in status
    assert "nothing new" in status


def test_bad_input_is_a_clear_error(three_conversations) -> None:
    for args, needle in [
        (("memory", "list", "--limit", "500"), "--limit is from 1 to 100"),
        (("memory", "list", "--since", "2025-03-01T10:00"), "must carry its UTC offset"),
        (("memory", "list", "--since", "fortnight"), "not a date wisp knows"),
        (("memory", "search", "!!!"), "at least one word"),
        (("memory", "show", "memory-one"), "MEM-000001"),
        (("memory", "list", "--workspace", "a", "--all-workspaces"), "not allowed with"),
    ]:
        r = wisp(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert needle in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_disabled_memory_keeps_reads_and_stops_capture_and_refine(three_conversations) -> None:
    home, srv, website, personal = three_conversations
    ok("config", "set", "memory.enabled", "false")
    ok("ask", "not remembered", cwd=website)
    assert js("memory", "status")["exchanges"] == 4
    calls = len(srv.chat_bodies)
    assert js("memory", "refine")["outcome"] == "disabled"
    assert len(srv.chat_bodies) == calls
    assert js("memory", "list")["total"] == 0  # reads work
    ok("config", "set", "memory.enabled", "true")
    srv.push(*[reply("NONE")] * 3)
    assert js("memory", "refine")["exchanges"] == 4


def test_refine_with_the_endpoint_down_keeps_everything(three_conversations) -> None:
    home, srv, website, personal = three_conversations
    srv.stop()  # nothing answers on that port any more
    r = wisp("memory", "refine")
    assert r.returncode == 3 and "Traceback" not in r.stderr
    assert "unreachable" in r.stderr or "no model endpoint" in r.stderr, r.stderr
    assert "wait for the next run" in r.stdout
    status = js("memory", "status")
    assert status["awaiting"] == 4 and status["memories"] == 0 and status["last_job"]["outcome"] == "failed"
