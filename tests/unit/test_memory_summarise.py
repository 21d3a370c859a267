"""summarise: exact readers over a corpus of outputs shaped like those pasted into bug reports.

tests/data/summarise/manifest.json names, for each output, the line a person
triaging it would call the root cause (``root``, with ``root_text``, a piece
of that line, so the manifest cannot drift from the files) and why.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wisp.core.tokens import estimate_tokens
from wisp.core.memory.readers import analyse, summarise
from wisp.core.memory.readers.doc import split_stored_lines

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
    for m in re.finditer(r"^\s*L(\d+):? (.*)$", s.text, re.MULTILINE):
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
