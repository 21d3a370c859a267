"""The search's second reading of its best hits (wisp.core.memory.search):
compound words give their parts, and words found together count again."""

from __future__ import annotations

from hypothesis import given, strategies as st

from wisp.core.memory.search import NEAR_WORDS, read_for, word_parts


def test_compound_words_give_their_parts() -> None:
    assert word_parts("RuntimeError") == ["runtimeerror", "runtime", "error"]
    assert word_parts("test_ingest") == ["test_ingest", "test", "ingest"]
    assert "server" in word_parts("HTTPServer") and "http" in word_parts("HTTPServer")


def test_a_log_line_holding_the_words_together_beats_the_same_words_scattered() -> None:
    weights = {w: (2.0, 1.6) for w in ("error", "ingest", "tests")}
    together = "FAILED tests/integration/test_ingest.py::test_refund - RuntimeError: [E6904] refused"
    scattered = "error " + "filler " * 40 + "ingest " + "filler " * 40 + "tests"
    found_t, near_t = read_for(together, ["error", "ingest", "tests"], weights)
    found_s, near_s = read_for(scattered, ["error", "ingest", "tests"], weights)
    assert set(found_t) == set(found_s) == {"error", "ingest", "tests"}
    assert near_t == 6.0 and near_s == 0.0


def test_a_stem_match_weighs_what_the_stem_weighs() -> None:
    found, _ = read_for("it comes from here", ["come"], {"come": (5.0, 0.7)})
    assert found == {"come": 0.7}


@given(st.text(max_size=400), st.lists(st.from_regex(r"[a-z]{1,8}", fullmatch=True), min_size=1, max_size=4))
def test_read_for_never_raises_and_near_is_bounded(text: str, words: list[str]) -> None:
    weights = {w: (1.0, 0.8) for w in words}
    found, near = read_for(text, words, weights)
    assert set(found) <= set(words)
    assert 0.0 <= near <= sum(found.values()) + 1e-9
    assert NEAR_WORDS > 1
