"""What the TUI does for issue 16, "Your conversations and models at hand", kept apart from app.py.

:class:`ConversationActions` is a mixin of :class:`wisp.tui.app.WispApp`.
The core decides (the slash commands of :mod:`wisp.core.chat_commands`
answer with an ``action`` and its ``data``); this module only does what a
screen can: run a turn again in a turn's place and show its versions
(``/retry``, ``/edit``, Left/Right on a :class:`~wisp.tui.widgets.VersionBar`),
open another conversation (``/fork``, ``/new``), clear the screen
(``/clear``), quit (``/quit``), copy to the clipboard (``/copy``, Ctrl+Y:
Textual's ``copy_to_clipboard``, OSC 52, which works over ssh), pick a model
(``/model``), jump to a hit (``/search``), search the prompt history
(Ctrl+R), switch themes (``ui.theme``, Ctrl+T), greet an empty chat, and
fold the side panels away in a narrow terminal. No SQL and no HTTP here:
stored turns come from :mod:`wisp.core.transcript`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wisp.core.config import WISP_THEME_NAMES
from wisp.themes import WISP_THEMES, resolve_theme

from .guard import Guarded

if TYPE_CHECKING:
    from wisp.core.command_base import CommandResult
    from wisp.core.transcript import TurnView

    from .widgets.version_bar import VersionBar
    from .widgets.welcome import Welcome

# The commands, the transcript, the screens and the widgets this mixin uses are imported where they
# are used: wisp.tui.app imports this module before its first frame (issue 12, "Paint first, then open").

__all__ = ["ConversationActions", "FOUND_SECONDS"]

#: How long a /search hit stays highlighted (seconds).
FOUND_SECONDS = 3.0


class ConversationActions(Guarded):
    """The app's side of issue 16 (see the module doc). Expects the app's
    ``session``, ``chat``, ``status``, ``prompt_input``, ``sidebar``,
    ``turn_worker``, ``run_turn``, ``show_page``, ``connect``,
    ``close_session`` and ``start_session``."""

    #: The turn ``/edit`` gave back to the input: sending replaces it; ``None`` otherwise.
    editing: int | None = None
    _welcome: "Welcome | None" = None

    # --- starting ------------------------------------------------------------------------

    def setup_themes(self) -> None:
        """Register wisp's dark and light themes and use config ``ui.theme``."""
        for theme in WISP_THEMES:
            self.register_theme(theme)  # type: ignore[attr-defined]
        self.apply_theme()

    async def show_start(self, *, notes: bool = True) -> None:
        """After the session opened: say which conversation ``--continue``
        took (unless ``notes`` is false: the app said it as the conversation
        opened), greet an empty conversation, name the profile in use."""
        from .widgets.notice import Notice
        from .widgets.welcome import Welcome

        s = self.session  # type: ignore[attr-defined]
        for note in getattr(s, "startup_notes", []) if notes else []:
            await self.chat.add(Notice(note))  # type: ignore[attr-defined]
        self.status.profile = s.profile  # type: ignore[attr-defined]
        if s.conversation_id is None or not await s.transcript.count(s.conversation_id):
            self._welcome = Welcome(s.model_name, s.endpoint_label if s.endpoint else "")
            await self.chat.add(self._welcome)  # type: ignore[attr-defined]

    def update_welcome(self) -> None:
        """After a connect: the welcome names the model and endpoint; the status bar the profile."""
        s = self.session  # type: ignore[attr-defined]
        if s is None:
            return
        self.status.profile = s.profile  # type: ignore[attr-defined]
        if self._welcome is not None and self._welcome.is_attached:
            connected = s.endpoint is not None
            self._welcome.show_model(s.model_name if connected else "", s.endpoint_label, failed=not connected)

    async def dismiss_welcome(self) -> None:
        """The first turn starts: the welcome goes."""
        if self._welcome is not None:
            welcome, self._welcome = self._welcome, None
            if welcome.is_attached:
                await welcome.remove()

    # --- what a command asks for ----------------------------------------------------------

    async def handle_action(self, result: CommandResult, text: str) -> bool:
        """Do what ``result.action`` asks (see
        :attr:`~wisp.core.command_base.CommandResult.action`). Returns True
        when the result needs nothing more shown; False to show its text as
        usual."""
        from .widgets.command_output import CommandOutput
        from .widgets.notice import Notice

        action = result.action
        if result.error or action is None:
            return False
        data = result.data or {}
        streaming = self.turn_running  # type: ignore[attr-defined]
        if action == "retry":
            if streaming:
                await self.chat.add(Notice("A reply is still streaming; press Esc to stop it first.", "warning"))
                return True
            await self.chat.add(CommandOutput(f"`{text.strip()}`\n\n{result.text}"))  # type: ignore[attr-defined]
            self.turn_worker = self.run_turn(data["prompt"], supersedes=data["turn"])  # type: ignore[attr-defined]
            return True
        if action == "edit":
            self.editing = int(data["turn"])
            prompt = self.prompt_input  # type: ignore[attr-defined]
            prompt.load_text(data["prompt"])
            prompt.move_cursor(prompt.document.end)
            prompt.focus()
            self.status.confirm(f"editing turn {self.editing}: send to replace it")  # type: ignore[attr-defined]
            return False
        if action in ("open", "new"):
            if streaming:  # opening another conversation would stop the reply
                await self.chat.add(Notice("A reply is still streaming; press Esc to stop it first, "  # type: ignore[attr-defined]
                                           + ("then /fork opens the fork." if action == "open" else "then /new."),
                                           "warning"))
                if action == "open":
                    await self.chat.add(CommandOutput(result.text))  # type: ignore[attr-defined]
                return True
            if action == "open":
                await self.chat.add(CommandOutput(result.text))  # type: ignore[attr-defined]
            await self.reopen(data.get("conversation") if action == "open" else None)
            return True
        if action == "clear":
            await self.clear_chat()
            return True
        if action == "quit":
            await self.action_quit()  # type: ignore[attr-defined]
            return True
        if action == "copy":
            self.copy_text(str(data.get("text") or ""), str(data.get("what") or "text"))
            return True
        if action == "pick-model":
            self.pick_model(list(data.get("models") or []), str(data.get("current") or ""))
            return True
        if action == "model":
            await self.chat.add(Notice(result.text))  # type: ignore[attr-defined]
            self.status.model = self.session.model_name  # type: ignore[attr-defined]
            self.status.window = self.session.context_window  # type: ignore[attr-defined]
            return True
        if action == "profile":
            self.status.profile = self.session.profile  # type: ignore[attr-defined]
            return False
        if action == "search":
            return await self.show_hits(result)
        return False

    def after_command(self, text: str, result: CommandResult) -> None:
        """``/config set ui.theme …`` (or unset) applies at once."""
        if not result.error and text.strip().startswith("/config") and "ui.theme" in text:
            self.apply_theme()

    def take_edit(self) -> int | None:
        """The turn a prompt being sent replaces (``/edit``), once."""
        turn, self.editing = self.editing, None
        return turn

    def cancel_edit(self) -> bool:
        """Esc with the input empty and nothing streaming leaves ``/edit``; True when it did."""
        if self.editing is None or self.prompt_input.text.strip():  # type: ignore[attr-defined]
            return False
        self.editing = None
        self.status.confirm("edit left; the turn stays as it was")  # type: ignore[attr-defined]
        return True

    # --- another conversation, a clear screen ----------------------------------------------

    async def reopen(self, conversation: int | None) -> None:
        """Close the session and open ``conversation`` (``None``: a new one)."""
        await self.close_session()  # type: ignore[attr-defined]
        self.options.resume = conversation  # type: ignore[attr-defined]
        self.options.continue_last = False  # type: ignore[attr-defined]
        self._session_closing = False
        self._first_shown = None
        self._last_turn_shown = 0
        self.editing = None
        self.ready.clear()  # type: ignore[attr-defined]
        await self.chat.reset()  # type: ignore[attr-defined]
        self.status.conversation = conversation  # type: ignore[attr-defined]
        self.start_session()  # type: ignore[attr-defined]

    async def clear_chat(self) -> None:
        """Clear the screen; the record stays, and "Show earlier turns" brings it back."""
        from .widgets.notice import Notice

        chat = self.chat  # type: ignore[attr-defined]
        if self.turn_running:  # type: ignore[attr-defined]
            await chat.add(Notice("A reply is still streaming; press Esc to stop it first.", "warning"))
            return
        await chat.reset()
        s = self.session  # type: ignore[attr-defined]
        shown = await s.transcript.count(s.conversation_id, versions=False) if s and s.conversation_id else 0
        if shown:
            self._first_shown = self._last_turn_shown + 1
            await chat.show_earlier_button(shown)
        await chat.add(Notice("Screen cleared; the conversation and its record stay."))

    # --- versions of a turn ------------------------------------------------------------------

    async def before_turn_shown(self, supersedes: int | None) -> None:
        """A turn starts: the welcome goes; a turn it replaces leaves the screen (with its bar)."""
        from .widgets.version_bar import VersionBar

        await self.dismiss_welcome()
        if supersedes is not None:
            for widget in list(self.chat.log_column.query(f".turn-{supersedes}")):  # type: ignore[attr-defined]
                await widget.remove()
            for bar in list(self.chat.query(VersionBar)):  # type: ignore[attr-defined]
                if bar.slot == supersedes:
                    await bar.remove()

    async def after_turn_shown(self, turn: int, supersedes: int | None) -> None:
        """A turn that replaced another ended: its bar says which version it is."""
        if supersedes is None or not turn:
            return
        s = self.session  # type: ignore[attr-defined]
        view = await s.transcript.turn(s.conversation_id, turn)
        if view is not None and len(view.versions) > 1:
            await self._mount_bar(view.versions, turn)

    async def mount_version_bars(self, turns: list[TurnView]) -> None:
        """Stored turns were drawn: a bar under each that has versions."""
        from .widgets.version_bar import VersionBar

        for view in turns:
            if len(view.versions) > 1 and not any(b.slot == view.number for b in self.chat.query(VersionBar)):  # type: ignore[attr-defined]
                await self._mount_bar(view.versions, view.number)

    async def _mount_bar(self, versions: list[int], shown: int) -> None:
        from .widgets.version_bar import VersionBar

        widgets = list(self.chat.log_column.query(f".turn-{shown}"))  # type: ignore[attr-defined]
        bar = VersionBar(versions, shown)
        if widgets:
            await self.chat.log_column.mount(bar, after=widgets[-1])  # type: ignore[attr-defined]
        else:
            await self.chat.add(bar)  # type: ignore[attr-defined]

    async def on_version_bar_switch(self, message: VersionBar.Switch) -> None:
        """Left/Right on a bar: show that version in place of the one shown."""
        await self.show_version(message.bar, message.number)

    async def show_version(self, bar: VersionBar, number: int) -> None:
        """Draw version ``number`` (a turn) where ``bar``'s shown version is."""
        from wisp.core.transcript import turn_events
        from .turn_renderer import TurnRenderer

        s = self.session  # type: ignore[attr-defined]
        view = await s.transcript.turn(s.conversation_id, number)
        if view is None:
            return
        widgets: list[Any] = []

        async def keep(widget: Any) -> None:
            widgets.append(widget)

        renderer = TurnRenderer(keep, lambda: widgets[-1] if widgets else None)
        for event in turn_events(view):
            await renderer.show(event)
        column = self.chat.log_column  # type: ignore[attr-defined]
        for old in list(column.query(f".turn-{bar.shown}")):
            await old.remove()
        if widgets:
            await column.mount_all(widgets, before=bar)
        bar.show(number)
        bar.focus()

    # --- copy, models, search, history ------------------------------------------------------

    def copy_text(self, text: str, what: str) -> None:
        """Put ``text`` on the clipboard (OSC 52) and confirm on the status line."""
        self.copy_to_clipboard(text)  # type: ignore[attr-defined]
        self.status.confirm(f"copied {what}")  # type: ignore[attr-defined]

    async def action_copy_reply(self) -> None:
        """Ctrl+Y: copy the last reply (as /copy)."""
        from wisp.core.commands import run_command

        if self.session is None:  # type: ignore[attr-defined]
            return
        result = await run_command(self.session, "/copy")  # type: ignore[attr-defined]
        if result.error:
            self.status.confirm(result.text.rstrip("."))  # type: ignore[attr-defined]
        else:
            self.copy_text(result.data["text"], result.data["what"])

    def pick_model(self, models: list[str], current: str) -> None:
        """The model picker; a pick runs ``/model NAME``."""
        from wisp.core.commands import run_command
        from .screens import ModelPickerScreen
        from .widgets.command_output import CommandOutput

        s = self.session  # type: ignore[attr-defined]

        async def picked(name: str | None) -> None:
            if name and name != current:
                result = await run_command(s, f"/model {name}")
                if not await self.handle_action(result, f"/model {name}"):
                    await self.chat.add(CommandOutput(result.text, error=result.error))  # type: ignore[attr-defined]

        self.push_screen(ModelPickerScreen(models, current, s.endpoint_label), callback=picked)  # type: ignore[attr-defined]

    async def show_hits(self, result: CommandResult) -> bool:
        """``/search``: jump to the one hit, or pick among several."""
        from .screens import SearchResultsScreen

        hits = list((result.data or {}).get("hits") or [])
        if not hits:
            return False
        if len(hits) == 1:
            from .screens.search_results import jump_turn

            turn = jump_turn(hits[0])
            await self.jump_to(turn, str(hits[0]["kind"]))
            where = f"turn {turn}" if turn == hits[0]["turn"] else f"an earlier version of turn {turn}"
            self.status.confirm(f"found in {where}")  # type: ignore[attr-defined]
            return True

        async def picked(choice: str | None) -> None:
            if choice:
                turn, _, kind = choice.partition(":")
                await self.jump_to(int(turn), kind)

        self.push_screen(SearchResultsScreen(hits, str(result.data.get("text") or "")), callback=picked)  # type: ignore[attr-defined]
        return True

    async def jump_to(self, turn: int, kind: str) -> None:
        """Scroll the chat to turn ``turn`` (its reply, or its prompt),
        showing it first when the window of turns on screen does not hold it
        (issue 12, "Open what is seen"), and mark it a moment."""
        from .widgets.assistant_message import AssistantMessage
        from .widgets.notice import Notice
        from .widgets.user_message import UserMessage

        chat = self.chat  # type: ignore[attr-defined]
        # the chat shows a window of a long conversation: it jumps to the turn unless it is shown
        await self.show_turns_around(turn)  # type: ignore[attr-defined]
        widgets = list(chat.log_column.query(f".turn-{turn}"))
        wanted = UserMessage if kind == "prompt" else AssistantMessage  # a tool call and output are in the reply
        target = next((w for w in widgets if isinstance(w, wanted)), widgets[0] if widgets else None)
        if target is None:
            await chat.add(Notice(f"Turn {turn} is not on the screen; /show turn {turn} shows it.", "warning"))
            return
        chat.release_anchor()
        chat.scroll_to_widget(target, animate=False, top=True)
        target.add_class("-found")
        self.set_timer(FOUND_SECONDS, lambda: target.remove_class("-found"))  # type: ignore[attr-defined]

    def action_history_search(self) -> None:
        """Ctrl+R: search the prompts sent; a pick goes back in the input."""
        from .screens import HistorySearchScreen

        prompt = self.prompt_input  # type: ignore[attr-defined]
        if len(self.screen_stack) > 1:  # type: ignore[attr-defined]  # a view is open over the chat
            return
        if not prompt.prompt_history:
            self.status.confirm("no earlier prompts yet")  # type: ignore[attr-defined]
            return
        screen = HistorySearchScreen(list(prompt.prompt_history))

        def picked(choice: str | None) -> None:
            if choice is not None:
                prompt.load_text(screen.prompts[choice])
                prompt.move_cursor(prompt.document.end)
                prompt.focus()

        self.push_screen(screen, callback=picked)  # type: ignore[attr-defined]

    # --- themes and width ---------------------------------------------------------------------

    def apply_theme(self, name: str | None = None) -> str:
        """Use theme ``name``, else config ``ui.theme`` (:func:`wisp.themes.resolve_theme`); returns the theme."""
        if name is None:
            try:
                config = self.session.config if self.session is not None else (self._config or None)  # type: ignore[attr-defined]
                if config is None:
                    from wisp.core.config import Config

                    config = Config.load()
                name = config.get("ui.theme")
            except Exception:
                name = None
        theme = resolve_theme(name, set(self.available_themes))  # type: ignore[attr-defined]
        self.theme = theme  # type: ignore[attr-defined]
        return theme

    def action_cycle_theme(self) -> None:
        """Ctrl+T: the next theme: wisp's dark, wisp's light, and the configured one when it is another."""
        cycle = list(WISP_THEME_NAMES)
        try:
            configured = resolve_theme(self.session.config.get("ui.theme"), set(self.available_themes))  # type: ignore[attr-defined]
        except Exception:
            configured = None
        if configured and configured not in cycle:
            cycle.append(configured)
        now = self.theme  # type: ignore[attr-defined]
        nxt = cycle[(cycle.index(now) + 1) % len(cycle)] if now in cycle else cycle[0]
        self.theme = nxt  # type: ignore[attr-defined]
        self.status.confirm(f"theme {nxt} (ui.theme keeps it: /config set ui.theme NAME)")  # type: ignore[attr-defined]

    def on_resize(self, event: Any) -> None:
        """Below about 100 columns the side panels fold away (F2–F4 open them over the chat)."""
        self.sidebar.fit_width(event.size.width)  # type: ignore[attr-defined]

