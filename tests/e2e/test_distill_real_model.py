"""The fact distiller on a real model: SmolLM2-135M through the real `wisp ask` (issue 17, "The model's own bookkeeping").

With ``context.distill`` on, a turn that states "we decided the CSV export uses
semicolons" makes one side call after the turn; what the model proposed is
shown as the model's facts (``fact_changed`` events, and the facts layer of
``wisp inspect context --json``), or the test prints that it proposed
nothing: a 135M model may. Either way the turn completes, and the side
call's cost (tokens, seconds) is printed. It uses the session's shared
embedded server (``embedded_home``), with replies capped, to stay short.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.real_model
WISP = str(Path(sys.executable).parent / "wisp")
SUBJECTS = {"decision", "preference", "entity", "task"}


def wisp(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    r = subprocess.run([WISP, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=os.environ.copy())
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def test_the_distiller_proposes_a_decision_stated_in_passing_or_says_it_proposed_none(
        embedded_home: Path, tmp_path: Path) -> None:
    wisp("config", "set", "context.distill", "on", cwd=tmp_path)
    wisp("config", "set", "model.max_tokens", "48", cwd=tmp_path)
    prompt = ("I'm tidying up the reports module today. By the way, we decided the CSV export uses semicolons. "
              "Which file should I look at first? One sentence.")
    r = wisp("ask", prompt, "--tool", "read_file", "--json", cwd=tmp_path)
    events = [json.loads(line) for line in r.stdout.splitlines()]

    # the turn completes, whatever the distiller did
    ended = [e for e in events if e["event"] == "turn_ended"]
    assert ended and ended[-1]["state"] in ("done", "cut"), events[-3:]
    assert not [e for e in events if e["event"] == "error"], [e for e in events if e["event"] == "error"]

    # the prompt states a decision, so the distiller made its one side call, and its cost is shown
    costs = [e for e in events if e["event"] == "side_call_cost" and e["kind"] == "distiller"]
    assert len(costs) == 1 and costs[0]["calls"] == 1, costs
    cost = costs[0]
    assert cost["tokens"] > 0 and cost["seconds"] > 0
    print(f"\ndistiller cost on SmolLM2: {cost['calls']} call, about {cost['tokens']} tokens, "
          f"{cost['seconds']:.2f} s")

    proposed = [e for e in events if e["event"] == "fact_changed" and e["source"] == "model"]
    report = json.loads(wisp("inspect", "context", "--json", cwd=tmp_path).stdout)
    # the facts layer rides last in the request (where the next prompt begins); the whole request is read
    system = "\n".join(str(m.get("content") or "") for m in report["request"]["messages"])
    if not proposed:
        print("the model proposed nothing for: we decided the CSV export uses semicolons")
        assert "inferred" not in system  # and the facts layer holds no proposal of its
        return
    latest = {(f["subject"], f["name"]): f for f in proposed}  # a later proposal of the same name replaced it
    for fact in proposed:
        print(f"proposed: {fact['subject']} {fact['name']} = {fact['value']} ({fact['fact']})")
        assert fact["proposal"] is True and fact["subject"] in SUBJECTS and fact["value"].strip()
        if fact["subject"] != "task" and latest[(fact["subject"], fact["name"])] is fact:  # the task has its layer
            # in the next request's facts layer, as the model's proposal, method inferred, from the prompt's entry
            line = next((ln for ln in system.splitlines() if f"; {fact['fact']}]" in ln), None)
            assert line is not None and "[model, inferred, turn 1" in line and "a proposal" in line, system
    print(f"semicolons in a proposal: {any('semicolon' in f['value'].lower() for f in proposed)}")
