"""wisp's screens, each a module with its ``.tcss`` beside it.

All are modal (:class:`WispModal`: one box over the chat, Esc closes):
:class:`HelpScreen` (F1), :class:`ApprovalScreen`,
:class:`InspectContextScreen` (``/inspect context``, F5),
:class:`ShowScreen` (``/show``), :class:`MemoryScreen` and
:class:`MemoryDetailScreen` (``/memory``), :class:`CompactScreen`
(``/compact``'s preview). :func:`view_for` picks the view for a command's
result.
"""

from __future__ import annotations

from .approval import ApprovalScreen
from .compact import CompactScreen
from .help import HelpScreen
from .inspect_context import InspectContextScreen
from .memory_detail import MemoryDetailScreen
from .memory_list import MemoryScreen
from .modal import WispModal
from .show import PAGE_LINES, ShowScreen
from .views import view_for

__all__ = [
    "ApprovalScreen",
    "CompactScreen",
    "HelpScreen",
    "InspectContextScreen",
    "MemoryDetailScreen",
    "MemoryScreen",
    "PAGE_LINES",
    "ShowScreen",
    "WispModal",
    "view_for",
]
