"""The names of the tools wisp has: a leaf, so that config validation can read
them without loading a tool (issue "One core, built once": "Validate config
against a leaf list of tool names"). Config validation and :func:`wisp.core.toolset.choose_tools` read it; :mod:`wisp.core.tools.registry` maps
each to its class, and a test checks the two agree."""

from __future__ import annotations

#: Every tool wisp has, in the order ``/tools`` and errors list them.
TOOL_NAMES: tuple[str, ...] = ("read_file", "system_info", "run_command", "memory")
