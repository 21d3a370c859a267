"""summarise (wisp.core.outputs.summarise): exact readers over a corpus of outputs shaped like those
pasted into bug reports, and its failing tests agreeing with the `tests` fact's reading.

tests/data/summarise/manifest.json names, for each output, the line a person
triaging it would call the root cause (``root``, with ``root_text``, a piece
of that line, so the manifest cannot drift from the files) and why.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from wisp.core.tokens import estimate_tokens
from wisp.core.outputs import analyse, read_test_run, split_stored_lines, summarise
from wisp.core.outputs.doc import Doc, Reading
from wisp.core.outputs.runs import COLLECTORS, TestOutputParser
from wisp.core.outputs.summaries import RUNTIME_READERS, TOOLCHAIN_READERS

from tests.support.home import DATA as DATA_ROOT

DATA = DATA_ROOT / "summarise"
MANIFEST = json.loads((DATA / "manifest.json").read_text())
TOOLCHAINS = ["pytest", "unittest", "go_", "cargo", "rustc", "gcc", "clang", "make", "cmake", "tsc", "eslint",
              "npm", "jest", "maven", "javac", "swift_build", "swift_test", "log_", "json_"]


def first_point(text: str) -> int | None:
    for line in text.splitlines():
        m = re.match(r"^L(\d+) ", line)
        if m:
            return int(m.group(1))
    return None


def test_corpus_is_large_and_covers_every_toolchain() -> None:
    assert len(MANIFEST) >= 30
    for word in TOOLCHAINS:
        assert any(word in name for name in MANIFEST), word
    for name in MANIFEST:
        assert (DATA / name).is_file(), name


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_first_point_cites_the_root_cause(name: str) -> None:
    expected = MANIFEST[name]
    text = (DATA / name).read_text()
    lines = split_stored_lines(text)
    assert expected["root_text"] in lines[expected["root"] - 1], "the manifest's line moved"
    s = summarise(text, {"exit_status": 1}, budget_tokens=1000)
    assert first_point(s.text) == expected["root"], s.text
    assert s.first_cited == expected["root"]
    assert s.text.startswith("notable lines (exact readers, no model): ")
    assert s.text.splitlines()[-1].startswith("what no reader explained: ")


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_summaries_fit_small_budgets_and_keep_the_root_cause(name: str) -> None:
    text = (DATA / name).read_text()
    # 200, not less: the estimate counts digits and symbols as tokenizers do, and an nginx
    # error line with its time and addresses is 60 tokens on its own
    for budget in (300, 200):
        s = summarise(text, None, budget_tokens=budget)
        assert estimate_tokens(s.text) <= budget, (budget, s.text)
        assert first_point(s.text) == MANIFEST[name]["root"], s.text
        o = summarise(text, None, overview=True, budget_tokens=budget)
        assert estimate_tokens(o.text) <= budget, (budget, o.text)


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_every_cited_line_is_the_stored_outputs_line(name: str) -> None:
    text = (DATA / name).read_text()
    lines = split_stored_lines(text)
    s = summarise(text, None, budget_tokens=2000)
    cited = list(re.finditer(r"^\s*L(\d+):? (.*)$", s.text, re.MULTILINE))
    assert cited, s.text  # a summary that cites no line in this form would pass the loop below unread
    for m in cited:
        number, shown = int(m.group(1)), m.group(2)
        assert 1 <= number <= len(lines)
        if shown.endswith("…"):
            continue
        # what is shown after a context line's number is that line (indentation may differ)
        if m.group(0).lstrip().startswith(f"L{number}:"):
            assert shown.strip() == lines[number - 1].expandtabs(4).strip(), (number, shown)


def _decorate(text: str) -> str:
    """The same output as a CI runner shows it: timestamps and colours."""
    out = []
    for i, line in enumerate(text.split("\n")):
        if re.search(r"error|FAIL|fatal", line):
            line = f"\x1b[31m{line}\x1b[0m"
        out.append(f"2024-06-01T10:{i // 60 % 60:02d}:{i % 60:02d}.1234567Z {line}")
    return "\n".join(out)


@pytest.mark.parametrize("name", [n for n in sorted(MANIFEST) if not n.endswith(".json") and not n.startswith("log_")])
def test_ci_timestamps_and_colours_do_not_change_the_reading(name: str) -> None:
    text = (DATA / name).read_text()
    s = summarise(_decorate(text), None, budget_tokens=1000)
    assert first_point(s.text) == MANIFEST[name]["root"], s.text


def test_the_references_example_shape() -> None:
    text = (DATA / "swift_build_errors.txt").read_text()
    s = summarise(text, {"exit_status": 1}, budget_tokens=1000).text.splitlines()
    assert s[0].startswith("notable lines (exact readers, no model): 24 lines, ")
    assert s[0].endswith("; exit status 1 (failed)")
    group = next(i for i, line in enumerate(s) if line.startswith("L13 "))
    assert s[group - 1] == "3 errors in 2 places; the first of each, root causes first:"
    assert s[group].endswith("(+1 more in /home/tomas/feedcli/Sources/FeedKit/Parser.swift)")
    assert s[group + 1].startswith("  L14: ")
    assert any(line.startswith("1 warning, the first at L10 (") for line in s)


def test_warnings_only_says_no_errors() -> None:
    text = ("   Compiling app v0.1.0 (/src/app)\n"
            "warning: unused variable: `x`\n --> src/main.rs:2:9\n  |\n2 |     let x = 1;\n  |         ^\n\n"
            "warning: `app` (bin \"app\") generated 1 warning\n    Finished dev [unoptimized] target(s) in 0.4s\n")
    s = summarise(text, {"exit_status": 0}).text
    assert "no errors or failing tests found by the readers" in s
    assert "1 warning, the first at L2 (src/main.rs ×1)" in s
    assert "exit status 0 (succeeded)" in s


def test_overview_names_size_ending_kinds_headings_and_ends() -> None:
    text = (DATA / "pytest_assert.txt").read_text()
    o = summarise(text, None, overview=True, budget_tokens=1500).text
    lines = o.splitlines()
    assert lines[0].startswith("overview (exact readers, no model): 103 lines, 6 KiB; it ended with L103: ")
    assert any(x.startswith("kinds of line: ") and "test result" in x and "blank" in x for x in lines)
    assert "L59 =================================== FAILURES ===================================" in lines
    assert "first lines:" in lines and "last lines:" in lines
    assert lines[-1].startswith("what no reader explained: ")
    with_status = summarise(text, {"exit_status": 1}, overview=True).text
    assert "; exit status 1 (failed)" in with_status.splitlines()[0]
    assert with_status.splitlines()[1].startswith("last line L103: ")


def test_unexplained_failure_lines_are_named() -> None:
    text = "building\nstep 1 ok\nwarming caches\nunexpected failure in the cache layer: shard 3 lost\ndone\n"
    s = summarise(text, None, hint="condense entry 9: QUESTION can read them").text
    assert "L4 unexpected failure in the cache layer: shard 3 lost" in s


def test_log_reader_counts_severities_and_groups_messages() -> None:
    text = (DATA / "log_app_disk_full.log").read_text()
    s = summarise(text, None).text
    assert "severities: FATAL 1, ERROR 15, WARN 2, INFO 76, DEBUG 1" in s
    assert "(×14, last L92)" in s
    assert "rare messages (warnings seen once or twice):" in s


def test_json_gives_its_shape() -> None:
    s = summarise((DATA / "json_package_ok.json").read_text(), None).text
    assert "L1 JSON: object with 6 keys" in s
    assert 'L5 "scripts": object with 3 keys' in s
    assert "nothing in it reports a failure" in s


def test_anything_else_without_errors_gives_first_and_last_lines() -> None:
    text = "\n".join(f"row {i}" for i in range(1, 101))
    s = summarise(text, None).text
    assert "no line mentions an error; the first and last lines:" in s
    assert "L1 row 1" in s and "L100 row 100" in s


def test_analysis_modes() -> None:
    assert analyse((DATA / "log_klog.log").read_text()).mode == "log"
    assert analyse((DATA / "json_api_error.json").read_text()).mode == "json"
    assert analyse((DATA / "gcc_make_errors.txt").read_text()).mode == "build"
    assert analyse("hello\nworld\n").mode == "other"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400), st.booleans())
def test_any_text_is_summarised_without_raising(text: str, overview: bool) -> None:
    s = summarise(text, {"exit_status": 3}, overview=overview, budget_tokens=300)
    assert s.text and estimate_tokens(s.text) <= 300


_PIECES = st.sampled_from([
    "error: x", "src/a.c:1:2: error: boom", "FAILED tests/t.py::t - E", "--- FAIL: TestX (0.00s)",
    "npm ERR! code E404", "[ERROR] /a/B.java:[1,2] bad", "Traceback (most recent call last):",
    '  File "a.py", line 1, in f', "ValueError: v", "=== FAILURES ===", "____ t ____", "E   assert 0",
    "thread 'main' panicked at src/m.rs:1:2:", "error[E0001]: x", " --> src/m.rs:1:1", "{", "}", "[", "]",
    "● a › b", "FAIL src/x.test.js", "CMake Error at CMakeLists.txt:3 (x):", "make: *** [all] Error 2",
    "2024-01-01 10:00:00 ERROR db down", "", "   ", "\t", "ok", "panic: nil", "goroutine 1 [running]:"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("\n".join))
def test_readers_never_raise_on_mixed_fragments(text: str) -> None:
    s = summarise(text, None, budget_tokens=400)
    assert s.text.splitlines()[-1].startswith("what no reader explained: ") or "…" in s.text


@pytest.mark.parametrize("name", ["gcc_make_errors.txt", "pytest_assert.txt", "maven_compile_error.txt"])
def test_a_read_file_output_is_read_for_its_text(name: str) -> None:
    """read_file numbers its lines (N<TAB>text) and ends [end of file]; the readers see through it."""
    lines = split_stored_lines((DATA / name).read_text())
    stored = "\n".join(f"{i}\t{line}" for i, line in enumerate(lines, start=1)) + "\n[end of file]"
    s = summarise(stored, None)
    assert first_point(s.text) == MANIFEST[name]["root"], s.text


# --- one reading of a test run: the `tests` fact and summarise agree (issue 9) ------------------

RUN_SAMPLES = sorted([p for p in (DATA_ROOT / "test_runs").iterdir()] +
                     [p for p in DATA.iterdir() if p.name != "manifest.json"])


def _stream(text: str, command: str | None, status: int | None, size: int = 97):
    """The test run as run_command reads it: fed in pieces as the command's output streams."""
    parser = TestOutputParser(command)
    for i in range(0, len(text), size):
        parser.feed(text[i:i + size])
    return parser.result(status)


