"""Opening what is seen (issue 12) with the versions of a turn (issue 16): the page below a window
of turns, its counts and the prompt history hold only the current version of a turn asked again
(/retry, /edit), as the page above it (load_page) and the composed request do."""

from __future__ import annotations

from pathlib import Path

from wisp.core.database import open_store
from wisp.core.transcript import load_after, load_page, prompt_history
from tests.support.long_conversation import write_turns


async def retried(tmp_path: Path) -> tuple[object, int]:
    """A stored conversation of 30 turns whose turn 10 was asked again (turn 31 replaced it)."""
    store = await open_store(tmp_path / "wisp.db")
    conv = (await store.create_conversation(str(tmp_path), model="m", title="t")).id
    await write_turns(store, conv, 30, output_lines=2)
    turn = await store.begin_turn(conv, supersedes=10)
    await store.add_entry(conv, turn.id, "prompt", "question 10 again: does the suite pass?")
    await store.add_entry(conv, turn.id, "reply", "Yes.")
    await store.end_turn(turn.id, "done")
    return store, conv


async def test_the_page_below_a_window_holds_only_current_turns(tmp_path: Path) -> None:
    store, conv = await retried(tmp_path)
    try:
        page = await load_after(store, conv, 5, 10)
        assert [t.number for t in page.turns] == [6, 7, 8, 9, 11, 12, 13, 14, 15, 16]
        assert page.earlier == 5 and page.later == 30 - 5 - 10  # 30 current turns in all (31 less turn 10)
        last = await load_after(store, conv, 25, 10)
        assert [t.number for t in last.turns] == [26, 27, 28, 29, 30, 31] and last.later == 0
        assert last.turns[-1].versions == [10, 31]  # the new version names the one it replaced
        above = await load_page(store, conv, 10, before_number=12)
        assert [t.number for t in above.turns] == [*range(1, 10), 11] and above.earlier == 0
        empty = await load_after(store, conv, 31, 10)
        assert empty.turns == [] and empty.earlier == 30 and empty.later == 0
    finally:
        await store.close()


async def test_the_prompt_history_leaves_out_replaced_turns(tmp_path: Path) -> None:
    store, conv = await retried(tmp_path)
    try:
        history = await prompt_history(store, conv)
        assert len(history) == 30 and history[-1] == "question 10 again: does the suite pass?"
        assert not any(p.startswith("question 10:") for p in history)
        assert (await prompt_history(store, conv, limit=3))[0].startswith("question 29:")
    finally:
        await store.close()
