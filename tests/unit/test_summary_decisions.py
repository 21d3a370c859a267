"""What the person stated survives every running summary: wisp keeps, beside the model's summary, the
person's statements (facts about the work, names, constraints, preferences, "remember that …", decisions),
each with its turn and entry, cut to a sentence, newest first when over its share of the budget, never a
whole paste; and a statement the person made again is kept once, where it was made last. The identifiers
wisp completes a summary with name the entry of the turn they came from."""

from __future__ import annotations

import re

from hypothesis import given, settings, strategies as st

from wisp.core.context.coverage import Item
from wisp.core.context.summariser import complete_summary, person_asked, person_decisions, previous_decisions
from wisp.core.context.summary import SummaryVersion
from wisp.core.statements import MAX_STATEMENT_WORDS, STATEMENT_CHARS, person_statements
from wisp.core.tokens import estimate_tokens


class Entry:
    def __init__(self, content: str, kind: str = "prompt", number: int | None = None) -> None:
        self.kind, self.content, self.number = kind, content, number


def test_plain_statements_of_fact_are_kept_not_only_decisions() -> None:
    prompt = ("Hi! The service listens on port 8437. We run 12 workers in production. What does the config say? "
              "Read docs/deploy.md. Remember that staging is on host bravo-3.internal. Our database is Postgres. "
              "Keep answers short.")
    assert person_statements(prompt) == [
        "The service listens on port 8437.", "We run 12 workers in production.",
        "Remember that staging is on host bravo-3.internal.", "Our database is Postgres.", "Keep answers short."]


def test_questions_requests_and_step_numbers_are_not_statements() -> None:
    for said in ("Which port does the service use?", "Read src/app/config.py.", "Run the tests again.",
                 "Next, about step 23: the client keeps its state in one place.", "Thanks, that helps.",
                 "How many workers do we run in production"):
        assert person_statements(said) == [], said


def test_a_statement_made_again_is_kept_once_where_it_was_made_last() -> None:
    said = "We decided the CSV export uses semicolons."
    decisions = (person_decisions(1, [Entry(said, number=1)]) +
                 person_decisions(2, [Entry("Let's call it Monthly totals.", number=4)])
                 + person_decisions(3, [Entry(said.upper(), number=7)]))
    text = complete_summary({}, {}, decisions, model_text="")
    assert text.splitlines() == ["What the person stated, kept by wisp (turn, entry):",
                                 '- turn 2, entry 4: "Let\'s call it Monthly totals."',
                                 f'- turn 3, entry 7: "{said.upper()}"']


def test_statements_are_kept_whatever_the_model_wrote_and_the_newest_when_over_the_cap() -> None:
    decisions = [f'turn {n}, entry {3 * n}: "We keep item {n} at port {8000 + n}."' for n in range(1, 41)]
    model = "they said: we keep item 40 at port 8040."
    text = complete_summary({}, {}, decisions, model_text=model, statement_tokens=200)
    kept = [line for line in text.splitlines() if line.startswith('- turn')]
    assert kept[-1] == '- turn 40, entry 120: "We keep item 40 at port 8040."'  # in the model's text too: kept
    assert sum(estimate_tokens(k) + 1 for k in kept) <= 200 and len(kept) < 40
    assert kept == [f'- {d}' for d in decisions[-len(kept):]]  # the newest, in order
    assert f"({40 - len(kept)} older statements not kept here for room" in text


def test_a_later_version_keeps_the_statements_of_the_earlier_one() -> None:
    first = complete_summary({}, {}, person_decisions(3, [Entry("The service listens on port 8437.", number=9)]),
                             model_text="")
    version = SummaryVersion(1, 1, first, (1, 2, 3), completion=first)
    again = previous_decisions(version)
    assert again == ['turn 3, entry 9: "The service listens on port 8437."']


