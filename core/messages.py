"""Keys of wisp's neutral chat messages that only wisp reads. A leaf.

A neutral message is a dict with ``role`` and ``content`` (and, for the
model, ``tool_calls``, ``tool_call_id`` and ``name``); each endpoint writes
its own wire shape from those keys alone, so a key named here never reaches a
server.
"""

from __future__ import annotations

__all__ = ["TOOLS_AT"]

#: On the request's system message: where in its content (a character offset) the tool layer goes when
#: the tool protocol writes it into the system message (:mod:`wisp.core.model.prompted`). The composer
#: sets it after the rules and the project's instructions, before the running summary: the summary
#: changes, the tools do not, and a server's prompt cache keeps only an unchanged start.
TOOLS_AT = "tools_at"
