"""`wisp eval` on a real model: the embedded SmolLM2-135M (issue "wisp eval", "Tests and what this must show").

`wisp eval --quick --runs 1 --json` completes every scenario with the memory
tool off and on, prints the table and keeps the results. A model this small
scores low; only that the scores are computed is checked. --quick keeps it
within a few minutes on two cores (short variants, replies capped).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wisp.core.eval import builtin_scenarios

pytestmark = pytest.mark.real_model
WISP = str(Path(sys.executable).parent / "wisp")


def test_eval_runs_every_scenario_on_the_embedded_model(embedded_home: Path, tmp_path: Path) -> None:
    r = subprocess.run([WISP, "eval", "--quick", "--runs", "1", "--json"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=1500, env=os.environ.copy())
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(r.stdout)
    assert "SmolLM2" in data["model"] and "embedded" in data["endpoint"]
    assert data["quick"] is True and data["runs"] == 1
    names = [s.name for s in builtin_scenarios()]
    assert [s["name"] for s in data["scenarios"]] == names
    for scenario, spec in zip(data["scenarios"], builtin_scenarios()):
        for memory in ("off", "on"):
            cell = scenario[memory]
            assert 0.0 <= cell["mean"] <= 10.0 and cell["spread"] == 0.0, (scenario["name"], memory)
            run = cell["runs"][0]
            assert len(run["checks"]) == len(spec.quick().questions)
            assert run["agent_requests"] >= len(spec.quick().turns)
            assert cell["tokens_per_request"] > 0
    # the table went to stderr, after the progress lines
    assert "| scenario | memory off: score | tokens/request | model calls | memory on: score" in r.stderr
    assert "wisp eval: across · memory on · run 1/1 · done:" in r.stderr
    # it used the person's one shared embedded server (issue "Real models, real work"), which stays for
    # the next wisp until it has been idle for model.embedded_idle_s
    history = subprocess.run([WISP, "eval", "history", "--json"], capture_output=True, text=True,
                             env=os.environ.copy())
    assert json.loads(history.stdout)["total"] == 1