def test_identifiers_name_the_entry_of_the_turn_they_came_from() -> None:
    """An identifier said in turns 9, 14 and 15 is credited to each turn's own entry (it was credited to
    turn 9's entry 28 in all three)."""
    item = Item("error_code", "AUTH-401")
    sources = {(9, "error_code:AUTH-401"): 28, (14, "error_code:AUTH-401"): 41, (15, "error_code:AUTH-401"): 44}
    text = complete_summary({9: [item], 14: [item], 15: [item]}, sources, [], model_text="")
    assert "- turn 9, entry 28: AUTH-401" in text
    assert "- turn 14, entry 41: AUTH-401" in text and "- turn 15, entry 44: AUTH-401" in text


def test_a_paste_of_long_lines_is_never_quoted_whole() -> None:
    paste = ("A" * 100_000) + "\n" + ("B" * 100_000)
    asked = person_asked(4, [Entry(paste, number=12)])
    assert len(asked) < 200 and asked.startswith('turn 4, entry 12: the person asked "AAAA')
    assert person_statements(paste) == []
    assert person_statements(paste + " The port is 8437.") == []  # a sentence of the paste, too long for one


_SENTENCE = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400)


@settings(max_examples=300, deadline=None)
@given(st.lists(_SENTENCE, max_size=30))
def test_no_statement_is_over_its_cap_and_none_is_lost_below_the_budget(parts: list[str]) -> None:
    text = " ".join(parts)
    found = person_statements(text)
    for s in found:
        assert len(s) <= STATEMENT_CHARS and len(s.split()) <= MAX_STATEMENT_WORDS
        assert "\n" not in s
    decisions = [f'turn {i + 1}, entry {i + 1}: "{s}"' for i, s in enumerate(found)]
    budget = sum(estimate_tokens(f"- {d}") + 1 for d in decisions)
    text_out = complete_summary({}, {}, decisions, model_text="", statement_tokens=budget)
    for d in decisions:  # all fit the budget: none lost
        assert f"- {d}" in text_out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([
    "The gateway listens on port {n}.", "We run {n} workers.", "Remember that the host is node-{n}.internal.",
    "Job {n} starts at 0{d}:30 UTC.", "Use version 2.{d}.{n} from now on."]), min_size=1, max_size=60),
    st.integers(min_value=40, max_value=600))
def test_the_kept_statements_are_the_newest_that_fit(templates: list[str], cap: int) -> None:
    decisions = [f'turn {i + 1}, entry {2 * i + 1}: "{t.format(n=100 + i, d=i % 10)}"'
                 for i, t in enumerate(templates)]
    out = complete_summary({}, {}, decisions, model_text="", statement_tokens=cap)
    rows = [line[2:] for line in out.splitlines() if re.match(r"- turn \d+", line)]
    assert sum(estimate_tokens(f"- {r}") + 1 for r in rows) <= cap
    assert rows == decisions[len(decisions) - len(rows):]


def test_sure_statements_are_kept_before_later_ones_that_only_sound_like_a_rule() -> None:
    """Prose full of "should" and "always" came after the person's plain statements and pushed them out."""
    sure = 'turn 3, entry 7: "The service listens on port 8437."'
    weak = [f'turn {n}, entry {2 * n}: "The team should always look at things {"abcdefghij"[n % 10]} first."'
            for n in range(4, 40)]
    out = complete_summary({}, {}, [sure, *weak], model_text="", statement_tokens=120)
    assert f"- {sure}" in out
    rows = [line for line in out.splitlines() if line.startswith("- turn")]
    assert rows[0] == f"- {sure}" and rows[-1] == f"- {weak[-1]}"  # in their order, the newest weak ones after it


def test_a_function_named_as_code_is_an_identifier_to_keep() -> None:
    from wisp.core.context.coverage import extract_items, is_present

    items = extract_items("The leak comes from resolve_account() in the worker; Client.refresh() is fine.")
    assert {Item("symbol", "resolve_account()"), Item("symbol", "Client.refresh()")} <= items
    assert is_present(Item("symbol", "resolve_account()"), "the summary names resolve_account as the cause")
    assert not is_present(Item("symbol", "resolve_account()"), "the summary names resolve_accounts")


