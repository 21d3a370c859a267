"""wisp's screens, each a module with its ``.tcss`` beside it.

All are modal (:class:`WispModal`: one box over the chat, Esc closes):
:class:`HelpScreen` (F1), :class:`ApprovalScreen`,
:class:`InspectContextScreen` (``/inspect context``, F5),
:class:`ShowScreen` (``/show``), :class:`MemoryScreen` and
:class:`MemoryDetailScreen` (``/memory``); the pickers of issue 16 on
:class:`PickerScreen`: :class:`ModelPickerScreen` (``/model``),
:class:`HistorySearchScreen` (Ctrl+R) and :class:`SearchResultsScreen`
(``/search``). :func:`view_for` picks the view for a command's result.
"""

from __future__ import annotations

from .approval import ApprovalScreen
from .help import HelpScreen
from .history_search import HistorySearchScreen
from .inspect_context import InspectContextScreen
from .memory_detail import MemoryDetailScreen
from .memory_list import MemoryScreen
from .modal import WispModal
from .model_picker import ModelPickerScreen
from .picker import PickerScreen, PickItem
from .search_results import SearchResultsScreen
from .show import PAGE_LINES, ShowScreen
from .views import view_for

__all__ = [
    "ApprovalScreen",
    "HelpScreen",
    "HistorySearchScreen",
    "InspectContextScreen",
    "MemoryDetailScreen",
    "MemoryScreen",
    "ModelPickerScreen",
    "PAGE_LINES",
    "PickItem",
    "PickerScreen",
    "SearchResultsScreen",
    "ShowScreen",
    "WispModal",
    "view_for",
]
