"""wisp's widgets, one per module (as in Textual's own ``textual.widgets``).

The conversation: :class:`ChatPane` draws the agent's events as
:class:`UserMessage`, :class:`AssistantMessage` (with :class:`ThinkingBlock`
and :class:`ToolBlock`), :class:`Notice` and :class:`CommandOutput`. Around
it: :class:`PromptInput`, :class:`StatusBar`, and :class:`ContextSidebar`
with its :class:`FactsPanel`, :class:`TaskPanel` and :class:`SummaryPanel`;
:class:`Welcome` in an empty chat and :class:`VersionBar` under a reply
that has versions (issue 16).
"""

from __future__ import annotations

from .assistant_message import AssistantMessage
from .chat_pane import ChatPane, TurnRenderer
from .command_output import CommandOutput
from .context_panel import ContextPanel, source_mark
from .context_sidebar import ContextSidebar
from .facts_panel import FactsPanel
from .notice import Notice
from .prompt_input import PromptInput
from .status_bar import StatusBar
from .summary_panel import SummaryPanel
from .task_panel import TaskPanel
from .thinking_block import ThinkingBlock
from .tool_block import ToolBlock
from .user_message import UserMessage
from .version_bar import VersionBar
from .welcome import Welcome

__all__ = [
    "AssistantMessage",
    "ChatPane",
    "CommandOutput",
    "ContextPanel",
    "ContextSidebar",
    "FactsPanel",
    "Notice",
    "PromptInput",
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
