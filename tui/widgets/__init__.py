"""wisp's widgets, one per module (as in Textual's own ``textual.widgets``).

The conversation: :class:`ChatPane` draws the agent's events as
:class:`UserMessage`, :class:`AssistantMessage` (with :class:`ThinkingBlock`,
:class:`ToolBlock` and :class:`ReplyText`), :class:`Notice` and
:class:`CommandOutput`. Around
it: :class:`PromptInput`, :class:`StatusBar`, and :class:`ContextSidebar`
with its :class:`FactsPanel`, :class:`TaskPanel` and :class:`SummaryPanel`;
:class:`Welcome` in an empty chat and :class:`VersionBar` under a reply
that has versions (issue 16).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

#: Where each name lives (the modules load when a name is first used, as in ``textual.widgets``:
#: the first frame imports only the widgets it shows; issue 12, "Paint first, then open").
_WHERE = {
    "AssistantMessage": "assistant_message",
    "ChatPane": "chat_pane",
    "CommandOutput": "command_output",
    "ContextPanel": "context_panel",
    "ContextSidebar": "context_sidebar",
    "FactsPanel": "facts_panel",
    "Notice": "notice",
    "PromptInput": "prompt_input",
    "ReplyText": "reply_text",
    "StatusBar": "status_bar",
    "SummaryPanel": "summary_panel",
    "TaskPanel": "task_panel",
    "ThinkingBlock": "thinking_block",
    "ToolBlock": "tool_block",
    "TurnRenderer": "..turn_renderer",
    "UserMessage": "user_message",
    "VersionBar": "version_bar",
    "Welcome": "welcome",
    "source_mark": "context_panel",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module if module.startswith("..") else f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "AssistantMessage",
    "ChatPane",
    "CommandOutput",
    "ContextPanel",
    "ContextSidebar",
    "FactsPanel",
    "Notice",
    "PromptInput",
    "ReplyText",
    "StatusBar",
    "SummaryPanel",
    "TaskPanel",
    "ThinkingBlock",
    "ToolBlock",
    "TurnRenderer",
    "UserMessage",
    "VersionBar",
    "Welcome",
    "source_mark",
]
