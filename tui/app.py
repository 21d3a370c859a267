"""The wisp Textual app: chat pane, side panels, prompt input and status bar.

The app owns no SQL and no HTTP: it opens a :class:`wisp.core.session.Session`,
hands prompts to it (or slash commands to :mod:`wisp.core.commands`) and
renders the :mod:`wisp.core.events` that come back, through the chat pane
(:class:`~wisp.tui.widgets.ChatPane`), the status bar and the side panels.
Stored turns are drawn by the same chat pane method as live ones.

Paint first, then open (issue 12, "Fast at every size"): the first frame
needs only Textual and wisp's own screen. The session (the store, the
tools, the context, the agent), the endpoint, the slash commands, the
modal screens and episodic refinement are imported and opened after the
first paint, or when first used. A stored conversation is shown from its
last turns, as many as fill the screen; earlier ones come as the person
scrolls up.

Every handler, action and worker answers a crash with an error line in the
chat and goes on (issue 11, "Every path answers"; :mod:`wisp.tui.guard`).
"""

from __future__ import annotations

import asyncio
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.worker import Worker, WorkerState

from wisp.core import collector
from wisp.core.text import terminal_safe
from wisp.themes import STYLESHEET

from .conversation_actions import ConversationActions

from .guard import Guarded
from .widgets.chat_pane import ChatPane
from .widgets.context_sidebar import ContextSidebar
from .widgets.notice import Notice
from .widgets.prompt_input import PromptInput
from .widgets.status_bar import StatusBar
from .widgets.user_message import UserMessage

if TYPE_CHECKING:
    from wisp.core import events as ev
    from wisp.core.config import Config
    from wisp.core.session import Session, SessionOptions

__all__ = ["WispApp", "PAGE_TURNS", "FIRST_PAGE_TURNS"]

#: Turns loaded at a time when the person scrolls up (or presses "Show earlier turns").
PAGE_TURNS = 20
#: Turns loaded from the store when a conversation opens; of them, the chat pane mounts those that
#: fill the screen and keeps the rest for the first scroll up.
FIRST_PAGE_TURNS = 20
#: The agent's events are drawn without stopping to paint; after this long (seconds) of events that
#: did not wait for the network, the turn's worker lets the screen paint once.
YIELD_EVERY_S = 1 / 60
#: How often a window looks for turns another wisp ended in its conversation (seconds): one COUNT
#: of the store's turns, so a second window follows within this long.
FOLLOW_EVERY_S = 2.0


def screenshot_dir(workdir: Any = None) -> Path:
    """Where a screenshot is saved: the person's Downloads folder
    (platformdirs) when it is a writable folder, else ``workdir`` (the
    conversation's working directory), else the current one."""
    import os

    from platformdirs import user_downloads_path

    for place in (user_downloads_path(), Path(workdir) if workdir else None, Path.cwd()):
        if place is not None and place.is_dir() and os.access(place, os.W_OK):
            return place
    return Path.cwd()


def wait_state(notice: str) -> str:
    """The status bar's state for a wait notice of the turn (key ``wait``):
    ``waiting for the model · 12 s`` while the endpoint loads the model or
    the embedded server starts again, ``streaming`` once it answers."""
    import re

    if "answers again" in notice:
        return "streaming"
    seconds = re.search(r"(\d+(?:\.\d+)?) s so far", notice)
    what = "the embedded model restarts" if "starting it again" in notice else (
        "busy with another wisp" if "busy with another" in notice else "waiting for the model")
    return f"{what} · {float(seconds.group(1)):.0f} s" if seconds else what


def _slash_commands() -> type:
    """The command palette's provider of wisp's slash commands, loaded when the palette opens."""
    from .command_provider import SlashCommands

    return SlashCommands


