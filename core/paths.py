"""Where wisp keeps its files, and how it creates them.

Rules (DESIGN.md, "Where things live"; issue "wisp runs end to end", "Config"):

- The home is ``~/.wisp``; the environment variable ``WISP_HOME`` moves the
  whole home, which is what tests use.
- The config is ``<home>/config.json``.
- The database and the audit log live in the platformdirs user data dir
  (``user_data_dir("wisp")``) unless the config says otherwise. When
  ``WISP_HOME`` is set, the data dir is ``$WISP_HOME/data`` instead, so that a
  test that sets ``WISP_HOME`` never touches the real home.
- Files are created with mode 0600 and directories with mode 0700.
- What the model may read is confined to the conversation's working
  directory (:func:`confined_path`, shared by ``read_file`` and AGENTS.md),
  and only regular files are opened, never in a way that can block
  (:func:`open_regular`): issue "Nothing runs, leaks, hangs or is lost that
  shouldn't be".

Nothing here reads the config; :mod:`wisp.core.config` builds on this.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

import platformdirs

__all__ = [
    "FILE_MODE",
    "DIR_MODE",
    "wisp_home",
    "config_path",
    "default_data_dir",
    "ensure_private_dir",
    "open_private",
    "create_private_file",
    "atomic_write_private",
    "OutsideWorkdir",
    "NotRegularFile",
    "confined_path",
    "open_regular",
    "file_kind",
]

#: Mode of every file wisp creates (DESIGN.md, "Where things live").
FILE_MODE = 0o600
#: Mode of every directory wisp creates.
DIR_MODE = 0o700


def wisp_home() -> Path:
    """Return the wisp home directory (not created here).

    ``$WISP_HOME`` when it is set and not empty (``~`` is expanded), else
    ``~/.wisp``. Source: DESIGN.md, "Where things live".
    """
    env = os.environ.get("WISP_HOME", "").strip()
    if env:
        return Path(env).expanduser()
    return Path.home() / ".wisp"


def config_path() -> Path:
    """Return the path of the config file, ``<wisp_home()>/config.json``."""
    return wisp_home() / "config.json"


def default_data_dir() -> Path:
    """Return the directory for the database and the audit log (not created).

    ``$WISP_HOME/data`` when ``WISP_HOME`` is set, so tests stay inside their
    temporary home; else platformdirs' ``user_data_dir("wisp")`` (for example
    ``~/.local/share/wisp`` on Linux). The config keys ``store.path`` and
    ``audit.dir`` override it (see :class:`wisp.core.config.Config`).
    """
    if os.environ.get("WISP_HOME", "").strip():
        return wisp_home() / "data"
    return Path(platformdirs.user_data_dir("wisp", appauthor=False))


def ensure_private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` and any missing parents, each new one with mode 0700.

    Directories that already exist keep their mode (wisp does not chmod a
    directory it did not create, such as the user's home). Returns the path.
    Raises ``OSError`` if a component exists and is not a directory, or on a
    permission error.
    """
    p = Path(path)
    missing: list[Path] = []
    cur = p
    while not cur.exists():
        missing.append(cur)
        if cur.parent == cur:
            break
        cur = cur.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue  # created meanwhile by another process
        os.chmod(d, DIR_MODE)  # mkdir's mode is filtered by the umask
    if not p.is_dir():
        raise NotADirectoryError(f"{p} exists and is not a directory")
    return p


