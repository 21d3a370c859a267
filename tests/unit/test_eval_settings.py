"""`wisp eval --set KEY=VALUE` (issue 17, "The model's own bookkeeping": the distiller measured off and on).

The parser of the person's text, its refusals (the same as a scenario's
``config``), how a setting goes over a scenario's config in a run, and how
the table and the history show and keep it.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wisp.core.config import SCHEMA, Config, ConfigError, format_value, parse_value
from wisp.core.eval.cli import parse_settings
from wisp.core.eval.history import append_record, parse_record, read_history
from wisp.core.eval.report import format_history, format_table
from wisp.core.eval.runner import Cell, EvalReport, RunResult, run_values
from wisp.core.eval.scenario import RESERVED_KEYS, SettingError, builtin_scenario, parse_setting


@pytest.mark.parametrize("text, key, value", [
    ("context.distill=on", "context.distill", True),
    ("  context.distill = off", "context.distill", False),
    ("context.distill_tokens=512", "context.distill_tokens", 512),
    ("model.context_window=2048", "model.context_window", 2048),
    ("model.context_window=", "model.context_window", None),  # an optional key back to its default
    ("tools.enabled=read_file,run_command", "tools.enabled", ["read_file", "run_command"]),
    ('tools.enabled=["read_file"]', "tools.enabled", ["read_file"]),
    ("context.assess=yes", "context.assess", True),
])
def test_a_setting_is_read_as_wisp_config_set_reads_it(text: str, key: str, value: object) -> None:
    assert parse_setting(text) == (key, value)


@pytest.mark.parametrize("text, words", [
    ("context.distill", "--set takes KEY=VALUE, such as --set context.distill=on"),
    ("=on", "--set takes KEY=VALUE"),
    ("context.distill=maybe", "context.distill expects a boolean"),
    ("context.distill_tokens=64", "context.distill_tokens expects"),
    ("context.distil=on", "did you mean context.distill?"),
    ("context.memory=on", "use --memory on, off or both"),
    ("model.endpoint=http://127.0.0.1:1", "the run sets this key itself"),
    ("x" * 5000 + "=1", "at most 4,096 characters"),
])
def test_a_setting_that_cannot_be_used_is_one_line_saying_what_to_write(text: str, words: str) -> None:
    with pytest.raises(SettingError) as err:
        parse_setting(text)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_every_key_a_scenario_may_not_set_is_refused_to_set_too() -> None:
    for key in RESERVED_KEYS:
        with pytest.raises(SettingError, match="the run sets this key itself"):
            parse_setting(f"{key}=x")


def test_settings_keep_their_order_and_the_last_of_a_key_wins() -> None:
    got = parse_settings(["context.distill=on", "model.context_window=2048", "context.distill=off"])
    assert list(got.items()) == [("model.context_window", 2048), ("context.distill", False)]
    assert parse_settings([]) == {}


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.text(max_size=60),
    st.tuples(st.sampled_from(sorted(SCHEMA)), st.text(max_size=40)).map(lambda kv: f"{kv[0]}={kv[1]}"),
))
def test_any_text_is_a_setting_or_a_one_line_error(text: str) -> None:
    """Outside input: a setting as `wisp config set` would store it, or a SettingError; nothing else."""
    try:
        key, value = parse_setting(text)
    except SettingError as exc:
        assert str(exc) and "\n" not in str(exc) and "\r" not in str(exc)
    else:
        assert key in SCHEMA and key not in RESERVED_KEYS and key == key.strip()
        assert value == parse_value(key, text.partition("=")[2], from_text=True)
        assert parse_value(key, value, from_text=False) == value  # storable in a run's config.json as it is


def _valid_values(key: str) -> st.SearchStrategy:
    spec = SCHEMA[key]
    if spec.type == "bool":
        return st.booleans()
    if spec.type == "int":
        top = int(spec.maximum) if spec.maximum is not None else 10**9
        return st.integers(min_value=int(spec.minimum or 0) + int(spec.exclusive_min), max_value=top)
    if spec.type == "choice":
        return st.sampled_from(spec.choices)
    return st.nothing()


SETTABLE = sorted(k for k, s in SCHEMA.items() if k not in RESERVED_KEYS and s.type in ("bool", "int", "choice"))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SETTABLE).flatmap(lambda k: st.tuples(st.just(k), _valid_values(k))))
def test_a_value_as_config_get_prints_it_reads_back_the_same(kv: tuple[str, object]) -> None:
    key, value = kv
    assert parse_setting(f"{key}={format_value(value)}") == (key, value)


# --- in a run -------------------------------------------------------------------------------------


def _link(reported: int | None = None) -> SimpleNamespace:
    return SimpleNamespace(endpoint=SimpleNamespace(provider="ollama", base_url="http://127.0.0.1:9"),
                           model="m", reported_window=reported, context_window=reported)


def test_settings_go_over_the_scenarios_config_and_under_the_runs_own(wisp_home: Path) -> None:
    scenario = builtin_scenario("stated-in-passing")
    person = Config(None, {})
    plain = run_values(scenario, False, person, _link(), wisp_home, quick=False)
    assert plain["model.context_window"] == 3072 and "context.distill" not in plain
    values = run_values(scenario, True, person, _link(), wisp_home, quick=False,
                        settings={"context.distill": True, "model.context_window": 4096,
                                  "tools.enabled": ["read_file", "run_command"]})
    assert values["context.distill"] is True and values["model.context_window"] == 4096
    assert values["tools.enabled"] == ["read_file", "run_command"] and values["context.memory"] is True
    # the quick caps stay under a setting; a setting cleared leaves wisp's default (here: what the link says)
    assert plain["context.reserve"] == 768
    quick = run_values(scenario.quick(), False, person, _link(reported=1024), wisp_home, quick=True,
                       settings={"model.max_tokens": 200, "context.reserve": None})
    assert quick["model.max_tokens"] == 200 and "context.reserve" not in quick and quick["agent.max_steps"] == 8
    assert quick["model.context_window"] == 1024  # the scenario's window, within what the endpoint reports
    cleared = run_values(scenario, False, person, _link(reported=3000), wisp_home, quick=False,
                         settings={"model.context_window": None})
    assert cleared["model.context_window"] == 3000
    clamped = run_values(scenario, False, person, _link(reported=3000), wisp_home, quick=False,
                         settings={"model.context_window": 8192})
    assert clamped["model.context_window"] == 3000  # never more than the endpoint has
    Config(None, {k: v for k, v in values.items()})  # a config wisp loads


# --- shown and kept -------------------------------------------------------------------------------


def _report(settings: dict) -> EvalReport:
    report = EvalReport("2025-06-12T10:00:00+00:00", "smol", "ollama http://127.0.0.1:9", 1, True, (False, True),
                        settings=settings)
    cells = {m: Cell("stated-in-passing", m, [RunResult("stated-in-passing", m, 1, score=10.0 * m,
                                                         prompt_tokens=[100])]) for m in (False, True)}
    report.results.append(("stated-in-passing", "t", cells))
    return report


def test_the_table_and_the_json_say_what_was_set() -> None:
    report = _report({"context.distill": True, "model.context_window": 2048})
    first = format_table(report).splitlines()[0]
    assert first.endswith("; set over every scenario: context.distill=true, model.context_window=2048")
    assert report.to_dict(detail=False)["settings"] == {"context.distill": True, "model.context_window": 2048}
    assert "set over every scenario" not in format_table(_report({}))


def test_the_history_keeps_the_settings(tmp_path: Path) -> None:
    path = tmp_path / "eval-history.jsonl"
    append_record(path, _report({"context.distill": False}).to_dict(detail=False))
    append_record(path, _report({}).to_dict(detail=False))
    records, skipped = read_history(path)
    assert skipped == 0 and [r["settings"] for r in records] == [{"context.distill": False}, {}]
    text = format_history(records)
    assert "1 run, quick, set context.distill=false" in text and text.count("set context.") == 1


def test_a_history_line_with_odd_settings_keeps_what_it_can() -> None:
    record = json.loads(json.dumps(_report({}).to_dict(detail=False)))
    record["settings"] = {"context.distill": True, "a": {"nested": 1}, "b": [1, 2], "c": float("inf"),
                          "d": "x" * 500, "": 1, "e": None, "f": ["ok"], "g": 3}
    got = parse_record({"format": 1, **record})
    assert got is not None
    assert got["settings"] == {"context.distill": True, "d": "x" * 200, "e": None, "f": ["ok"], "g": 3}
    record["settings"] = "context.distill=on"
    assert parse_record({"format": 1, **record})["settings"] == {}
    del record["settings"]  # a line from before --set
    assert parse_record({"format": 1, **record})["settings"] == {}


def test_config_error_is_what_a_setting_error_carries() -> None:
    """The value's error is the one `wisp config set` gives, with --set before it."""
    with pytest.raises(ConfigError) as config_error:
        parse_value("context.distill_tokens", "12", from_text=True)
    with pytest.raises(SettingError) as setting_error:
        parse_setting("context.distill_tokens=12")
    assert str(setting_error.value) == f"--set: {config_error.value}"
