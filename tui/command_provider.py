"""wisp's slash commands in Textual's command palette (Ctrl+P).

:class:`SlashCommands` lists every command of
:data:`wisp.core.commands.COMMANDS` with its one-line help, so that typing
``compact`` or ``inspect`` in the palette finds it. Choosing one does what
typing it does: a command that needs no more words (``/inspect context``,
``/retry``, ``/compact``) is run as if sent from the prompt input
(:meth:`wisp.tui.app.WispApp.submit_text`); one that needs words
(``/search TEXT``, ``/show entry N``) is put in the prompt input to finish.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

__all__ = ["SlashCommands", "palette_line"]

_OPTIONAL = re.compile(r"\s*\[[^\[\]]*\]")
#: A word the person fills in: TEXT, N, NAME, MEM-000001, "…".
_PLACEHOLDER = re.compile(r"\b[A-Z][A-Z0-9_-]*\b|…")


def palette_line(usage: str) -> tuple[str, bool]:
    """The line the palette runs for a command of this usage, and whether it
    is complete (True) or needs more words (False: it goes to the input).
    The first form of the usage without its optional parts: ``/compact
    [focus on …] | /compact undo`` runs ``/compact``; ``/show entry N | …``
    needs its N."""
    bare = usage
    while _OPTIONAL.search(bare):
        bare = _OPTIONAL.sub("", bare)
    first = bare.split(" | ")[0].strip()
    if _PLACEHOLDER.search(first):
        return first.split()[0] + " ", False
    return first, True


class SlashCommands(Provider):
    """The palette's hits for wisp's slash commands (each once, by name)."""

    def _commands(self) -> list[Any]:
        from wisp.core.commands import COMMANDS

        seen: dict[str, Any] = {}
        for cmd in COMMANDS.values():
            seen.setdefault(cmd.name, cmd)
        return list(seen.values())

    def _runner(self, line: str, complete: bool) -> Any:
        app = self.app
        if complete and hasattr(app, "submit_text"):
            return partial(app.submit_text, line)

        def finish() -> None:  # the person types the rest
            prompt = getattr(app, "prompt_input", None)
            if prompt is not None:
                prompt.load_text(line)
                prompt.move_cursor(prompt.document.end)
                prompt.focus()

        return finish

    async def discover(self) -> Hits:
        for cmd in self._commands():
            line, complete = palette_line(cmd.usage)
            yield DiscoveryHit(f"/{cmd.name}", self._runner(line, complete), text=f"/{cmd.name}", help=cmd.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query.lstrip("/"))
        for cmd in self._commands():
            name = f"/{cmd.name}"
            score = matcher.match(cmd.name)
            if score <= 0:
                score = matcher.match(f"{cmd.name} {cmd.help}") * 0.5
            if score > 0:
                line, complete = palette_line(cmd.usage)
                yield Hit(score, matcher.highlight(name), self._runner(line, complete), text=name, help=cmd.help)
