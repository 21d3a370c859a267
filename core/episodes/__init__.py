"""Episodic memory across conversations: capture, refine, query, forget.

Issue "Episodic memory across conversations"; behaviour of the reference
``enso-episodic-memory.txt`` under wisp's own ``wisp memory`` commands.

- :mod:`.schema`: the tables (store migration 3).
- :mod:`.capture`: every exchange saved, through the agent's hooks.
- :mod:`.refine`: batches of new exchanges turned into memories by the model;
  the lock in the database.
- :mod:`.query`: filters, FTS5 search, one memory and its sources.
- :mod:`.dates`: the memory time zone, ``--since``/``--until``.
- :mod:`.ids`: ``MEM-000001`` references from a counter, never reused.
- :mod:`.forget`: a memory, its sources, and every memory they connect.
- :mod:`.render`: text, Markdown and JSON for the CLI, the TUI and the model.
- :mod:`.tool_verbs`: ``memories QUERY`` and ``recall MEM-…`` for the memory tool.
- :mod:`.commands`: the ``/memory`` slash command.
- :mod:`.cli`: ``wisp memory list|search|show|forget|status|refine|serve``.
- :mod:`.viewer`: the read-only web viewer.
"""
