"""The status bar: endpoint, model, state and the tokens of the last request."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static

from ..guard import Guarded

__all__ = ["StatusBar"]


class StatusBar(Guarded, Static):
    """One line at the bottom. Set its reactive attributes; it redraws itself.

    ``state`` is ``connecting``, ``ready``, ``streaming``, ``waiting for
    approval``, ``error`` or ``no endpoint``; ``prompt_tokens`` and
    ``completion_tokens`` are the last request's counts as the endpoint
    reported them, ``estimated_tokens`` wisp's own estimate when it reported
    none, and ``window`` the model's context window (all tokens).
    ``profile`` names the endpoint profile in use (issue 16, "Profiles"),
    and ``note`` is a short confirmation shown for a few seconds
    (:meth:`confirm`: "copied the reply of turn 3").
    ``problem`` is a short warning shown after the state (an MCP server that
    failed, issue 15), or empty.
    """

    DEFAULT_CSS = """
    StatusBar {
        dock: bottom;
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text-muted;
    }
    StatusBar.-error {
        color: $error;
    }
    StatusBar.-streaming {
        color: $accent;
    }
    """

    endpoint: reactive[str] = reactive("not connected")
    model: reactive[str] = reactive("")
    state: reactive[str] = reactive("connecting")
    prompt_tokens: reactive[int | None] = reactive(None)
    estimated_tokens: reactive[int | None] = reactive(None)
    completion_tokens: reactive[int | None] = reactive(None)
    window: reactive[int | None] = reactive(None)
    conversation: reactive[int | None] = reactive(None)
    profile: reactive[str | None] = reactive(None)
    note: reactive[str] = reactive("")
    #: wisp's own side calls of the last turn (the fact distiller, the assessment), in brief.
    side_calls: reactive[str] = reactive("")
    problem: reactive[str] = reactive("")

    #: How long a :meth:`confirm` note stays (seconds).
    NOTE_SECONDS = 4.0

    def confirm(self, text: str) -> None:
        """Show ``text`` in place of the help hint for :data:`NOTE_SECONDS`."""
        self.note = text
        timer = getattr(self, "_note_timer", None)
        if timer is not None:
            timer.stop()
        self._note_timer = self.set_timer(self.NOTE_SECONDS, lambda: setattr(self, "note", ""))

    def render(self) -> str:
        parts = [f"● {self.state}", self.model or "no model", self.endpoint]
        if self.profile:
            parts.insert(1, f"profile {self.profile}")
        if self.problem:
            parts.insert(1, f"⚠ {self.problem}")
        prompt = self.prompt_tokens if self.prompt_tokens is not None else self.estimated_tokens
        if prompt is not None:
            tok = f"{'' if self.prompt_tokens is not None else '~'}{prompt:,}"
            tok += f"/{self.window:,} tokens" if self.window else " tokens"
            if self.completion_tokens is not None:
                tok += f", {self.completion_tokens:,} out"
            parts.append(tok)
        if self.side_calls:
            parts.append(self.side_calls)
        if self.conversation is not None:
            parts.append(f"#{self.conversation}")
        parts.append(f"✓ {self.note}" if self.note else "F1 help")
        return " │ ".join(parts)

    def watch_state(self, state: str) -> None:
        self.set_class(state in ("error", "no endpoint"), "-error")
        self.set_class(state == "streaming", "-streaming")
