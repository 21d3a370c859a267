"""``/model`` in the TUI: the endpoint's models in a picker (issue 16, "Models and endpoints").

The list is the ``data`` of the ``/model`` result (the endpoint's
``/api/tags`` or ``/v1/models``, read by the core); picking one answers its
name, and the app runs ``/model NAME``, which switches from the next request.
"""

from __future__ import annotations

from .picker import PickerScreen, PickItem

__all__ = ["ModelPickerScreen"]


class ModelPickerScreen(PickerScreen):
    """``models`` (names), ``current`` (the one in use, marked ●), ``where``
    (the endpoint's label)."""

    CSS_PATH = ["modal.tcss", "picker.tcss", "model_picker.tcss"]
    BOX_ID = "model-picker-box"
    PLACEHOLDER = "type to filter the models"

    def __init__(self, models: list[str], current: str, where: str = "") -> None:
        items = [PickItem(m, f"{'●' if m == current else '○'} {m}", m) for m in models]
        title = f"Models at {where}" if where else "Models"
        super().__init__(f"{title}: {len(models)} (● in use). The pick applies from the next request.", items,
                         current=current, hint="Enter switches · Esc keeps the model · type to filter")
