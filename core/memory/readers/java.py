"""Readers for Maven, javac, Surefire, Gradle and Java stack traces.

- Maven's javac errors: ``[ERROR] /path/App.java:[42,17] cannot find symbol``
  with ``symbol:``/``location:`` under it; ``[WARNING]`` ones tallied.
- Surefire: ``[ERROR] testAdd(com.ex.AppTest)  Time elapsed: … <<< FAILURE!``
  (JUnit 4) and ``[ERROR] com.ex.AppTest.testAdd  Time elapsed: … <<<
  FAILURE!`` (JUnit 5) with the exception under it; the ``Failures:`` list
  and ``Tests run: …`` kept.
- ``[ERROR] Failed to execute goal …`` followed from the others; Maven's
  closing advice (``-> [Help 1]``, ``Re-run Maven …``) is accounted for.
- Gradle: ``> Task :x FAILED``, ``* What went wrong:`` and ``FAILURE: Build
  failed`` followed from the others; ``AppTest > testAdd() FAILED`` lists a
  failing test.
- Java stack traces: the deepest ``Caused by:`` is the root cause, placed at
  its first frame.
(javac run directly writes GCC's form, read by :mod:`.cfamily`.)
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_ROOT, RANK_TEST, Doc, Finding, Reading, shorten

_MVN_DIAG = re.compile(r"^\[(?P<sev>ERROR|WARNING)\] (?P<path>(?:[A-Za-z]:)?[^\s\[]+?\.(?:java|kt|scala|groovy)):"
                       r"\[(?P<line>\d+),(?P<col>\d+)\] (?P<msg>.*)$")
_MVN_KOTLIN = re.compile(r"^\[(?P<sev>ERROR|WARNING)\] (?:e|w): (?:file://)?(?P<path>\S+?\.kt):(?P<line>\d+):(?P<col>\d+) (?P<msg>.*)$")
_SUREFIRE4 = re.compile(r"^\[ERROR\] (?P<method>[\w$\[\]., ]+?)\((?P<cls>[\w.$]+)\)(?:\s+--)?\s+Time elapsed: .*<<< "
                        r"(?P<kind>FAILURE|ERROR)!\s*$")
_SUREFIRE5 = re.compile(r"^\[ERROR\] (?P<name>[\w.$]+(?:\.[\w$\[\]]+)?(?:\(\))?)(?:\s+--)?\s+Time elapsed: .*<<< "
                        r"(?P<kind>FAILURE|ERROR)!\s*$")
_SUREFIRE_CLASS = re.compile(r"^\[(?:ERROR|INFO|WARNING)\] Tests run: \d+.*(?:<<< (?:FAILURE|ERROR)!)? - in \S+$|"
                             r"^\[(?:ERROR|INFO|WARNING)\] Tests run: \d+, Failures: \d+.*-- in \S+$")
_TESTS_RUN = re.compile(r"^\[(?:ERROR|INFO|WARNING)\] Tests run: (?P<counts>\d+, Failures: \d+, Errors: \d+, Skipped: \d+)\s*$")
_FAIL_LIST_HEAD = re.compile(r"^\[ERROR\] (?:Failures|Errors|Tests in error|Failed tests):\s*$")
_FAIL_LIST_ITEM = re.compile(r"^\[ERROR\]\s{2,}(?:Run \d+: )?(?P<name>[\w.$]+(?:[.:]\w+)*)(?::\d+)?\s*(?P<msg>.*)$")
_GOAL = re.compile(r"^\[ERROR\] Failed to execute goal (?P<msg>.*)$")
_MVN_BOILER = re.compile(r"^\[ERROR\] (?:-> \[Help 1\]|To see the full stack trace|Re-run Maven|For more information|"
                         r"\[Help \d+\]|After correcting the problems|\s*mvn <args>|\s*$)|^\[ERROR\]$")
_MVN_ERROR = re.compile(r"^\[ERROR\] (?P<msg>.+)$")
_GRADLE_TASK = re.compile(r"^> Task (?P<task>\S+) FAILED$")
_GRADLE_TEST = re.compile(r"^(?P<cls>[\w.$]+) > (?P<test>.+?) FAILED$")
_JAVA_EXC = re.compile(r"^(?:Exception in thread \"[^\"]*\" |Caused by: )?(?P<exc>(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*"
                       r"(?:Exception|Error|Throwable|Failure)[\w$]*)(?:: (?P<msg>.*))?$")
_JAVA_AT = re.compile(r"^\s+at (?P<frame>[\w.$<>]+)\((?P<file>[\w$.-]+\.(?:java|kt|scala|groovy)):(?P<line>\d+)\)$")


def read_maven(doc: Doc, r: Reading) -> None:
    """Maven with javac and Surefire, and Gradle (see the module doc)."""
    tagged = doc.lines_with("[ERROR]", "[WARNING]")
    gradle = doc.lines_with("> Task ", " FAILED", "FAILURE: Build failed", "What went wrong")
    if not tagged and not gradle:
        return
    saw = False
    seen_diags: set[tuple[str, str, str, str]] = set()
    for i in tagged:
        if i + 1 in r.claimed:
            continue
        line = doc.lines[i]
        m = _MVN_DIAG.match(line) or _MVN_KOTLIN.match(line)
        if m:
            saw = True
            path = m.group("path")
            key = (path, m.group("line"), m.group("col"), m.group("msg").strip())
            if key in seen_diags:  # Maven repeats the compiler's errors in its closing report
                r.claim(i + 1)
                j = i + 1
                while j < doc.n and re.match(r"^\[ERROR\]\s{2,}\S|^\s{2,}\S", doc.lines[j]):
                    r.claim(j + 1)
                    j += 1
                continue
            seen_diags.add(key)
            at = f"{path}:{m.group('line')}:{m.group('col')}"
            if m.group("sev") == "WARNING":
                r.add(Finding(i + 1, "warning", path, f"warning at {at}: {shorten(m.group('msg'), 200)}", reader="maven"))
                continue
            ctx = tuple(j + 1 for j in range(i + 1, min(doc.n, i + 3)) if doc.lines[j].startswith("  "))
            r.add(Finding(i + 1, "error", path, f"error at {at}: {shorten(m.group('msg'), 200)}", RANK_ROOT, ctx,
                          reader="maven"))
            continue
        m4 = _SUREFIRE4.match(line)
        m5 = None if m4 else _SUREFIRE5.match(line)
        if m4 or m5:
            saw = True
            name = f"{m4.group('cls')}.{m4.group('method')}" if m4 else m5.group("name")  # type: ignore[union-attr]
            ctx = tuple(j + 1 for j in range(i + 1, min(doc.n, i + 3)) if doc.lines[j].strip())
            j = i + 1
            while j < doc.n and j - i < 200 and not doc.lines[j].startswith("["):
                r.claim(j + 1)
                j += 1
            first = doc.lines[ctx[0] - 1].strip() if ctx else ""
            kind = "failure" if (m4 or m5).group("kind") == "FAILURE" else "error"  # type: ignore[union-attr]
            r.add(Finding(i + 1, kind, name, f"failed {name}" + (f": {shorten(first, 200)}" if first else ""), RANK_TEST,
                          ctx, reader="surefire"))
            r.fail_test(name, i + 1)
            continue
        if _SUREFIRE_CLASS.match(line):
            saw = True
            r.claim(i + 1)
            continue
        m = _TESTS_RUN.match(line)
        if m:
            saw = True
            r.tally(i + 1, "surefire: tests run: " + m.group("counts").split(", ", 1)[0] + ", " +
                    m.group("counts").split(", ", 1)[1])
            continue
        if _FAIL_LIST_HEAD.match(line):
            saw = True
            r.claim(i + 1)
            j = i + 1
            while j < doc.n and (im := _FAIL_LIST_ITEM.match(doc.lines[j])):
                r.claim(j + 1)
                name = re.sub(r":\d+$", "", im.group("name"))
                if not any(name in t or t in name for t in r.failing_tests):
                    r.fail_test(name, j + 1)
                j += 1
            continue
        m = _GOAL.match(line)
        if m:
            saw = True
            r.add(Finding(i + 1, "error", "maven", f"maven: failed to execute goal {shorten(m.group('msg'), 220)}",
                          RANK_AFTER, reader="maven"))
            continue
        if line.startswith("[ERROR] Please refer to ") or line.startswith("[ERROR] Crash dump"):
            r.claim(i + 1)
            continue
        if _MVN_BOILER.match(line) or line.startswith("[ERROR] COMPILATION ERROR") or line.startswith("[ERROR] BUILD"):
            r.claim(i + 1)
            continue
    if saw or any("BUILD FAILURE" in doc.lines[i] for i in doc.lines_with("BUILD FAILURE")):
        r.saw("maven")
        for i in doc.lines_with("BUILD FAILURE", "COMPILATION ERROR", "[INFO] "):
            if re.match(r"^\[INFO\] (?:BUILD FAILURE|\d+ (?:errors?|warnings?))\s*$", doc.lines[i]) \
                    or "COMPILATION ERROR" in doc.lines[i]:
                r.claim(i + 1)
        for i in tagged:
            line = doc.lines[i]
            if i + 1 in r.claimed:
                continue
            if line.startswith("[WARNING]"):
                text = line[len("[WARNING]"):].strip()
                if text:
                    r.add(Finding(i + 1, "warning", "maven", f"maven warning: {shorten(text, 200)}", reader="maven"))
                else:
                    r.claim(i + 1)
            elif (m := _MVN_ERROR.match(line)):
                text = m.group("msg").strip()
                if re.match(r"^\d+ errors?\s*$", text):
                    r.claim(i + 1)
                    continue
                r.add(Finding(i + 1, "error", "maven", f"maven error: {shorten(text, 200)}", RANK_ROOT,
                              reader="maven"))
    # Gradle
    gsaw = False
    for i in gradle:
        if i + 1 in r.claimed:
            continue
        line = doc.lines[i]
        m = _GRADLE_TASK.match(line)
        if m:
            gsaw = True
            r.add(Finding(i + 1, "error", "gradle", f"gradle: task {m.group('task')} failed", RANK_AFTER, reader="gradle"))
            continue
        m = _GRADLE_TEST.match(line)
        if m:
            gsaw = True
            name = f"{m.group('cls')}.{m.group('test')}"
            ctx = tuple(j + 1 for j in range(i + 1, min(doc.n, i + 3)) if doc.lines[j].startswith("    "))
            first = doc.lines[ctx[0] - 1].strip() if ctx else ""
            r.add(Finding(i + 1, "failure", name, f"failed {name}" + (f": {shorten(first, 200)}" if first else ""),
                          RANK_TEST, ctx, reader="gradle"))
            r.fail_test(name, i + 1)
            continue
        if line.startswith("FAILURE: Build failed"):
            gsaw = True
            r.add(Finding(i + 1, "error", "gradle", shorten(line, 200), RANK_AFTER, reader="gradle"))
            continue
        if line.startswith("* What went wrong"):
            gsaw = True
            r.claim(i + 1)
            ctx = tuple(j + 1 for j in range(i + 1, min(doc.n, i + 3)) if doc.lines[j].strip())
            r.claim(*ctx)
    if gsaw:
        r.saw("gradle")
        for i in doc.lines_with("BUILD FAILED", "* Try:", "Run with --stacktrace", "Run with --info",
                                "Get more help at", "> Run with"):
            r.claim(i + 1)


def read_java_traces(doc: Doc, r: Reading) -> None:
    """Java stack traces: the deepest ``Caused by:`` of each, at its first frame."""
    for i in doc.lines_with("Exception", "Error", "Throwable"):
        if i + 1 in r.claimed:
            continue
        line = doc.lines[i]
        if line.startswith("Caused by: "):
            continue
        m = _JAVA_EXC.match(line)
        if not m or i + 1 >= doc.n or not _JAVA_AT.match(doc.lines[i + 1]):
            continue
        # the trace: frames, "... N more", "Caused by:" blocks
        causes = [i]
        j = i + 1
        while j < doc.n and j - i < 3000:
            ln = doc.lines[j]
            if _JAVA_AT.match(ln) or re.match(r"^\s+\.\.\. \d+ (?:more|common frames omitted)$", ln) \
                    or re.match(r"^\s+at ", ln):
                j += 1
                continue
            if ln.startswith("Caused by: ") or ln.lstrip().startswith("Suppressed: "):
                if ln.startswith("Caused by: "):
                    causes.append(j)
                j += 1
                continue
            break
        r.claim_range(i + 1, j)
        root = causes[-1]
        place, where = "java", ""
        for k in range(root + 1, min(j, root + 40)):
            fm = _JAVA_AT.match(doc.lines[k])
            if fm:
                place, where = fm.group("file"), f" (at {fm.group('file')}:{fm.group('line')})"
                break
        text = doc.lines[root].strip()
        r.add(Finding(root + 1, "error", place, f"{shorten(text, 200)}{where}", RANK_ROOT,
                      (i + 1,) if root != i else (), reader="java"))


__all__ = ["read_maven", "read_java_traces"]
