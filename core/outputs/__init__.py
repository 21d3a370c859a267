"""What wisp knows about the outputs of build and test tools, in one place (issue 9,
"One home for output knowledge").

One module per format family holds everything wisp knows about that format:
how to recognise it, its test run (counts and failing tests) and its notable
lines for ``summarise``:

- :mod:`.pytest`, :mod:`.unittest`, :mod:`.python` (tracebacks);
- :mod:`.go`, :mod:`.cargo` (cargo, rustc, nextest), :mod:`.swift`;
- :mod:`.jest` (Jest, Vitest), :mod:`.tsc`, :mod:`.eslint`, :mod:`.npm`,
  :mod:`.node`;
- :mod:`.java` (Maven, Surefire, Gradle, Java stack traces);
- :mod:`.cfamily` (gcc, clang, linkers, make, ninja), :mod:`.cmake`;
- :mod:`.logs`, :mod:`.jsonshape`, :mod:`.other` (bare error lines,
  crashes, CI markers).

The shared shapes: :mod:`.doc` (an output as numbered lines, findings),
:mod:`.testrun` (:class:`TestRun`, the collectors' base), :mod:`.runs`
(the one reading of a test run), :mod:`.commands` (what a command line
says), :mod:`.summaries` (the notable lines and the overview).

Public API:

- :func:`read_test_run` → :class:`TestRun` or None: what the ``tests`` fact
  reads from a stored output; :class:`TestOutputParser`: the same reading
  fed piece by piece as a command runs (``run_command``'s
  ``meta["tests"]``);
- :func:`framework_for_command`, :func:`looks_like_test_command`,
  :func:`fact_name_for_command`;
- :func:`summarise` → :class:`Summary` and :func:`analyse` →
  :class:`Analysis`, as the memory tool's ``summarise`` uses them;
- :func:`split_stored_lines` (recall's line numbering) and
  :func:`exit_status_of` (a tool result's exit status from its meta).

The package is a leaf: it imports only :mod:`wisp.core.tokens` and the
standard library, never context, memory, tools, model, store or episodes.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .commands import fact_name_for_command, framework_for_command, looks_like_test_command, runner_for_command
    from .doc import exit_status_of, split_stored_lines
    from .runs import TestOutputParser, read_test_run
    from .summaries import Analysis, Summary, analyse, summarise
    from .testrun import MAX_LINE_CHARS, MAX_NAMES, TestRun

__all__ = ["TestRun", "TestOutputParser", "read_test_run", "framework_for_command", "runner_for_command",
           "looks_like_test_command", "fact_name_for_command", "summarise", "analyse", "Summary", "Analysis",
           "split_stored_lines", "exit_status_of", "MAX_NAMES", "MAX_LINE_CHARS"]

#: Where each public name lives. A name's module (and the parsers it needs, with their compiled
#: patterns) loads when the name is first used, not with the package: a request without a tool
#: output never loads the test-run readers (issue 12, "Paint first, then open").
_WHERE = {
    "fact_name_for_command": "commands", "framework_for_command": "commands",
    "looks_like_test_command": "commands", "runner_for_command": "commands",
    "exit_status_of": "doc", "split_stored_lines": "doc",
    "TestOutputParser": "runs", "read_test_run": "runs",
    "Analysis": "summaries", "Summary": "summaries", "analyse": "summaries", "summarise": "summaries",
    "MAX_LINE_CHARS": "testrun", "MAX_NAMES": "testrun", "TestRun": "testrun",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
