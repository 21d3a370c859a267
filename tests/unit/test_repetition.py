"""The detector of a reply that repeats itself (wisp.core.model.repetition): property tests.
A true loop is always found, however it is streamed; prose, code and Markdown tables, whose
structure repeats, are not."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from wisp.core.model.repetition import CHECK_EVERY, MAX_SPAN, RepeatWatch, find_repeat

MIN = 600
words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=9)


def chunks(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in zip(points, points[1:])]


@settings(max_examples=150, deadline=None)
@given(prefix=st.text(max_size=300), span=st.text(min_size=1, max_size=MAX_SPAN // 4),
       extra=st.integers(0, 5), cuts=st.lists(st.integers(0, 10**6), max_size=40))
def test_a_true_loop_is_always_found_and_while_it_streams(prefix: str, span: str, extra: int, cuts: list[int]) -> None:
    copies = max(3, -(-MIN // len(span))) + extra
    text = prefix + span * copies
    found = find_repeat(text, MIN)
    assert found is not None and found.copies >= 3 and found.chars >= MIN
    assert len(span) % len(found.span) == 0 or found.chars >= MIN  # the shortest period of the run
    watch = RepeatWatch(MIN)
    seen = None
    for piece in chunks(text + span * (CHECK_EVERY // len(span) + 2), cuts):
        seen = seen or watch.feed(piece)
    assert seen is not None


@st.composite
def prose(draw) -> str:
    sentences = draw(st.lists(st.lists(words, min_size=3, max_size=14), min_size=5, max_size=60))
    return " ".join(" ".join(s).capitalize() + "." for s in sentences)


@st.composite
def table(draw) -> str:
    cols = draw(st.integers(2, 8))
    rows = draw(st.integers(1, 200))
    cells = draw(st.lists(st.lists(words, min_size=cols, max_size=cols), min_size=rows, max_size=rows))
    head = "| " + " | ".join(f"col{i}" for i in range(cols)) + " |\n" + "|" + "---|" * cols + "\n"
    # a row's number is in it, as in any listing: no two rows are equal
    return head + "".join(f"| {n} | " + " | ".join(r) + " |\n" for n, r in enumerate(rows and cells))


@st.composite
def code(draw) -> str:
    names = draw(st.lists(words, min_size=5, max_size=80))
    lines = ["def handler(self, event):"]
    for i, name in enumerate(names):
        lines.append(f"    self.{name}_{i} = event.get({name!r}, None)")
        lines.append(f"    if self.{name}_{i} is None:\n        return")
    return "\n".join(lines) + "\n"


@settings(max_examples=120, deadline=None)
@given(parts=st.lists(st.one_of(prose(), table(), code()), min_size=1, max_size=4),
       cuts=st.lists(st.integers(0, 10**6), max_size=60))
def test_prose_code_and_tables_are_never_stopped(parts: list[str], cuts: list[int]) -> None:
    # each part is its own (three equal 600-character blocks in a row would be a loop)
    text = "\n\n".join(f"Part {i}:\n{p}" for i, p in enumerate(parts))
    watch = RepeatWatch(MIN)
    for piece in chunks(text, cuts):
        assert watch.feed(piece) is None
    assert find_repeat(text, MIN) is None


def test_the_rule_s_edges() -> None:
    assert find_repeat("ab" * 299, MIN) is None            # 598 characters: under the rule
    assert find_repeat("ab" * 300, MIN).span in ("ab", "ba")
    assert find_repeat("x" * 10**6, 0) is None              # 0 never stops
    long_span = "".join(chr(0x4e00 + i) for i in range(MAX_SPAN + 1))
    assert find_repeat(long_span * 5, MIN) is None          # a span longer than MAX_SPAN is left to the cap
    two = "".join(chr(0x4e00 + i) for i in range(400))
    assert find_repeat("intro " + two * 2, MIN) is None     # two copies are not a loop
    assert find_repeat("intro " + two * 3, MIN).copies == 3
    r = find_repeat("x" + "hello world. " * 100, MIN)
    assert r.chars == 13 * 100 and r.copies == 100 and "13-character span" in r.describe()


@settings(max_examples=60, deadline=None)
@given(line=st.text(alphabet="abcdefghij 0123456789:", min_size=5, max_size=60), extra=st.integers(1, 4),
       cuts=st.lists(st.integers(0, 10**6), max_size=20))
def test_quoting_what_the_model_was_given_is_not_a_loop_until_it_goes_past_it(line: str, extra: int,
                                                                                 cuts: list[int]) -> None:
    """A pasted log of one line over and over, repeated back, is the model quoting it; once the reply
    repeats the line more often than the paste holds it, the run is the model's own and stops it."""
    copies = max(3, -(-MIN // len(line))) + 2
    paste = "Here is the log:\n" + (line + "\n") * copies
    echo = "You said: " + (line + "\n") * copies
    watch = RepeatWatch(MIN, quoted=paste)
    assert all(watch.feed(piece) is None for piece in chunks(echo, cuts))
    unquoted = RepeatWatch(MIN)
    assert any(unquoted.feed(piece) is not None for piece in chunks(echo, cuts)) or \
        find_repeat(echo, MIN) is not None
    past = RepeatWatch(MIN, quoted=paste)
    more = echo + (line + "\n") * (extra + copies)
    assert any(past.feed(piece) is not None for piece in chunks(more, cuts + [len(more)]))
