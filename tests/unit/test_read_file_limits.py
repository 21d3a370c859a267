"""read_file never hangs and always makes progress (issue "Nothing runs, leaks, hangs or is lost
that shouldn't be", "Nothing hangs"): FIFOs, devices and sockets are refused without being opened
in a blocking way, the reading runs in a thread with a deadline, pages are bytes with a cap, and a
line longer than the page is cut with a marker whose from_byte reads on."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wisp.core.tools import ToolContext
from wisp.core.tools import read_file as rf
from wisp.core.tools.read_file import ReadFile


class _Cfg:
    def __init__(self, **values):
        self.values = values

    def get(self, key):
        return self.values.get(key)


def ctx(workdir: Path, **cfg) -> ToolContext:
    return ToolContext(workdir=workdir, config=_Cfg(**cfg))


async def read(workdir: Path, limit_s: float = 20.0, **args) -> rf.ToolResult:
    return await asyncio.wait_for(ReadFile().run(args, ctx(workdir, **args.pop("cfg", {}))), limit_s)


async def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    started = time.monotonic()
    r = await read(tmp_path, path="pipe")
    assert not r.ok and "a FIFO (named pipe), not a regular file" in r.content
    assert time.monotonic() - started < 5


async def test_devices_and_sockets_are_refused(tmp_path: Path) -> None:
    (tmp_path / "zero").symlink_to("/dev/zero")
    r = await ReadFile().run({"path": "/dev/zero"}, ctx(tmp_path, **{"tools.read_file.allow_outside_workdir": True}))
    assert not r.ok and "a character device" in r.content
    r = await read(tmp_path, path="zero", cfg={"tools.read_file.allow_outside_workdir": True})
    assert not r.ok and "a character device" in r.content
    r = await read(tmp_path, path="zero")  # a link inside pointing outside is outside
    assert not r.ok and "outside the working directory" in r.content
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock_path = tmp_path / "s.sock"
    sock.bind(str(sock_path))
    sock.listen(1)
    try:
        r = await read(tmp_path, path="s.sock")
        assert not r.ok and "a socket, not a regular file" in r.content
    finally:
        sock.close()


async def test_the_event_loop_keeps_running_while_a_file_is_read(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system that hangs: the read waits in its thread, the loop stays free, and the deadline
    answers."""
    (tmp_path / "a.txt").write_text("hello\n")
    release = threading.Event()
    entered = threading.Event()
    real = rf.open_regular

    def hanging_open(path):
        entered.set()
        release.wait(30)
        return real(path)

    monkeypatch.setattr(rf, "open_regular", hanging_open)
    monkeypatch.setattr(rf, "READ_DEADLINE_S", 1.0)
    task = asyncio.ensure_future(ReadFile().run({"path": "a.txt"}, ctx(tmp_path)))
    ticks = 0
    while not entered.is_set():
        await asyncio.sleep(0.01)
    while not task.done():  # the loop runs other work while the thread hangs
        ticks += 1
        await asyncio.sleep(0.01)
    release.set()
    r = task.result()
    assert ticks > 5
    assert not r.ok and "took longer than 1 s" in r.content and "file system" in r.content


async def test_a_300_mb_line_is_cut_and_read_on_by_bytes(tmp_path: Path) -> None:
    size = 300 * 1024 * 1024
    path = tmp_path / "one-line.txt"
    with open(path, "wb") as fh:
        block = b"abcdefghij" * 104857  # ~1 MiB, no newline
        written = 0
        while written < size:
            piece = block[: size - written]
            fh.write(piece)
            written += len(piece)
        fh.write(b"\nsecond line\n")
    cap = 262144
    started = time.monotonic()
    r = await read(tmp_path, path="one-line.txt")
    took = time.monotonic() - started
    assert r.ok and took < 5, took
    lines = r.content.split("\n")
    assert lines[0].startswith("1\tabcdefghij") and len(lines[0]) == 2 + cap
    assert lines[-1] == (f"[line 1 goes on past this page of {cap:,} bytes (the file is {size + 13:,} bytes); "
                         f"call read_file with from_byte={cap} to read on]")
    assert len(r.content.encode()) < cap + 500
    # following the marker makes progress, and reaches the next line
    r2 = await read(tmp_path, path="one-line.txt", from_byte=cap)
    assert r2.content.startswith(f"[from byte {cap:,}: the rest of line 1]\n1\t")
    assert f"from_byte={2 * cap}" in r2.content
    near_end = size - 10
    r3 = await read(tmp_path, path="one-line.txt", from_byte=near_end)
    assert r3.content == (f"[from byte {near_end:,}: the rest of line 1]\n1\tabcdefghij\n2\tsecond line\n"
                          "[end of file]")
    r4 = await read(tmp_path, path="one-line.txt", offset=2)
    assert r4.content == "2\tsecond line\n[end of file]"
    path.unlink()


