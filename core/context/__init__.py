"""The layered context: what each request to the model is built from (issue "Layered context").

Modules, one job each:

- :mod:`.schema`: migration 2 (facts, summaries, token calibration tables).
- :mod:`.facts`: facts with versions (``c1``, ``c2`` …), sources (person >
  tool > model), proposals, forget/keep, ``fact.recorded`` audit events;
  :func:`~.facts.parse_assignment` reads ``SUBJECT [NAME] = VALUE`` (and the
  forms a small model writes); :func:`~.facts.history_text` writes a fact's
  history in the reference document's recall format.
- :mod:`.task`: the task (a fact of subject ``task``), its objective, the
  300-character cut, "from the next turn on", never replaced by the model.
- :mod:`.digest`, :mod:`.references`, :mod:`.turns`: tool outputs as
  references with a digest, in the memory form or the two forms without it.
- :mod:`.coverage`, :mod:`.summary`, :mod:`.summariser`: the running
  summary's items, versions and side call.
- :mod:`wisp.core.tokens`, :mod:`.calibration`: token estimates and their per-model
  calibration.
- :mod:`.composer`: the layers in order, the token budget, what must leave.
- :mod:`.workspace`: the ``branch`` fact's reader (the ``tests`` fact's
  is :mod:`wisp.core.outputs`).
- :mod:`.recall`: entries and turns read back in full (audit log first, the
  store's copy as the fallback), with the reference document's header line.
- :mod:`.inspect`, :mod:`.show`, :mod:`.commands`, :mod:`.cli`:
  ``/inspect context``, ``/show``, ``/fact``, ``/task``, ``wisp inspect context``.
- :mod:`.manager`: :class:`~.manager.ContextManager`, one per session
  (``session.context``), which plugs the composer and the hooks into the agent.

For the memory tool (issue "memory tool"), from a tool holding the session's
``ContextManager`` as ``manager`` and the conversation id ``c``:

- recall an entry: ``await recall.recall_entry(store, audit, c, n)`` →
  ``RecalledEntry`` (``.header`` is ``entry 4: read_file output, turn 2 at
  14:05:12, from the audit log``, ``.content`` the full text), ``None`` when
  there is none (then ``await recall.stored_range(store, c)`` says what is);
  a turn: ``recall.recall_turn``;
- recall a fact: ``await manager.recall_fact(c, "codename")`` (the history,
  or a ``memory: no fact …`` line naming what the conversation knows);
- recall the task: ``await manager.tasks.current(c)``;
- the running summary: ``await manager.summaries.latest(c)`` /
  ``.versions(c)`` (``SummaryVersion`` with ``covers`` and ``refs``);
- note: ``await manager.note(c, "entity release codename = BLUE HERON",
  turn=t, entries=[…])`` → the result line (``noted: …`` / ``error: …``);
  the note is recorded as the model's proposal when the turn ends (12 a turn);
- task: ``await manager.propose_task(c, "THE TASK; objective: …", turn=t)``;
- references already name ``memory "recall entry N"`` when the registry has a
  tool called ``memory`` (:class:`~.turns.ToolFlags`), and the system rules
  gain :data:`~.composer.MEMORY_RULE`.

For tools that act (issue "Tools that act"): a tool result whose ``meta`` has
``tests`` (run_command's reading) or whose output reads as a test run, from a
tool that does not only read, becomes a ``tests`` fact before the next request
(:meth:`~.manager.ContextManager.scan_test_runs`); or call
``manager.record_test_run(...)`` / ``manager.record_fact(...)`` directly.
"""
