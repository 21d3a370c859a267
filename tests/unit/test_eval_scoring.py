"""Scoring with no model judge, and the results store (issue "wisp eval")."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wisp.core.eval.history import append_record, parse_record, read_history
from wisp.core.eval.report import format_history, format_score, format_table
from wisp.core.eval.runner import Cell, EvalReport, RunResult
from wisp.core.eval.scenario import parse_scenario
from wisp.core.eval.scoring import check_question, mean_and_spread, run_score


def question(**fields: object):
    turn = {"prompt": "q", **fields}
    return parse_scenario({"format": 1, "name": "t", "turns": [turn]}).turns[0].question


@pytest.mark.parametrize("answer, reply, passed", [
    ("7312", "The port is 7312.", True),
    ("7312", "The port is **7312**", True),
    ("7312", "The port is 73120.", False),
    ("7312", "Port: 17312", False),
    ("Ilse Varga", "It goes to ilse   varga for sign-off.", True),
    ("Ilse Varga", "It goes to Ilse.", False),
    ("dist/harbour-1.tar.gz", "It wrote `dist/harbour-1.tar.gz`.", True),
    ("dist/harbour-1.tar.gz", "It wrote dist/harbour-2.tar.gz.", False),
    ({"regex": "(?i)structlog"}, "We chose StructLog.", True),
    ({"regex": "structlog"}, "We chose StructLog.", False),
    (["SQLite", "sqlite3"], "sqlite3, in the end", True),
    (["SQLite", {"regex": "lite$"}], "Postgres", False),
])
def test_exact_answers(answer: object, reply: str, passed: bool) -> None:
    check = check_question(0, "q", question(answer=answer), reply, [])
    assert check.passed is passed
    assert (check.matched is not None) is passed
    assert check.why == ("" if passed else "the reply does not give the answer")


def test_routing_counts_a_memory_call_as_wrong_even_with_system_info() -> None:
    q = question(calls={"require": ["system_info"], "forbid": ["memory"]})
    good = check_question(0, "q", q, "21 GiB", ["system_info"])
    wrong = check_question(0, "q", q, "21 GiB", ["memory", "system_info"])
    neither = check_question(0, "q", q, "I don't know", [])
    assert good.passed and not good.wrong
    assert not wrong.passed and wrong.wrong == ["memory"] and wrong.why == "called memory"
    assert not neither.passed and neither.why == "did not call system_info"


def test_a_turn_that_failed_fails_its_question_even_with_the_answer() -> None:
    check = check_question(0, "q", question(answer="4"), "4", [], error="timeout: too slow")
    assert not check.passed and "the turn failed" in check.why


def test_weights_share_the_ten_points() -> None:
    heavy, light = question(answer="a", weight=3), question(answer="b")
    checks = [check_question(0, "q", heavy, "a", []), check_question(1, "q", light, "nope", [])]
    assert run_score(checks) == pytest.approx(7.5)
    assert run_score([]) == 0.0


def test_mean_and_spread() -> None:
    assert mean_and_spread([]) == (None, None)
    assert mean_and_spread([5.0]) == (5.0, 0.0)
    mean, spread = mean_and_spread([4.0, 5.0, 6.0])
    assert mean == pytest.approx(5.0) and spread == pytest.approx(1.0)
    assert format_score(*mean_and_spread([10.0, 10.0, 7.0])) == "9.0 ± 1.7"
    assert format_score(None, None) == "–"


def report(*scores: tuple[str, list[float], list[float]]) -> EvalReport:
    rep = EvalReport("2025-06-12T10:00:00+00:00", "qwen3:8b", "ollama http://127.0.0.1:11434", 3, False,
                     (False, True))
    for name, off, on in scores:
        cells = {}
        for memory, values in ((False, off), (True, on)):
            cell = Cell(name, memory)
            for k, s in enumerate(values, 1):
                cell.runs.append(RunResult(name, memory, k, score=s, prompt_tokens=[1000, 3000], side_calls=1))
            cells[memory] = cell
        rep.results.append((name, name.title(), cells))
    return rep


def test_the_table_has_a_row_per_scenario_and_a_column_each_for_memory_off_and_on() -> None:
    text = format_table(report(("sustained", [8.0, 9.0, 10.0], [7.0, 7.0, 7.0]), ("routing", [10.0], [5.0])))
    lines = text.splitlines()
    assert lines[0].startswith("wisp eval: qwen3:8b at ollama http://127.0.0.1:11434; 3 runs each")
    header = next(l for l in lines if l.startswith("| scenario"))
    assert header.count("memory off") == 1 and header.count("memory on") == 1
    assert "| sustained | 9.0 ± 1.0 | 2,000 | 3.0 | 7.0 ± 0.0 | 2,000 | 3.0 |" in lines
    assert "| routing | 10.0 ± 0.0 | 2,000 | 3.0 | 5.0 ± 0.0 | 2,000 | 3.0 |" in lines


# --- the results store ----------------------------------------------------------------------


def test_history_is_appended_privately_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "data" / "eval-history.jsonl"
    first = report(("recalling", [2.0], [4.0]))
    second = report(("recalling", [3.0], [9.0]))
    second.model = "gemma3:12b"
    append_record(path, first.to_dict(detail=False))
    append_record(path, second.to_dict(detail=False))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    records, skipped = read_history(path)
    assert skipped == 0
    assert [r["model"] for r in records] == ["qwen3:8b", "gemma3:12b"]
    assert records[1]["scenarios"][0]["on"]["mean"] == 9.0
    text = format_history(records)
    assert text.index("gemma3:12b") < text.index("qwen3:8b")  # newest first
    assert "recalling 3.0/9.0" in text


def test_history_skips_lines_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "eval-history.jsonl"
    good = json.dumps({"format": 1, **report(("noting", [1.0], [2.0])).to_dict(detail=False)})
    path.write_bytes(b"\n".join([b"{not json", good.encode(), b"[1,2]", b'{"format": 9}', b"\xff\xfe",
                                 good[: len(good) // 2].encode()]) + b"\n")
    records, skipped = read_history(path)
    assert len(records) == 1 and skipped == 5
    assert read_history(tmp_path / "none.jsonl") == ([], 0)


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(
                        st.sampled_from(["format", "date", "model", "scenarios", "name", "on", "off", "mean",
                                         "runs", "scores", "x"]), c, max_size=5), max_leaves=25))
def test_any_record_reads_or_is_skipped(obj: object) -> None:
    record = parse_record(obj)
    if record is not None:
        format_history([record])  # and it can be shown
        json.dumps(record, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_read_without_a_crash(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("h") / "eval-history.jsonl"
    path.write_bytes(data)
    records, skipped = read_history(path)
    assert skipped + len(records) <= data.count(b"\n") + 1


def test_the_readme_shows_a_table_of_the_current_shape() -> None:
    from tests.support.home import ROOT

    readme = (ROOT / "README.md").read_text().splitlines()
    at = readme.index("<!-- eval-table -->")
    shown = [line for line in readme[at + 1:at + 10] if line.startswith("|")]
    made = [line for line in format_table(report(("sustained", [1.0], [2.0]))).splitlines() if line.startswith("|")]
    assert shown[:2] == made[:2]
    assert [row.split(" | ")[0] for row in shown[2:7]] == ["| sustained", "| recalling", "| noting", "| routing",
                                                           "| across"]
