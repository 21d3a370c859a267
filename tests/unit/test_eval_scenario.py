"""The scenario format of `wisp eval` (issue "wisp eval", "Scenarios"): parsing, errors, dates, the built-ins."""

from __future__ import annotations

import copy
import fnmatch
import json
import tomllib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wisp.core.eval.scenario import (RESERVED_KEYS, ScenarioError, builtin_names, builtin_scenario,
                                     builtin_scenarios, load_scenario_file, parse_scenario, parse_when)
from tests.support.home import ROOT

SCENARIOS = ROOT / "core" / "eval" / "scenarios"

MINIMAL = {"format": 1, "name": "mine", "turns": [{"prompt": "What is 2+2?", "answer": "4"}]}


def doc(**changes: object) -> dict:
    d = copy.deepcopy(MINIMAL)
    d.update(changes)
    return d


def test_the_reference_scenarios_are_built_in_in_order() -> None:
    assert builtin_names()[:5] == ["sustained", "recalling", "noting", "routing", "across"]
    for s in builtin_scenarios():
        assert s.questions, s.name
        assert s.quick().questions, s.name
        assert len(s.quick().turns) <= len(s.turns)


def test_sustained_has_forty_turns_and_asks_about_its_first_ones() -> None:
    s = builtin_scenario("sustained")
    assert len(s.turns) == 40
    answers = [q.answer.shown for _, q in s.questions]
    assert answers == ["7312", "test_rejects_expired_token", "Redis"]
    # each answer appears in one place only: the config file, the test file, the person's prompt
    holders = {a: [p for p, text in s.files.items() if a in text] for a in answers}
    assert holders == {"7312": ["config/server.toml"], "test_rejects_expired_token": ["tests/test_tokens.py"],
                       "Redis": []}
    assert sum("Redis" in t.prompt for t in s.turns) == 1


def test_across_follows_longmemeval_question_kinds() -> None:
    s = builtin_scenario("across")
    assert len(s.earlier) == 3
    assert [q.kind for _, q in s.questions] == ["extraction", "temporal", "knowledge-update", "abstention"]
    abstain = s.questions[-1][1].answer
    for said in ("I don't know.", "I do not know what was decided.", "We never discussed a CI provider.",
                 "I couldn't find anything about that."):
        assert abstain.matches(said), said
    assert abstain.matches("We decided on GitHub Actions.") is None


def test_every_scenario_file_ships_as_package_data() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = meta["tool"]["setuptools"]["package-data"]["wisp.core.eval"]
    files = [p.relative_to(ROOT / "core" / "eval").as_posix() for p in SCENARIOS.iterdir()]
    assert "scenarios/README.md" in files
    for name in files:
        assert any(fnmatch.fnmatch(name, pat) for pat in patterns), name
    assert sorted(p.stem for p in SCENARIOS.glob("*.json")) == sorted(builtin_names())


def test_a_file_scenario_parses(tmp_path: Path) -> None:
    path = tmp_path / "my.json"
    path.write_text(json.dumps(doc(files={"a/b.txt": "hi"}, config={"model.context_window": 2048})))
    s = load_scenario_file(path)
    assert s.name == "mine" and s.files == {"a/b.txt": "hi"} and s.config == {"model.context_window": 2048}
    assert s.source == str(path)


@pytest.mark.parametrize("changes, words", [
    ({"format": 2}, "format"),
    ({"name": "Bad Name"}, "lowercase"),
    ({"name": "history"}, "command line"),
    ({"turns": []}, "non-empty list"),
    ({"turns": [{"prompt": "hi"}]}, "no turn is a question"),
    ({"turns": [{"prompt": "q", "answer": "a", "quick": False}]}, "keep one for --quick"),
    ({"turns": [{"prompt": "q", "answer": {"regex": "("}}]}, "not a regular expression"),
    ({"turns": [{"prompt": "q", "answer": 4}]}, "write a string"),
    ({"turns": [{"prompt": "q", "answer": "a", "weight": 0}]}, "above 0"),
    ({"turns": [{"prompt": "q", "calls": {"require": ["memory"], "forbid": ["memory"]}}]}, "both"),
    ({"turns": [{"prompt": "q", "answer": "a", "colour": "red"}]}, "unknown field 'colour'"),
    ({"turns": [{"prompt": "hi", "weight": 2}, {"prompt": "q", "answer": "a"}]}, "only a question"),
    ({"config": {"model.endpoint": "http://x:1"}}, "the run sets this key"),
    ({"config": {"context.memory": True}}, "the run sets this key"),
    ({"config": {"model.context_window": "big"}}, "model.context_window expects"),
    ({"config": {"no.such": 1}}, "unknown config key"),
    ({"files": {"../escape.txt": "x"}}, "relative path"),
    ({"files": {"/etc/passwd": "x"}}, "relative path"),
    ({"files": {"a": "x", "a/b": "y"}}, "cannot be a folder"),
    ({"earlier": [{"when": "next friday", "exchanges": [{"request": "r"}]}]}, "last WEEKDAY"),
    ({"earlier": [{"when": "today 25:00", "exchanges": [{"request": "r"}]}]}, "time of day"),
    ({"earlier": [{"when": "today", "exchanges": []}]}, "non-empty list"),
])
def test_bad_scenarios_get_one_line_saying_where_and_what(changes: dict, words: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc(**changes), "my.json")
    message = str(err.value)
    assert message.startswith("my.json"), message
    assert words in message, message
    assert "\n" not in message