def test_lines_of_a_pasted_log_are_not_the_persons_statements() -> None:
    """A new user's pasted deploy log filled the list ("2026-05-08 12:25:00", "… items=201 latency_ms=167")
    and pushed out "The project codename is Bramble and the owner is Marta Quill." from turn 1."""
    log = "\n".join(f"2026-05-08 12:{i:02d}:00 INFO ingest: finished batch {i} items=201 latency_ms=167"
                    for i in range(60))
    prompt = f"Here is the deploy log:\n{log}\nThe owner of this service is Marta Quill."
    assert person_statements(prompt) == ["The owner of this service is Marta Quill."]
    assert person_statements('{"port": 8437, "host": "db-1"}\npool_size = 33') == []
    # nor the lines of a pasted traceback (a new user's: both were kept as their statements)
    trace = ('Traceback (most recent call last):\n  File "/tmp/proj/invoice.py", line 5, in total\n'
             '    return sum(items)\nTypeError: unsupported operand\nThe tax rate is 21 percent.')
    assert person_statements(trace) == ["The tax rate is 21 percent."]
    # identifiers and the word "error" in the person's own sentence are no log line
    said = "The failing test is tests/test_pay.py::test_refund_rounding, error PAY-402."
    assert person_statements(said) == [said]


def test_a_version_names_every_turn_it_had_no_room_to_list() -> None:
    """The turns an earlier version left out for room are named again, with those this one leaves out
    (a version covering turns 1–15 said "3 older turns not listed" and began at turn 8)."""
    asked = [f'turn {n}, entry {2 * n - 1}: the person asked "question number {n} about the work"'
             for n in range(1, 16)]
    first = complete_summary({}, {}, [], model_text="", asked=asked[:10], own_tokens=200)
    v1 = SummaryVersion(1, 1, first, tuple(range(1, 11)), completion=first)
    gone_first = re.search(r"\(turns ([\d–, ]+) not listed here for room", first)
    assert gone_first, first
    from wisp.core.context.summariser import previous_asked

    second = complete_summary({}, {}, [], model_text="", asked=[*previous_asked(v1), *asked[10:]], own_tokens=200)
    listed = {int(n) for n in re.findall(r"- turn (\d+), entry", second)}
    gone = re.search(r"\(turns ([\d–, ]+) not listed here for room", second).group(1)
    from wisp.core.context.summariser import _turns_in

    assert listed | _turns_in(gone) == set(range(1, 16)) and 15 in listed


def test_a_passage_the_person_quotes_to_edit_is_not_what_they_state() -> None:
    """A draft paragraph pasted in quotes for editing held values ('forty thousand files', 'eleven
    seconds') that counted as sure statements and, pasted twice, pushed the manager's name stated in
    passing out of the eval's 1,024-token window; a short quote (a value, a name) still counts."""
    draft = ("Here is the next paragraph of the draft: 'The manifest cache keeps the last manifest of every "
             "folder in memory, so a plan no longer reads every file's hash from disk. On a folder of forty "
             "thousand files this takes the plan from eleven seconds to under one.' Make it shorter.")
    assert person_statements(draft) == []
    # a quote the person asks to keep is theirs
    rule = ('Remember this: "the staging database listens on port 6544 from now on, since the old port '
            'clashed with the metrics exporter on every machine"')
    assert person_statements(rule) == [rule]
    said = 'The owner said "use port 8437" and we agreed. Oh, and my manager, Ilse Varga, signs off.'
    assert person_statements(said) == ['The owner said "use port 8437" and we agreed.',
                                       "Oh, and my manager, Ilse Varga, signs off."]
    # an apostrophe inside a word opens nothing: the person's own sentence after it is theirs
    assert person_statements("The file's owner is Aiko. It's 'done' now, we decided to ship on 3 May.") == [
        "The file's owner is Aiko.", "It's 'done' now, we decided to ship on 3 May."]


@given(st.text(alphabet=st.sampled_from(list("ab '\"“”‘’.:\n")), max_size=200))
def test_quoted_passages_lie_inside_the_text_in_order(text: str) -> None:
    from wisp.core.statements import PASSAGE_WORDS, quoted_passages

    spans = quoted_passages(text)
    assert all(0 <= a < b <= len(text) for a, b in spans)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:]))
    assert all(len(text[a + 1:b - 1].split()) >= PASSAGE_WORDS for a, b in spans)
