"""summarise reads outputs as stored and as produced: wisp's own lines, read_file's numbers and
per-line prefixes taken off, the stored numbering kept; readers by kind (linker failures beneath
a compiler's summary, exception groups and chained tracebacks, JSON reporting errors inside a
success).

tests/data/outputs/ holds real-shaped outputs as wisp stores them (run_command's trailer,
read_file's numbers), one file each, and manifest.json names for each the line a person triaging
it would call the root cause (``root``, with ``root_text``, a piece of that line, so that the
manifest cannot drift from the files) and why. tests/data/outputs_second/ is a second set of the
same kinds from other tools and shapes (pm2, klog, GitHub Actions around BuildKit, MSBuild's
link.exe, mold under ninja, MongoDB, BigQuery, SQS and FCM bodies…), written after the readers as a
stand-in for outputs they were not built on: it measures whether they read by kind, not by example.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wisp.core.outputs import split_stored_lines, summarise
from wisp.core.outputs.doc import Doc
from wisp.core.outputs.prefixes import produced

from tests.support.home import DATA as DATA_ROOT

DATA = DATA_ROOT / "outputs"
MANIFEST = json.loads((DATA / "manifest.json").read_text())
SECOND = DATA_ROOT / "outputs_second"
SECOND_MANIFEST = json.loads((SECOND / "manifest.json").read_text())
#: Every output of both sets: (folder, name, expected).
ALL = [(DATA, n, e) for n, e in MANIFEST.items()] + [(SECOND, n, e) for n, e in SECOND_MANIFEST.items()]
ALL_IDS = [f"{d.name}/{n}" for d, n, _ in ALL]
#: The kinds the corpus must hold, by a word in each file's name.
KINDS = ["buildkit", "cargo", "link", "lld", "mold", "gcc", "clang", "pytest", "python", "exception_group",
         "during_handling", "direct_cause", "node", "npm", "go_", "java", "maven", "gradle", "compose", "honcho",
         "supervisord", "journald", "kubectl", "turbo", "jenkins", "json_"]


def first_point(text: str) -> int | None:
    """The line the first point of a summary cites (``L154 …``)."""
    for line in text.splitlines():
        m = re.match(r"^L(\d+) ", line)
        if m:
            return int(m.group(1))
    return None


def read_file_form(text: str) -> str:
    """``text`` as read_file stores a file holding it: numbered lines, then ``[end of file]``."""
    return "\n".join(f"{i}\t{line}" for i, line in enumerate(split_stored_lines(text), 1)) + "\n[end of file]"


def run_command_form(text: str, status: int = 0) -> str:
    """``text`` as run_command stores a command's output: the output, then ``[exit status N]``."""
    return f"{text.rstrip(chr(10))}\n[exit status {status}]"


# -- the corpus -------------------------------------------------------------------------------


def test_the_corpus_is_large_and_covers_every_kind() -> None:
    assert len(MANIFEST) >= 25
    for word in KINDS:
        assert any(word in name for name in MANIFEST), word
    assert {p.name for p in DATA.iterdir()} - {"manifest.json"} == set(MANIFEST)


def test_the_second_set_is_large_and_covers_the_kinds() -> None:
    assert len(SECOND_MANIFEST) >= 25
    for word in ["compose", "journald", "kubectl", "gha_", "cargo", "lld", "ld_", "mold", "msvc", "clang",
                 "exception_group", "chain", "during_handling", "node", "gradle", "spring", "go_", "pm2",
                 "supervisord", "json_es", "json_graphql", "json_"]:
        assert any(word in name for name in SECOND_MANIFEST), word
    assert {p.name for p in SECOND.iterdir()} - {"manifest.json"} == set(SECOND_MANIFEST)


@pytest.mark.parametrize("folder, name, expected", ALL, ids=ALL_IDS)
def test_the_root_cause_is_cited_first(folder: Path, name: str, expected: dict) -> None:
    text = (folder / name).read_text()
    lines = split_stored_lines(text)
    assert expected["root_text"] in lines[expected["root"] - 1], "the manifest's line moved"
    s = summarise(text, None, budget_tokens=1000)
    assert s.first_cited == expected["root"], s.text
    assert first_point(s.text) == expected["root"], s.text
    # small budgets keep it first
    assert first_point(summarise(text, None, budget_tokens=250).text) == expected["root"]