def open_private(path: str | os.PathLike[str], flags: int) -> int:
    """``os.open`` a file, creating it with mode 0600 if ``O_CREAT`` is given.

    ``flags`` are ``os.O_*`` flags. A file this call creates is chmod'ed to
    exactly 0600 whatever the umask; an existing file keeps its mode. The
    parent directory is created (0700) if missing. Returns the file
    descriptor; raises ``OSError``.
    """
    p = Path(path)
    if flags & os.O_CREAT:
        ensure_private_dir(p.parent)
        existed = p.exists()
        fd = os.open(p, flags | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
        if not existed:
            try:
                os.fchmod(fd, FILE_MODE)
            except OSError:
                os.close(fd)
                raise
        return fd
    return os.open(p, flags | getattr(os, "O_CLOEXEC", 0))


def create_private_file(path: str | os.PathLike[str]) -> Path:
    """Make sure ``path`` exists as a file, created empty with mode 0600.

    An existing file is left as it is. Parents are created with 0700.
    Returns the path; raises ``OSError``.
    """
    fd = open_private(path, os.O_WRONLY | os.O_CREAT)
    os.close(fd)
    return Path(path)


def atomic_write_private(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically; the result has mode 0600.

    Writes a temporary file in the same directory, fsyncs it, then
    ``os.replace``s it over ``path`` and fsyncs the directory (best effort),
    so a reader sees either the old file or the new one, never a mix (issue
    "wisp runs end to end", "Config": "Writes are atomic (temp file, then
    rename), with mode 0600"). A symlink at ``path`` is followed, so the file
    it points to is replaced. The parent is created (0700) if missing.
    Raises ``OSError``; on failure the temporary file is removed and ``path``
    is untouched.
    """
    target = Path(os.path.realpath(path))
    ensure_private_dir(target.parent)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE)
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dfd = os.open(target.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


# --- reading what the model asks for ---------------------------------------------


class OutsideWorkdir(ValueError):
    """A path that resolves outside the working directory. ``path`` is what it
    resolves to (symlinks followed), ``workdir`` the resolved working directory."""

    def __init__(self, path: Path, workdir: Path) -> None:
        super().__init__(f"{path} is outside the working directory {workdir}")
        self.path = path
        self.workdir = workdir


class NotRegularFile(OSError):
    """A path that is not a regular file (a FIFO, a device, a socket, a
    directory). ``kind`` names it in words (:func:`file_kind`)."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(f"{path} is {kind}, not a regular file")
        self.path = path
        self.kind = kind


def confined_path(raw: str | os.PathLike[str], workdir: str | os.PathLike[str], *,
                  allow_outside: bool = False) -> Path:
    """The absolute path ``raw`` names, resolved: ``~`` expanded, a relative
    path taken from ``workdir``, every symlink followed (so a link inside
    that points outside counts as outside). Raises :class:`OutsideWorkdir`
    when it lies outside ``workdir`` (resolved too) unless ``allow_outside``;
    ``OSError`` when it cannot be resolved (a symlink loop, no home).

    The one confinement rule of the working directory (issue "wisp runs end to
    end", read_file; issue "Nothing runs, leaks, hangs or is lost that
    shouldn't be", AGENTS.md)."""
    try:
        base = Path(workdir).resolve()
        path = Path(raw).expanduser()
        if not path.is_absolute():
            path = base / path
        path = path.resolve()
    except RuntimeError as exc:  # a symlink loop (Python 3.11), or no home for ~
        raise OSError(str(exc)) from None
    if not allow_outside and not path.is_relative_to(base):
        raise OutsideWorkdir(path, base)
    return path


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words: ``a regular file``, ``a directory``,
    ``a FIFO (named pipe)``, ``a character device``, ``a block device``,
    ``a socket`` or ``not a regular file``."""
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"),
                        (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a regular file for reading, in binary, without ever blocking on
    something that is not one: the path is ``stat``-ed first (a FIFO, a
    device or a socket is refused before any ``open``), then opened with
    ``O_NONBLOCK`` and checked again with ``fstat`` (in case it was swapped
    in between). Raises :class:`NotRegularFile`, or ``OSError`` (missing,
    no permission). Blocking reads of the returned file are the caller's to
    keep off the event loop."""
    p = Path(path)
    mode = os.stat(p).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularFile(p, file_kind(mode))
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(p, file_kind(mode))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
