"""The approval modal: may this command run, or this edit be made? (issue "Tools that act", "Approval").

Shows the command and the directory it would run in, with three choices:

- **y** — allow once;
- **a** — always allow commands that begin with the prefix shown (editable;
  Tab to it) in this workspace; not offered for a command that chains,
  pipes or redirects, since a prefix cannot vouch for the rest of it, nor
  when no standing prefix can hold (an interpreter, shell or wrapper, a
  program that writes: :func:`wisp.core.tools.approval.suggest_prefix`
  offers none);
- **n** or **Esc** — deny; the model is told it was denied.

Keys pressed in the first :attr:`ApprovalScreen.ARM_DELAY_S` seconds are
ignored, so that a key meant for the prompt cannot approve a command that
appeared under it. Focus starts on Deny, so Enter alone denies.
The screen returns ``(choice, prefix)``: ``("once", None)``,
``("always", prefix)`` or ``("deny", None)``.

For an MCP server's tool that acts (issue 15) it shows the server, the tool
and its arguments, and **a** always allows that tool in this workspace
(``("always", tool name)``).

Where commands have no sandbox, the request's ``notice`` (what the core
says about it: :func:`wisp.core.tools.sandbox.approval_notice`) is shown
under the command, in the warning colour.

For an edit (``edit_file``: :attr:`ApprovalRequest.is_edit`) it shows the
change before it happens: the file, the lines added and removed, and the
unified diff highlighted (pygments' diff lexer, through Rich's ``Syntax``)
in a scrolling box (Up/Down, PageUp/PageDown, Home/End, or the mouse), its
control and bidirectional characters shown as escapes
(:func:`wisp.core.text.shown_diff`) so that no line can hide what it
changes. **y** allows it once, **a** allows edits to this file for the rest
of this conversation (``("always", path)``), **n** or **Esc** denies it.
"""

from __future__ import annotations

import json

from textual.app import ComposeResult
from textual.binding import Binding
from rich.syntax import Syntax
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Input, Label, Static

from wisp.core.text import shown_command, shown_diff
from wisp.core.tool_names import mcp_parts
from wisp.core.tools.approval import ApprovalRequest, is_simple_command, prefix_matches

from wisp.themes import syntax_theme

from .modal import WispModal

__all__ = ["ApprovalScreen"]


