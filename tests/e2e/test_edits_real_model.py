"""The model's edits through the real ``wisp`` command on the embedded SmolLM2 (issue "Edits the
person can see and undo"): the tool reaches the model in the prompted protocol (its section is in
the system message the real server is sent), and an edit scripted at the HTTP boundary (a 135M model
does not call tools on cue: :class:`tests.support.scripted_reads.ScriptedReads`) is made by
``wisp ask --allow-edits``, the real model answers after its result, and ``wisp ask --continue /undo``
puts the file back."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_compaction_real_model import _shared_server
from tests.support.home import require_local, write_config
from tests.support.scripted_reads import ScriptedReads

pytestmark = pytest.mark.real_model

WISP = str(Path(sys.executable).parent / "wisp")
APP = "def answer():\n    return 41\n"


def test_a_scripted_edit_reaches_smollm2_applies_and_undoes_through_the_real_wisp(shared_embedded: Path,
                                                                                 tmp_path: Path) -> None:
    require_local()
    home, work = tmp_path / "wisp-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "app.py").write_text(APP)
    env = {k: v for k, v in os.environ.items() if k != "WISP_WORKSPACE"}
    env.update(WISP_HOME=str(home), HOME=str(tmp_path / "user"), XDG_DATA_HOME=str(tmp_path / "user" / "data"))

    def wisp(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([WISP, *args], capture_output=True, text=True, cwd=work, env=env, timeout=900,
                              input="")

    base_url, model, n_ctx = asyncio.run(_shared_server(shared_embedded))
    with ScriptedReads(base_url) as proxy:
        write_config(home, {"model.provider": "openai", "model.endpoint": proxy.base_url, "model.name": model,
                            "model.context_window": n_ctx, "model.tool_mode": "prompted", "model.max_tokens": 48,
                            "model.timeout_s": 600, "memory.enabled": False})
        prompt = "In app.py, make answer() return 42."
        proxy.calls[prompt] = ("edit_file", {"path": "app.py", "search": "return 41", "replace": "return 42"})
        r = wisp("ask", "--tool", "read_file", "--tool", "edit_file", "--allow-edits", "--json", prompt)
        assert r.returncode == 0, r.stderr[-3000:]
        events = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
        (result,) = [e for e in events if e["event"] == "tool_result"]
        assert result["ok"] and result["content"].startswith("edited app.py: 1 replacement (line 2)")
        assert (work / "app.py").read_text() == APP.replace("41", "42")
        assert "-    return 41\n+    return 42" in result["meta"]["diff"]  # --json: the diff is in the event
        # the real model was given the tool in the prompted protocol, and answered after the result
        (after,) = proxy.forwarded
        assert after.status == 200 and after.completion_tokens
        assert "## edit_file\nChange a file: search is exact text from the file (once)" in after.system
        assert "[result of edit_file]\nedited app.py" in after.last
        assert [e for e in events if e["event"] == "turn_ended"][-1]["state"] in ("done", "cut")
        undo = wisp("ask", "--continue", "/undo")
        assert undo.returncode == 0, undo.stderr
        assert undo.stdout.startswith("Undid turn 1's 1 edit: put back app.py.")
        assert (work / "app.py").read_text() == APP
