"""Shared fixtures: a private WISP_HOME per test and fake endpoints on 127.0.0.1."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.fakes import FakeOllama, FakeOpenAI
from tests.support.home import ROOT, SCREENSHOTS, require_local, write_config  # noqa: F401  (re-exported)



@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    """The API keys a test's wisp took from the environment are forgotten after it
    (:mod:`wisp.core.redact` keeps them for the life of the process)."""
    yield
    from wisp.core.redact import forget_all

    forget_all()


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs with a home of its own, asked for or not, as llm and httpx isolate theirs:
    WISP_HOME, HOME and XDG_DATA_HOME point into a fresh folder beside the test's ``tmp_path``
    (not in it, so a test that lists ``tmp_path`` sees only its own files), so the real home is
    never touched whatever a test forgets. A test that needs the home's path asks for
    :func:`wisp_home`, which lays its own over this one."""
    base = tmp_path_factory.mktemp("isolated")
    monkeypatch.setenv("WISP_HOME", str(base / "wisp-home"))
    monkeypatch.setenv("HOME", str(base / "user"))
    monkeypatch.setenv("XDG_DATA_HOME", str(base / "user" / "data"))
    monkeypatch.delenv("WISP_WORKSPACE", raising=False)


@pytest.fixture(autouse=True)
def _close_memory_harnesses() -> Iterator[None]:
    """A memory harness a failed test left open is closed, so the run can end."""
    yield
    from tests.support.memory_harness import LEFT_OPEN, close_left_open

    if LEFT_OPEN:
        close_left_open()


@pytest.fixture
def wisp_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh WISP_HOME (config, database and audit log inside it); the real home is never touched.
    A shared embedded server started under it is stopped at the end (it would outlive the test)."""
    home = tmp_path / "wisp-home"
    home.mkdir()
    monkeypatch.setenv("WISP_HOME", str(home))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "user" / "data"))
    monkeypatch.delenv("WISP_WORKSPACE", raising=False)
    yield home
    embedded = home / "data" / "embedded"
    if embedded.is_dir() and not embedded.is_symlink():  # a link is the session's shared server's
        from wisp.core.model.embedded import stop_shared_servers

        stop_shared_servers(home / "data")




@pytest.fixture
def fake_ollama() -> Iterator[FakeOllama]:
    with FakeOllama() as srv:
        yield srv


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as srv:
        yield srv


@pytest.fixture
def ollama_home(wisp_home: Path, fake_ollama: FakeOllama) -> tuple[Path, FakeOllama]:
    """A WISP_HOME whose config points at the fake Ollama server."""
    write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": fake_ollama.base_url,
                             "model.name": "wisp-fake:latest", "model.timeout_s": 5,
                             "model.load_wait_s": 10})
    return wisp_home, fake_ollama


@pytest.fixture
def openai_home(wisp_home: Path, fake_openai: FakeOpenAI) -> tuple[Path, FakeOpenAI]:
    """A WISP_HOME whose config points at the fake OpenAI-compatible server."""
    write_config(wisp_home, {"model.provider": "openai", "model.endpoint": fake_openai.base_url,
                             "model.name": "wisp-fake", "model.timeout_s": 5,
                             "model.load_wait_s": 10})
    return wisp_home, fake_openai

