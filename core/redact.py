"""Secrets: out of wisp's environment, out of its children's reach, out of every line it shows.

A leaf: it imports nothing of wisp's, so every layer can use it.

- :func:`take_secret` reads an API key from the environment variable that
  config ``model.api_key_env`` names, **removes the variable** from
  ``os.environ`` (so no child process started later inherits it), zeroes it
  in the environment block ``/proc/<wisp>/environ`` shows, and keeps the
  value in memory only. Reading it again gives the kept value; the variable
  set again wins.
- :func:`make_undumpable` marks the process non-dumpable
  (``prctl(PR_SET_DUMPABLE, 0)``, Linux): ``/proc/<wisp>/environ``,
  ``mem`` and ``maps`` are then owned by root, so another process of the same
  user (an MCP server, a command, a model-written script) cannot read the
  environment wisp started with or its memory. A child gets its own
  dumpable state back when it ``exec``s.
- :func:`redact` is the one rule that hides secrets in text: every value
  :func:`remember` was given (the API key once read), the password of a URL
  (``http://user:pw@host`` → ``http://user:***@host``), a bearer token
  (``Bearer abc1…`` → ``Bearer ***``) and what follows ``Authorization:``. It is applied where text leaves wisp's
  hands: an endpoint's error messages, the audit log, stderr, exports and
  the viewer (which read what those recorded).
- :func:`looks_like_key` tells a key from an environment variable's name, so
  a key typed into ``model.api_key_env`` is refused without being repeated.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from typing import Any, TextIO

__all__ = ["take_secret", "remember", "forget_all", "redact", "redact_obj", "looks_like_key",
           "make_undumpable", "RedactingStream", "MASK", "taken_secrets"]

#: What stands in for a secret.
MASK = "***"
#: The shortest value :func:`remember` hides (characters): a shorter one would
#: mask ordinary words in every message, and is no key anyway.
MIN_SECRET_CHARS = 8

_lock = threading.Lock()
_values: set[str] = set()
_taken: dict[str, str] = {}  # variable name → the value taken out of os.environ

# scheme://user:password@host: the password runs up to the "@" (never across a quote, a space or a "/")
_URL_PASSWORD = re.compile(r'(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/@:"\\]*:)(?P<pw>[^\s/@"\\]*)(?P<at>@)')
# "Bearer <token>" (a token holds a digit: "bearer of news" is prose), and any scheme after Authorization:
_BEARER = re.compile(r"(?P<head>\b[Bb]earer\s+)(?P<tok>(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{8,})")
_AUTHORIZATION = re.compile(r"(?P<head>\b(?:Proxy-)?Authorization\b[\"']?\s*[:=]\s*[\"']?(?:[A-Za-z]+\s+)?)"
                            r"(?P<tok>[A-Za-z0-9._~+/=*-]{3,})", re.IGNORECASE)
#: Prefixes of the keys of well-known services (OpenAI, Anthropic, GitHub,
#: Hugging Face, GitLab, Slack, AWS, Google, Stripe …).
_KEY_PREFIXES = re.compile(r"^(sk-|sk_|pk_|rk_|ghp_|gho_|ghs_|ghu_|github_pat_|hf_|glpat-|xox[abpr]-|AIza|gsk_|pplx-|"
                           r"nvapi-|key-|r8_)|^(AKIA|ASIA)[A-Z0-9]{16}$")


#: A value of these characters only could be part of a number: it is not remembered, since masking it
#: would change every number that holds it (token counts, sizes, times) and break a JSON line's numbers
#: (the audit log masks the line as written). No key is all digits; a URL's password is masked by its
#: place in the URL whatever it is.
_NUMBERISH = re.compile(r"[0-9.eE+-]+")


def remember(value: str | None) -> None:
    """Hide ``value`` (a secret, at least :data:`MIN_SECRET_CHARS` long,
    and not something a number could hold: :data:`_NUMBERISH`) wherever
    :func:`redact` is applied from now on."""
    if isinstance(value, str) and len(value.strip()) >= MIN_SECRET_CHARS and not _NUMBERISH.fullmatch(value.strip()):
        with _lock:
            _values.add(value.strip())


def forget_all() -> None:
    """Forget every remembered value and taken variable (for tests)."""
    with _lock:
        _values.clear()
        _taken.clear()


def take_secret(name: str | None) -> str | None:
    """The value of environment variable ``name``, removed from
    ``os.environ`` and kept in memory (see the module doc); ``None`` when it
    is unset or empty and was never taken. The value is remembered for
    :func:`redact`."""
    if not name:
        return None
    with _lock:
        value = os.environ.pop(name, None)
        if value:
            _taken[name] = value
            _scrub_initial_environ(name)
        else:
            value = _taken.get(name)
    remember(value)
    return value or None


def _scrub_initial_environ(name: str) -> bool:
    """Overwrite ``NAME=value`` in the environment block the process was
    started with (Linux): ``/proc/PID/environ`` shows that block, not
    ``os.environ``, so unsetting a variable leaves it readable there to
    anyone allowed to read the file (root, or with the process dumpable,
    its user). The bytes are zeroed through ``/proc/self/mem``; nothing
    points at them once the variable is unset. Returns whether it found and
    zeroed it. Never raises."""
    try:
        fields = open("/proc/self/stat", "rb").read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (fields 50 and 51 of stat)
        if not 0 < start < end or end - start > 1 << 24:
            return False
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            block = mem.read(end - start)
            needle = name.encode() + b"="
            at = 0 if block.startswith(needle) else block.find(b"\0" + needle) + 1
            if at <= 0 and not block.startswith(needle):
                return False
            stop = block.find(b"\0", at)
            stop = len(block) if stop < 0 else stop
            mem.seek(start + at)
            mem.write(b"\0" * (stop - at))
        return True
    except (OSError, ValueError, IndexError):
        return False


def taken_secrets() -> dict[str, str]:
    """The variables :func:`take_secret` removed, with their values (a copy):
    what config may still hand on by name (``${NAME}`` in an MCP server's
    ``env``), though wisp's own environment no longer has them."""
    with _lock:
        return dict(_taken)


