"""/retry on a real model (issue 16): SmolLM2-135M through the embedded llama.cpp server.

The session's shared embedded server (tests/e2e/conftest.py; CI has two cores): a
turn, ``/retry``, a second version of the reply; the old version stays in the
record, marked superseded, and the next request composes only the new one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wisp.core import events as ev
from wisp.core.commands import run_command
from wisp.core.session import Session, SessionOptions

pytestmark = pytest.mark.real_model


async def test_retry_gives_a_second_version_and_the_context_composes_only_it(embedded_home: Path,
                                                                               tmp_path: Path) -> None:
    async with await Session.open(SessionOptions(workdir=tmp_path, transport="ask")) as s:
        assert await s.connect(), s.endpoint_error
        first = [e async for e in s.run_turn("Name one colour. Answer in one word.")]
        assert first[-1].state in ("done", "cut")
        retry = await run_command(s, "/retry")
        assert retry.action == "retry" and not retry.error, retry.text
        second = [e async for e in s.run_turn(retry.data["prompt"], supersedes=retry.data["turn"])]
        started = second[0]
        assert isinstance(started, ev.TurnStarted) and (started.turn, started.supersedes) == (2, 1)
        assert second[-1].state in ("done", "cut")

        turns = await s.store.turns(s.conversation_id, versions=True)
        assert [(t.number, t.superseded_by) for t in turns] == [(1, 2), (2, None)]
        replies = {t.number: [e for e in await s.store.entries(s.conversation_id, t.id) if e.kind == "reply"]
                   for t in turns}
        assert replies[1] and replies[2], "each version keeps its reply"
        old, new = replies[1][-1], replies[2][-1]

        composed = await s.context.compose(s.conversation_id)
        assistant = [m for m in composed.messages if m["role"] == "assistant"]
        users = [m for m in composed.messages if m["role"] == "user"
                 and not str(m["content"]).startswith("Facts (")]  # between turns the facts stand last, alone
        assert len(users) == 1 and len(assistant) == 1, composed.messages  # one version, not two
        assert assistant[0]["content"].strip() == new.content.strip()
        if old.content.strip() != new.content.strip():
            assert old.content.strip() not in composed.text()
        assert composed.layer("recent").detail["turns"] + composed.layer("older").detail["turns"] == [2]
