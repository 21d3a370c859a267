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

Nothing here reads the config; :mod:`wisp.core.config` builds on this.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

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
