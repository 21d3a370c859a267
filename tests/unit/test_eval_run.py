"""`wisp eval` against the fake endpoint with a scripted model (issue "wisp eval", "Tests and what this must show").

A model that uses its tools perfectly scores 10 of 10 on every scenario with
memory on; one that never calls tools scores less wherever a scenario needs
a recall, so the scoring can fail. Each run is isolated from the person's
home, and the results are kept.
"""

from __future__ import annotations

import io
import json
import re
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from wisp.core.cli import main
from wisp.core.config import Config
from wisp.core.database import open_store
from wisp.core.eval import EvalOptions, builtin_scenario, builtin_scenarios, run_eval
from wisp.core.eval.cli import ProgressPrinter
from wisp.core.eval.runner import QUICK_MAX_TOKENS, Progress
from tests.support.fakes import FakeOllama
from tests.support.fakes.scripted import ScriptedModel
from tests.support.home import write_config


#: The reference document's scenarios; others may be added as data files after them.
REFERENCE = ["sustained", "recalling", "noting", "routing", "across"]


@pytest.fixture
def scratch_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the runs make their temporary homes, to see that they are removed."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def serve(home: Path, model: ScriptedModel) -> FakeOllama:
    srv = FakeOllama(responder=model).start()
    write_config(home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                        "model.name": "wisp-fake:latest", "model.timeout_s": 10,
                        # the person's own settings, which a run must not take
                        "tools.enabled": ["read_file"], "context.recent_turns": 5})
    return srv


@pytest.fixture
def perfect(wisp_home: Path) -> Iterator[tuple[Path, FakeOllama, ScriptedModel]]:
    model = ScriptedModel(builtin_scenarios(), uses_tools=True)
    srv = serve(wisp_home, model)
    yield wisp_home, srv, model
    srv.stop()


@pytest.fixture
def toolless(wisp_home: Path) -> Iterator[tuple[Path, FakeOllama, ScriptedModel]]:
    model = ScriptedModel(builtin_scenarios(), uses_tools=False)
    srv = serve(wisp_home, model)
    yield wisp_home, srv, model
    srv.stop()


def failed(report, scenario: str, memory: bool) -> list[str]:
    """The kinds and answers of the questions that failed (first run)."""
    cells = next(c for n, _, c in report.results if n == scenario)
    return [f"{c.kind}:{c.expected}" for c in cells[memory].runs[0].checks if not c.passed]


async def test_a_model_that_uses_its_tools_perfectly_scores_ten_with_memory_on(perfect, scratch_tmp) -> None:
    home, srv, model = perfect
    report = await run_eval(EvalOptions(builtin_scenarios(), runs=1, memory=(True,)), Config.load())
    scores = {name: cells[True].mean for name, _, cells in report.results}
    assert list(scores)[:5] == REFERENCE
    # every built-in scenario, including any added later, can be solved by using the tools well
    assert set(scores.values()) == {10.0}, {n: failed(report, n, True) for n in scores}
    for name, _, cells in report.results:
        run = cells[True].runs[0]
        if name in REFERENCE and name != "noting":
            assert run.agent_requests > len(builtin_scenario(name).turns)  # it called tools
        assert cells[True].tokens_per_request and cells[True].tokens_per_request > 100
        assert run.model_calls == run.agent_requests + run.side_calls
    across = next(c for n, _, c in report.results if n == "across")[True].runs[0]
    assert across.refine["outcome"] == "completed" and len(across.refine["memories"]) == 5
    noting = next(c for n, _, c in report.results if n == "noting")[True].runs[0]
    assert noting.side_calls >= 1  # the window is small: a running summary was written
    # the decision stated in passing had left the window, and the person's statements beside the summary
    # answered it: no recall was needed
    passing = next(c for n, _, c in report.results if n == "stated-in-passing")[True].runs[0]
    assert passing.agent_requests == len(builtin_scenario("stated-in-passing").turns) and passing.side_calls >= 1
    # what it was offered: the scenario's tools and memory, not the person's tools.enabled
    offered = {tuple(t["function"]["name"] for t in b.get("tools") or []) for b in srv.chat_bodies}
    assert ("system_info", "run_command", "memory") in offered and ("read_file",) not in offered
    assert list(scratch_tmp.iterdir()) == []  # every run's home and working directory are gone


