"""What a command line says about its test run (wisp.core.outputs.commands): the framework it
runs, whether it runs tests at all, and the `tests` fact's name (moved from test_test_results.py
and test_context_references.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wisp.core.outputs import fact_name_for_command, framework_for_command, looks_like_test_command
from wisp.core.outputs.commands import FACT_NAME_CHARS, runner_for_command


@pytest.mark.parametrize("command,framework", [
    ("pytest -q", "pytest"), ("python3 -m pytest tests", "pytest"), ("uv run pytest", "pytest"),
    ("go test ./...", "go"), ("cargo test --all", "cargo"), ("cargo nextest run", "cargo"),
    ("npx jest --ci", "jest"), ("npx vitest run", "vitest"), ("swift test --parallel", "swift"),
    ("ls -l", None), ("make", None), ("echo pytestish", None),
])
def test_command_hints(command: str, framework: str | None) -> None:
    assert framework_for_command(command) == framework


def test_test_commands_and_names() -> None:
    assert looks_like_test_command("cd x && python -m pytest -q")
    assert looks_like_test_command("go test ./...") and looks_like_test_command("npm run test")
    assert not looks_like_test_command("git status")
    assert fact_name_for_command("PYTHONPATH=. pytest -q -x tests/") == "pytest tests/"


def test_tests_fact_name_is_the_runner_and_its_targets() -> None:
    """Options and their values don't make a new fact (QA: `-p no:cacheprovider` became part of the name)."""
    assert fact_name_for_command("PYTHONPATH=. /x/.venv/bin/python -m pytest -q -p no:cacheprovider tests/unit") \
        == "pytest tests/unit"
    assert fact_name_for_command("cargo test --release") == "cargo test"
    assert fact_name_for_command("go test ./...") == "go test ./..."
    assert fact_name_for_command("make check") == "make check"


@pytest.mark.parametrize("command,runner", [
    ("make  check", "make check"), ("cd x && tox -e py", "tox"), ("npm run test", "npm run test"),
    ("./gradlew test", "gradlew test"), ("git status", None), ("", None),
])
def test_runner_for_command(command: str, runner: str | None) -> None:
    assert runner_for_command(command) == runner


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_command_line_is_read_without_raising(command: str) -> None:
    """A command line comes from the model: unbalanced quotes and the like never raise."""
    name = fact_name_for_command(command)
    assert isinstance(name, str) and 0 < len(name) <= FACT_NAME_CHARS or not command.strip() and name == ""
    framework_for_command(command)
    assert looks_like_test_command(command) is (runner_for_command(command) is not None)
