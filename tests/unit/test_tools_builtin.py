"""read_file and system_info, on real files in a temporary directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wisp.core.tools import ToolContext, UnknownTool
from wisp.core.tools.registry import build_registry
from wisp.core.tools.base import check_arguments
from wisp.core.tools.read_file import ReadFile
from wisp.core.tools.system_info import SystemInfo


class _Cfg:
    def __init__(self, **values):
        self.values = values

    def get(self, key):
        return self.values.get(key)


def ctx(workdir: Path, **cfg) -> ToolContext:
    return ToolContext(workdir=workdir, config=_Cfg(**cfg))


async def test_read_file_numbers_lines_and_ends(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\nbeta\ngamma\n")
    r = await ReadFile().run({"path": "a.txt"}, ctx(tmp_path))
    assert r.ok
    assert r.content == "1\talpha\n2\tbeta\n3\tgamma\n[end of file]"
    assert r.meta["lines"] == 3


async def test_read_file_pages_with_offset_and_limit(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    r = await ReadFile().run({"path": "big.txt", "offset": 10, "limit": 5}, ctx(tmp_path))
    lines = r.content.splitlines()
    assert lines[0] == "10\tline 10"
    assert lines[4] == "14\tline 14"
    assert lines[5] == "[more: lines 15-100 of 100; call read_file with offset=15]"
    # following the hint reads the next page exactly
    r2 = await ReadFile().run({"path": "big.txt", "offset": 15, "limit": 86}, ctx(tmp_path))
    assert r2.content.splitlines()[0] == "15\tline 15"
    assert r2.content.endswith("100\tline 100\n[end of file]")


async def test_read_file_is_confined_to_workdir(tmp_path: Path) -> None:
    inside = tmp_path / "work"
    inside.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    for path in ("../secret.txt", str(secret)):
        r = await ReadFile().run({"path": path}, ctx(inside))
        assert not r.ok
        assert "outside the working directory" in r.content
        assert "top secret" not in r.content
    # a symlink pointing out is refused too
    (inside / "link.txt").symlink_to(secret)
    r = await ReadFile().run({"path": "link.txt"}, ctx(inside))
    assert not r.ok and "top secret" not in r.content
    # and allowed when the config says so
    r = await ReadFile().run({"path": str(secret)},
                             ctx(inside, **{"tools.read_file.allow_outside_workdir": True}))
    assert r.ok and "top secret" in r.content


async def test_read_file_errors_are_results_not_exceptions(tmp_path: Path) -> None:
    (tmp_path / "bin.dat").write_bytes(b"\x00\x01\x02")
    (tmp_path / "d").mkdir()
    cases = [({"path": "missing.txt"}, "no file"), ({"path": "bin.dat"}, "binary"),
             ({"path": "d"}, "directory"), ({"path": ""}, "needs a path")]
    for args, words in cases:
        r = await ReadFile().run(args, ctx(tmp_path))
        assert not r.ok and words in r.content


async def test_read_file_respects_byte_cap(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text(("x" * 999 + "\n") * 50)
    r = await ReadFile().run({"path": "wide.txt"}, ctx(tmp_path, **{"tools.read_file.max_bytes": 5000}))
    assert r.content.count("\n") <= 6
    assert "[more: lines 6-50 of 50" in r.content


@pytest.mark.parametrize("topic,word", [("memory", "RAM"), ("cpu", "CPU"), ("disk", "Disk"), ("os", "OS")])
async def test_system_info_topics(tmp_path: Path, topic: str, word: str) -> None:
    r = await SystemInfo().run({"topic": topic}, ctx(tmp_path))
    assert r.ok and r.content.startswith(word)


async def test_system_info_memory_matches_proc(tmp_path: Path) -> None:
    if not Path("/proc/meminfo").exists():
        pytest.skip("no /proc/meminfo on this system")
    total_kib = int(Path("/proc/meminfo").read_text().split()[1])
    r = await SystemInfo().run({"topic": "memory"}, ctx(tmp_path))
    assert f"{total_kib * 1024 / 2**30:.1f} GiB total" in r.content


async def test_system_info_unknown_topic(tmp_path: Path) -> None:
    r = await SystemInfo().run({"topic": "weather"}, ctx(tmp_path))
    assert not r.ok and "memory, cpu, disk, os" in r.content


def test_registry_and_argument_checks() -> None:
    reg = build_registry(["read_file", "system_info"])
    assert reg.names == ["read_file", "system_info"]
    assert [s["function"]["name"] for s in reg.schemas()] == ["read_file", "system_info"]
    with pytest.raises(UnknownTool, match="wisp has read_file"):
        build_registry(["teleport"])
    rf = reg.get("read_file")
    assert check_arguments(rf, {}) == "error: read_file needs the argument 'path'"
    assert "has no argument 'colour'" in check_arguments(rf, {"path": "a", "colour": 1})
    assert "must be a integer" in check_arguments(rf, {"path": "a", "offset": "ten"})
    args = {"path": "a", "offset": "10"}
    assert check_arguments(rf, args) is None and args["offset"] == 10
    assert "must be one of" in check_arguments(reg.get("system_info"), {"topic": "x"})