async def test_a_model_that_never_calls_tools_scores_less_where_a_recall_is_needed(toolless) -> None:
    report = await run_eval(EvalOptions(builtin_scenarios(), runs=1, memory=(False, True)), Config.load())
    for memory in (False, True):
        assert failed(report, "sustained", memory) == ["extraction:7312", "extraction:test_rejects_expired_token"]
        assert failed(report, "recalling", memory) == ["extraction:2a843bdb5d5e",
                                                       "extraction:dist/harbour-1.tar.gz"]
        # the person's statements ride beside the running summary: the port, the name and the date stated
        # in passing are in every request of this 1,024-token window, even for a model that never calls a
        # tool (the draft paragraphs the person pasted in quotes to edit are not their statements)
        assert failed(report, "noting", memory) == []
        assert len(failed(report, "routing", memory)) == 8
        assert failed(report, "across", memory) == ["extraction:Copper Lantern", "temporal:/(?i)structlog/",
                                                    "knowledge-update:SQLite"]
        # and the decision stated first in passing: the quoted note, handbook and help text took no room
        assert failed(report, "stated-in-passing", memory) == []
    scores = {name: cells[True].mean for name, _, cells in report.results}
    assert scores["routing"] == 0.0 and scores["across"] == 2.5 and scores["recalling"] == 0.0
    assert all(scores[name] < 10.0 for name in REFERENCE if name != "noting") and scores["noting"] == 10.0


async def test_with_the_fact_distiller_a_decision_stated_in_passing_is_in_every_request(toolless) -> None:
    """--set context.distill=on (issue "The model's own bookkeeping"): the
    decision becomes the model's fact, so even a model that never calls a
    tool answers it after its turn left the window. (The --quick variant is
    sized for a real model's replies and token counts; with this model's
    short replies its first turn stays in view.)"""
    home, srv, model = toolless
    scenario = builtin_scenario("stated-in-passing")
    report = await run_eval(EvalOptions([scenario], runs=1, memory=(False, True),
                                        settings={"context.distill": True}), Config.load())
    assert report.settings == {"context.distill": True} and report.to_dict()["settings"] == {"context.distill": True}
    cells = report.results[0][2]
    for memory in (False, True):
        assert cells[memory].mean == 10.0, failed(report, "stated-in-passing", memory)
        run = cells[memory].runs[0]
        assert run.side_calls > 4  # a distiller call for each turn that stated a decision, and the summary
    from wisp.core.context.composer import context_part, person_part

    asked = [b["messages"] for b in srv.chat_bodies
             if b.get("tools") and person_part(b["messages"][-1]["content"]) == "Which separator does the CSV export use?"]
    last = asked[-1]  # the question's request (memory on)
    facts = context_part(last[-1]["content"])  # the facts end the question's message
    assert "semicolons" not in "".join(
        str(m.get("content")) for m in last[1:-1])  # the first turn is out of the window…
    assert re.search(r'^- decision csv export semicolons = "the CSV export uses semicolons" \[model, inferred, turn 1, '
                     r"entry 1; a proposal; c\d+\]$", facts, re.M)  # …its decision is the model's fact
    distilled = [b for b in srv.chat_bodies if not b.get("tools")  # its rules first in the prompt, after the chat's
                 and str(b["messages"][-1]["content"]).startswith("You read one turn of a conversation")]
    assert len(distilled) == 2 * 4  # memory off and on; the turns that stated no decision made no call


