"""Maven (javac, Surefire), Gradle and Java stack traces: the test run and the notable lines.

- Surefire's run (framework ``maven``): the ``Results:`` block's ``Tests
  run: 15, Failures: 1, Errors: 1, Skipped: 0`` (summed over the modules of
  a multi-module build); failing names from ``[ERROR] testAdd(com.ex.AppTest)
  Time elapsed: … <<< FAILURE!`` (JUnit 4) and ``[ERROR]
  com.ex.AppTest.testAdd -- Time elapsed: … <<< FAILURE!`` (JUnit 5), as
  ``com.ex.AppTest.testAdd``; when the output holds only the ``Failures:``
  list, its items (``AppTest.testAdd``).
- Gradle's run: ``AppTest > testAdd() FAILED`` names a failing test
  (``AppTest.testAdd()``), and ``3 tests completed, 1 failed, 1 skipped``
  counts them.
- Notable lines: Maven's javac errors (``[ERROR] /path/App.java:[42,17]
  cannot find symbol`` with ``symbol:``/``location:`` under it);
  ``[WARNING]`` ones tallied; Surefire's failures with the exception under
  each; ``[ERROR] Failed to execute goal …`` followed from the others, and
  Maven's closing advice (``-> [Help 1]``, ``Re-run Maven …``) is accounted
  for. Gradle: ``> Task :x FAILED``, ``* What went wrong:`` and ``FAILURE:
  Build failed`` followed from the others. Java stack traces: the deepest
  ``Caused by:`` is the root cause, placed at its first frame. (javac run
  directly writes GCC's form, read by :mod:`.cfamily`.)
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_ROOT, RANK_TEST, Doc, Finding, Reading, shorten
from .testrun import Collector, Names, TestRun

__all__ = ["MavenRun", "GradleRun", "read_maven", "read_java_traces", "read_kotlin"]

_MVN_DIAG = re.compile(r"^\[(?P<sev>ERROR|WARNING)\] (?P<path>(?:[A-Za-z]:)?[^\s\[]+?\.(?:java|kt|scala|groovy)):"
                       r"\[(?P<line>\d+),(?P<col>\d+)\] (?P<msg>.*)$")
_MVN_KOTLIN = re.compile(r"^\[(?P<sev>ERROR|WARNING)\] (?:e|w): (?:file://)?(?P<path>\S+?\.kt):(?P<line>\d+):(?P<col>\d+) (?P<msg>.*)$")
_SUREFIRE4 = re.compile(r"^\[ERROR\] (?P<method>[\w$\[\]., ]+?)\((?P<cls>[\w.$]+)\)(?:\s+--)?\s+Time elapsed: .*<<< "
                        r"(?P<kind>FAILURE|ERROR)!\s*$")
_SUREFIRE5 = re.compile(r"^\[ERROR\] (?P<name>[\w.$]+(?:\.[\w$\[\]]+)?(?:\(\))?)(?:\s+--)?\s+Time elapsed: .*<<< "
                        r"(?P<kind>FAILURE|ERROR)!\s*$")
_SUREFIRE_CLASS = re.compile(r"^\[(?:ERROR|INFO|WARNING)\] Tests run: \d+.*(?:<<< (?:FAILURE|ERROR)!)? - in \S+$|"
                             r"^\[(?:ERROR|INFO|WARNING)\] Tests run: \d+, Failures: \d+.*-- in \S+$")
_TESTS_RUN = re.compile(r"^\[(?:ERROR|INFO|WARNING)\] Tests run: (?P<counts>(?P<run>\d+), Failures: (?P<failures>\d+), "
                        r"Errors: (?P<errors>\d+), Skipped: (?P<skipped>\d+))\s*$")
_FAIL_LIST_HEAD = re.compile(r"^\[ERROR\] (?:Failures|Errors|Tests in error|Failed tests):\s*$")
_FAIL_LIST_ITEM = re.compile(r"^\[ERROR\]\s{2,}(?:Run \d+: )?(?P<name>[\w.$]+(?:[.:]\w+)*)(?::\d+)?\s*(?P<msg>.*)$")
_GOAL = re.compile(r"^\[ERROR\] Failed to execute goal (?P<msg>.*)$")
_MVN_BOILER = re.compile(r"^\[ERROR\] (?:-> \[Help 1\]|To see the full stack trace|Re-run Maven|For more information|"
                         r"\[Help \d+\]|After correcting the problems|\s*mvn <args>|\s*$)|^\[ERROR\]$")
_MVN_ERROR = re.compile(r"^\[ERROR\] (?P<msg>.+)$")
_GRADLE_TASK = re.compile(r"^> Task (?P<task>\S+) FAILED$")
_GRADLE_TEST = re.compile(r"^(?P<cls>[\w.$]+) > (?P<test>.+?) FAILED$")
_GRADLE_COUNTS = re.compile(r"^(?P<run>\d+) tests? completed, (?P<failed>\d+) failed(?:, (?P<skipped>\d+) skipped)?\s*$")
_JAVA_EXC = re.compile(r"^(?:Exception in thread \"[^\"]*\" |Caused by: )?(?P<exc>(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*"
                       r"(?:Exception|Error|Throwable|Failure)[\w$]*)(?:: (?P<msg>.*))?$")
#: A frame, its method qualified by its module and class loader as Java 9+ writes them
#: (``java.base/java.util.Arrays.copyOf``, ``app//org.junit…``, ``java.base@17.0.2/…``).
_JAVA_AT = re.compile(r"^\s+at (?P<frame>[\w.$<>/@-]+)\((?P<file>[\w$.-]+\.(?:java|kt|scala|groovy)):(?P<line>\d+)\)$")
#: Any frame, also one with no file (``(Native Method)``, ``(Unknown Source)``).
_ANY_AT = re.compile(r"^\s+at [\w.$<>/@-]+\(")


def _surefire_name(line: str) -> str | None:
    """The test a Surefire failure line names (JUnit 4 or 5), or None."""
    if m := _SUREFIRE4.match(line):
        return f"{m.group('cls')}.{m.group('method')}"
    if m := _SUREFIRE5.match(line):
        return m.group("name")
    return None


class MavenRun(Collector):
    """Surefire's run under Maven (see the module doc)."""

    framework = "maven"
    prefilter = r"\[(?:ERROR|INFO|WARNING)\] "
    needles = ("error", "test")

    def __init__(self) -> None:
        super().__init__()
        self.listed = Names()  # the Failures:/Errors: list's items
        self.in_list = False

    def line(self, line: str, number: int) -> None:
        if not line.startswith("["):
            return  # another format's line: the Failures: list goes on
        if m := _TESTS_RUN.match(line):
            self.counts = self.counts or {}
            for key in ("run", "failures", "errors", "skipped"):
                self.counts[key] = self.counts.get(key, 0) + int(m.group(key))
            self.summary_at(number)
            self.in_list = False
        elif name := _surefire_name(line):
            self.names.add(name, number)
            self.evidence += 1
        elif _FAIL_LIST_HEAD.match(line):
            self.in_list = True
        elif self.in_list and (m := _FAIL_LIST_ITEM.match(line)):
            self.listed.add(re.sub(r":\d+$", "", m.group("name")), number)
        else:
            self.in_list = False

    def result(self) -> TestRun | None:
        if self.counts is None:
            return None
        if not self.names.names:
            self.names = self.listed
        c = self.counts
        failed, errors, skipped = c["failures"], c["errors"], c["skipped"]
        passed = max(0, c["run"] - failed - errors - skipped)
        return self.run(passed=passed, failed=failed, skipped=skipped, errors=errors, total=c["run"])