class ApprovalScreen(WispModal[tuple[str, "str | None"]]):
    """Ask the person whether ``request``'s command may run."""

    #: Seconds after opening during which keys and clicks are ignored.
    ARM_DELAY_S = 0.4

    CSS_PATH = ["modal.tcss", "approval.tcss"]
    BINDINGS = [
        Binding("y", "choose('once')", "Allow once"),
        Binding("a", "choose('always')", "Always allow"),
        Binding("n", "choose('deny')", "Deny"),
        Binding("up", "scroll_diff('up')", "Scroll the diff", show=False),
        Binding("down", "scroll_diff('down')", "Scroll the diff", show=False),
        Binding("pageup", "scroll_diff('page_up')", "Page up", show=False),
        Binding("pagedown", "scroll_diff('page_down')", "Page down", show=False),
        Binding("home", "scroll_diff('home')", "Top", show=False),
        Binding("end", "scroll_diff('end')", "Bottom", show=False),
    ]
    BOX_ID = "approval-box"

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__()
        self.request = request
        self.edit = bool(getattr(request, "is_edit", False))
        self.mcp = bool(getattr(request, "is_mcp", False))
        self.simple = not self.mcp and not self.edit and is_simple_command(request.command)
        self.suggested = request.suggested_prefix if self.simple else ""
        #: "Always" is offered only with a prefix that can stand.
        self.offers_always = self.simple and bool(self.suggested)
        self.armed = False

    def _compose_mcp(self) -> ComposeResult:
        request = self.request
        tool = (mcp_parts(request.tool) or (None, None))[1] or request.tool
        yield Static("⚠ The model wants to use an MCP tool that acts", classes="approval-title")
        yield Static(shown_command(f"server {request.server} · tool {tool} ({request.tool})"),
                     id="approval-command", markup=False)
        try:
            args = json.dumps(request.arguments or {}, ensure_ascii=False, indent=2)
        except (TypeError, ValueError):
            args = str(request.arguments)
        lines = shown_command(args).split("\n")  # an argument's own control or bidi characters escaped
        if len(lines) > 12:
            lines = lines[:12] + [f"… ({len(lines) - 12} more lines)"]
        yield Static("\n".join(lines), id="approval-arguments", markup=False)
        yield Static(f"in {request.workdir}", id="approval-dir", markup=False)
        yield Static(f"(always: {request.tool} runs without asking in this workspace, from now on)",
                     id="approval-note", markup=False)
        yield Static("", id="approval-error", markup=False)
        with Horizontal(id="approval-buttons"):
            yield Button("Allow once (y)", id="once", variant="success")
            yield Button("Always allow (a)", id="always", variant="primary")
            yield Button("Deny (n, Esc)", id="deny", variant="error")

    def _compose_edit(self) -> ComposeResult:
        request = self.request
        verb = "create" if request.new_file else "edit"
        yield Static(f"⚠ The model wants to {verb} a file", classes="approval-title")
        added = f"{request.added} line{'' if request.added == 1 else 's'} added"
        what = f"new file · {added}" if request.new_file else f"{added}, {request.removed} removed"
        yield Static(f"{shown_command(request.path or '')} · {what}", id="approval-file", markup=False)
        diff = shown_diff(request.diff or "")
        yield VerticalScroll(Static(Syntax(diff, "diff", theme=syntax_theme(self.app.current_theme.dark),
                                           word_wrap=False), id="approval-diff-text"), id="approval-diff")
        yield Static(f"in {request.workdir}", id="approval-dir", markup=False)
        lines = diff.count("\n") + 1
        yield Static(f"({lines} lines of diff: ↑↓ PgUp PgDn scroll it. a: edits to "
                     f"{shown_command(request.path or '')} are made without asking for the rest of this "
                     "conversation; each shows in the chat, and /undo takes a turn's edits back)",
                     id="approval-note", markup=False)
        yield Static("", id="approval-error", markup=False)
        with Horizontal(id="approval-buttons"):
            yield Button("Allow once (y)", id="once", variant="success")
            yield Button("Allow this file (a)", id="always", variant="primary")
            yield Button("Deny (n, Esc)", id="deny", variant="error")

    def action_scroll_diff(self, how: str) -> None:
        """Scroll the diff of an edit (Up, Down, PageUp, PageDown, Home, End)."""
        if not self.edit:
            return
        box = self.query_one("#approval-diff", VerticalScroll)
        {"up": box.scroll_up, "down": box.scroll_down, "page_up": box.scroll_page_up,
         "page_down": box.scroll_page_down, "home": box.scroll_home, "end": box.scroll_end}[how](animate=False)

    def compose_box(self) -> ComposeResult:
        if self.edit:
            yield from self._compose_edit()
            return
        if self.mcp:
            yield from self._compose_mcp()
            return
        yield Static("⚠ The model wants to run a command", classes="approval-title")
        # everything that runs is shown: line ends marked, empty runs counted, controls and U+202E escaped
        shown = shown_command(self.request.command)
        yield Static(shown, id="approval-command", markup=False)
        if shown.count("\n") >= 10:
            yield Static(f"({shown.count(chr(10)) + 1} lines shown: every one of them runs; scroll to read them)",
                         id="approval-lines", markup=False)
        yield Static(f"in {self.request.workdir}", id="approval-dir", markup=False)
        notice = getattr(self.request, "notice", None)
        if notice:  # no sandbox here: the core's line, as it says it
            yield Static(notice, id="approval-sandbox", markup=False)
        if self.offers_always:
            with Horizontal(id="approval-prefix-row"):
                yield Label("Always allow commands that begin with:")
                yield Input(self.suggested, id="approval-prefix")
            yield Static("(in this workspace, from now on; Tab to edit the prefix, Enter to allow it)",
                         id="approval-note", markup=False)
        elif notice:  # without a sandbox the notice above says why there is no "always"
            pass
        elif self.simple:
            yield Static("No prefix can always allow this command (it runs code its words give, wraps "
                         "another program, or writes), so it can only be allowed once.",
                         id="approval-note", markup=False)
        else:
            yield Static("This command chains, pipes, redirects or substitutes, so it can only be "
                         "allowed once.", id="approval-note", markup=False)
        yield Static("", id="approval-error", markup=False)
        with Horizontal(id="approval-buttons"):
            yield Button("Allow once (y)", id="once", variant="success")
            if self.offers_always:
                yield Button("Always allow (a)", id="always", variant="primary")
            yield Button("Deny (n, Esc)", id="deny", variant="error")

    def on_mount(self) -> None:
        self.query_one("#deny", Button).focus()
        self.set_timer(self.ARM_DELAY_S, self._arm)

    def _arm(self) -> None:
        self.armed = True

    @property
    def prefix(self) -> str:
        """The prefix in the field (the suggestion until the person edits it)."""
        if not self.offers_always:
            return ""
        return " ".join(self.query_one("#approval-prefix", Input).value.split())

    def action_close(self) -> None:
        """Esc denies (once armed), as n does."""
        self.action_choose("deny")

    def action_choose(self, choice: str) -> None:
        """Answer ``once``, ``always`` or ``deny`` (ignored until armed)."""
        if not self.armed:
            return
        if choice == "always" and self.mcp:
            self.dismiss(("always", self.request.tool))
            return
        if choice == "always" and self.edit:  # this file, for the rest of this conversation
            self.dismiss(("always", self.request.path))
            return
        if choice == "always":
            if not self.offers_always:
                self._error("This command can only be allowed once (y) or denied (n).")
                return
            prefix = self.prefix
            if not prefix or not prefix_matches(self.request.command, prefix):
                self._error(f"The command's words do not begin with the whole words {prefix!r}; edit the "
                            "prefix so that they do, or allow once (y).")
                field = self.query_one("#approval-prefix", Input)
                field.focus()  # keep the keys in the field being corrected
                field.cursor_position = len(field.value)
                return
            self.dismiss(("always", prefix))
            return
        self.dismiss((choice, None) if choice in ("once", "deny") else ("deny", None))

    def _error(self, text: str) -> None:
        self.query_one("#approval-error", Static).update(text)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_choose(event.button.id or "deny")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_choose("always")
