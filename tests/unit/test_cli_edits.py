"""`wisp ask` and the model's edits, as a real process against the fake Ollama on 127.0.0.1: no edit
without --allow-edits (the model and the person are told, the diff it asked for is printed), each diff
printed with it, and /undo headless after --continue and --resume."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.edits import audit_events, edit_turn, told
from tests.unit.test_cli import wisp

APP = "def answer():\n    return 41\n"
CHANGE = {"path": "app.py", "search": "return 41", "replace": "return 42"}


def test_without_allow_edits_nothing_is_edited_and_both_are_told(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "app.py").write_text(APP)
    srv.push(*edit_turn(CHANGE, "I could not change it."))
    r = wisp("ask", "--tool", "edit_file", "make it 42", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "app.py").read_text() == APP
    assert r.stdout.endswith("I could not change it.\n")
    assert ("wisp: not edited, edits need approval: app.py (allow them with wisp ask --allow-edits, or wisp config "
            "set tools.edit_file.allow on); the edit it asked for:\n--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n"
            " def answer():\n-    return 41\n+    return 42\n") in r.stderr
    assert told(srv.chat_bodies[1])[0].startswith("The edit of app.py was not made: edits need the person's approval")
    assert [e["payload"]["choice"] for e in audit_events(home, "approval")] == ["needs_approval"]


def test_allow_edits_makes_them_and_prints_each_diff(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "app.py").write_text(APP)
    srv.push(*edit_turn(CHANGE, "It returns 42 now."))
    r = wisp("ask", "--allow-edits", "--tool", "edit_file", "make it 42", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "app.py").read_text() == APP.replace("41", "42")
    assert '[edit_file "app.py"]\n' in r.stderr
    assert ("wisp: edited app.py (entry 4; /undo takes it back):\n--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n"
            " def answer():\n-    return 41\n+    return 42\n") in r.stderr
    assert r.stdout.endswith("It returns 42 now.\n")
    assert [(e["payload"]["choice"], e["payload"]["source"]) for e in audit_events(home, "approval")] == [
        ("allow_list", "flag")]
    # the flag is for this one wisp ask: the next one asks again, and no one can answer
    srv.push(*edit_turn({"path": "app.py", "search": "return 42", "replace": "return 43"}, "No."))
    again = wisp("ask", "--continue", "again", cwd=tmp_path)
    assert again.returncode == 0 and (tmp_path / "app.py").read_text() == APP.replace("41", "42")


def test_continue_then_undo_puts_the_file_back_headless(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "app.py").write_text(APP)
    srv.push(*edit_turn(CHANGE))
    assert wisp("ask", "--allow-edits", "--tool", "edit_file", "make it 42", cwd=tmp_path).returncode == 0
    r = wisp("ask", "--continue", "/undo", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Undid turn 1's 1 edit: put back app.py.")
    assert (tmp_path / "app.py").read_text() == APP
    assert len(srv.chat_bodies) == 2  # the undo cost the model nothing
    again = wisp("ask", "--continue", "/undo", "--json", cwd=tmp_path)
    assert again.returncode == 2
    line = json.loads(again.stdout)
    assert line["error"] and line["text"].startswith("No edit of this conversation is left to undo")
    assert [e["payload"]["files"] for e in audit_events(home, "edit.undone")] == [["app.py"]]


def test_resume_then_undo_takes_that_conversations_edits_only(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "b.txt").write_text("bee\n")
    srv.push(*edit_turn(CHANGE), *edit_turn({"path": "b.txt", "search": "bee", "replace": "wasp"}, call_id="c2"))
    assert wisp("ask", "--allow-edits", "--tool", "edit_file", "make it 42", cwd=tmp_path).returncode == 0
    assert wisp("ask", "--allow-edits", "--tool", "edit_file", "a new conversation", cwd=tmp_path).returncode == 0
    ids = sorted(c["id"] for c in json.loads(wisp("conversations", "--json").stdout)["conversations"])
    (tmp_path / "app.py").write_text(APP.replace("41", "42") + "# the person's line\n")
    refused = wisp("ask", "--resume", str(ids[0]), "/undo", cwd=tmp_path)
    assert refused.returncode == 2 and "Nothing was undone: app.py: its content changed since turn 1's edit" \
        in refused.stderr and "/undo diff 1" in refused.stderr
    diff = wisp("ask", "--resume", str(ids[0]), "/undo diff", cwd=tmp_path)
    assert diff.returncode == 0 and "+# the person's line" in diff.stdout
    (tmp_path / "app.py").write_text(APP.replace("41", "42"))  # the person takes their line out again
    r = wisp("ask", "--resume", str(ids[0]), "/undo", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "app.py").read_text() == APP and (tmp_path / "b.txt").read_text() == "wasp\n"