class GradleRun(Collector):
    """Gradle's test run (see the module doc)."""

    framework = "gradle"
    prefilter = r"[\w.$]+ > |\d+ tests? completed"
    needles = ("fail", "test")

    def line(self, line: str, number: int) -> None:
        if m := _GRADLE_COUNTS.match(line):
            self.counts = {k: int(v or 0) for k, v in m.groupdict().items()}
            self.summary_at(number)
        elif m := _GRADLE_TEST.match(line):
            self.names.add(f"{m.group('cls')}.{m.group('test')}", number)
            self.evidence += 1

    def result(self) -> TestRun | None:
        if self.counts is None:
            return None
        c = self.counts
        passed = max(0, c["run"] - c["failed"] - c["skipped"])
        return self.run(passed=passed, failed=c["failed"], skipped=c["skipped"], total=c["run"])


def read_maven(doc: Doc, r: Reading) -> None:
    """Maven with javac and Surefire, and Gradle (see the module doc)."""
    tagged = doc.lines_with("[ERROR]", "[WARNING]")
    gradle = doc.lines_with("> Task ", " FAILED", "FAILURE: Build failed", "What went wrong", " tests completed",
                            " test completed")
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
        name = _surefire_name(line)
        if name is not None:
            saw = True
            ctx = tuple(j + 1 for j in range(i + 1, min(doc.n, i + 3)) if doc.lines[j].strip())
            j = i + 1
            while j < doc.n and j - i < 200 and not doc.lines[j].startswith("["):
                r.claim(j + 1)
                j += 1
            first = doc.lines[ctx[0] - 1].strip() if ctx else ""
            kind = "failure" if line.rstrip().endswith("<<< FAILURE!") else "error"
            r.add(Finding(i + 1, kind, name, f"failed {name}" + (f": {shorten(first, 200)}" if first else ""), RANK_TEST,
                          ctx, reader="surefire"))
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
            while j < doc.n and _FAIL_LIST_ITEM.match(doc.lines[j]):
                r.claim(j + 1)
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
            continue
        if line.startswith("FAILURE: Build failed"):
            gsaw = True
            r.add(Finding(i + 1, "error", "gradle", shorten(line, 200), RANK_AFTER, reader="gradle"))
            continue
        if _GRADLE_COUNTS.match(line):
            gsaw = True
            r.tally(i + 1, "gradle: " + line.strip())
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
        if not m or i + 1 >= doc.n or not _ANY_AT.match(doc.lines[i + 1]):
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



