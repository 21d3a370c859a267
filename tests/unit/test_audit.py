"""The audit log (issue "wisp runs end to end", "Storage and audit log"; issue
"memory tool": recall reads an event by its byte offset, not by scanning)."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from pathlib import Path

import pytest

from wisp.core.audit import AuditLog, AuditRef, new_event_id


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "realhome"))
    monkeypatch.setenv("WISP_HOME", str(tmp_path / "wisp"))


@pytest.fixture
def adir(tmp_path) -> Path:
    return tmp_path / "audit"


def names(d: Path) -> list[str]:
    return sorted(p for p in os.listdir(d))


TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def test_write_then_read_by_ref(adir):
    log = AuditLog(adir)
    ref = log.write("prompt", {"text": "héllo\nworld"}, conversation=1, turn=2, entry=3)
    assert isinstance(ref, AuditRef)
    assert ref.file == "audit-000001.jsonl" and ref.offset == 0
    ev = log.read(ref)
    assert ev == {
        "id": ref.event_id, "time": ev["time"], "conversation": 1, "turn": 2, "entry": 3,
        "kind": "prompt", "payload": {"text": "héllo\nworld"},
    }
    assert TIME.match(ev["time"])
    ref2 = log.write("response", "plain text")
    assert ref2.offset == (adir / ref.file).stat().st_size - len(
        (adir / ref.file).read_bytes().splitlines(keepends=True)[-1])
    assert log.read(ref2)["payload"] == "plain text"
    assert log.read(ref2)["conversation"] is None
    # one event a line, each a JSON object with exactly the seven keys
    lines = (adir / ref.file).read_bytes().splitlines()
    assert len(lines) == 2
    assert all(set(json.loads(x)) == {"id", "time", "conversation", "turn", "entry", "kind", "payload"}
               for x in lines)
    log.close()


def test_event_is_on_disk_before_write_returns(adir):
    log = AuditLog(adir)
    ref = log.write("tool.result", {"output": "x" * 1000})
    # another reader (not through this object) sees the whole line at once
    with open(adir / ref.file, "rb") as f:
        f.seek(ref.offset)
        line = f.readline()
    assert line.endswith(b"\n") and json.loads(line)["id"] == ref.event_id
    log.close()


def test_event_ids_are_unique_and_sortable(adir):
    log = AuditLog(adir)
    ids = [log.write("k", i).event_id for i in range(500)]
    assert len(set(ids)) == 500
    assert ids == sorted(ids)
    assert all(re.fullmatch(r"ev-[0-9a-f]{20}", i) for i in ids)
    # a clock that goes back still gives increasing ids
    a = new_event_id(now_us=10**15)
    b = new_event_id(now_us=10**15 - 5)
    assert b > a


def test_payload_of_odd_types_is_written(adir):
    log = AuditLog(adir)
    ref = log.write("k", {"path": Path("/x"), "set": {1}, "bytes": b"ab", "tuple": (1, 2),
                          "lone": "a\udc80b"})
    ev = log.read(ref)
    assert ev["payload"]["path"] == "/x"
    assert ev["payload"]["set"] == [1]
    assert ev["payload"]["bytes"] == "ab"
    assert ev["payload"]["tuple"] == [1, 2]
    assert ev["payload"]["lone"] == "a\udc80b"


def test_files_and_dir_are_private(adir):
    old = os.umask(0)
    try:
        log = AuditLog(adir, max_bytes=200, keep=3)
        for i in range(10):
            log.write("k", "x" * 50)
    finally:
        os.umask(old)
    assert stat.S_IMODE(adir.stat().st_mode) == 0o700
    assert len(log.files()) == 3
    for p in log.files():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600


def test_disabled_writes_nothing(adir):
    log = AuditLog(adir, enabled=False)
    assert log.write("prompt", {"text": "x"}) is None
    assert not adir.exists()
    assert list(log.iter_events()) == []
    assert log.current_file is None


def test_rotation_at_max_bytes_keeps_keep_files(adir):
    log = AuditLog(adir, max_bytes=1000, keep=3)
    refs = [log.write("k", {"i": i, "pad": "p" * 100}) for i in range(60)]
    files = names(adir)
    assert len(files) == 3
    nums = [int(re.match(r"audit-(\d+)\.jsonl", n).group(1)) for n in files]
    assert nums == list(range(nums[0], nums[0] + 3))
    assert nums[0] > 1  # the oldest were deleted
    assert log.current_file.name == files[-1]
    for n in files:
        assert (adir / n).stat().st_size <= 1000
    # files are numbered in time order, and no event was ever moved
    kept = [r for r in refs if r.file in files]
    gone = [r for r in refs if r.file not in files]
    assert kept and gone
    for r in kept:
        assert log.read(r)["payload"]["i"] == refs.index(r)
    for r in gone:
        assert log.read(r) is None  # rotated away: the caller falls back to the store
        assert log.find(r.event_id) is None
    assert [e["payload"]["i"] for e in log.iter_events()] == [refs.index(r) for r in kept]


def test_event_larger_than_max_bytes_goes_alone(adir):
    log = AuditLog(adir, max_bytes=300, keep=10)
    a = log.write("k", "small")
    big = log.write("k", "B" * 1000)
    c = log.write("k", "small again")
    assert a.file == "audit-000001.jsonl"
    assert big.file == "audit-000002.jsonl" and big.offset == 0
    assert c.file == "audit-000003.jsonl"
    assert log.read(big)["payload"] == "B" * 1000


def test_reopening_continues_the_highest_file(adir):
    with AuditLog(adir, max_bytes=10_000) as log:
        a = log.write("k", 1)
    with AuditLog(adir, max_bytes=10_000) as log:
        b = log.write("k", 2)
        assert b.file == a.file and b.offset > a.offset
        assert log.read(a)["payload"] == 1 and log.read(b)["payload"] == 2


def test_read_rejects_wrong_id_offset_or_file(adir):
    log = AuditLog(adir)
    a = log.write("k", "a")
    b = log.write("k", "b")
    assert log.read(AuditRef(a.event_id, a.file, b.offset)) is None  # id differs
    assert log.read(AuditRef(a.event_id, a.file, 5)) is None  # middle of a line
    assert log.read(AuditRef(a.event_id, a.file, 10**9)) is None  # past the end
    assert log.read(AuditRef(a.event_id, "audit-000009.jsonl", 0)) is None  # no such file
    assert log.read(AuditRef(a.event_id, "../audit/audit-000001.jsonl", 0)) is None
    assert log.read(AuditRef(a.event_id, a.file, -1)) is None
    assert log.read(a)["payload"] == "a"


def test_read_does_not_scan(adir):
    """Reading the last event touches only its line: everything before it is
    overwritten with bytes that no scanner could get through (no newline, not
    JSON), and the read still works."""
    log = AuditLog(adir, max_bytes=10**9)
    refs = [log.write("k", {"i": i, "text": "line " * 20}) for i in range(2000)]
    last = refs[-1]
    path = adir / last.file
    with open(path, "r+b") as f:
        f.write(b"\x00garbage" * (last.offset // 8) + b"#" * (last.offset % 8))
    assert path.stat().st_size > last.offset
    ev = log.read(last)
    assert ev is not None and ev["payload"]["i"] == 1999
    # a scan cannot find it: it sits at the end of one giant garbled "line"
    assert log.find(refs[0].event_id) is None
    assert log.find(last.event_id) is None
    assert list(log.iter_events()) == []


def test_read_at_a_far_offset_of_a_sparse_gigabyte_file(adir):
    """A 1 GiB log (sparse, so it costs no disk): the reader seeks, it does not read."""
    adir.mkdir()
    path = adir / "audit-000001.jsonl"
    with open(path, "wb") as f:
        f.seek(1 << 30)
        f.write(b"\n")
    log = AuditLog(adir, max_bytes=1 << 31)
    ref = log.write("k", "far")
    assert ref.offset == (1 << 30) + 1
    assert log.read(ref)["payload"] == "far"


def test_garbled_tail_does_not_break_other_events(adir):
    log = AuditLog(adir)
    refs = [log.write("k", i) for i in range(3)]
    log.close()
    path = adir / refs[0].file
    with open(path, "ab") as f:
        f.write(b'{"id":"ev-cut","kind":"k","payl')  # a crash mid-write
    log = AuditLog(adir)
    assert [e["payload"] for e in log.iter_events()] == [0, 1, 2]
    new = log.write("k", 3)
    assert log.read(new)["payload"] == 3
    assert [e["payload"] for e in log.iter_events()] == [0, 1, 2, 3]
    assert all(log.read(r)["payload"] == i for i, r in enumerate(refs))
    assert log.find(new.event_id)["payload"] == 3


def test_truncated_last_line_is_skipped(adir):
    log = AuditLog(adir)
    refs = [log.write("k", i) for i in range(3)]
    path = adir / refs[0].file
    os.truncate(path, path.stat().st_size - 5)
    assert log.read(refs[2]) is None
    assert log.read(refs[1])["payload"] == 1
    assert [e["payload"] for e in log.iter_events()] == [0, 1]


def test_find_scans_all_kept_files(adir):
    log = AuditLog(adir, max_bytes=300, keep=100)
    refs = [log.write("k", {"i": i, "pad": "x" * 50}) for i in range(20)]
    assert len(log.files()) > 3
    for i in (0, 7, 19):
        assert log.find(refs[i].event_id)["payload"]["i"] == i
    assert log.find("ev-00000000000000000000") is None


def test_iter_with_refs_gives_readable_refs(adir):
    log = AuditLog(adir, max_bytes=400, keep=100)
    refs = [log.write("k", i) for i in range(30)]
    assert len(log.files()) > 3
    pairs = list(log.iter_with_refs())
    assert [r for r, _ in pairs] == refs
    for r, ev in pairs:
        assert log.read(r) == ev


def test_threads_do_not_interleave_lines(adir):
    log = AuditLog(adir, max_bytes=5000, keep=1000)
    out: list[AuditRef] = []
    lock = threading.Lock()

    def work(t):
        for i in range(100):
            r = log.write("k", {"t": t, "i": i, "pad": "z" * (i % 37)})
            with lock:
                out.append(r)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 800 and len({r.event_id for r in out}) == 800
    for r in out:
        assert log.read(r) is not None
    assert sum(1 for _ in log.iter_events()) == 800
    for p in log.files():
        assert p.stat().st_size <= 5000


def test_two_writers_on_one_directory_give_correct_refs(adir):
    """Like two wisp processes sharing the log: each ref is still exact."""
    a = AuditLog(adir, max_bytes=2000, keep=100)
    b = AuditLog(adir, max_bytes=2000, keep=100)
    refs = []
    for i in range(100):
        refs.append((a if i % 2 else b).write("k", {"i": i, "pad": "q" * (i % 13)}))
    for i, r in enumerate(refs):
        assert a.read(r)["payload"]["i"] == i
    assert sum(1 for _ in a.iter_events()) == 100


def test_bad_limits_are_refused(adir):
    with pytest.raises(ValueError):
        AuditLog(adir, max_bytes=0)
    with pytest.raises(ValueError):
        AuditLog(adir, keep=0)