@pytest.mark.parametrize("folder, manifest", [(DATA, MANIFEST), (SECOND, SECOND_MANIFEST)], ids=["first", "second"])
def test_the_whole_corpus_has_its_root_causes_first(folder: Path, manifest: dict) -> None:
    """The figure the issue asks for: every output of each set, root cause first."""
    firsts = [summarise((folder / n).read_text(), None).first_cited == e["root"] for n, e in manifest.items()]
    assert sum(firsts) == len(firsts), f"{sum(firsts)} of {len(firsts)}"


@pytest.mark.parametrize("folder, name, expected", ALL, ids=ALL_IDS)
def test_cited_lines_are_the_stored_lines(folder: Path, name: str, expected: dict) -> None:
    """Each ``L154`` is the stored output's line 154, and a context line shows that line as stored."""
    text = (folder / name).read_text()
    lines = split_stored_lines(text)
    s = summarise(text, None, budget_tokens=2000)
    clean = Doc(text).stored_lines  # as stored, without terminal colours (a summary shows none)
    for m in re.finditer(r"^\s+L(\d+): (.*)$", s.text, re.MULTILINE):
        number, shown = int(m.group(1)), m.group(2)
        assert 1 <= number <= len(lines)
        if not shown.endswith("…"):
            line = clean[number - 1]
            stored = re.sub(r"^\d+\t", "", line) if "\t" in line[:10] else line
            assert shown.strip() == stored.expandtabs(4).strip(), (number, shown)


def test_the_first_point_is_where_a_recall_from_its_line_lands() -> None:
    """``recall entry N from line K`` shows line K first: the summary's numbering is the stored one."""
    from wisp.core.memory.paging import page_lines

    for folder, name, expected in ALL:
        text = (folder / name).read_text()
        page = page_lines(split_stored_lines(text), expected["root"], 200, file_end=True)
        assert expected["root_text"] in page.lines[0], name


# -- as produced ------------------------------------------------------------------------------


def test_wisps_own_lines_are_not_the_outputs() -> None:
    p = produced(["a", "b", "[timed out after 60 s: the command and the processes it started were ended "
                  "(config tools.run_command.timeout_s)]", "[exit status 124]"])
    assert p.lines == ["a", "b", "", ""] and p.own == {2, 3} and p.exit_status == 124
    # a line in the middle that looks like one is the program's
    assert produced(["[exit status 3]", "done"]).lines == ["[exit status 3]", "done"]


def test_the_exit_status_of_the_trailer_is_the_endings() -> None:
    s = summarise("cc -c a.c\n[exit status 2]", None)
    assert s.text.splitlines()[0].endswith("; exit status 2 (failed)")


def test_read_files_numbers_are_taken_off_even_for_one_line() -> None:
    d = Doc('1\t{"a": 1}\n[end of file]')
    assert d.lines == ['{"a": 1}', ""] and d.self_numbered
    # numbers that do not count up by one are the file's own
    assert not Doc("3\tx\n9\ty\n[end of file]").self_numbered


@pytest.mark.parametrize("prefix", [
    lambda i: f"#12 {i / 7:.3f} ",
    lambda i: f"web-1  | ",
    lambda i: f"{9 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d} worker.1 | ",
    lambda i: f"Jun 12 08:{i // 60 % 60:02d}:{i % 60:02d} host app[812]: ",
    lambda i: f"2024-06-12T10:11:{i % 60:02d}.1234567Z ",
    lambda i: f"[2024-06-12T10:11:{i % 60:02d}.123Z] ",
    lambda i: f"[pod/api-5f7c9-x2/api] ",
    lambda i: f"@acme/api:build: ",
    lambda i: f"0|api      | ",
    lambda i: f"[api] ",
    lambda i: f"Jun 12 08:{i // 60 % 60:02d}:{i % 60:02d}.{i:06d} host app[812]: ",
    lambda i: f"[{i * 1.25:12.6f}] host app[812]: ",
    lambda i: f"2024-06-12T10:11:{i % 60:02d}.{i:06d}+00:00 app[web.1]: ",
], ids=["buildkit", "compose", "honcho", "journald", "actions", "jenkins", "kubectl", "turbo", "pm2", "concurrently",
        "journald-precise", "journald-monotonic", "heroku"])