#: kotlinc's diagnostics: ``e: file:///…/A.kt:42:17 message`` (Kotlin 1.8+) and
#: ``e: /…/A.kt: (42, 17): message`` (older); ``w:`` for warnings.
_KOTLIN = re.compile(r"^(?P<sev>[ew]): (?:file://)?(?P<path>[^\s:]*?\.kts?)(?::(?P<line>\d+):(?P<col>\d+)|"
                     r": \((?P<line2>\d+), (?P<col2>\d+)\):?) (?P<msg>.+)$")


def read_kotlin(doc: Doc, r: Reading) -> None:
    """kotlinc's ``e:`` (error) and ``w:`` (warning) lines, as Gradle and
    Maven show them: each error a root cause at its file."""
    for i in doc.lines_with("e: ", "w: "):
        if i + 1 in r.claimed:
            continue
        m = _KOTLIN.match(doc.lines[i].strip())
        if not m:
            continue
        path = m.group("path")
        line, col = m.group("line") or m.group("line2"), m.group("col") or m.group("col2")
        at = f"{path}:{line}:{col}"
        if m.group("sev") == "w":
            r.add(Finding(i + 1, "warning", path, f"warning at {at}: {shorten(m.group('msg'), 200)}", reader="kotlin"))
        else:
            r.add(Finding(i + 1, "error", path, f"error at {at}: {shorten(m.group('msg'), 200)}", RANK_ROOT,
                          reader="kotlin"))
