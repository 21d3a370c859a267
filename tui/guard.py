"""Every path answers: a crash in the TUI becomes an error line, not an exit.

Issue 11, "Every path answers": a crash anywhere in the TUI is shown as an
error line, the conversation is kept, and the app goes on. Textual ends the
app on an exception that escapes a message handler, an action or
``compose``, and stops the message loop of the widget whose handler raised
for good; so wisp's own handlers catch it first.

Every widget, screen and the app derive from :class:`Guarded`: each
message handler (``on_*``, ``_on_*``), action (``action_*``), key method
(``key_*``) and ``compose`` that a subclass defines is wrapped by
:func:`guarded` when the class is made. An exception there (never a
cancellation) goes to the app's ``report_crash(error, where)`` (see
:meth:`wisp.tui.app.WispApp.report_crash`), which writes the error line.
Where the app has no ``report_crash`` (a widget run in another app, in a
test) the exception is raised as before.

Workers are answered by the app's ``on_worker_state_changed``; the exit
status after a crash that still escapes is the app's return code, never 0
(:func:`wisp.tui.launch.exit_status`).
"""

from __future__ import annotations

import inspect
from functools import wraps
from typing import Any, Callable, TypeVar

__all__ = ["Guarded", "guarded", "is_guarded", "is_handler_name", "report"]

F = TypeVar("F", bound=Callable[..., Any])

#: Names of the methods Textual calls for messages, actions and keys.
HANDLER_PREFIXES = ("on_", "_on_", "action_", "key_")

_MARK = "__wisp_guarded__"


def is_handler_name(name: str) -> bool:
    """Whether Textual calls a method of this name for a message, an action
    or a key, or to compose the widget (``compose``)."""
    return name == "compose" or name.startswith(HANDLER_PREFIXES)


def is_guarded(function: Any) -> bool:
    """Whether ``function`` was wrapped by :func:`guarded`."""
    return bool(getattr(function, _MARK, False))


def report(node: Any, error: Exception, where: str) -> bool:
    """Hand ``error`` to the app of ``node`` (a widget, a screen or the app
    itself). Returns False when that app cannot report it (no
    ``report_crash``, or no app), so the caller raises it instead."""
    try:
        app = node if hasattr(node, "report_crash") else node.app
    except Exception:  # not attached to an app
        return False
    reporter = getattr(app, "report_crash", None)
    if reporter is None:
        return False
    reporter(error, where)
    return True


def guarded(method: F) -> F:
    """Wrap a handler, an action or ``compose`` so that an exception it
    raises is reported to the app (:func:`report`) instead of ending it.

    Works for plain, ``async`` and generator methods (``compose``: the
    widgets yielded before the error stay). ``asyncio.CancelledError`` is
    not an ``Exception`` and passes through untouched.
    """
    if is_guarded(method):
        return method
    where = method.__qualname__
    wrapper: Any
    if inspect.iscoroutinefunction(method):
        @wraps(method)
        async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return await method(self, *args, **kwargs)
            except Exception as error:
                if not report(self, error, where):
                    raise
                return None
    elif inspect.isgeneratorfunction(method):
        @wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                yield from method(self, *args, **kwargs)
            except Exception as error:
                if not report(self, error, where):
                    raise
    else:
        @wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except Exception as error:
                if not report(self, error, where):
                    raise
                return None
    setattr(wrapper, _MARK, True)
    return wrapper  # type: ignore[no-any-return]


class Guarded:
    """Mixin for wisp's widgets, screens and app: the handlers, actions,
    key methods and ``compose`` each subclass defines are :func:`guarded`,
    including handlers declared with Textual's ``@on``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrapped: dict[Any, Any] = {}
        for name, value in list(vars(cls).items()):
            if inspect.isfunction(value) and (is_handler_name(name) or hasattr(value, "_textual_on")):
                wrapped[value] = guarded(value)
                setattr(cls, name, wrapped[value])
        # Textual collected the @on handlers of this class before this hook ran: swap in the wrapped ones
        decorated = vars(cls).get("_decorated_handlers") or {}
        for handlers in decorated.values():
            for i, (method, selectors) in enumerate(handlers):
                if method in wrapped:
                    handlers[i] = (wrapped[method], selectors)