def test_a_prefix_on_every_line_is_read_off(prefix) -> None:
    text = (DATA_ROOT / "summarise" / "cargo_build_error.txt").read_text()
    lines = split_stored_lines(text)
    prefixed = "\n".join(prefix(i) + line for i, line in enumerate(lines))
    want = summarise(text, None).first_cited
    s = summarise(prefixed, None)
    assert s.first_cited == want, s.text
    assert "mismatched types" in s.text


def test_a_bracketed_level_is_no_process_name() -> None:
    """Maven's ``[INFO] ``/``[ERROR] `` look like concurrently's ``[api] ``; levels are not names."""
    lines = ["[INFO] Scanning for projects...", "[INFO] Building app 1.0", "[ERROR] a.java:[3,1] boom",
             "[INFO] BUILD FAILURE"]
    assert produced(list(lines)).lines == lines


def test_interleaved_processes_are_read_one_stream_at_a_time() -> None:
    """A web server's access line in the middle of a worker's traceback does not end it."""
    text = (DATA / "honcho_exception_group.txt").read_text()
    doc = Doc(text)
    assert set(doc.streams) >= {"web.1", "worker.1"}
    s = summarise(text, None)
    assert "StorageQuotaExceeded" in s.text.splitlines()[3]


# -- readers by kind --------------------------------------------------------------------------


def test_a_linker_error_comes_before_the_compilers_summary_of_it() -> None:
    text = (DATA / "rust_link_ssl.txt").read_text()
    s = summarise(text, None).text
    assert "what followed from them: L18 error: linking with `cc` failed" in s
    assert s.index("undefined reference to `SSL_CTX_set_min_proto_version'") < s.index("what followed")


def test_an_exception_groups_own_line_followed_from_its_sub_exceptions() -> None:
    text = (DATA / "python_exception_group.txt").read_text()
    s = summarise(text, None).text
    assert "what followed from them: L16 ExceptionGroup: unhandled errors in a TaskGroup (2 sub-exceptions)" in s
    assert "L23 httpx.HTTPStatusError" in s.splitlines()[3]  # the first sub-exception leads
    assert "L30 KeyError: 'items'" in s  # the second sub-exception, read too


def test_a_group_a_logger_starts_on_its_own_line_is_read() -> None:
    """uvicorn logs ``traceback.format_exc()`` after its ``ERROR:    ``: the box starts on that line."""
    text = (SECOND / "docker_logs_t_group.txt").read_text()
    assert "ERROR:      + Exception Group Traceback" in text.splitlines()[2]
    s = summarise(text, None)
    assert s.first_cited == 17 and "L22 psycopg_pool.PoolTimeout" in s.text, s.text
    assert "what followed from them: L10 ExceptionGroup" in s.text


def test_the_first_exception_of_a_chain_is_the_cause() -> None:
    """The first traceback of a chain leads; the one raised while handling it, or because of it,
    is shown after it, or counted under it when it was raised in the same file."""
    for name, cause, cause_line, later in [
            ("python_during_handling.txt", "KeyError: 'user_id'", 6, "(+1 more in /srv/ingest/ingest/records.py)"),
            ("python_direct_cause.txt", "httpcore.ConnectError", 10, "L30 httpx.ConnectError")]:
        s = summarise((DATA / name).read_text(), None)
        assert s.first_cited == cause_line, s.text
        point = s.text.splitlines()[3]
        assert point.startswith(f"L{cause_line} {cause}"), s.text
        assert later in s.text and s.text.index(later) >= s.text.index(cause), s.text


