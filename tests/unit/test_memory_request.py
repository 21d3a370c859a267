"""The memory tool's request: every form and error of wisp-memory-tool.txt, and nothing that raises."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wisp.core.memory.request import RequestError, Target, parse_request, parse_task_value

EXAMPLE = "note entity release codename = BLUE HERON"


@pytest.mark.parametrize("text, target", [
    ("recall entry 7", Target("entry", 7)),
    ("entry 7", Target("entry", 7)),
    ("Recall Entry 7", Target("entry", 7)),
    ('memory "recall entry 7"', Target("entry", 7)),          # copied from a reference
    ("recall entry 4 from line 60", Target("entry", 4, from_line=60)),
    ("entry 4 from line 60", Target("entry", 4, from_line=60)),
    ("recall turn 3", Target("turn", 3)),
    ("turn 3", Target("turn", 3)),
    ("recall turn 3 from entry 14", Target("turn", 3, from_entry=14)),
    ("recall turn 3 from entry 14 line 60", Target("turn", 3, from_entry=14, from_line=60)),
    ("recall task", Target("task")),
    ("task", Target("task")),
    ("recall fact codename", Target("fact", name="codename")),
    ('fact "ci"', Target("fact", name="ci")),
    ("recall summary", Target("summary")),
    ("recall summary v2", Target("summary", 2)),
    ("summary v3", Target("summary", 3)),
    ("recall output 3f9a2c1b", Target("output", name="3f9a2c1b")),
    ("recall MEM-000001", Target("episode", name="MEM-000001")),
])
def test_recall_targets(text: str, target: Target) -> None:
    req = parse_request(text)
    assert req.verb == "recall"
    assert req.target == target


@pytest.mark.parametrize("text, subject, name, value", [
    ("note entity release codename = BLUE HERON", "entity", "release codename", "BLUE HERON"),
    ("remember entity release codename = BLUE HERON", "entity", "release codename", "BLUE HERON"),
    ("note entity: release codename = BLUE HERON", "entity", "release codename", "BLUE HERON"),
    ("note entity release codename: BLUE HERON", "entity", "release codename", "BLUE HERON"),
    ('note entity release codename = "BLUE HERON"', "entity", "release codename", "BLUE HERON"),
    ("note entity release codename = 'BLUE HERON'", "entity", "release codename", "BLUE HERON"),
    ("note tests ci = green", "tests", "ci", "green"),
    ("note branch = main", "branch", "", "main"),
    ("note preference answers: short", "preference", "answers", "short"),
    ("note entity server url = http://10.0.0.5:8080/x", "entity", "server url", "http://10.0.0.5:8080/x"),
])
def test_note_forms(text: str, subject: str, name: str, value: str) -> None:
    req = parse_request(text)
    assert (req.verb, req.subject, req.name, req.value) == ("note", subject, name, value)


@pytest.mark.parametrize("text, line", [
    ("note weather today = rain",
     "error: no subject weather to note; use one of task, decision, preference, entity, tests, workdir, branch, "
     f"such as {EXAMPLE}"),
    ("note entity = BLUE HERON", f"error: say which entity it is before the =, such as {EXAMPLE}"),
    ("note entity release codename BLUE HERON", f"error: write note SUBJECT NAME = VALUE, such as {EXAMPLE}"),
    ("note", f"error: write note SUBJECT NAME = VALUE, such as {EXAMPLE}"),
    ("note entity release codename =", f"error: write note SUBJECT NAME = VALUE, such as {EXAMPLE}"),
    ("task objective: it works", "error: write task THE TASK; objective: WHAT DONE LOOKS LIKE"),
    ("condense entry 7", "error: write condense entry N: QUESTION, such as condense entry 7: why did the link step fail"),
])
def test_note_and_task_errors_are_the_references(text: str, line: str) -> None:
    with pytest.raises(RequestError) as info:
        parse_request(text)
    assert info.value.line == line


@pytest.mark.parametrize("text, value", [
    ("task fix the CI build; objective: swift test passes", "fix the CI build; objective: swift test passes"),
    ("task fix the CI build. Objective: swift test passes", "fix the CI build; objective: swift test passes"),
    ("task fix the CI build, objective: swift test passes", "fix the CI build; objective: swift test passes"),
    ("task add a --dry-run flag to harbour sync", "add a --dry-run flag to harbour sync"),
    ("note task = ship 1.0; objective: tagged", "ship 1.0; objective: tagged"),
])
def test_task_forms(text: str, value: str) -> None:
    req = parse_request(text)
    assert (req.verb, req.value) == ("task", value)


def test_task_is_cut_to_300_characters() -> None:
    value = parse_task_value("x" * 500 + "; objective: done")
    assert len(value) == 300 and value.endswith("…")


@pytest.mark.parametrize("text, overview", [("summarise entry 7", False), ("summarize entry 7", False),
                                            ("summarise entry 7 overview", True),
                                            ("summarise output 3f9a2c1b overview", True)])
def test_summarise_forms(text: str, overview: bool) -> None:
    req = parse_request(text)
    assert req.verb == "summarise" and req.overview is overview


def test_condense_form() -> None:
    req = parse_request("condense entry 7: why did the link step fail")
    assert req.verb == "condense" and req.target == Target("entry", 7)
    assert req.question == "why did the link step fail"


def test_memories_verb() -> None:
    req = parse_request("memories website launch since 7d")
    assert req.verb == "memories" and req.query == "website launch since 7d"


@pytest.mark.parametrize("text", ["", "   ", "recall", "recall entry", "recall ???", "entry seven",
                                  "recall entry 4 from line sixty", "summarise", "summarise entry 7 loudly",
                                  "recall fact", "recall turn 3 sideways"])
def test_malformed_requests_get_one_error_line(text: str) -> None:
    with pytest.raises(RequestError) as info:
        parse_request(text)
    assert info.value.line.startswith(("error: ", "memory: "))
    assert "\n" not in info.value.line


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_no_request_raises(text: str) -> None:
    try:
        req = parse_request(text)
    except RequestError as exc:
        assert exc.line.startswith(("error: ", "memory: "))
        return
    assert req.verb in ("recall", "note", "task", "summarise", "condense", "memories")


_WORDS = st.sampled_from(["recall", "note", "remember", "task", "summarise", "condense", "memories", "entry",
                          "turn", "fact", "summary", "v2", "from", "line", "=", ":", ";", "objective:", "7",
                          "-1", "0", "99999999999999", "entity", "tests", "\"", "'", "memory", "MEM-000001",
                          "overview", "output", "3f9a2c1b", "\t", "\n", "ø", "🙂"])


@settings(max_examples=600)
@given(st.lists(_WORDS, max_size=12).map(" ".join))
def test_no_request_made_of_the_verbs_words_raises(text: str) -> None:
    try:
        parse_request(text)
    except RequestError as exc:
        assert exc.line.startswith(("error: ", "memory: "))


async def test_an_unknown_verb_is_a_search_whose_nothing_found_names_every_verb(tmp_path) -> None:
    """QA: `frobnicate x` was answered with the recall forms only. A request with no verb is a recall
    (wisp-memory-tool.txt, "Arguments"), so words that name no target are a search now; when it finds
    nothing, its one line still names every verb."""
    from tests.support.memory_harness import make_harness

    req = parse_request("frobnicate x", ("task", "decision", "preference", "entity", "tests", "workdir", "branch"))
    assert (req.verb, req.target) == ("recall", Target("search", name="frobnicate x"))
    h = await make_harness(tmp_path)
    await h.begin()
    line = await h.ask("frobnicate x")
    await h.close()
    assert line.startswith('memory: nothing in this conversation before this turn holds "frobnicate x"')
    for verb in ("recall", "note", "task", "summarise", "condense", "memories"):
        assert verb in line