def redact(text: Any) -> Any:
    """``text`` with every secret masked (see the module doc); anything that
    is not a ``str`` is returned as it is. Never raises; idempotent."""
    if not isinstance(text, str) or not text:
        return text
    with _lock:
        values = sorted(_values, key=len, reverse=True)
    for value in values:
        if value in text:
            text = text.replace(value, MASK)
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: m["head"] + (MASK if m["pw"] else "") + m["at"], text)
    if "earer" in text:
        text = _BEARER.sub(lambda m: m["head"] + MASK, text)
    if "uthorization" in text or "UTHORIZATION" in text:
        text = _AUTHORIZATION.sub(lambda m: m["head"] + MASK, text)
    return text


def redact_obj(obj: Any, depth: int = 0) -> Any:
    """``obj`` (JSON-shaped: dicts, lists, strings) with :func:`redact`
    applied to every string in it, keys included; a new object where
    anything changed. Nesting past 200 levels is left as it is."""
    if isinstance(obj, str):
        return redact(obj)
    if depth > 200:
        return obj
    if isinstance(obj, dict):
        return {redact(k) if isinstance(k, str) else k: redact_obj(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v, depth + 1) for v in obj]
    return obj


def looks_like_key(value: str) -> bool:
    """Whether ``value`` looks like a key or token rather than an
    environment variable's name: a known service's key prefix (``sk-``,
    ``ghp_``, ``AKIA`` …), or a run of 16 characters or more (between ``_``
    or ``.``) mixing lower case, upper case and digits, or 32 hexadecimal digits or
    more. Names such as ``OPENAI_API_KEY``, ``work_key`` or ``MyApiKey`` are
    not keys."""
    text = value.strip()
    if not text:
        return False
    if _KEY_PREFIXES.match(text) and len(text) >= 12:
        return True
    if len(text) >= 32 and re.fullmatch(r"[0-9a-fA-F]+", text) and re.search(r"\d", text):
        return True
    return any(len(word) >= 16 and re.search(r"[a-z]", word) and re.search(r"[A-Z]", word)
               and re.search(r"\d", word) for word in re.split(r"[_.]", text))


def make_undumpable() -> bool:
    """Mark this process non-dumpable (Linux ``prctl(PR_SET_DUMPABLE, 0)``),
    so that other processes of the same user cannot read its
    ``/proc/PID/environ`` or ``mem``. Returns whether it took; elsewhere (or
    when ``WISP_DUMPABLE=1`` asks to keep it debuggable) it does nothing and
    returns ``False``. Never raises."""
    if not sys.platform.startswith("linux") or os.environ.get("WISP_DUMPABLE") == "1":
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_dumpable = 4
        return libc.prctl(pr_set_dumpable, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class RedactingStream:
    """A text stream that writes through :func:`redact` (wisp's stderr).
    Everything else is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