def test_json_reporting_a_failure_inside_a_success() -> None:
    s = summarise((DATA / "json_es_bulk.txt").read_text(), None).text.splitlines()
    wrong = s.index("what it reports as wrong:")
    assert s[wrong + 1].startswith("L26 items[1].index.error: document_parsing_exception: [1:52] failed to parse")
    assert any(x.startswith("L3 errors: true") for x in s[wrong + 2:])
    s = summarise((DATA / "json_batch_results.txt").read_text(), None).text
    assert "L8 results[1].status: failed (id msg_02; reason number is on the carrier's block list)" in s
    assert "L5 JSON: object with 2 keys" in s  # after the HTTP headers


@pytest.mark.parametrize("key", ["writeErrors", "insertErrors", "Failed", "failed_records", "partialFailures",
                                 "rowExceptions", "batch-errors", "UnprocessedItems", "rejectedRows"])
def test_a_compound_key_that_reports_failures_is_read_by_its_last_word(key: str) -> None:
    body = json.dumps({"ok_count": 3, key: [{"id": "r2", "code": "E42", "message": "row 2 is bad"}]}, indent=2)
    s = summarise(run_command_form(body), None).text.splitlines()
    wrong = s.index("what it reports as wrong:")
    assert s[wrong + 1] == f"L3 {key}: E42: row 2 is bad"


@pytest.mark.parametrize("key", ["ignoreErrors", "allowFailures", "expectedErrors", "maxErrors", "onError",
                                 "retryOnFailure", "knownFailures"])
def test_a_setting_named_after_errors_is_no_failure(key: str) -> None:
    """A linter's or a retry policy's settings (``"ignoreErrors": ["E501"]``) report nothing."""
    body = json.dumps({"name": "lint", key: ["E501", "W291"], "enabled": True}, indent=2)
    s = summarise(read_file_form(body), {"path": "/w/.lintrc.json"}).text
    assert "nothing in it reports a failure" in s, s


def test_an_item_that_holds_why_one_level_down_says_why_and_which() -> None:
    """Elasticsearch's ``failures[].cause``: the point says the cause and names the item."""
    s = summarise((SECOND / "json_es_update_by_query.txt").read_text(), None).text
    assert ("L14 failures: document_parsing_exception: [1:88] failed to parse field [shipped_at] of type [date] in "
            "document with id 'o-88412' (id o-88412) (+1 more)") in s, s


def test_a_status_line_after_the_document_leaves_it_json() -> None:
    """``curl -s -w '\\nstatus=%{http_code}\\n'`` puts its status after the body."""
    body = json.dumps({"results": [{"id": 1, "status": "failed", "error": "bad number"}]}, indent=2)
    s = summarise(run_command_form(body + "\nstatus=207"), None)
    assert s.mode == "json" and s.first_cited == 6, s.text
    # a second document, or a long text after it, is not one JSON document
    assert summarise(run_command_form(body + "\n" + body), None).mode != "json"
    assert summarise(run_command_form(body + "\n" + "then it went on " * 20), None).mode != "json"


def test_errors_inside_reported_items_are_cited_where_they_are() -> None:
    """A report whose items carry their own errors (BigQuery's insertErrors) cites each item's errors,
    the most specific lines, as a bulk response's items are cited and not its ``errors: true``."""
    body = json.dumps({"insertErrors": [{"index": 4, "errors": [{"reason": "invalid", "message": "bad date"}]}]},
                      indent=2)
    s = summarise(run_command_form(body), None)
    assert s.first_cited == 5 and "L5 insertErrors[0].errors: bad date" in s.text, s.text


# -- JSON's shape, through read_file and run_command, pretty and compact ------------------------

_SCALAR = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False,
                                                                              width=32) | st.text(max_size=12)
_KEY = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF, blacklist_characters='"\\'), min_size=1,
               max_size=10)
_JSON = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEY, inner, max_size=4),
                     max_leaves=12)
