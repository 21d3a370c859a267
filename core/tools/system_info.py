"""The ``system_info`` tool: facts about this machine, by topic.

Topics: ``memory`` (RAM, not the conversation's memory), ``cpu``, ``disk`` and
``os`` (issue "wisp runs end to end"). Read from the standard library and
``/proc`` where there is one; nothing is run.
"""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path
from typing import Any

from .base import ToolContext, ToolResult

TOPICS = ("memory", "cpu", "disk", "os")


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def memory_info() -> str:
    """RAM in GiB from /proc/meminfo (Linux) or sysconf."""
    try:
        fields: dict[str, int] = {}
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            fields[key] = int(rest.split()[0]) * 1024
        total, avail = fields["MemTotal"], fields.get("MemAvailable", fields.get("MemFree", 0))
        return f"RAM: {_gib(total)} total, {_gib(avail)} available, {_gib(total - avail)} in use"
    except (OSError, KeyError, ValueError):
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            return f"RAM: {_gib(total)} total"
        except (ValueError, OSError, AttributeError):
            return "RAM: unknown on this system"


def cpu_info() -> str:
    """Processor model, logical cores and load average."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    text = f"CPU: {model}, {os.cpu_count()} logical cores"
    try:
        one, five, fifteen = os.getloadavg()
        text += f"; load average {one:.2f} {five:.2f} {fifteen:.2f}"
    except OSError:
        pass
    return text


def disk_info(path: Path) -> str:
    """Size and free space of the file system holding ``path``."""
    usage = shutil.disk_usage(path)
    return f"Disk at {path}: {_gib(usage.total)} total, {_gib(usage.free)} free, {_gib(usage.used)} used"


def os_info() -> str:
    """Operating system, release and Python version."""
    return (f"OS: {platform.system()} {platform.release()} ({platform.machine()}); "
            f"Python {platform.python_version()}")


class SystemInfo:
    """Report RAM, CPU, disk or OS facts."""

    name = "system_info"
    read_only = True
    description = "This machine's RAM (topic memory), processor (cpu), disk space (disk) or operating system (os)."
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"topic": {"type": "string", "enum": list(TOPICS)}},
        "required": ["topic"],
    }

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """One topic's facts as a line of text; an unknown topic is an error result."""
        topic = str(arguments.get("topic", "")).strip().lower()
        if topic == "memory":
            return ToolResult(memory_info())
        if topic == "cpu":
            return ToolResult(cpu_info())
        if topic == "disk":
            return ToolResult(disk_info(ctx.workdir))
        if topic == "os":
            return ToolResult(os_info())
        return ToolResult(f"error: no topic {topic!r}; use one of {', '.join(TOPICS)}", ok=False)
