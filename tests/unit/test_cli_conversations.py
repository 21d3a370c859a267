"""Issue 16 on the command line, run as real processes against fake endpoints on 127.0.0.1:
conversations search and rm, export and import, --fork, ask --model, --profile, /retry,
the conversation of this directory, --help's config path, and the servers' quirks end to end."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.fakes import FakeOllama, FakeOpenAI, fault, raw, reply, text
from tests.support.home import write_config
from tests.unit.test_cli import WISP, wisp


def ask(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    r = wisp("ask", *args, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return r


def without_ids(data: dict) -> dict:
    data = json.loads(json.dumps(data))
    for key in ("exported_at", "audit_events"):
        data.pop(key)
    for key in ("id", "updated_at"):
        data["conversation"].pop(key)
    for item in data["entries"] + data["facts"]:
        item.pop("id")
    return data


def test_conversations_search_json_gives_conversation_turn_date_and_snippet(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(reply("The deploy key is in the vault."), reply("It rains in Tokyo."))
    ask("where is the deploy key?", cwd=tmp_path)
    ask("weather in tokyo", cwd=tmp_path)
    r = wisp("conversations", "search", "deploy", "key", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["total"] == 2
    hit = data["hits"][1]
    assert (hit["conversation"], hit["turn"], hit["kind"]) == (1, 1, "prompt")
    assert hit["date"].endswith("Z") and "[deploy] [key]" in hit["snippet"] and hit["title"]
    assert json.loads(wisp("conversations", "search", "nothing-like-it", "--json").stdout)["hits"] == []
    plain = wisp("conversations", "search", "tokyo")
    assert plain.returncode == 0 and "#2 turn 1" in plain.stdout and "[Tokyo]" in plain.stdout


def test_conversations_list_shows_titles_and_title_renames(ollama_home, tmp_path: Path) -> None:
    ask("please help me plan the release", cwd=tmp_path)
    r = wisp("conversations")
    assert "please help me plan the release" in r.stdout
    ask("--continue", "/title Release plan", cwd=tmp_path)
    assert "Release plan" in wisp("conversations").stdout


def test_export_takes_its_format_from_the_file_and_never_makes_directories(ollama_home, tmp_path: Path) -> None:
    """A new user's `wisp export 5 -o /nonexistent/dir/x.json` made /nonexistent/dir and wrote Markdown
    into x.json."""
    home, srv = ollama_home
    ask("hello there", cwd=tmp_path)
    out = tmp_path / "x.json"
    assert wisp("export", "1", "-o", str(out)).returncode == 0
    assert json.loads(out.read_text())["format"] == "wisp-conversation"  # .json: json
    md = tmp_path / "x.md"
    assert wisp("export", "1", "-o", str(md)).returncode == 0 and md.read_text().startswith("# hello there")
    missing = tmp_path / "no" / "such" / "dir" / "x.json"
    r = wisp("export", "1", "-o", str(missing))
    assert r.returncode == 2 and "does not exist" in r.stderr and not (tmp_path / "no").exists()
    assert wisp("export", "1").stdout.startswith("# hello there")  # stdout: md, as before


def test_export_both_formats_and_import_round_trip(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(reply("Use ```make``` then:\n\n```sh\nmake test\n```"))
    ask("how do I test?", cwd=tmp_path)
    ask("--continue", "/fact decision build = use make", cwd=tmp_path)
    md = wisp("export", "1", "--format", "md")
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("# how do I test?") and "**You**" in md.stdout and "## Facts" in md.stdout
    out = tmp_path / "one.json"
    r = wisp("export", "1", "--format", "json", "-o", str(out))
    assert r.returncode == 0 and "wrote conversation 1" in r.stderr
    first = json.loads(out.read_text())
    assert first["format"] == "wisp-conversation" and first["facts"] and first["audit_events"]
    assert all(e["audit_event_id"] for e in first["entries"])
    imported = wisp("import", str(out), "--json")
    assert imported.returncode == 0, imported.stderr
    new = json.loads(imported.stdout)["conversation"]
    assert new == 2
    second = json.loads(wisp("export", str(new), "--format", "json").stdout)
    assert without_ids(second) == without_ids(first)
    assert "2" in wisp("conversations").stdout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = json.loads(wisp("import", str(out), "--workdir", str(elsewhere), "--json").stdout)["conversation"]
    assert json.loads(wisp("export", str(moved), "--format", "json").stdout)["conversation"]["workdir"] == \
        str(elsewhere)
    assert wisp("import", str(out), "--workdir", str(tmp_path / "nope")).returncode == 2


def test_import_refuses_what_is_not_an_export(wisp_home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    r = wisp("import", str(bad))
    assert r.returncode == 2 and "not a wisp conversation export" in r.stderr and "Traceback" not in r.stderr
    r = wisp("import", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "cannot read" in r.stderr


def test_conversations_rm_says_what_goes(ollama_home, tmp_path: Path) -> None:
    ask("first conversation", cwd=tmp_path)
    ask("--continue", "/fact entity codename = HERON", cwd=tmp_path)
    dry = wisp("conversations", "rm", "1")
    assert dry.returncode == 2 and "add --yes" in dry.stderr and "1 turns" in dry.stderr
    assert json.loads(wisp("conversations", "--json").stdout)["total"] == 1
    r = wisp("conversations", "rm", "1", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["turns"] == 1 and report["entries"] == 2 and report["facts"] >= 1 and report["audit_kept"] > 0
    assert json.loads(wisp("conversations", "--json").stdout)["total"] == 0
    assert wisp("conversations", "rm", "1", "--yes").returncode == 2
    ask("second", cwd=tmp_path)
    listing = json.loads(wisp("conversations", "--json").stdout)
    assert [c["id"] for c in listing["conversations"]] == [2]  # a deleted id is never given again
    purged = wisp("conversations", "rm", "2", "--yes", "--purge-audit")
    assert purged.returncode == 0 and "blanked" in purged.stdout


def test_fork_starts_a_new_conversation_with_the_turns_up_to_there(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(reply("answer one"), reply("answer two"))
    ask("question one", cwd=tmp_path)
    ask("--continue", "question two", cwd=tmp_path)
    r = wisp("ask", "--fork", "1:1", "question three", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "forked conversation 1 up to turn 1 as conversation 2" in r.stderr
    sent = json.dumps(srv.chat_bodies[-1]["messages"])
    assert "answer one" in sent and "answer two" not in sent
    data = json.loads(wisp("export", "2", "--format", "json").stdout)
    assert [t["number"] for t in data["turns"]] == [1, 2]
    assert wisp("ask", "--fork", "1:9", "x", cwd=tmp_path).returncode == 2
    bad = wisp("ask", "--fork", "one", "x", cwd=tmp_path)
    assert bad.returncode == 2 and "ID:TURN" in bad.stderr


def test_ask_model_is_used_for_that_turn_only(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    ask("--model", "wisp-fake-2:latest", "hi", cwd=tmp_path)
    assert srv.chat_bodies[-1]["model"] == "wisp-fake-2:latest"
    ask("--continue", "again", cwd=tmp_path)
    assert srv.chat_bodies[-1]["model"] == "wisp-fake:latest"
    listed = wisp("ask", "--continue", "/model", cwd=tmp_path)
    assert listed.returncode == 0 and "wisp-fake-2:latest" in listed.stdout


def test_ask_retry_asks_again_and_keeps_the_old_version(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(reply("version one"), reply("version two"))
    ask("tell me", cwd=tmp_path)
    r = ask("--continue", "/retry", cwd=tmp_path)
    assert r.stdout.strip() == "version two" and "Asking turn 1 again" in r.stderr
    data = json.loads(wisp("export", "1", "--format", "json").stdout)
    assert [(t["number"], t["superseded_by"]) for t in data["turns"]] == [(1, 2), (2, None)]
    assert "version one" in json.dumps(data["entries"])


def test_profile_chooses_the_endpoint(wisp_home: Path, tmp_path: Path) -> None:
    with FakeOllama() as home_srv, FakeOpenAI() as work_srv:
        path = write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": home_srv.base_url,
                                        "model.name": "wisp-fake:latest", "model.timeout_s": 5})
        data = json.loads(path.read_text())
        data["profiles"] = {"work": {"provider": "openai", "endpoint": work_srv.base_url, "model": "wisp-fake-2"}}
        path.write_text(json.dumps(data))
        ask("--profile", "work", "hi", cwd=tmp_path)
        assert work_srv.chat_bodies and not home_srv.chat_bodies
        assert work_srv.chat_bodies[0]["model"] == "wisp-fake-2"
        r = wisp("ask", "--profile", "nope", "hi", cwd=tmp_path)
        assert r.returncode == 2 and "no profile 'nope'" in r.stderr and "work" in r.stderr


def test_continue_and_inspect_take_the_newest_conversation_of_this_directory(ollama_home, tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    ask("in here", cwd=here)
    ask("over there", cwd=there)
    r = ask("--continue", "and here again", cwd=here)
    assert f"Continuing conversation 1 (in here), the newest in {here}" in r.stderr
    inspect = wisp("inspect", "context", cwd=here)
    assert inspect.returncode == 0 and "Continuing conversation 1" in inspect.stderr
    anywhere = ask("--continue", "--all", "and anywhere", cwd=tmp_path)
    assert "the newest anywhere" in anywhere.stderr
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    new = ask("--continue", "hello", cwd=fresh)
    assert "No conversation in" in new.stderr and "starting a new one" in new.stderr
    none = wisp("inspect", "context", cwd=tmp_path / "there" / "..")
    assert none.returncode == 2 or "Continuing" in none.stderr
    assert wisp("ask", "--all", "x", cwd=here).returncode == 2


def test_help_names_the_real_config_path(wisp_home: Path) -> None:
    r = wisp("--help")
    assert r.returncode == 0 and str(wisp_home / "config.json") in r.stdout.replace("\n", "")


# --- the servers' quirks, end to end -------------------------------------------------------


def test_parallel_calls_sharing_an_index_all_run(wisp_home: Path, tmp_path: Path) -> None:
    """Ollama's /v1 gives every parallel call index 0; each one runs (issue 16)."""
    (tmp_path / "a.txt").write_text("apples\n")
    (tmp_path / "b.txt").write_text("bananas\n")

    def frag(id_: str, path: str) -> dict:
        return raw("data: " + json.dumps({"choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
            {"index": 0, "id": id_, "type": "function",
             "function": {"name": "read_file", "arguments": json.dumps({"path": path})}}]}}]}))

    with FakeOpenAI([reply(frag("call_a", "a.txt"), frag("call_b", "b.txt"), finish="tool_calls"),
                     reply("Apples and bananas.")]) as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake", "model.timeout_s": 5})
        r = wisp("ask", "read both", "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        events = [json.loads(line) for line in r.stdout.splitlines()]
        results = [e for e in events if e["event"] == "tool_result"]
        assert [e["call_id"] for e in results] == ["call_a", "call_b"]
        assert "apples" in results[0]["content"] and "bananas" in results[1]["content"]
        tool_messages = [m for m in srv.chat_bodies[1]["messages"] if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in tool_messages] == ["call_a", "call_b"]


def test_an_sse_error_field_shows_its_message(wisp_home: Path, tmp_path: Path) -> None:
    """Older llama.cpp servers send a failure as ``error:``, not ``data:``. This one is a refusal for
    size without a count: it is fitted again twice, and refused each time, the turn ends with its words."""
    line = raw('error: {"code": 400, "message": "the request exceeds the available context size, try increasing it",'
               ' "type": "invalid_request_error"}')
    with FakeOpenAI([fault.disconnect(line, clean=True) for _ in range(3)]) as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake", "model.timeout_s": 5})
        r = wisp("ask", "hello", cwd=tmp_path)
    assert r.returncode == 3
    assert "the request exceeds the available context size" in r.stderr and "Traceback" not in r.stderr


def test_a_prompts_control_characters_never_reach_the_listing(ollama_home, tmp_path: Path) -> None:
    """A new user's prompt with a NUL and a terminal-title escape: `wisp conversations` piped on the raw
    escape, and `--json` cut the preview at the NUL."""
    home, srv = ollama_home
    r = subprocess.run([WISP, "ask", "-"], input=b"hi \x00 there \x1b]0;TITLE\x07 say ok\n", capture_output=True,
                       cwd=tmp_path, env=os.environ.copy(), timeout=60)
    assert r.returncode == 0, r.stderr
    [conv] = json.loads(wisp("conversations", "--json").stdout)["conversations"]
    assert conv["last_prompt"] == "hi \\x00 there \\x1b]0;TITLE\\x07 say ok" == conv["title"]
    table = wisp("conversations").stdout  # not a terminal: a pipe
    assert "\x1b" not in table and "\x00" not in table and "there" in table

