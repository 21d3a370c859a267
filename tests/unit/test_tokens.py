"""The token estimate (wisp.core.tokens) against real SmolLM2 counts (issue 10, "Exact tokens")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wisp.core.tokens import SAMPLE_ABOVE, _cost, chars_per_token, estimate_tokens, text_kind

DATA = json.loads((Path(__file__).parent.parent / "data" / "tokens" / "smollm2_counts.json").read_text())
SAMPLES = DATA["samples"]


@pytest.mark.parametrize("sample", SAMPLES, ids=[s["kind"] for s in SAMPLES])
def test_each_kind_is_estimated_within_ten_percent(sample: dict) -> None:
    real = sample["smollm2_tokens"]
    assert abs(estimate_tokens(sample["text"]) - real) <= real * 0.10


def test_the_flat_estimate_was_far_off_for_logs_and_numbered_code() -> None:
    # the reason for the change: four characters a token undercounts these by a third or more
    for sample in SAMPLES:
        if sample["kind"] in ("log", "numbered code"):
            assert estimate_tokens(sample["text"], 4.0) < sample["smollm2_tokens"] * 0.75


def test_empty_and_tiny_texts() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 1
    assert estimate_tokens(" ") == 1
    assert estimate_tokens("12345678") == 8  # digits one by one
    assert estimate_tokens("hello world") == 2


def test_a_huge_text_is_estimated_from_samples_close_to_the_whole() -> None:
    code = next(s["text"] for s in SAMPLES if s["kind"] == "code")
    big = code * (SAMPLE_ABOVE // len(code) + 2)
    assert len(big) > SAMPLE_ABOVE
    whole = _cost(big)
    assert abs(estimate_tokens(big) - whole) <= whole * 0.05


def test_chars_per_token_is_the_texts_own() -> None:
    log = next(s["text"] for s in SAMPLES if s["kind"] == "log")
    prose = next(s["text"] for s in SAMPLES if s["kind"] == "prose")
    assert chars_per_token(log) < chars_per_token(prose)
    assert chars_per_token("") > 0


def test_text_kind() -> None:
    kinds = {s["kind"]: text_kind(s["text"]) for s in SAMPLES}
    assert kinds == {"code": "code", "numbered code": "code", "log": "log", "prose": "prose"}


def test_a_window_the_server_cannot_take_is_cut_to_its_n_ctx() -> None:
    """Found by a new user: config said 99,999,999 and wisp planned requests for it while the
    embedded server had 8,192, so a long prompt was sent whole and refused."""
    from wisp.core.tokens import window_from

    assert window_from(99_999_999, 8192, cap=8192) == (
        8192, "the server's n_ctx (config model.context_window asks 99,999,999)")
    assert window_from(4096, 8192, cap=8192) == (4096, "config model.context_window")
    assert window_from(None, 8192, cap=8192) == (8192, "the endpoint")
    assert window_from(99_999_999, 8192) == (99_999_999, "config model.context_window")  # no cap: config rules