_DOC = st.dictionaries(_KEY, _JSON, min_size=1, max_size=6) | st.lists(_JSON, min_size=1, max_size=5)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DOC, st.sampled_from([None, 2, 4]), st.sampled_from(["read_file", "run_command"]))
def test_any_json_document_gets_its_shape(value, indent, tool) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    stored = read_file_form(text) if tool == "read_file" else run_command_form(text, 0)
    meta = {"path": "/w/doc.json"} if tool == "read_file" else {"exit_status": 0}
    for overview in (False, True):
        s = summarise(stored, meta, overview=overview, budget_tokens=1000)
        assert s.mode == "json", s.text
        kind = "object" if isinstance(value, dict) else "array"
        assert re.search(rf"^L1 JSON: (?:empty )?{kind}", s.text, re.MULTILINE), s.text
        if isinstance(value, dict) and len(value) <= 8:
            first_key = next(iter(value))
            assert f'"{first_key}"' in s.text, s.text


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_KEY, _JSON, min_size=1, max_size=6), st.sampled_from([None, 2, 4]))
def test_a_keys_value_span_holds_exactly_its_value(value, indent) -> None:
    """What a problem's point accounts for is its key's whole value: the lines from the key to
    where its value ends hold that value and nothing after it."""
    from wisp.core.outputs.jsonshape import value_span

    lines = json.dumps(value, indent=indent, ensure_ascii=False).split("\n")
    if indent is None:
        assert all(value_span(lines, 1) == (1, 1) for _ in value)
        return
    for k, key in enumerate(value):
        line = 2 + sum(len(json.dumps(value[x], indent=indent, ensure_ascii=False).split("\n")) for x in list(value)[:k])
        first, last = value_span(lines, line)
        text = "\n".join(lines[first - 1:last]).lstrip()
        name = json.dumps(key, ensure_ascii=False) + ":"
        assert text.startswith(name), (key, text)
        text = text[len(name):]
        assert json.loads(text.rstrip().rstrip(",")) == value[key], (key, first, last)


def test_the_lines_of_a_reported_failure_are_explained() -> None:
    """A failure's message and fields, below the key its point cites, are what the point says."""
    s = summarise((SECOND / "json_mongo_bulkwrite.txt").read_text(), None)
    assert "L5 writeErrors: 11000: E11000 duplicate key error" in s.text
    assert s.unexplained == 0, s.text


# -- random prefixes on a known build log -------------------------------------------------------

_BUILD = (DATA_ROOT / "summarise" / "gcc_make_errors.txt").read_text()
_ROOT = summarise(_BUILD, None).first_cited
_PREFIXES = st.sampled_from([
    lambda k, name: f"#{k} {k * 0.731:.3f} ",
    lambda k, name: f"{name}  | ",
    lambda k, name: f"12:00:{k % 60:02d} {name} | ",
    lambda k, name: f"Jun  3 12:00:{k % 60:02d} ci-7 {name}[41]: ",
    lambda k, name: f"2024-06-03T12:00:{k % 60:02d}.{k:07d}Z ",
    lambda k, name: f"[2024-06-03 12:00:{k % 60:02d}] ",
    lambda k, name: f"[pod/{name}-7d9f/{name}] ",
    lambda k, name: f"@acme/{name}:build: ",
    lambda k, name: f"{k % 3}|{name}   | ",
    lambda k, name: f"[{name}] ",
    lambda k, name: f"Jun  3 12:00:{k % 60:02d}.{k:06d} ci-7 {name}[41]: ",
    lambda k, name: f"app[{name}]: ",
])


@settings(max_examples=120, deadline=None)
@given(st.lists(_PREFIXES, min_size=1, max_size=2, unique_by=id), st.sampled_from(["api", "builder", "web.1"]),
       st.booleans(), st.integers(0, 500))
def test_random_prefixes_keep_the_root_cause_and_its_line(prefixes, name, trailer, seed) -> None:
    lines = split_stored_lines(_BUILD)
    out = []
    for k, line in enumerate(lines):
        p = ""
        for make in prefixes:
            p += make(seed + k, name)
        out.append(p + line)
    text = "\n".join(out)
    if trailer:
        text = run_command_form(text, 2)
    s = summarise(text, None)
    assert s.first_cited == _ROOT, s.text
    assert "request.c:77:17" in s.text
