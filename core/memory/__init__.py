"""The model's memory tool: verbs, recall, note, task, summarise readers, condense.

Issue 4 ("The memory tool"); the behaviour, verbs and output formats are those
of ``wisp-memory-tool.txt``. Modules:

- :mod:`.request`: the one ``request`` argument parsed into a verb and target;
- :mod:`.limits`: the numbers (page budget, notes a turn, chunks);
- :mod:`.paging`: numbering and paging stored text within a token budget;
- :mod:`.recall`: gathering entries, turns, facts, the task and summaries;
- ``summarise``'s exact readers (no model) live in :mod:`wisp.core.outputs`;
- :mod:`.condense`: the chunked pass of the conversation's own model;
- :mod:`.ports`: what the tool needs from facts, the task and the running summary;
- :mod:`.tool`: the ``memory`` tool itself and :func:`attach_memory`.
"""
