"""Python's cyclic garbage collector around one launch of ``wisp``: held while wisp starts, frozen before it exits.

The collector runs after every 700 new container objects. While a process
imports its modules (wisp's own, httpx's, Textual's) it walks the same
long-lived objects again and again and finds no garbage; when the
interpreter exits it collects once more everything it is about to free
anyway. On the 2-core benchmark machine that was about 18 ms of ``wisp ask``'s
one turn while starting and about 45 ms at exit (issue 12, "Fast at every
size", last row; ``benchmarks/ask_one_turn.py``).

So the console script (:func:`wisp.tui.launch.main`) calls :func:`hold`
first; the command calls :func:`started` once what it needs is imported
and open (``wisp ask`` when its session is open, the TUI once its first
screen is up and the rest of the core is imported); and the console script
calls :func:`before_exit` last. :func:`started` freezes what startup made
(``gc.freeze``: those objects are never walked again, so every later
collection is shorter) and turns the collector back on.

The rules, from the Python documentation of :mod:`gc`: ``gc.disable`` stops
automatic collection (reference counting still frees every object that is
not in a cycle); ``gc.freeze`` moves every tracked object to a permanent
generation that no collection visits. Frozen objects in a cycle are not
finalised at exit: wisp closes its store, its files and its connections
itself before it returns, and the interpreter still flushes stdout and
stderr and runs ``atexit`` handlers.

Nothing here acts unless :func:`hold` was called, so code that imports the
core (the tests, a person's script) keeps the collector as it was.
"""

from __future__ import annotations

import gc

__all__ = ["before_exit", "hold", "started"]

_held = False


def hold() -> None:
    """Turn the collector off for startup (the console script's first call).
    Idempotent; :func:`started` turns it back on."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def started() -> None:
    """Startup is over: freeze what it made and turn the collector back on.
    Does nothing unless :func:`hold` turned it off, and nothing the second time."""
    global _held
    if _held:
        _held = False
        gc.freeze()
        gc.enable()


def before_exit() -> None:
    """The process is about to exit: spare the interpreter its last walk over
    every object (``gc.freeze``). Called by the console script only, after
    the command returned."""
    gc.freeze()
