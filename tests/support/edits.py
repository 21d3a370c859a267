"""Helpers of the edit tests: script a model's ``edit_file`` call on a fake endpoint, answer its
approval, read what the model was told and what the audit log holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Awaitable, Callable

from tests.support.fakes import reply, text, tool_call


def edit_turn(arguments: dict[str, Any], after: str = "Done.", *, call_id: str = "call_e1",
              usage: tuple[int, int] | None = None) -> list[dict]:
    """A turn whose model calls ``edit_file`` with ``arguments``, then answers ``after``; ``usage``
    (prompt, completion tokens) is what the fake server reports for each of its two replies."""
    extra = {"usage": usage} if usage is not None else {}
    return [reply(text("Let me change it."), tool_call("edit_file", arguments, id=call_id), finish="tool_calls",
                  **extra), reply(text(after), **extra)]


def told(body: dict) -> list[str]:
    """What the tool results of a request said to the model (the ``tool`` messages' texts), in order."""
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


class Asker:
    """The person's answers to approvals, in order (``once``, ``always``, ``deny``), each with an
    optional action run first (what happens on disk while the modal is open); keeps the requests."""

    def __init__(self, *answers: str, before: Callable[[Any], Awaitable[None] | None] | None = None) -> None:
        self.answers = list(answers)
        self.before = before
        self.requests: list[Any] = []

    async def __call__(self, request: Any) -> tuple[str, str | None]:
        self.requests.append(request)
        if self.before is not None:
            done = self.before(request)
            if done is not None:
                await done
        answer = self.answers.pop(0) if self.answers else "deny"
        return answer, (request.path if answer == "always" else None)


def audit_events(home: Path, kind: str | None = None) -> list[dict]:
    events = []
    for f in sorted((home / "data").rglob("audit-*.jsonl")):
        events += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return [e for e in events if kind is None or e["kind"] == kind]