async def test_a_2_gb_sparse_file_answers_at_once(tmp_path: Path) -> None:
    path = tmp_path / "sparse.txt"
    with open(path, "wb") as fh:
        fh.truncate(2 * 1024 ** 3)
    started = time.monotonic()
    r = await read(tmp_path, path="sparse.txt")
    assert time.monotonic() - started < 5
    assert not r.ok and "binary" in r.content
    # text first, then the hole: the text is read and the NULs are refused by position
    with open(path, "r+b") as fh:
        fh.write(b"x" * 10000 + b"\n" + b"y" * 10)
    r = await read(tmp_path, path="sparse.txt")
    assert not r.ok and "a NUL byte at byte 10,011" in r.content
    r = await read(tmp_path, path="sparse.txt", cfg={"tools.read_file.max_bytes": 10005})
    assert r.ok and r.content.startswith("1\txxxx") and "call read_file with offset=2" in r.content
    assert "the file is 2,147,483,648 bytes" in r.content


async def test_an_offset_past_the_end_and_a_from_byte_past_the_end(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    r = await read(tmp_path, path="a.txt", offset=3)
    assert not r.ok and "has 2 lines; offset 3 is past the end" in r.content
    r = await read(tmp_path, path="a.txt", from_byte=100)
    assert not r.ok and "from_byte 100 is past the end" in r.content
    r = await read(tmp_path, path="a.txt", from_byte=4)
    assert r.content == "2\ttwo\n[end of file]"
    r = await read(tmp_path, path="a.txt", offset=10 ** 30, limit=10 ** 30)
    assert not r.ok and "past the end" in r.content


async def test_crlf_ends_are_dropped_and_a_cut_keeps_every_character(tmp_path: Path) -> None:
    (tmp_path / "dos.txt").write_bytes(b"one\r\ntwo\rthree\r\n")
    r = await read(tmp_path, path="dos.txt")
    assert r.content == "1\tone\n2\ttwo\rthree\n[end of file]"
    (tmp_path / "wide.txt").write_bytes("é".encode() * 10)
    r = await read(tmp_path, path="wide.txt", cfg={"tools.read_file.max_bytes": 5})
    assert r.content.startswith("1\téé\n") and "from_byte=4" in r.content  # not cut inside é
    r = await read(tmp_path, path="wide.txt", from_byte=5, cfg={"tools.read_file.max_bytes": 5})
    assert r.content.startswith("[from byte 6: the rest of line 1]\n1\téé\n")  # starts at a whole é


def _follow(workdir: Path, name: str, max_bytes: int, limit: int) -> list[tuple[int, str]]:
    """Read a whole file by following the markers; returns (line number, text) pieces."""
    pieces: list[tuple[int, str]] = []
    args: dict = {"path": name, "limit": limit}
    for _ in range(10000):
        r = asyncio.run(ReadFile().run(dict(args), ctx(workdir, **{"tools.read_file.max_bytes": max_bytes})))
        assert r.ok, r.content
        body = r.content.split("\n")
        marker = body[-1]
        for line in body[:-1]:
            if line.startswith("[from byte "):
                continue
            number, _, text = line.partition("\t")
            pieces.append((int(number), text))
        if marker == "[end of file]":
            return pieces
        m = re.search(r"from_byte=(\d+)", marker) or re.search(r"offset=(\d+)", marker)
        assert m, marker
        key = "from_byte" if "from_byte" in marker else "offset"
        args = {"path": name, "limit": limit, key: int(m.group(1))}
        if key == "offset":
            args.pop("from_byte", None)
    raise AssertionError("no progress")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0\n\r"),
                             max_size=40), max_size=12),
       max_bytes=st.integers(4, 64), limit=st.integers(1, 5), end_newline=st.booleans())
def test_following_the_markers_reads_every_line_whole(tmp_path_factory, text, max_bytes, limit,
                                                       end_newline) -> None:
    work = tmp_path_factory.mktemp("pages")
    data = "\n".join(text) + ("\n" if end_newline and text else "")
    (work / "f.txt").write_bytes(data.encode())
    pieces = _follow(work, "f.txt", max_bytes, limit)
    joined: dict[int, str] = {}
    for number, piece in pieces:
        joined[number] = joined.get(number, "") + piece
    expected = data.split("\n")
    if data.endswith("\n") or not data:
        expected = expected[:-1]
    assert [joined.get(i + 1, "") for i in range(len(expected))] == expected
    assert set(joined) <= set(range(1, len(expected) + 1))