def test_a_file_that_is_not_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"format": 1,\n  "name": }')
    with pytest.raises(ScenarioError, match=r"bad\.json: not JSON at line 2, column"):
        load_scenario_file(path)
    with pytest.raises(ScenarioError, match="cannot read it"):
        load_scenario_file(tmp_path / "missing.json")


def test_an_unknown_builtin_names_the_ones_there_are() -> None:
    with pytest.raises(ScenarioError, match="wisp has sustained, recalling"):
        builtin_scenario("nope")


def test_every_reserved_key_is_refused() -> None:
    for key in RESERVED_KEYS:
        with pytest.raises(ScenarioError, match="the run sets this key"):
            parse_scenario(doc(config={key: None}))


def test_quick_leaves_out_marked_turns_and_applies_its_config() -> None:
    s = parse_scenario(doc(config={"model.context_window": 4096, "context.reserve": 512},
                           quick={"config": {"model.context_window": 1024}},
                           turns=[{"prompt": "a", "quick": False}, "b", {"prompt": "q", "answer": "x"}]))
    q = s.quick()
    assert [t.prompt for t in q.turns] == ["b", "q"]
    assert builtin_scenario("across").quick().earlier == builtin_scenario("across").earlier[2:]
    assert q.config == {"model.context_window": 1024, "context.reserve": 512}


# --- dates of earlier conversations -------------------------------------------------

UTC = timezone.utc


@pytest.mark.parametrize("now, text, expected", [
    (datetime(2025, 6, 12, 9, 0, tzinfo=UTC), "last tuesday", datetime(2025, 6, 10, 10, 0, tzinfo=UTC)),  # a Thursday
    (datetime(2025, 6, 10, 9, 0, tzinfo=UTC), "last tuesday", datetime(2025, 6, 3, 10, 0, tzinfo=UTC)),  # on a Tuesday
    (datetime(2025, 6, 11, 9, 0, tzinfo=UTC), "last tuesday 16:30", datetime(2025, 6, 10, 16, 30, tzinfo=UTC)),
    (datetime(2025, 6, 12, 9, 0, tzinfo=UTC), "last Tuesday - 6d 10:00", datetime(2025, 6, 4, 10, 0, tzinfo=UTC)),
    (datetime(2025, 6, 12, 9, 0, tzinfo=UTC), "3 days ago at 08:05", datetime(2025, 6, 9, 8, 5, tzinfo=UTC)),
    (datetime(2025, 6, 12, 9, 0, tzinfo=UTC), "yesterday + 1d", datetime(2025, 6, 12, 10, 0, tzinfo=UTC)),
    (datetime(2025, 6, 12, 9, 0, tzinfo=UTC), "today 23:59", datetime(2025, 6, 12, 23, 59, tzinfo=UTC)),
])
def test_when_names_a_day_and_time(now: datetime, text: str, expected: datetime) -> None:
    assert parse_when(text, now) == expected


def test_the_across_dates_put_the_update_after_the_first_decision_and_tuesday_last() -> None:
    s = builtin_scenario("across")
    for day in range(7):  # whatever weekday it is today
        now = datetime(2025, 6, 9, 12, 0, tzinfo=UTC) + timedelta(days=day)
        first, update, tuesday = (parse_when(c.when, now) for c in s.earlier)
        assert first < update < tuesday < now
        assert tuesday.weekday() == 1 and (now - tuesday).days < 8
        assert len({first.weekday(), update.weekday(), tuesday.weekday()}) == 3


# --- any input: a ScenarioError or a scenario, never a crash --------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20)
field_values = {
    "format": st.sampled_from([1, 2, "1", True]),
    "name": st.sampled_from(["ok", "x-1", "", "Bad", "history", 3]),
    "turns": st.lists(st.one_of(st.text(max_size=10), st.fixed_dictionaries(
        {"prompt": st.text(max_size=10)},
        optional={"answer": json_values, "calls": json_values, "weight": json_values, "kind": json_values,
                  "quick": json_values})), max_size=4),
    "config": st.dictionaries(st.sampled_from(["model.context_window", "context.reserve", "tools.enabled",
                                               "model.endpoint", "x"]), json_values, max_size=3) | json_values,
    "files": st.dictionaries(st.text(max_size=12), json_values, max_size=3) | json_values,
    "earlier": json_values | st.lists(st.fixed_dictionaries(
        {"when": st.text(max_size=20), "exchanges": json_values}), max_size=2),
    "quick": json_values,
}


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({}, optional=field_values) | json_values)
def test_any_json_is_a_scenario_or_a_one_line_error(obj: object) -> None:
    try:
        s = parse_scenario(obj, "fuzz.json")
    except ScenarioError as exc:
        assert str(exc).startswith("fuzz.json") and "\n" not in str(exc)
    else:
        assert s.questions and s.quick().questions


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_any_when_is_a_moment_or_a_value_error(text: str) -> None:
    try:
        moment = parse_when(text, datetime(2025, 6, 12, 9, 0, tzinfo=UTC))
    except ValueError as exc:
        assert str(exc)
    else:
        assert moment.tzinfo is not None
