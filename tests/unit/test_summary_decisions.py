"""wisp's completion of a running summary keeps the person's own statements of decisions (issue "Compaction you
can see and trust"), each once: a statement the person made again is kept where it was made last, so it neither
takes the room twice nor pushes an older decision out of the newest 8."""

from __future__ import annotations

from wisp.core.context.summariser import MAX_DECISIONS, complete_summary, person_decisions


class Entry:
    def __init__(self, content: str, kind: str = "prompt") -> None:
        self.kind, self.content, self.number = kind, content, None


def test_a_statement_made_again_is_kept_once_where_it_was_made_last() -> None:
    said = "We decided the CSV export uses semicolons."
    decisions = (person_decisions(1, [Entry(said)]) + person_decisions(2, [Entry("Let's call it Monthly totals.")])
                 + person_decisions(3, [Entry(said.upper())]))
    text = complete_summary({}, {}, decisions, model_text="")
    assert text.splitlines() == ["The person's own words, kept by wisp:",
                                 '- turn 2: "Let\'s call it Monthly totals."',
                                 f'- turn 3: "{said.upper()}"']


def test_the_newest_statements_are_kept_and_those_the_model_wrote_are_not_repeated() -> None:
    decisions = [f'turn {n}: "We\'ll keep item {n}."' for n in range(1, MAX_DECISIONS + 3)]
    text = complete_summary({}, {}, decisions, model_text="they said: we'll keep item 10.")
    kept = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(kept) == MAX_DECISIONS and "item 10." not in text
    assert kept[0] == """- turn 2: "We'll keep item 2.\""""
