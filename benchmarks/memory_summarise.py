"""summarise on a 50 MB build log: the exact readers' time for the notable lines and
for the overview (issue "The memory tool"). The log is generated: compiler command
lines, progress lines, a few thousand warnings, one error three quarters in, and
make's closing lines; the script checks the first point cites that error.

    python benchmarks/memory_summarise.py [MEGABYTES]
"""

from __future__ import annotations

import random
import sys
import time

import _common  # noqa: F401


def build_log(target_bytes: int, seed: int = 1) -> tuple[str, int]:
    """A build log of about ``target_bytes`` and the 1-based line of its one error."""
    rnd = random.Random(seed)
    out: list[str] = []
    size = n = 0
    mods = ["core", "net", "io", "ui", "db", "auth", "sched", "util"]
    while size < target_bytes:
        n += 1
        m = rnd.choice(mods)
        k = rnd.random()
        if k < 0.55:
            line = f"[{n % 100:3d}%] Building CXX object src/{m}/CMakeFiles/{m}.dir/file_{n}.cpp.o"
        elif k < 0.85:
            line = (f"/usr/bin/c++ -DNDEBUG -I/home/ci/proj/include -I/home/ci/proj/src/{m} -O2 -g -std=gnu++20 "
                    f"-Wall -Wextra -c /home/ci/proj/src/{m}/file_{n}.cpp -o src/{m}/CMakeFiles/{m}.dir/file_{n}.cpp.o")
        elif k < 0.93:
            line = f"  CC      drivers/{m}/obj_{n}.o"
        elif k < 0.995:
            line = f"Scanning dependencies of target {m}_{n % 50}"
        else:
            line = (f"/home/ci/proj/src/{m}/file_{n}.cpp:{rnd.randint(1, 900)}:{rnd.randint(1, 80)}: warning: "
                    f"unused variable 'tmp{n}' [-Wunused-variable]")
        out.append(line)
        size += len(line) + 1
    mid = len(out) * 3 // 4
    out[mid:mid] = ["/home/ci/proj/src/net/socket.cpp:212:9: error: 'kMaxBacklog' was not declared in this scope",
                    "  212 |     if (n > kMaxBacklog) {", "      |         ^~~~~~~~~~~"]
    out += ["make[2]: *** [src/net/CMakeFiles/net.dir/build.make:1120: src/net/CMakeFiles/net.dir/socket.cpp.o] Error 1",
            "make: *** [Makefile:146: all] Error 2"]
    return "\n".join(out) + "\n", mid + 1


def main() -> None:
    from wisp.core.outputs import summarise

    megabytes = float(sys.argv[1]) if len(sys.argv) > 1 else 50
    text, root = build_log(int(megabytes * 1024 * 1024))
    print(f"build log: {len(text.encode()) / 1024 ** 2:.1f} MiB, {text.count(chr(10)):,} lines, error at L{root}")
    for overview in (False, True):
        times = []
        for _ in range(3):
            t = time.perf_counter()
            s = summarise(text, {"exit_status": 2}, overview=overview, budget_tokens=1000)
            times.append(time.perf_counter() - t)
        what = "overview" if overview else "notable lines"
        extra = "" if overview else f"; first point L{s.first_cited} ({'the error' if s.first_cited == root else 'WRONG'})"
        print(f"summarise {what}: median {sorted(times)[1]:.2f} s (min {min(times):.2f}, max {max(times):.2f}){extra}")


if __name__ == "__main__":
    main()
