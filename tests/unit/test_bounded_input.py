"""The pieces that bound what an endpoint sends: the line splitter with its
cap (hypothesis: any text, cut anywhere, splits as ``str.splitlines`` does,
and no line past the cap is ever held), the bounded inflater, and the
reading of ``Retry-After``."""

from __future__ import annotations

import email.utils
import gzip
import zlib

import pytest
from hypothesis import given, settings, strategies as st

from wisp.core.model._transport import (INFLATE_PIECE_BYTES, LineSplitter, LineTooLong, _Inflater,
                                        retry_after_seconds)

# text rich in every line break str.splitlines knows, "\r\n" pairs that a cut may part included
_BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
texts = st.lists(st.one_of(st.sampled_from(_BREAKS), st.text(max_size=30)), max_size=40).map("".join)


def _cut(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in zip(points, points[1:])]


def _split(pieces: list[str], limit: int) -> list[str]:
    splitter = LineSplitter(limit)
    lines: list[str] = []
    for piece in pieces:
        lines += splitter.feed(piece)
        assert splitter.held <= limit
    return lines + splitter.end()


@settings(max_examples=500, deadline=None)
@given(texts, st.lists(st.integers(0, 2000), max_size=12))
def test_any_text_cut_anywhere_splits_as_splitlines(text: str, cuts: list[int]) -> None:
    assert _split(_cut(text, cuts), 10 ** 6) == text.splitlines()


@settings(max_examples=500, deadline=None)
@given(texts, st.lists(st.integers(0, 2000), max_size=12), st.integers(0, 40))
def test_a_line_past_the_cap_raises_and_nothing_longer_is_held(text: str, cuts: list[int], limit: int) -> None:
    longest = max((len(line) for line in text.splitlines()), default=0)
    if longest <= limit:
        assert _split(_cut(text, cuts), limit) == text.splitlines()
    else:
        with pytest.raises(LineTooLong):
            _split(_cut(text, cuts), limit)


def test_an_endless_line_is_refused_as_soon_as_it_passes_the_cap() -> None:
    splitter = LineSplitter(1000)
    fed = 0
    with pytest.raises(LineTooLong):
        while fed < 10 ** 6:
            splitter.feed("a" * 64)
            fed += 64
    assert fed <= 1000


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=5000), st.lists(st.integers(0, 10 ** 5), max_size=8),
       st.sampled_from(["gzip", "deflate", "raw-deflate"]))
def test_the_inflater_gives_back_the_body_cut_anywhere(body: bytes, cuts: list[int], kind: str) -> None:
    if kind == "gzip":
        packed, encoding = gzip.compress(body), "gzip"
    elif kind == "deflate":
        packed, encoding = zlib.compress(body), "deflate"
    else:
        comp = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        packed, encoding = comp.compress(body) + comp.flush(), "deflate"
    points = sorted({c % (len(packed) + 1) for c in cuts} | {0, len(packed)})
    inflater = _Inflater(encoding)
    out = b"".join(p for a, b in zip(points, points[1:]) for p in inflater.feed(packed[a:b]))
    assert out == body


def test_a_bomb_inflates_in_bounded_pieces_and_members_follow() -> None:
    bomb = gzip.compress(bytes(8 * INFLATE_PIECE_BYTES + 5)) + gzip.compress(b"tail")
    pieces = list(_Inflater("gzip").feed(bomb))
    assert max(len(p) for p in pieces) <= INFLATE_PIECE_BYTES
    assert b"".join(pieces) == bytes(8 * INFLATE_PIECE_BYTES + 5) + b"tail"


def test_a_body_that_is_not_gzip_raises_zlib_error() -> None:
    with pytest.raises(zlib.error):
        list(_Inflater("gzip").feed(b"this is not gzip at all"))


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(" 1.5 ") == 1.5
    assert retry_after_seconds(email.utils.formatdate(1000.0 + 20, usegmt=True), now=1000.0) == 20.0
    assert retry_after_seconds(email.utils.formatdate(1000.0 - 20, usegmt=True), now=1000.0) == 0.0
    for bad in (None, "", "soon", "nan", "inf"):
        assert retry_after_seconds(bad) is None


@given(st.text(max_size=60))
def test_retry_after_never_raises(value: str) -> None:
    got = retry_after_seconds(value)
    assert got is None or got >= 0


def test_the_embedded_servers_small_answers_are_read_within_a_cap() -> None:
    """wisp's own server's port could be another program's: its /v1/models and
    status answers are read at most 64 KiB (a gzip bomb there is no answer)."""
    import asyncio
    import json

    import httpx

    from tests.support.fault_http import FaultServer, gzip_bomb, head
    from wisp.core.model._transport import capped_json
    from wisp.core.model.embedded import _answers

    def models(conn, req) -> None:
        body = json.dumps({"data": [{"id": "smol"}]}).encode()
        conn.sendall(head(Content_Length=str(len(body))) + body)

    async def ask(url: str) -> tuple:
        async with httpx.AsyncClient(timeout=10, trust_env=False) as client:
            return await _answers(client, url), await capped_json(client, url + "/v1/models")

    with FaultServer(models) as good:
        assert asyncio.run(ask(good.base_url)) == ("smol", (200, {"data": [{"id": "smol"}]}))
    with FaultServer(gzip_bomb(64 * 1024 * 1024)) as bomb:
        async def bombed() -> tuple:
            async with httpx.AsyncClient(timeout=10, trust_env=False) as client:
                with pytest.raises(ValueError, match="over 65,536 bytes"):
                    await capped_json(client, bomb.base_url + "/v1/models")
                return await _answers(client, bomb.base_url)
        assert asyncio.run(bombed()) is None