def test_the_command_prints_json_and_the_table_and_keeps_the_results(perfect, scratch_tmp, capsys) -> None:
    home, srv, model = perfect
    code = main(["eval", "recalling", "routing", "--runs", "2", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert [s["name"] for s in data["scenarios"]] == ["recalling", "routing"]
    assert data["runs"] == 2 and data["model"] == "wisp-fake:latest" and data["memory"] == ["off", "on"]
    on = data["scenarios"][0]["on"]
    assert on["scores"] == [10.0, 10.0] and on["mean"] == 10.0 and on["spread"] == 0.0
    assert len(on["runs"]) == 2 and on["runs"][0]["checks"][0]["passed"] is True
    assert on["model_calls"] > 0 and on["tokens_per_request"] > 0
    # the progress, then the table, on stderr
    assert "wisp eval: recalling · memory on · run 2/2 · turn 3/6" in err
    assert "| recalling | " in err and "| routing | " in err
    # the person's home holds the history, and none of the runs' conversations
    data_dir = Config.load().db_path.parent
    assert sorted(p.name for p in data_dir.iterdir()) == ["eval-history.jsonl"]
    assert list(scratch_tmp.iterdir()) == []

    assert main(["eval", "history", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["total"] == 1 and listing["skipped"] == 0
    past = listing["evaluations"][0]
    assert past["model"] == "wisp-fake:latest" and "ollama http://127.0.0.1" in past["endpoint"]
    assert past["scenarios"][1]["name"] == "routing" and past["scenarios"][1]["on"]["mean"] == 10.0
    assert main(["eval", "history"]) == 0
    text = capsys.readouterr().out
    assert "wisp-fake:latest" in text and "recalling 0.0/10.0, routing 10.0/10.0" in text


async def test_a_run_never_touches_the_persons_conversations(perfect) -> None:
    home, srv, model = perfect
    config = Config.load()
    async with await open_store(config.db_path) as store:
        conv = await store.create_conversation(str(home), model="mine")
    await run_eval(EvalOptions([builtin_scenario("across")], runs=1, memory=(True,)), config)
    async with await open_store(config.db_path) as store:
        rows = await store.list_conversations(limit=10)
        assert [r.id for r in rows] == [conv.id]
        async with store.db.execute("SELECT COUNT(*) FROM episode_exchanges") as cur:
            assert (await cur.fetchone())[0] == 0


async def test_the_quick_variants_score_ten_too_for_a_perfect_model(perfect) -> None:
    report = await run_eval(EvalOptions(builtin_scenarios(), runs=1, memory=(True,), quick=True), Config.load())
    assert {c[True].mean for _, _, c in report.results} == {10.0}
    across = next(c for n, _, c in report.results if n == "across")[True].runs[0]
    assert len(across.refine["memories"]) == 2  # one earlier conversation of two exchanges


async def test_earlier_conversations_are_found_whatever_wisp_workspace_says(perfect, monkeypatch) -> None:
    monkeypatch.setenv("WISP_WORKSPACE", "my-project")  # the memory verbs' default filter
    report = await run_eval(EvalOptions([builtin_scenario("across")], runs=1, memory=(True,), quick=True),
                            Config.load())
    assert report.results[0][2][True].mean == 10.0


def test_quick_caps_replies_and_keeps_fewer_turns(perfect, capsys) -> None:
    home, srv, model = perfect
    assert main(["eval", "routing", "--quick", "--runs", "1", "--memory", "on", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["quick"] is True and data["memory"] == ["on"] and "off" not in data["scenarios"][0]
    assert len(data["scenarios"][0]["on"]["runs"][0]["checks"]) == 2
    agent = [b for b in srv.chat_bodies if b.get("tools")]
    assert agent and all(b["options"]["num_predict"] == QUICK_MAX_TOKENS for b in agent)


def test_model_max_tokens_caps_every_reply_of_a_session(perfect, capsys) -> None:
    home, srv, model = perfect
    assert main(["config", "set", "model.max_tokens", "33"]) == 0
    assert main(["ask", "hello"]) == 0
    assert srv.chat_bodies[-1]["options"]["num_predict"] == 33


def test_set_applies_a_key_to_every_run_and_the_results_keep_it(perfect, capsys) -> None:
    home, srv, model = perfect
    argv = ["eval", "stated-in-passing", "--runs", "1", "--memory", "off", "--json"]
    assert main(argv + ["--set", "context.distill=off"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert main(argv + ["--set", "context.distill=on", "--set", "context.distill_tokens=512"]) == 0
    on, err = capsys.readouterr()
    on = json.loads(on)
    assert off["settings"] == {"context.distill": False}
    assert on["settings"] == {"context.distill": True, "context.distill_tokens": 512}
    # without a tool, the statements kept beside the summary answer both decisions either way; the setting
    # shows in the distiller's side calls
    assert off["scenarios"][0]["off"]["mean"] == 10.0 and on["scenarios"][0]["off"]["mean"] == 10.0
    assert on["scenarios"][0]["off"]["model_calls"] > off["scenarios"][0]["off"]["model_calls"]
    assert "; set over every scenario: context.distill=true, context.distill_tokens=512\n" in err
    assert main(["eval", "history", "--json"]) == 0
    kept = json.loads(capsys.readouterr().out)["evaluations"]
    assert [e["settings"] for e in kept] == [on["settings"], off["settings"]]
    assert main(["eval", "history"]) == 0
    assert "set context.distill=true, context.distill_tokens=512" in capsys.readouterr().out


def test_a_scenario_file_of_ones_own(perfect, tmp_path, capsys) -> None:
    home, srv, model = perfect
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"format": 1, "name": "mine", "files": {"a.txt": "the code is 4411\n"},
                                "turns": [{"prompt": "Read `a.txt`."},
                                          {"prompt": "What was the code in a.txt?", "answer": "4411"}]}))
    assert main(["eval", "--file", str(path), "--runs", "1", "--memory", "off"]) == 0
    out = capsys.readouterr().out
    assert "| mine | " in out and "memory on" not in out


@pytest.mark.parametrize("argv, words", [
    (["eval", "nope"], "no scenario 'nope'"),
    (["eval", "--runs", "0"], "--runs must be from 1 to 100"),
    (["eval", "history", "routing"], "takes no scenario names"),
    (["eval", "--set", "context.distill"], "--set takes KEY=VALUE, such as --set context.distill=on"),
    (["eval", "--set", "context.memory=on"], "use --memory on, off or both"),
    (["eval", "--set", "context.distill=perhaps"], "--set: context.distill expects a boolean"),
])
def test_bad_usage_exits_2_with_one_line(wisp_home, capsys, argv, words) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_a_bad_scenario_file_exits_2(wisp_home, tmp_path, capsys) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"format": 1, "name": "bad", "turns": [{"prompt": "x", "answer": {"regex": "("}}]}')
    assert main(["eval", "--file", str(path)]) == 2
    assert "turns[0].answer.regex: not a regular expression" in capsys.readouterr().err


def test_no_endpoint_exits_3_and_keeps_nothing(wisp_home, capsys) -> None:
    write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": "http://127.0.0.1:9",
                             "model.timeout_s": 2})
    assert main(["eval", "routing", "--runs", "1"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("wisp: error: no model endpoint:") and err.count("\n") == 1
    assert not (Config.load().db_path.parent / "eval-history.jsonl").exists()


def test_list_shows_the_scenarios(wisp_home, capsys) -> None:
    assert main(["eval", "--list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in data["scenarios"]][:5] == REFERENCE
    assert data["scenarios"][0]["turns"] == 40
    assert main(["eval", "--list"]) == 0
    out = capsys.readouterr().out
    assert "sustained: A 40-turn session" in out and "README.md" in out


def test_history_with_nothing_yet(wisp_home, capsys) -> None:
    assert main(["eval", "history"]) == 0
    assert "No evaluations yet" in capsys.readouterr().out


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_one_line_rewritten_on_a_terminal_and_a_line_a_step_elsewhere() -> None:
    steps = [Progress("noting", True, 1, 3, 1, 10), Progress("noting", True, 1, 3, 6, 10),
             Progress("noting", True, 1, 3, 10, 10, "done", 7.5)]
    tty, pipe = Terminal(), io.StringIO()
    printer = ProgressPrinter(tty)
    for p in steps:
        printer(p)
        ProgressPrinter(pipe)(p)
    assert tty.getvalue().count("\n") == 1 and tty.getvalue().count("\r") == 3
    assert "turn 6/10 [##########..........]" in tty.getvalue()
    lines = pipe.getvalue().splitlines()
    assert lines == ["wisp eval: noting · memory on · run 1/3 · turn 1/10 [....................]",
                     "wisp eval: noting · memory on · run 1/3 · turn 6/10 [##########..........]",
                     "wisp eval: noting · memory on · run 1/3 · done: 7.5 of 10"]
