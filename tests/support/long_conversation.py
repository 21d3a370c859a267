"""A long stored conversation, written fast: for the long-conversation tests and benchmark (issue 12).

Each turn has a prompt (``question N: …``), a ``run_command`` call whose
result has ``output_lines`` lines, and a reply with a fenced code block. The
rows go in through the store's own connection in one transaction (a
thousand turns in well under a second; ``Store.add_entry`` one by one
takes minutes), with the columns the store's migrations made.
"""

from __future__ import annotations

import json
from typing import Any

REPLY = ("Turn {i}: the suite passes. The function that matters is:\n\n```python\n"
         "def total(items: list[int]) -> int:\n    return sum(i for i in items if i > 0)\n```\n\n"
         "It skips the **negative** values, as `test_total` expects.")


def tool_output(lines: int) -> str:
    """A test run's output of ``lines`` lines."""
    return "\n".join(f"tests/test_{n:03d}.py::test_case_{n} PASSED" for n in range(lines))


async def write_turns(store: Any, conversation: int, turns: int, *, output_lines: int = 200,
                      start: int = 1) -> None:
    """Add ``turns`` ended turns (numbers from ``start``) to ``conversation`` in ``store``
    (a :class:`wisp.core.store.Store`)."""
    from wisp.core.store import utc_now

    now = utc_now()
    output = tool_output(output_lines)
    async with store.transaction() as db:
        async with db.execute("SELECT COALESCE(MAX(number), 0) FROM entries WHERE conversation_id = ?",
                              (conversation,)) as cur:
            number = (await cur.fetchone())[0]
        for i in range(start, start + turns):
            cur = await db.execute(
                "INSERT INTO turns (conversation_id, number, state, started_at, ended_at, prompt_tokens,"
                " completion_tokens) VALUES (?, ?, 'done', ?, ?, 100, 50)", (conversation, i, now, now))
            tid = cur.lastrowid
            args = {"command": f"pytest -q tests/test_{i}.py"}
            rows = [("prompt", f"question {i}: does the suite pass after change {i}?", None, None, None, "{}"),
                    ("tool_call", json.dumps(args), "run_command", f"c{i}", json.dumps(args), "{}"),
                    ("tool_result", output, "run_command", f"c{i}", None, json.dumps({"exit_status": 0})),
                    ("reply", REPLY.format(i=i), None, None, None, "{}")]
            for kind, content, tool, call_id, arguments, meta in rows:
                number += 1
                await db.execute(
                    "INSERT INTO entries (conversation_id, turn_id, number, kind, content, tool_name,"
                    " tool_call_id, arguments, meta, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (conversation, tid, number, kind, content, tool, call_id, arguments, meta, now))