@pytest.mark.parametrize("path", RUN_SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_tests_fact_and_summarise_agree(path: Path) -> None:
    """For every sample that is a test run: run_command's meta["tests"] (streamed), the `tests` fact
    read from the stored output, and summarise name the same failing tests, and the counts agree."""
    text = path.read_text()
    meta = {"exit_status": 1}
    fact = read_test_run(text, 1)
    if fact is None:
        assert _stream(text, None, 1) is None
        return
    streamed = _stream(text, None, 1)
    assert streamed == fact
    a = analyse(text, meta)
    assert a.reading.test_run == fact
    assert list(a.reading.failing_tests) == fact.failing and a.reading.more_failing == fact.more_failing
    # every name is cited at a line that says it: pytest's section says the test's last part, a jest
    # suite that failed to run says so under its file, go's package line the package
    lines = split_stored_lines(text)
    for name, line in a.reading.failing_tests.items():
        shown = lines[line - 1]
        said = (name, name.split("::")[-1], name.rsplit(".", 1)[-1], name.split(" [")[0])
        assert any(x in shown for x in said) or name.endswith("(failed to run)") and "failed to run" in shown, \
            (name, shown)
    # the counts: every failing name is counted as failed or as an error (go: a package that did not build)
    counted = (fact.failed or 0) + (fact.errors or 0)
    assert len(fact.failing) + fact.more_failing <= max(counted, 1)
    assert fact.outcome == ("failed" if counted or fact.failing else fact.outcome)
    # and summarise says it all in words
    s = summarise(text, meta, budget_tokens=4000).text
    assert f"test run: {fact.headline()}" in s
    if fact.failing:
        assert f"{len(fact.failing)} failing test{'s' if len(fact.failing) != 1 else ''}: " in s
        for name in fact.failing[:12]:
            assert name in s
    else:
        assert "failing test" not in s.replace("no errors or failing tests", "")
    assert fact.summary().startswith(fact.headline()) and fact.value().startswith(f"{fact.outcome} (exit status 1)")


def test_the_samples_hold_a_run_of_every_framework() -> None:
    """So that the agreement above covers each collector."""
    seen = {run.framework for run in (read_test_run(p.read_text(), 1) for p in RUN_SAMPLES) if run is not None}
    assert seen == {c.framework for c in COLLECTORS}, seen


def test_a_command_hint_is_read_the_same_by_both() -> None:
    """The entry's meta carries the command: summarise picks the run the fact picks."""
    text = (DATA_ROOT / "test_runs" / "cargo_nextest_failed.txt").read_text()
    meta = {"exit_status": 100, "command": "cargo nextest run"}
    run = read_test_run(text, 100, "cargo nextest run")
    a = analyse(text, meta)
    assert a.reading.test_run == run and list(a.reading.failing_tests) == ["calc tests::it_multiplies"]
    # the panic under the nextest name is the failing test's, not a root cause of its own
    assert any(f.kind == "failure" and f.place == "tests::it_multiplies" for f in a.reading.findings)


def test_without_a_summary_summarise_still_lists_the_failures_it_saw() -> None:
    text = "FAILED tests/t.py::test_a - assert 0\nFAILED tests/t.py::test_b\n"
    assert read_test_run(text, None) is None
    a = analyse(text)
    assert list(a.reading.failing_tests) == ["tests/t.py::test_a", "tests/t.py::test_b"]
    assert a.reading.test_run is None


# --- no reader raises on outside input ---------------------------------------------------------

_RUN_PIECES = st.sampled_from([
    "FAILED a.py::t - x", "ERROR a.py", "=== FAILURES ===", "____ t ____", "1 failed, 2 passed in 0.1s",
    "--- FAIL: TestX (0.00s)", "    --- FAIL: TestX/sub (0.00s)", "FAIL\tpkg\t0.01s", "ok  \tpkg\t0.1s",
    "FAIL\tpkg [build failed]", '{"Action":"fail","Package":"p","Test":"T"}', '{"Action":"fail"}', "{",
    "test a ... FAILED", "test result: FAILED. 1 passed; 1 failed; 0 ignored", "error: could not compile `x`",
    "        FAIL [   0.005s] calc t", "     Summary [   0.012s] 2 tests run: 1 passed, 1 failed",
    "● Suite › t", "● Test suite failed to run", "FAIL ./a.test.js", "Tests:       1 failed, 1 total",
    "Test Suites: 1 failed, 1 total", " FAIL  src/a.test.ts > s > t", " Tests  1 failed (1)", " Test Files  1 failed (1)",
    "Test Case '-[A.B t]' failed (0.1 seconds).", "\t Executed 1 test, with 1 failure (0 unexpected) in 0.1 (0.1) seconds",
    "✘ Test a() failed after 0.1 seconds.", "✘ Test run with 1 test failed after 0.1 seconds.", "error: fatalError",
    "FAIL: t (m.C)", "Ran 2 tests in 0.1s", "FAILED (failures=1, errors=1)", "OK (skipped=1)",
    "[ERROR] Tests run: 2, Failures: 1, Errors: 0, Skipped: 0", "[ERROR] a.B.t -- Time elapsed: 0.1 s <<< FAILURE!",
    "[ERROR] Failures: ", "[ERROR]   B.t:12 boom", "A > t() FAILED", "2 tests completed, 1 failed",
    "", " ", "\x1b[31m", "\r", "2024-06-01T10:00:00.1Z FAILED a.py::t"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_RUN_PIECES | st.text(max_size=40), max_size=40).map("\n".join),
       st.sampled_from([None, "pytest", "go test", "cargo test", "npx jest", "swift test", "make test", "ls"]),
       st.sampled_from([None, 0, 1, -9]), st.integers(min_value=1, max_value=50))
def test_the_test_run_reading_never_raises_and_any_split_agrees(text: str, command, status, size: int) -> None:
    whole = read_test_run(text, status, command)
    assert whole is None or whole.outcome in ("passed", "failed", "no tests")
    parser = TestOutputParser(command)
    for i in range(0, len(text), size):
        parser.feed(text[i:i + size])
    assert parser.result(status) == whole
    if whole is not None:
        whole.summary(), whole.value(), whole.to_dict()


@settings(max_examples=300, deadline=None)
@given(st.lists(_RUN_PIECES | st.text(max_size=40), max_size=40).map("\n".join),
       st.sampled_from([None, 0, 1]), st.sampled_from([None, "pytest", "go test ./...", "make check"]))
def test_summarise_reads_the_run_the_fact_reads(text: str, status, command) -> None:
    """summarise reads only the lines that hold a collector's needle (for speed on large outputs);
    that finds the same run as reading every line, so the two cannot disagree on any text."""
    assume("\r" not in text and "\x1b" not in text)
    doc = Doc(text, None)
    assume(not doc.ci_stamped and not doc.self_numbered)
    meta = {"exit_status": status, "command": command} if status is not None else {"command": command}
    fact = read_test_run(text, status, command)
    a = analyse(text, meta)
    assert a.reading.test_run == fact
    if fact is not None:
        assert list(a.reading.failing_tests) == fact.failing


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=80) | _RUN_PIECES, max_size=30))
def test_no_collector_raises_on_any_line(lines: list[str]) -> None:
    for cls in COLLECTORS:
        c = cls()
        for number, line in enumerate(lines, start=1):
            c.line(line, number)
        c.result()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=80) | _PIECES | _RUN_PIECES, max_size=30).map("\n".join))
def test_no_reader_raises_on_any_text(text: str) -> None:
    for reader in TOOLCHAIN_READERS + RUNTIME_READERS:
        reader(Doc(text, None), Reading())
