"""Which identifiers a turn's running summary must keep (wisp.core.context.summariser.item_sources): a
paste is read by its head and tail, and a turn gives at most MAX_TURN_ITEMS. CI found the bound missing:
after a 2 MB base64 paste (base64 is full of slashed runs that read as paths) the running summary held
395,529 tokens and the next turn could not be sent."""

from __future__ import annotations

import base64
import hashlib

from hypothesis import given, settings, strategies as st

from wisp.core.context.coverage import Item
from wisp.core.context.summariser import MAX_TURN_ITEMS, item_sources, turn_items


class Entry:
    def __init__(self, content: str, kind: str = "prompt", number: int | None = None) -> None:
        self.kind, self.content, self.number = kind, content, number


def base64_paste(size: int) -> str:
    blob = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(size // 43 + 1))
    encoded = base64.b64encode(blob).decode()
    return "".join(encoded[i:i + 76] + "\n" for i in range(0, len(encoded), 76))


def test_a_2_mb_base64_paste_gives_a_bounded_set_from_its_head_and_tail() -> None:
    paste = "See src/app/main.py first.\n" + base64_paste(2_000_000) + "Then tests/test_app.py::test_run.\n"
    items = item_sources([Entry(paste, number=193)])  # the whole paste holds 8,050 "identifiers"
    assert 0 < len(items) <= 64 and set(items.values()) == {193}
    assert Item("path", "src/app/main.py") in items  # the head's
    head, tail = paste[:4_000], paste[-4_000:]
    assert all(i.text in head or i.text in tail for i in items)


def test_an_ordinary_turn_keeps_every_identifier_in_its_order() -> None:
    entries = [Entry("Fix src/pay/charge.py for PAY-402.", number=1),
               Entry("Commit 3f9a2c1b changed tests/test_pay.py::test_refund_rounding.", "reply", number=2)]
    items = item_sources(entries)
    assert set(items) == turn_items(entries) and list(items.values()) == [1, 1, 2, 2]
    assert [i.text for i in items] == ["src/pay/charge.py", "PAY-402", "3f9a2c1b",
                                       "tests/test_pay.py::test_refund_rounding"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=3000), max_size=8))
def test_any_turn_gives_at_most_the_bound_and_always_the_same(texts: list[str]) -> None:
    entries = [Entry(t, number=n) for n, t in enumerate(texts)]
    first = item_sources(entries)
    assert len(first) <= MAX_TURN_ITEMS and first == item_sources(entries)
