"""The wisp Textual app: chat pane, prompt input and status bar.

The app owns no SQL and no HTTP: it opens a :class:`wisp.core.session.Session`,
hands prompts to it (or slash commands to :mod:`wisp.core.commands`) and
renders the :mod:`wisp.core.events` that come back.
"""

from __future__ import annotations

import asyncio
from typing import Any

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.worker import Worker

from wisp.core import events as ev
from wisp.core.commands import is_command, run_command
from wisp.core.config import Config
from wisp.core.session import Session, SessionOptions
from wisp.core.transcript import load_page, prompt_history
from wisp.themes import STYLESHEET, WISP_THEME

from .chat import AssistantMessage, ChatPane, CommandOutput, Notice, ToolBlock, UserMessage
from .help import HelpScreen
from .prompt import PromptInput
from .status import StatusBar

PAGE_TURNS = 50  # turns rendered at a time


class WispApp(App[int]):
    """wisp's TUI. ``options`` say which conversation to open and which tools
    to give; ``config`` defaults to the one in ``WISP_HOME``."""

    TITLE = "wisp"
    CSS_PATH = str(STYLESHEET)
    BINDINGS = [
        Binding("f1", "help", "Help"),
        Binding("escape", "stop", "Stop reply", show=False),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(self, options: SessionOptions | None = None, config: Config | None = None,
                 connect: bool = True) -> None:
        super().__init__()
        self.options = options or SessionOptions()
        self._config = config
        self._connect = connect
        self.session: Session | None = None
        self.turn_worker: Worker[Any] | None = None
        self._first_shown: int | None = None
        self._session_closing = False
        self.ready = asyncio.Event()

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield ChatPane(id="chat")
        yield PromptInput(id="prompt")
        yield StatusBar(id="status")

    @property
    def chat(self) -> ChatPane:
        return self.query_one(ChatPane)

    @property
    def status(self) -> StatusBar:
        return self.query_one(StatusBar)

    @property
    def prompt_input(self) -> PromptInput:
        return self.query_one(PromptInput)

    async def on_mount(self) -> None:
        self.register_theme(WISP_THEME)
        self.theme = "wisp"
        self.prompt_input.focus()
        self.start_session()

    @work(exclusive=True, group="session")
    async def start_session(self) -> None:
        """Open the session, show the stored conversation, then connect."""
        try:
            self.session = await Session.open(self.options, self._config)
        except Exception as exc:  # a bad config or unknown conversation: say so, stay open
            await self.chat.add(Notice(f"wisp could not open: {exc}", "error"))
            self.status.state = "error"
            self.ready.set()
            return
        s = self.session
        self.status.conversation = s.conversation_id
        if s.conversation_id is not None:
            await self.show_page(s.conversation_id)
            self.prompt_input.prompt_history = await prompt_history(s.store, s.conversation_id)
        if self._connect:
            await self.connect()
        self.ready.set()

    async def connect(self) -> bool:
        """Resolve the endpoint; show which model and endpoint, or why none."""
        assert self.session is not None
        self.status.state = "connecting"
        async def say(line: str) -> None:
            self.status.endpoint = line
            await self.chat.add(Notice(line))

        ok = await self.session.connect(on_status=say)
        self.status.endpoint = self.session.endpoint_label
        self.status.model = self.session.model_name
        self.status.window = self.session.context_window
        if ok:
            self.status.state = "ready"
        else:
            self.status.state = "no endpoint"
            await self.chat.add(Notice(self.session.endpoint_error or "no endpoint", "error"))
        return ok

    async def show_page(self, conversation_id: int, before: int | None = None) -> None:
        """Render a page of stored turns (at the top when loading earlier ones)."""
        assert self.session is not None
        page = await load_page(self.session.store, conversation_id, PAGE_TURNS, before)
        widgets: list[Any] = []
        for turn in page.turns:
            widgets.extend(_turn_widgets(turn))
        if before is None:
            await self.chat.mount_all(widgets)
        else:
            anchor = self.chat.earlier_button
            index = self.chat.children.index(anchor) + 1 if anchor is not None else 0
            await self.chat.mount_all(widgets, before=index if index < len(self.chat.children) else None)
        if page.turns:
            self._first_shown = page.turns[0].number
        if page.earlier:
            await self.chat.show_earlier_button(page.earlier)
        else:
            await self.chat.hide_earlier_button()
        if before is None:
            self.chat.scroll_end(animate=False)

    async def on_chat_pane_load_earlier(self, message: ChatPane.LoadEarlier) -> None:
        if self.session and self.session.conversation_id and self._first_shown:
            await self.show_page(self.session.conversation_id, before=self._first_shown)

    # --- input -----------------------------------------------------------

    async def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        text = message.text
        if self.session is None:
            await self.chat.add(Notice("wisp is still starting; try again in a moment.", "warning"))
            return
        if is_command(text):
            result = await run_command(self.session, text)
            await self.chat.add(CommandOutput(f"`{text.strip()}`\n\n{result.text}", error=result.error))
            return
        if self.turn_worker is not None and self.turn_worker.is_running:
            await self.chat.add(Notice("A reply is still streaming; press Esc to stop it first.", "warning"))
            return
        self.turn_worker = self.run_turn(text)

    @work(exclusive=True, group="turn")
    async def run_turn(self, text: str) -> None:
        """Run one turn and render its events as they come."""
        assert self.session is not None
        s = self.session
        if s.endpoint is None and not await self.connect():
            await self.chat.add(UserMessage(text))
            await self.chat.add(Notice("Not sent: no model endpoint answers. " +
                                       (s.endpoint_error or ""), "error"))
            return
        self.status.state = "streaming"
        reply: AssistantMessage | None = None
        blocks: dict[str, ToolBlock] = {}
        final_state = "error"

        async def ensure_reply() -> AssistantMessage:
            nonlocal reply
            if reply is None:
                reply = AssistantMessage()
                await self.chat.add(reply)
            return reply

        try:
            async for item in s.run_turn(text):
                if isinstance(item, ev.TurnStarted):
                    self.status.conversation = item.conversation
                    await self.chat.add(UserMessage(item.prompt, entry=item.entry))
                elif isinstance(item, ev.TextDelta):
                    await (await ensure_reply()).add_text(item.text)
                    self.chat.scroll_end(animate=False)
                elif isinstance(item, ev.ThinkingDelta):
                    await (await ensure_reply()).add_thinking(item.text)
                elif isinstance(item, ev.ToolCall):
                    block = ToolBlock(item.name, item.arguments, item.call_id, item.entry)
                    blocks[item.call_id] = block
                    await (await ensure_reply()).add_tool(block)
                    self.chat.scroll_end(animate=False)
                elif isinstance(item, ev.ToolOutput):
                    if item.call_id in blocks:
                        blocks[item.call_id].stream(item.text)
                elif isinstance(item, ev.ToolResult):
                    if item.call_id in blocks:
                        blocks[item.call_id].finish(item.content, item.ok, item.entry)
                elif isinstance(item, ev.Usage):
                    self.status.prompt_tokens = item.prompt
                    self.status.estimated_tokens = item.estimated_prompt
                    self.status.completion_tokens = item.completion
                elif isinstance(item, ev.Notice):
                    await self.chat.add(Notice(item.text, item.level))
                elif isinstance(item, ev.Error):
                    if reply is not None:
                        await reply.finish(partial=True)
                    await self.chat.add(Notice(item.message, "error"))
                elif isinstance(item, ev.TurnEnded):
                    final_state = item.state
                    if reply is not None and item.state != "error":
                        await reply.finish(cut=item.state == "cut")
        except asyncio.CancelledError:
            final_state = "stopped"
            if reply is not None:
                await reply.finish(stopped=True)
            else:
                await self.chat.add(Notice("■ stopped", "warning"))
            raise
        finally:
            self.status.state = "error" if final_state == "error" else "ready"
            self.chat.scroll_end(animate=False)

    # --- actions ---------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_stop(self) -> None:
        """Esc: stop the streaming reply (the turn is recorded as stopped)."""
        if self.turn_worker is not None and self.turn_worker.is_running:
            self.turn_worker.cancel()

    async def action_quit(self) -> None:
        await self.close_session()
        self.exit(0)

    async def close_session(self) -> None:
        """Stop a running turn, stop an embedded server and close the store."""
        if self._session_closing:
            return
        self._session_closing = True
        if self.turn_worker is not None and self.turn_worker.is_running:
            self.turn_worker.cancel()
            try:
                await self.turn_worker.wait()
            except Exception:
                pass
        if self.session is not None:
            await self.session.close()
            self.session = None

    async def on_unmount(self) -> None:
        await self.close_session()


def _turn_widgets(turn: Any) -> list[Any]:
    """Widgets for one stored turn."""
    widgets: list[Any] = []
    reply: AssistantMessage | None = None
    blocks: dict[str, ToolBlock] = {}
    pending_text: list[str] = []
    for e in turn.entries:
        meta = e.meta or {}
        if e.kind == "prompt":
            widgets.append(UserMessage(e.content, entry=e.number))
        elif e.kind == "reply":
            widgets.append(AssistantMessage(e.content or "", cut=bool(meta.get("cut")),
                                            partial=bool(meta.get("partial"))))
            if meta.get("partial"):
                reason = meta.get("reason") or "an error"
                widgets.append(Notice(f"⚠ incomplete ({reason}) — the reply so far is kept", "warning"))
            elif meta.get("cut"):
                widgets.append(Notice("✂ cut at the output limit — not finished", "warning"))
        elif e.kind == "tool_call":
            block = ToolBlock(e.tool_name or "?", e.arguments or {}, e.tool_call_id or "", e.number)
            blocks[e.tool_call_id or ""] = block
            widgets.append(block)
        elif e.kind == "tool_result":
            block = blocks.get(e.tool_call_id or "")
            if block is not None:
                block.finish(e.content, not meta.get("error"), e.number)
        elif e.kind == "notice":
            widgets.append(Notice(e.content, "warning"))
    del reply, pending_text
    if turn.state == "stopped":
        widgets.append(Notice("■ stopped", "warning"))
    elif turn.state == "error":
        widgets.append(Notice("⚠ this turn ended with an error", "error"))
    return widgets
