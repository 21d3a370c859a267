"""Keys of wisp's neutral chat messages that only wisp reads. A leaf.

A neutral message is a dict with ``role`` and ``content`` (and, for the
model, ``tool_calls``, ``tool_call_id`` and ``name``); each endpoint writes
its own wire shape from those keys alone, so a key named here never reaches a
server.
"""

from __future__ import annotations

__all__ = ["TOOLS_AT", "CONTEXT_AT", "CONTEXT_JOIN"]

#: On the request's system message: where in its content (a character offset) the tool layer goes when
#: the tool protocol writes it into the system message (:mod:`wisp.core.model.prompted`). The composer
#: sets it after the rules and the project's instructions, before the running summary: the summary
#: changes, the tools do not, and a server's prompt cache keeps only an unchanged start.
TOOLS_AT = "tools_at"
#: On the request's user message that ends with the facts and the task (the current prompt, or a
#: message of them alone): where in its content (a character offset) they begin, the marker that
#: joins them to the person's words included. Under the prompted protocol they move to the end of
#: the system message (:func:`wisp.core.model.prompted.to_prompted_messages`): SmolLM2-135M, which
#: calls tools 16 times in 30 prompts that need one, called none with the facts anywhere after the
#: system message (it echoed them instead: "The file is named \"workdir.md\"").
CONTEXT_AT = "context_at"
#: Between the person's own words and the facts and task after them, when they share the current
#: turn's message.
CONTEXT_JOIN = "\n\n(Kept by wisp for this turn, not the person's words:)\n"
