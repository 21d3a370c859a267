"""The <think>…</think> splitter: tags split across chunks, and any split gives the same result."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from wisp.core.model.base import StreamText, StreamThinking
from wisp.core.model.thinking import ThinkSplitter, split_thinking


def run(chunks: list[str]) -> list[tuple[str, str]]:
    """Feed chunks; return merged (kind, text) segments."""
    splitter = ThinkSplitter()
    events = []
    for chunk in chunks:
        events.extend(splitter.feed(chunk))
    events.extend(splitter.flush())
    merged: list[tuple[str, str]] = []
    for event in events:
        assert isinstance(event, (StreamText, StreamThinking))
        assert event.text, "no empty events"
        kind = "text" if isinstance(event, StreamText) else "thinking"
        if merged and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + event.text)
        else:
            merged.append((kind, event.text))
    return merged


def test_plain_text_passes_through():
    assert run(["Hello", " world"]) == [("text", "Hello world")]


def test_think_block_is_separated():
    assert run(["<think>plan</think>Answer"]) == [("thinking", "plan"), ("text", "Answer")]


def test_tags_split_across_chunks():
    chunks = ["<thi", "nk>pl", "an</th", "ink", ">Ans", "wer"]
    assert run(chunks) == [("thinking", "plan"), ("text", "Answer")]


def test_tag_split_one_character_at_a_time():
    source = "Hi <think>a b</think>there"
    assert run(list(source)) == [("text", "Hi "), ("thinking", "a b"), ("text", "there")]


def test_blank_lines_after_close_tag_are_dropped():
    assert run(["<think>x</think>", "\n", "\n  Answer\n"]) == [("thinking", "x"), ("text", "Answer\n")]


def test_partial_tag_is_held_back_until_known():
    splitter = ThinkSplitter()
    assert splitter.feed("Hello <thi") == [StreamText("Hello ")]
    assert splitter.feed("s is not a tag") == [StreamText("<this is not a tag")]


def test_unfinished_partial_tag_is_released_at_flush():
    splitter = ThinkSplitter()
    assert splitter.feed("a <th") == [StreamText("a ")]
    assert splitter.flush() == [StreamText("<th")]


def test_unclosed_think_block_stays_thinking():
    assert run(["<think>still going"]) == [("thinking", "still going")]
    splitter = ThinkSplitter()
    splitter.feed("<think>x")
    assert splitter.in_thinking


def test_open_tag_inside_thinking_is_text_of_the_thinking():
    assert run(["<think>a<think>b</think>c"]) == [("thinking", "a<think>b"), ("text", "c")]


def test_close_tag_outside_thinking_is_plain_text():
    assert run(["a</think>b"]) == [("text", "a</think>b")]


def test_two_blocks():
    assert run(["<think>1</think>x<think>2</think>y"]) == [
        ("thinking", "1"),
        ("text", "x"),
        ("thinking", "2"),
        ("text", "y"),
    ]


def test_split_thinking_helper():
    assert split_thinking("<think>why</think>\n\nBecause.") == ("Because.", "why")


def reference(source: str) -> list[tuple[str, str]]:
    """The same rules, written plainly for a whole string."""
    out: list[tuple[str, str]] = []
    in_think, after_close, i = False, False, 0
    while i <= len(source):
        tag = "</think>" if in_think else "<think>"
        j = source.find(tag, i)
        piece = source[i:] if j < 0 else source[i:j]
        if not in_think and after_close:
            piece = piece.lstrip()
        if piece:
            kind = "thinking" if in_think else "text"
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + piece)
            else:
                out.append((kind, piece))
        if j < 0:
            break
        i = j + len(tag)
        in_think = not in_think
        after_close = not in_think
    return out


pieces = st.lists(
    st.one_of(
        st.sampled_from(["<think>", "</think>", "<", ">", "<th", "ink>", "</", "\n", " "]),
        st.text(alphabet="ab <>/thinkTHINK\n", max_size=6),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(parts=pieces, data=st.data())
def test_any_split_gives_the_same_result(parts, data):
    source = "".join(parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(source)), max_size=10)))
    chunks, last = [], 0
    for cut in cuts:
        chunks.append(source[last:cut])
        last = cut
    chunks.append(source[last:])
    assert run(chunks) == run([source]) == reference(source)
    # nothing is lost except the tags themselves and the whitespace after a close tag
    joined = "".join(t for _, t in run(chunks))
    assert len(joined) <= len(source)
