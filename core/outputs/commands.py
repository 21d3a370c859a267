"""What a command line says about the test run its output holds, and the ``tests`` fact's name.

- :func:`framework_for_command`: the framework a command runs, among those
  whose output wisp reads (``pytest -q`` → ``pytest``); it breaks ties
  when an output could be read several ways.
- :func:`runner_for_command` / :func:`looks_like_test_command`: whether a
  command runs tests at all (``make check``, ``tox``, ``npm test`` …), so
  that its exit status alone can say passed or failed.
- :func:`fact_name_for_command`: the ``tests`` fact's name (issue "Layered
  context", "Facts": the command without its options).
"""

from __future__ import annotations

import re
import shlex

__all__ = ["framework_for_command", "runner_for_command", "looks_like_test_command", "fact_name_for_command",
           "FACT_NAME_CHARS"]

#: Characters of a ``tests`` fact's name.
FACT_NAME_CHARS = 60

_COMMAND_HINTS: list[tuple[str, re.Pattern[str]]] = [
    ("pytest", re.compile(r"(?:^|[\s/;&|(])(?:py\.test|pytest)\b|-m\s+pytest\b")),
    ("go", re.compile(r"(?:^|[\s/;&|(])go\s+test\b")),
    ("cargo", re.compile(r"(?:^|[\s/;&|(])cargo\s+(?:\+\S+\s+)?(?:test|nextest)\b")),
    ("vitest", re.compile(r"(?:^|[\s/;&|(])vitest\b")),
    ("jest", re.compile(r"(?:^|[\s/;&|(])jest\b")),
    ("swift", re.compile(r"(?:^|[\s/;&|(])swift\s+test\b")),
]
_TEST_COMMAND = re.compile(
    r"(^|[\s;&|/])(pytest|py\.test|tox|nox|unittest|go\s+test|cargo\s+(test|nextest)|npm\s+(run\s+)?test|"
    r"yarn\s+(run\s+)?test|pnpm\s+(run\s+)?test|jest|vitest|mocha|rspec|make\s+(test|check)|ctest|"
    r"swift\s+test|mvn\s+test|gradle\w*\s+test|dotnet\s+test|phpunit|bats|prove|mix\s+test|deno\s+test|"
    r"bun\s+test)(\s|$)",
    re.IGNORECASE,
)
#: The runner's name in a fact's name, where it is not the framework's.
_RUNNER_NAMES = {"go": "go test", "cargo": "cargo test", "swift": "swift test"}


def framework_for_command(command: str | None) -> str | None:
    """The framework a command line runs (``pytest -q`` → ``pytest``,
    ``go test ./...`` → ``go``), or None when it names none of them."""
    if not command:
        return None
    for name, rx in _COMMAND_HINTS:
        if rx.search(command):
            return name
    return None


def runner_for_command(command: str | None) -> str | None:
    """The test runner a command line names, as written with its spaces
    folded (``make  check`` → ``make check``, ``cd x && tox -e py`` →
    ``tox``), or None when it runs no tests."""
    m = _TEST_COMMAND.search(command or "")
    return " ".join(m.group(2).split()) if m else None


def looks_like_test_command(command: str | None) -> bool:
    """Whether a command line runs tests (pytest, go test, cargo test, npm test, make test …)."""
    return runner_for_command(command) is not None


def fact_name_for_command(command: str) -> str:
    """The ``tests`` fact's name for a command, at most :data:`FACT_NAME_CHARS` characters.

    For a framework wisp knows (:func:`framework_for_command`) it is the
    runner and the targets named (``pytest tests/unit`` for
    ``PYTHONPATH=. .venv/bin/python -m pytest -q -p no:cacheprovider tests/unit``),
    so reruns with other options update one fact; otherwise the command's
    words without options and environment assignments.
    """
    try:
        words = shlex.split(command or "")
    except ValueError:
        words = (command or "").split()
    framework = framework_for_command(command)
    if framework is not None:
        runner = _RUNNER_NAMES.get(framework, framework)
        targets = [w for w in words[1:] if not w.startswith("-") and not re.match(r"^\w+=", w)
                   and ("/" in w or "::" in w or re.search(r"\.(py|js|ts|tsx|go|rs|swift)$", w))
                   and not re.search(r"(^|/)(python[\d.]*|node|npx)$", w)]
        name = " ".join([runner, *targets])
    else:
        kept = [w for w in words if not w.startswith("-") and not re.match(r"^\w+=", w)]
        name = " ".join(kept) or (command or "tests").strip()
    return name if len(name) <= FACT_NAME_CHARS else name[:FACT_NAME_CHARS - 1] + "…"