class WispApp(ConversationActions, Guarded, App[int]):
    """wisp's TUI. ``options`` say which conversation to open and which tools
    to give; ``config`` defaults to the one in ``WISP_HOME``; ``connect``
    false leaves the endpoint alone until the first prompt."""

    TITLE = "wisp"
    CSS_PATH = str(STYLESHEET)
    #: Ctrl+P's palette: Textual's own commands and wisp's slash commands (tui/command_provider.py)
    COMMANDS = App.COMMANDS | {_slash_commands}
    BINDINGS = [
        Binding("f1", "help", "Help"),
        Binding("escape", "stop", "Stop reply", show=False),
        # Ctrl+C stops a reply too (the input copies a selection first; with nothing running, Textual's hint)
        Binding("ctrl+c", "interrupt", "Stop reply", show=False),
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("pageup", "scroll_chat('page_up')", "Scroll up", show=False, priority=True),
        Binding("pagedown", "scroll_chat('page_down')", "Scroll down", show=False, priority=True),
        Binding("ctrl+home", "scroll_chat('home')", "Top", show=False, priority=True),
        Binding("ctrl+end", "scroll_chat('end')", "Bottom", show=False, priority=True),
        Binding("ctrl+o", "toggle_blocks", "Open/close the last reply's blocks", show=False),
        # the layered context's panels and view (issue "Layered context")
        Binding("f2", "toggle_panel('facts')", "Facts", show=False),
        Binding("f3", "toggle_panel('task')", "Task", show=False),
        Binding("f4", "toggle_panel('summary')", "Summary", show=False),
        Binding("f5", "inspect_context", "Inspect context", show=False),
        # issue 16 (tui/conversation_actions.py)
        Binding("ctrl+r", "history_search", "Search earlier prompts", show=False, priority=True),
        Binding("ctrl+y", "copy_reply", "Copy the last reply", show=False, priority=True),  # over TextArea's redo
        Binding("ctrl+t", "cycle_theme", "Next theme", show=False, priority=True),
    ]

    def __init__(self, options: "SessionOptions | None" = None, config: "Config | None" = None,
                 connect: bool = True) -> None:
        super().__init__()
        if options is None:
            from wisp.core.session_options import SessionOptions

            options = SessionOptions()
        self.options = options
        if self.options.ask is None:  # commands wait for the person's say (tui/approval.py)
            self.options.ask = self.ask_approval
        self._config = config
        self._connect = connect
        self.session: "Session | None" = None
        # wisp's dark and light themes, config ui.theme (issue 16), before the first frame, so the
        # stylesheet is built once, in wisp's colours
        self.setup_themes()
        self._opening: Any = None  # the half-open session, until the session is built
        self._transcript: Any = None  # the record as the screen reads it, from the moment the store opens
        self.turn_worker: Worker[Any] | None = None
        #: A command running beside the screen (/compact's preview, /model's list): Esc and Ctrl+C stop it.
        self.command_worker: Worker[Any] | None = None
        self._first_shown: int | None = None
        self._last_turn_shown = 0
        self._session_closing = False
        self.ready = asyncio.Event()
        # the main screen's widgets, kept so that they are found while a modal screen is up
        self._chat = ChatPane(id="chat")
        self._chat.turns_drawn = self.mount_version_bars  # a bar under each stored turn with versions (issue 16)
        self._sidebar = ContextSidebar(id="context-sidebar")
        self._prompt = PromptInput(id="prompt")
        self._status = StatusBar(id="status")

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield self._chat
            yield self._sidebar
        yield self._prompt
        yield self._status

    @property
    def turn_running(self) -> bool:
        """Whether a turn's worker runs now (the one place the screen asks)."""
        return self.turn_worker is not None and self.turn_worker.is_running

    @property
    def chat(self) -> ChatPane:
        return self._chat

    @property
    def status(self) -> StatusBar:
        return self._status

    @property
    def prompt_input(self) -> PromptInput:
        return self._prompt

    @property
    def sidebar(self) -> ContextSidebar:
        return self._sidebar

    async def on_mount(self) -> None:
        self.prompt_input.focus()
        self.memory_refine_timer: Any = None
        #: Looks for turns another wisp ended in this conversation (:meth:`follow_conversation`).
        self.follow_timer: Any = None
        # paint first, then open: the session starts once the first frame is on screen
        self.call_after_refresh(self.start_session)

    @work(exclusive=True, group="session", exit_on_error=False)
    async def start_session(self) -> None:
        """Open the session, show the stored conversation, then connect.

        The store opens and the conversation is settled and shown first
        (:class:`wisp.core.session.Opening`); the rest of the session (the
        tools, the context, the agent, the model link) is built after the
        last turns are on screen."""
        try:
            from wisp.core.session import Opening

            try:
                opening = await Opening.start(self.options, self._config)
            except Exception as exc:  # a bad config or unknown conversation: say so, stay open
                await self.chat.add(Notice(f"wisp could not open: {exc}", "error"))
                self.status.state = "error"
                return
            self._opening, self._transcript = opening, opening.transcript
            conversation = opening.plan.conversation_id
            self.status.conversation = conversation
            agents = opening.plan.agents_md
            for problem in (agents.problems if agents is not None else []):
                await self.chat.add(Notice(problem, "warning"))
            if opening.plan.note:  # which conversation --continue took (issue 16)
                await self.chat.add(Notice(opening.plan.note))
            if conversation is not None:
                await self.show_page(conversation)
                self.prompt_input.prompt_history = await self._transcript.prompts(conversation)
            try:
                from wisp.core.session import preload

                await asyncio.to_thread(preload)  # the rest of the core, while the screen paints and answers
                self.session = await opening.build()
            except Exception as exc:
                await opening.close()
                await self.chat.add(Notice(f"wisp could not open: {exc}", "error"))
                self.status.state = "error"
                return
            collector.started()  # the core is imported and the session built: the garbage collector runs again
            s = self.session
            self.apply_theme()
            from wisp.themes import theme_problem

            theme_says = theme_problem(s.config.get("ui.theme"), set(self.available_themes))
            for problem in [*s.mcp.problems, *([theme_says] if theme_says else [])]:  # AGENTS.md's: shown already
                await self.chat.add(Notice(problem, "warning"))
            await self.show_start(notes=False)  # the welcome, the profile (issue 16); the note is shown
            from wisp.core.episodes.refine import REFINE_INTERVAL_S

            # Episodic memory: refine new exchanges every 15 minutes while wisp runs.
            self.memory_refine_timer = self.set_interval(REFINE_INTERVAL_S, self.refine_memory)
            if self.follow_timer is None:  # a second window on this conversation shows its turns as they end
                self.follow_timer = self.set_interval(FOLLOW_EVERY_S, self.follow_conversation)
            self.refresh_context()
            if self._connect:
                await self.connect()
        finally:
            collector.started()  # also when the session could not open
            self.ready.set()

    def _conversation_shown(self) -> int | None:
        """The conversation on screen (known before the session is built)."""
        if self.session is not None:
            return self.session.conversation_id
        return self.status.conversation

    async def connect(self) -> bool:
        """Resolve the endpoint; show which model and endpoint, or why none."""
        assert self.session is not None
        self.status.state = "connecting"
        said: list[Notice] = []

        async def say(line: str) -> None:
            self.status.endpoint = line
            said.append(Notice(line))
            await self.chat.add(said[-1])

        began = time.monotonic()

        def tick() -> None:  # a start can take a minute or two on 2 cores: the seconds show it is alive
            self.status.state = f"connecting · {time.monotonic() - began:.0f} s"

        ticker = self.set_interval(1.0, tick)
        try:
            ok = await self.session.connect(on_status=say)
        finally:
            ticker.stop()
        if ok:
            for notice in said:  # "Starting the embedded model…" is done: the status bar says what runs
                await notice.remove()
        else:  # why, in the chat, in the same frame as the status bar's "no endpoint"
            await self.chat.add(Notice(self.session.endpoint_error or "no endpoint", "error"))
        self.status.endpoint = self.session.endpoint_label
        self.status.model = self.session.model_name
        self.status.window = self.session.context_window
        self.update_welcome()
        self.status.state = "ready" if ok else "no endpoint"
        return ok

    async def show_page(self, conversation_id: int, before: int | None = None) -> None:
        """Draw stored turns: the last ones (as many as fill the screen; the
        rest of the first page is kept for the first scroll up), or
        (``before``) a page of those above the first shown."""
        if before is None:
            page = await self._transcript.page(conversation_id, FIRST_PAGE_TURNS)
            self._last_turn_shown = max(self._last_turn_shown, page.turns[-1].number) if page.turns else 0
            kept = await self.chat.show_last_turns(page.turns)
            self.chat.anchor()
            if page.turns:
                self._first_shown = page.turns[0].number
        else:
            page = await self._transcript.page(conversation_id, PAGE_TURNS, before)
            kept = 0
            await self.chat.show_turns(page.turns, above=True)
            if page.turns:
                self._first_shown = page.turns[0].number
        await self.chat.note_earlier(page.earlier + kept)

    async def on_chat_pane_load_earlier(self, message: ChatPane.LoadEarlier) -> None:
        """The person scrolled up to the first turn shown, or asked for earlier turns."""
        conversation = self._conversation_shown()
        if self._transcript is None or not conversation:
            return
        if not await self.chat.show_kept_turns(PAGE_TURNS):  # the rest of the first page, loaded already
            first = self.chat.first_turn_shown or self._first_shown  # none shown: after /clear
            if first is not None and self.chat.earlier:
                await self.show_page(conversation, before=first)
        self.chat.loaded()

    async def on_chat_pane_load_later(self, message: ChatPane.LoadLater) -> None:
        """The person scrolled down to the last stored turn of a window that stops short of the end."""
        conversation = self._conversation_shown()
        last = self.chat.last_turn_shown
        if self._transcript is None or not conversation or last is None or not self.chat.later:
            return
        page = await self._transcript.after(conversation, last, PAGE_TURNS)
        await self.chat.note_later(page.later)
        await self.chat.show_turns(page.turns)
        self.chat.loaded()

    async def show_first_turns(self) -> None:
        """Ctrl+Home: the conversation's first turns (the window jumps there)."""
        conversation = self._conversation_shown()
        if self._transcript is None or not conversation or not self.chat.earlier or self.chat.streaming:
            return
        page = await self._transcript.after(conversation, 0, PAGE_TURNS)
        await self.chat.show_window(page.turns, earlier=0, later=page.later)

    async def show_turns_around(self, turn: int) -> bool:
        """Show stored turn ``turn`` (and the turns after it, a page): the
        window jumps there unless it is shown already (``/search``'s jump).
        False when there is no such current turn."""
        conversation = self._conversation_shown()
        if self._transcript is None or not conversation:
            return False
        if list(self.chat.log_column.query(f".turn-{turn}")):
            return True
        page = await self._transcript.after(conversation, turn - 1, PAGE_TURNS)
        if not page.turns or page.turns[0].number != turn:
            return False
        self.chat.release_anchor()
        await self.chat.show_window(page.turns, earlier=page.earlier, later=page.later)
        return True

    async def show_last_turns(self) -> None:
        """Ctrl+End, or a prompt sent while the window stops short of the end: the last turns again."""
        conversation = self._conversation_shown()
        if self._transcript is None or not conversation or not self.chat.later or self.chat.streaming:
            return
        page = await self._transcript.page(conversation, PAGE_TURNS)
        await self.chat.show_window(page.turns, earlier=page.earlier, later=0)

    # --- input -----------------------------------------------------------

    async def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        await self.submit_text(message.text)

    async def submit_text(self, text: str) -> None:
        """What sending ``text`` from the prompt input does: a slash command
        runs, anything else is a turn (the command palette's commands come
        here too)."""
        if self.chat.later:  # the window of stored turns stops short of the end: show the end again
            await self.show_last_turns()
        self.chat.anchor()  # the person sent something: follow the end again
        if self.session is None:
            await self.chat.add(Notice("wisp is still starting; try again in a moment.", "warning"))
            return
        from wisp.core.commands import is_command, run_command  # the commands load on first use

        if is_command(text):
            from wisp.core.commands import command_for

            command = command_for(text)
            if command is not None and command.asks_model:  # /compact: its side call must not freeze the screen
                if self.turn_running:
                    await self.chat.add(Notice(f"/{command.name} waits for the reply to end; press Esc to stop "
                                               "it first.", "warning"))
                    return
                self.command_worker = self.run_model_command(text)
                return
            if command is not None and command.asks_endpoint:  # /model: a busy server answers in minutes
                self.command_worker = self.run_endpoint_command(text, command.name)
                return
            await self.show_command_result(text, await run_command(self.session, text))
            return
        if self.turn_running:
            self.prompt_input.load_text(text)  # the typed prompt stays (issue 16)
            await self.chat.add(Notice("A reply is still streaming; press Esc to stop it first.", "warning"))
            return
        self.turn_worker = self.run_turn(text, supersedes=self.take_edit())

    async def show_command_result(self, text: str, result: Any) -> None:
        """Show a slash command's result: its action, its view, or its text in the chat."""
        from wisp.core.context.compaction import CompactPreview

        from .screens import CompactScreen, MemoryScreen, view_for
        from .widgets.command_output import CommandOutput

        assert self.session is not None
        self.refresh_context()  # /fact, /task … change what the panels show
        self.after_command(text, result)
        if await self.handle_action(result, text):  # /retry, /copy, /model … (issue 16)
            return
        view = view_for(result)  # /inspect context, /show: a view, not chat text
        if view is not None:
            await self.push_screen(view)
            return
        if result.title == "memory" and not result.error and (result.data or {}).get("memories"):
            await self.push_screen(MemoryScreen(self.session, result.data))  # pick a memory to read
            return
        if isinstance(result.data, CompactPreview) and not result.error:
            preview = result.data  # /compact: shown first; Enter applies it, Esc cancels
            await self.push_screen(CompactScreen(preview),
                                   callback=lambda answer: self.compact_answered(preview, answer))
            return
        await self.chat.add(CommandOutput(f"`{text.strip()}`\n\n{result.text}", error=result.error))
        if result.reconnect and not self.turn_running:
            await self.connect()  # /config set model.…: use the new endpoint or model now

    @work(exclusive=True, group="model-command", exit_on_error=False)
    async def run_model_command(self, text: str) -> None:
        """A command that asks the model (``/compact``), run beside the
        screen, with a line saying it waits for the model."""
        from wisp.core.commands import run_command

        assert self.session is not None
        line = "Asking the model for a summary to preview (nothing changes until you apply it)"
        waiting = Notice(line + "…")
        await self.chat.add(waiting)
        started, was = time.monotonic(), self.status.state
        self.status.state = "summarising"  # a new user saw "ready" for the five minutes it took
        ticker = self.set_interval(1.0, lambda: waiting.set_text(
            f"{line}: {time.monotonic() - started:.0f} s so far…"))
        try:
            result = await run_command(self.session, text)
        finally:
            ticker.stop()
            self.status.state = was
            await waiting.remove()
        await self.show_command_result(text, result)

    @work(exclusive=True, group="endpoint-command", exit_on_error=False)
    async def run_endpoint_command(self, text: str, name: str) -> None:
        """A command that asks the endpoint (``/model``), run beside the screen:
        the keys keep working while a busy server takes its time (a new user's
        screen took no key for minutes while the embedded model served another
        wisp), and after a second a line says what it waits for; Esc or Ctrl+C
        stops waiting."""
        from wisp.core.commands import run_command

        assert self.session is not None
        waiting: Notice | None = None
        started = time.monotonic()

        def tick() -> None:
            nonlocal waiting
            line = (f"/{name}: waiting for the endpoint, {time.monotonic() - started:.0f} s so far (a server busy "
                    "with another request answers when it is free; Esc stops waiting)")
            if waiting is None:
                waiting = Notice(line)
                self.call_later(self.chat.add, waiting)
            else:
                waiting.set_text(line)

        ticker = self.set_interval(1.0, tick)
        try:
            result = await run_command(self.session, text)
        except asyncio.CancelledError:
            await self.chat.add(Notice(f"/{name}: stopped waiting for the endpoint.", "warning"))
            raise
        finally:
            ticker.stop()
            if waiting is not None:
                await waiting.remove()
        await self.show_command_result(text, result)

    async def compact_answered(self, preview: Any, answer: str | None) -> None:
        """The preview's answer: ``"apply"`` records its summary (through the core); anything else cancels."""
        from wisp.core.context.compaction import CompactError
        from wisp.core.context.summary import turn_ranges

        from .widgets.command_output import CommandOutput

        assert self.session is not None
        if answer != "apply":
            await self.chat.add(CommandOutput("`/compact`\n\nCancelled: nothing changed.", error=False))
            return
        try:
            version = await self.session.apply_compaction(preview)
        except CompactError as exc:
            await self.chat.add(CommandOutput(f"`/compact`\n\n{exc}", error=True))
            return
        except Exception as error:  # every path answers (issue 11)
            self.report_crash(error, "applying /compact")
            return
        self.refresh_context()
        await self.chat.add(CommandOutput(
            f"`/compact`\n\nApplied: running summary version {version.version} covers turns "
            f"{turn_ranges(version.covers)}; they left the window (the next request has about "
            f"{preview.tokens_after:,} tokens). They stay in the store: `/show turn N`. "
            "`/compact undo` restores the previous version.", error=False))

    @work(exclusive=True, group="turn", exit_on_error=False)
    async def run_turn(self, text: str, supersedes: int | None = None) -> None:
        """Run one turn and draw its events as they come; Esc (cancelling
        this worker) ends it as stopped. ``supersedes``: the turn it asks
        again in place of (``/retry``, ``/edit``)."""
        from wisp.core import events as ev

        assert self.session is not None
        s = self.session
        await self.dismiss_welcome()  # the first prompt: the welcome goes (issue 16)
        if s.endpoint is None and not await self.connect():
            await self.chat.add(UserMessage(terminal_safe(text)))
            await self.chat.add(Notice("Not sent: no model endpoint answers (see above). "
                                       "Press Up to get the prompt back.", "error"))
            return
        await self.show_turns_from_elsewhere()
        await self.before_turn_shown(supersedes)
        self.status.state = "streaming"
        final_state = "error"
        turn = 0
        # The agent reads the stream as fast as the endpoint sends: a text delta is only handed to the
        # reply, which draws what arrived at most once a frame, so nothing here waits for the screen.
        # Events that came without waiting for the network let the screen paint every YIELD_EVERY_S.
        clock = time.perf_counter
        since = clock()
        text_delta, thinking_delta = ev.TextDelta, ev.ThinkingDelta
        # the claim refuses a conversation another wisp added turns to since this screen last looked
        turns = s.run_turn(text, supersedes=supersedes, seen=self._last_turn_shown)
        try:
            async for item in turns:
                kind = type(item)
                if kind is text_delta or kind is thinking_delta:
                    try:
                        await self.chat.show_event(item)
                    except Exception as error:  # drawn wrong: reported, and the turn goes on
                        self.report_crash(error, f"drawing {kind.__name__}")
                else:
                    if kind is ev.TurnStarted:
                        turn = item.turn
                    elif kind is ev.TurnEnded:
                        final_state = item.state
                    await self.show_agent_event(item)
                    if kind is ev.Error and item.kind in ("busy", "moved"):
                        final_state = "refused"  # nothing was sent: not an error of this session
                    if kind is ev.Error and item.kind in ("busy", "moved") and not self.prompt_input.text:
                        self.prompt_input.load_text(text)  # not sent: the prompt stays to send again (issue 16)
                        again = "once that turn has ended" if item.kind == "busy" else "after reading them"
                        await self.chat.add(Notice(f"Your prompt is back in the input: send it again {again}.",
                                                   "warning"))
                    if kind is ev.Error and item.kind == "moved":
                        await self.show_turns_from_elsewhere()
                now = clock()
                if now - since > YIELD_EVERY_S:
                    await asyncio.sleep(0)
                    since = clock()
        except asyncio.CancelledError:
            final_state = "stopped"
            await self.show_agent_event(ev.TurnEnded(turn, "stopped"))
            raise
        finally:
            # Esc while an event is drawn leaves the turn's events unread: closing them now ends the
            # turn in the store at once, not when the garbage collector finds the generator
            await turns.aclose()
            self.status.state = "error" if final_state == "error" else "ready"
            self.refresh_context()
        await self.after_turn_shown(turn, supersedes)

    async def show_agent_event(self, item: ev.AgentEvent) -> None:
        """Draw one event of the live turn: in the chat, the status bar and
        the panels. An event drawn wrong is reported, and the turn goes on."""
        from wisp.core import events as ev

        try:
            if isinstance(item, ev.TurnStarted):
                self.status.conversation = item.conversation
                self.status.problem = ""
                self._last_turn_shown = item.turn
            elif isinstance(item, ev.McpServerFailed):  # issue 15: say which server, and go on
                self.status.problem = f"MCP server {item.server} failed"
                item = ev.Notice(f"MCP server {item.server} failed: {item.message}", level="warning",
                                 key=f"mcp-{item.server}")
            elif isinstance(item, ev.Usage):
                self.status.prompt_tokens = item.prompt
                self.status.estimated_tokens = item.calibrated_prompt or item.estimated_prompt
                self.status.completion_tokens = item.completion
            elif isinstance(item, (ev.FactChanged, ev.SummaryChanged)):
                self.refresh_context()
            elif isinstance(item, ev.Notice) and item.key == "wait":  # the server loads or starts again
                self.status.state = wait_state(item.text)
            elif isinstance(item, ev.SideCallCost):  # the distiller's or the assessment's cost (issue 17)
                self.status.side_calls = (f"{item.kind} ~{item.tokens:,} tok {item.seconds:.1f} s" if item.calls
                                          else "")
            await self.chat.show_event(item)
        except Exception as error:
            self.report_crash(error, f"drawing {type(item).__name__}")

    @work(exclusive=True, group="context-panels", exit_on_error=False)
    async def refresh_context(self) -> None:
        """Redraw the facts, task and summary panels from the session (core reads the store)."""
        s = self.session
        if s is None or self._session_closing:
            return
        state = await s.panel_state()
        self.sidebar.show_state(state)

    def action_toggle_panel(self, name: str) -> None:
        """F2/F3/F4: show or hide the facts, task or running summary panel."""
        self.sidebar.toggle(name)

    async def action_inspect_context(self) -> None:
        """F5: the same view as /inspect context (F6 selects a line in the prompt)."""
        if self.session is not None:
            from wisp.core.commands import run_command

            from .screens import view_for

            result = await run_command(self.session, "/inspect context")
            view = view_for(result)
            if view is not None:
                await self.push_screen(view)

    @work(exclusive=True, group="memory-refine", exit_on_error=False)
    async def refine_memory(self) -> None:
        """Run episodic memory's refinement once (the work is in core); skipped
        while a reply streams or the session closes, to be tried next time."""
        busy = self.turn_running
        if self.session is not None and not self._session_closing and not busy:
            await self.session.refine_memory()

    async def ask_approval(self, request: Any) -> tuple[str, str | None]:
        """Ask the person about a command in the approval modal; returns
        ``(choice, prefix)`` (see :class:`~wisp.tui.screens.ApprovalScreen`).
        A stopped turn closes the modal."""
        from .screens.approval import ApprovalScreen

        answer: asyncio.Future[tuple[str, str | None]] = asyncio.get_running_loop().create_future()
        screen = ApprovalScreen(request)

        def done(result: tuple[str, str | None] | None) -> None:
            if not answer.done():
                answer.set_result(result or ("deny", None))

        previous = self.status.state
        self.status.state = "waiting for approval"
        await self.push_screen(screen, callback=done)
        try:
            return await answer
        except asyncio.CancelledError:
            if screen.is_current:
                screen.dismiss(None)
            raise
        finally:
            self.status.state = previous

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        """Textual's screenshot (Ctrl+P → Screenshot) as an SVG file, saved in
        the Downloads folder when there is one, else in the working directory
        (:func:`screenshot_dir`): Textual saves into ``~/Downloads`` whether it
        exists or not, and fails where it does not. Textual's notice names the
        file. Returns the delivery key."""
        if path is None:
            where = self.session.workdir if self.session is not None else self.options.workdir
            path = str(screenshot_dir(where))
        return super().deliver_screenshot(filename, path, time_format)

    @work(exclusive=True, group="follow", exit_on_error=False)
    async def follow_conversation(self) -> None:
        """Draw the turns another wisp (a second TUI, ``wisp ask --continue``)
        ended in this conversation since they were last looked for, reply and
        all (:meth:`show_turns_from_elsewhere`); the timer runs it every
        :data:`FOLLOW_EVERY_S` seconds. Skipped while this window runs a turn
        (it draws its own) or the session closes."""
        busy = self.turn_running
        if self.session is not None and not self._session_closing and not busy:
            await self.show_turns_from_elsewhere()

    async def show_turns_from_elsewhere(self) -> None:
        """Draw turns another wisp process added to this conversation since
        it was shown, so the screen shows all the model will be sent."""
        s = self.session
        if s is None or s.conversation_id is None:
            return
        # a turn left open by a wisp that died is ended first: else it stays undrawn, and every prompt of
        # this window is refused for the turn it never shows (a new user's `wisp ask … | head` died)
        await s.settle_open_turns()
        count = await s.transcript.count(s.conversation_id)
        missing = count - self._last_turn_shown
        if missing <= 0:
            return
        page = await s.transcript.page(s.conversation_id, limit=min(missing, PAGE_TURNS))
        turns = list(page.turns)
        while turns and turns[-1].state == "open":  # still running there: shown once it has ended, reply and all
            turns.pop()
        turns = [t for t in turns if t.number > self._last_turn_shown]  # a version elsewhere: numbers run on
        if not turns:
            return
        shown = len(turns)
        await self.chat.add(Notice(f"{shown} turn{'s' if shown != 1 else ''} added by another wisp "
                                   "process (another window, or wisp ask) while this one was open:", "warning"))
        await self.chat.show_turns(turns)
        self._last_turn_shown = turns[-1].number

    # --- every path answers (issue 11) -----------------------------------

    def report_crash(self, error: BaseException, where: str) -> None:
        """Show an internal error as an error line in the chat and go on: the
        conversation is kept. The traceback goes to Textual's log and, when a
        session is open, to the audit log (kind ``tui.error``), whose event
        id the line names. Called by :mod:`wisp.tui.guard` for handlers,
        actions and ``compose``, and for failed workers."""
        trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        self.log.error(f"wisp: internal error in {where}:\n{trace}")
        line = (f"⚠ wisp hit an internal error in {where}: {type(error).__name__}: {error}. "
                "The conversation is kept; you can go on.")
        s = self.session
        if s is not None:
            ref = s.report_error(where, f"{type(error).__name__}: {error}", trace)
            if ref is not None:
                line += f" The traceback is audit event {ref.event_id}."
        self.call_later(self._show_error_line, line)

    async def _show_error_line(self, line: str) -> None:
        try:
            await self.chat.add(Notice(line, "error"))
        except Exception:  # the chat itself is broken: a toast still says it
            self.notify(line, severity="error", timeout=30)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that failed is reported like any other crash (workers run with ``exit_on_error=False``)."""
        if event.state == WorkerState.ERROR and not self._session_closing and event.worker.error is not None:
            self.report_crash(event.worker.error, f"{event.worker.name or 'a worker'}")

    # --- actions ---------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """PageUp/PageDown/Ctrl+Home/Ctrl+End scroll the chat only when no view
        (/inspect context, /show, help) is open over it; a view scrolls itself."""
        if action == "scroll_chat" and len(self.screen_stack) > 1:
            return False
        return True

    async def action_scroll_chat(self, where: str) -> None:
        """PageUp/PageDown/Ctrl+Home/Ctrl+End scroll the conversation from the
        prompt (scrolling up lets go of the end; Ctrl+End follows it again).
        Ctrl+Home goes to the conversation's first turn, Ctrl+End to its last,
        however many turns are not shown."""
        chat = self.chat
        if where == "home" and chat.earlier and not chat.streaming:
            chat.release_anchor()  # going to the start: stop following the end
            await self.show_first_turns()
            chat.call_after_refresh(chat.scroll_home, animate=False, immediate=True)
            return
        if where == "end" and chat.later and not chat.streaming:
            await self.show_last_turns()
            chat.anchor()
        {"page_up": chat.scroll_page_up, "page_down": chat.scroll_page_down,
         "home": chat.scroll_home, "end": chat.scroll_end}[where](animate=False)

    def action_toggle_blocks(self) -> None:
        """Ctrl+O: open or close the tool and thinking blocks of the last reply."""
        from textual.widgets import Collapsible

        reply = self.chat.last_reply
        if reply is None:
            return
        blocks = list(reply.query(Collapsible))
        if blocks:
            opening = all(b.collapsed for b in blocks)
            for block in blocks:
                block.collapsed = not opening

    def on_key(self, event: Any) -> None:
        """Typing while focus is elsewhere (a clicked block) goes to the prompt, not nowhere."""
        if (event.is_printable and self.screen is self.screen_stack[0]
                and not isinstance(self.focused, PromptInput)):
            prompt = self.prompt_input
            prompt.focus()
            prompt.insert(event.character or "")
            event.stop()

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        self.push_screen(HelpScreen())

    def action_stop(self) -> None:
        """Esc: stop the streaming reply (the turn is recorded as stopped), or
        a command waiting for the endpoint; with neither and the input
        empty, leave /edit."""
        if not self.stop_running():
            self.cancel_edit()

    def action_interrupt(self) -> None:
        """Ctrl+C: stop the streaming reply or a waiting command, as Esc does
        (a new user's Ctrl+C only got "press Ctrl+Q to quit" while the reply
        went on); with nothing running, Textual's hint that Ctrl+Q quits."""
        if not self.stop_running():
            self.action_help_quit()

    def stop_running(self) -> bool:
        """Cancel the streaming turn, else a command waiting for the endpoint
        or the model; True when there was one."""
        for worker in (self.turn_worker, self.command_worker):
            if worker is not None and worker.is_running:
                worker.cancel()
                return True
        return False

    async def action_quit(self) -> None:
        await self.close_session()
        self.exit(0)

    async def close_session(self) -> None:
        """Stop a running turn, stop an embedded server and close the store."""
        if self._session_closing:
            return
        self._session_closing = True
        if self.turn_running and self.turn_worker is not None:
            self.turn_worker.cancel()
            try:
                await self.turn_worker.wait()
            except Exception:
                pass
        if self.session is not None:
            await self.session.close()
            self.session = None
        elif self._opening is not None:  # opened, never built (wisp quit while it was opening)
            await self._opening.close()
        self._opening = self._transcript = None

    async def on_unmount(self) -> None:
        await self.close_session()

