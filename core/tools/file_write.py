"""Writing a file of the working directory, checked at the moment of writing.

What ``edit_file`` and ``/undo`` do to a file goes through :func:`replace_checked`
(write or create) and :func:`remove_checked` (take back a file an edit created).
The rules, and why:

- The file is found again when it is written, not trusted from when the edit
  was shown: the path is resolved once more by the one confinement rule
  (:func:`wisp.core.paths.confined_path`), must resolve to the same place,
  and its directory is opened and checked to be that place still (on Linux,
  ``/proc/self/fd`` names the directory the descriptor holds), so a
  directory swapped for a link between the approval and the write is
  refused, never followed.
- The file itself is opened with ``O_NOFOLLOW`` relative to that directory:
  a file swapped for a symbolic link is refused (:class:`Changed`); it must
  be a regular file with one hard link (:class:`HardLinkedFile`: a second
  name may lie outside the working directory, as read_file refuses); and its
  bytes must be exactly what the person was shown (``expect``), or the
  write is refused (:class:`Changed`): a file changed by the person or a
  command meanwhile is never overwritten.
- The new bytes are written to a temporary file in the same directory,
  fsynced, then renamed over the name (``os.replace``), so the file is
  either as it was or as it will be, never half written; a file the edit
  creates is linked into place (``os.link``), which fails rather than
  replace a file that appeared meanwhile. The rename replaces the name,
  never what a link at that name points to. The directory is fsynced after.
- A replaced file keeps its mode; a new file gets ``0666`` less the
  process's umask, as an editor would make it (these are the person's
  project files, not wisp's own private ones).

Everything here blocks: callers run it in a thread. The window between the
check of ``expect`` and the rename is a few system calls; a process that
writes the file inside it is not seen (no portable lock covers it).
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from ..paths import confined_path

__all__ = ["Changed", "HardLinkedFile", "NotAFile", "Written", "read_exactly", "replace_checked",
           "remove_checked", "current_umask"]

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class Changed(OSError):
    """The file is not what the person was shown: its bytes differ, it was
    swapped for a link, it appeared or went away, or its path now resolves
    elsewhere. The message says which, in words for the model and the person."""


class HardLinkedFile(OSError):
    """The file has ``links`` hard links (``st_nlink`` > 1): its other name may
    be outside the working directory, and a hard link does not say where."""

    def __init__(self, links: int) -> None:
        super().__init__(f"{links} hard links")
        self.links = links


class NotAFile(OSError):
    """The name is ``kind`` (a directory, a FIFO, a device, a socket), not a regular file."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass(frozen=True)
class Written:
    """What a write did: ``mode`` of the file written (its permission bits),
    ``created_dirs`` (directories made for a new file, outermost first,
    relative to the working directory)."""

    mode: int
    created_dirs: tuple[str, ...] = ()


def current_umask() -> int:
    """The process's umask, read without changing it (``/proc/self/status``
    on Linux; ``0o022`` where that cannot be read): ``os.umask`` can only be
    read by setting it, which would race with other threads creating files."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def read_exactly(fd: int) -> bytes:
    """Every byte of the open file ``fd`` from its start."""
    os.lseek(fd, 0, os.SEEK_SET)
    parts = []
    while True:
        data = os.read(fd, 1 << 20)
        if not data:
            return b"".join(parts)
        parts.append(data)


def _open_dir(directory: Path, workdir: Path) -> int:
    """Open ``directory`` (resolved, inside ``workdir``) and check that the
    descriptor holds that directory still; raises :class:`Changed` if a part
    of the path was swapped meanwhile."""
    try:
        dfd = os.open(directory, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    except FileNotFoundError:
        raise Changed(f"its directory {directory} is gone") from None
    except NotADirectoryError:
        raise Changed(f"{directory} is no longer a directory") from None
    try:
        held = _held_path(dfd)
        if held is not None and held != directory:
            raise Changed(f"its directory now leads to {held}")
        if held is None and (os.fstat(dfd).st_ino, os.fstat(dfd).st_dev) != (
                os.stat(directory).st_ino, os.stat(directory).st_dev):
            raise Changed(f"its directory {directory} was replaced")
        if not (held or directory).is_relative_to(workdir):
            raise Changed(f"its directory now lies outside the working directory {workdir}")
    except BaseException:
        os.close(dfd)
        raise
    return dfd


def _held_path(fd: int) -> Path | None:
    """The path the kernel gives for the directory ``fd`` holds (Linux), or ``None``."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


def _current(dfd: int, name: str) -> tuple[bytes | None, os.stat_result | None]:
    """The bytes and the stat of ``name`` in directory ``dfd`` (``(None,
    None)`` when there is none), never following a link."""
    try:
        fd = os.open(name, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=dfd)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError:
            raise exc from None
        if stat.S_ISLNK(st.st_mode):
            raise Changed("it is a symbolic link now") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            from ..paths import file_kind

            raise NotAFile(file_kind(st.st_mode))
        if st.st_nlink > 1:
            raise HardLinkedFile(st.st_nlink)
        return read_exactly(fd), st
    finally:
        os.close(fd)


def _check(path: Path, workdir: Path, raw: str) -> None:
    """``raw`` (the path as given) still resolves to ``path`` inside ``workdir``."""
    try:
        again = confined_path(raw, workdir)
    except ValueError:  # OutsideWorkdir
        raise Changed("it now resolves outside the working directory (a link was put in its path)") from None
    if again != path:
        raise Changed(f"it now resolves to {again} (a link was put in its path)")


def _make_dirs(path: Path, workdir: Path) -> tuple[str, ...]:
    """Make the missing directories above ``path`` (inside ``workdir``), each
    made relative to its parent's descriptor without following links;
    returns those made, outermost first, relative to ``workdir``."""
    missing: list[Path] = []
    here = path.parent
    while not here.exists():
        if here == workdir or not here.is_relative_to(workdir):
            break
        missing.append(here)
        here = here.parent
    made: list[str] = []
    for directory in reversed(missing):
        dfd = _open_dir(directory.parent, workdir)
        try:
            os.mkdir(directory.name, 0o777, dir_fd=dfd)
            made.append(str(directory.relative_to(workdir)))
        except FileExistsError:
            st = os.stat(directory.name, dir_fd=dfd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                raise Changed(f"{directory} appeared meanwhile and is not a directory") from None
        finally:
            os.close(dfd)
    return tuple(made)


def replace_checked(workdir: Path, raw: str, path: Path, expect: bytes | None, data: bytes, *,
                    mode: int | None = None, make_dirs: bool = False) -> Written:
    """Write ``data`` to ``path`` (resolved from ``raw`` inside ``workdir``)
    if it holds exactly ``expect`` now (``None``: it must not exist yet), as
    the module doc says. ``mode`` is the permission bits a new file gets
    (default ``0666`` less the umask); an existing file keeps its own.
    ``make_dirs`` makes a new file's missing directories. Raises
    :class:`Changed`, :class:`HardLinkedFile`, :class:`NotAFile` or
    ``OSError``; the file is untouched then."""
    workdir = Path(workdir).resolve()
    _check(path, workdir, raw)
    created: tuple[str, ...] = ()
    if expect is None and make_dirs:
        created = _make_dirs(path, workdir)
    dfd = _open_dir(path.parent, workdir)
    try:
        now, st = _current(dfd, path.name)
        if expect is None and now is not None:
            raise Changed("it exists now: it was created after the edit was shown")
        if expect is not None and now is None:
            raise Changed("it is gone: it was removed after the edit was shown")
        if expect is not None and now != expect:
            raise Changed("its content changed after the edit was shown")
        bits = stat.S_IMODE(st.st_mode) if st is not None else (
            mode if mode is not None else 0o666 & ~current_umask())
        tmp = f".{path.name[:200]}.wisp-{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            try:
                os.fchmod(fd, bits)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            if now is None:  # a new file: linked into place, never over one that appeared meanwhile
                try:
                    os.link(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
                except FileExistsError:
                    raise Changed("it exists now: it was created after the edit was shown") from None
                os.unlink(tmp, dir_fd=dfd)
            else:
                os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
        try:
            os.fsync(dfd)
        except OSError:
            pass
        return Written(bits, created)
    finally:
        os.close(dfd)


def remove_checked(workdir: Path, raw: str, path: Path, expect: bytes, *, dirs: tuple[str, ...] = ()) -> None:
    """Remove ``path`` if it holds exactly ``expect`` now (a file an edit
    created, taken back by ``/undo``), then the directories ``dirs``
    (relative to ``workdir``, innermost last) that are empty. Raises as
    :func:`replace_checked` does."""
    workdir = Path(workdir).resolve()
    _check(path, workdir, raw)
    dfd = _open_dir(path.parent, workdir)
    try:
        now, _ = _current(dfd, path.name)
        if now is None:
            raise Changed("it is gone already")
        if now != expect:
            raise Changed("its content changed since the edit")
        os.unlink(path.name, dir_fd=dfd)
        try:
            os.fsync(dfd)
        except OSError:
            pass
    finally:
        os.close(dfd)
    for rel in reversed(dirs):
        directory = workdir / rel
        try:
            if directory.is_relative_to(workdir) and not directory.is_symlink():
                directory.rmdir()  # only when empty
        except OSError:
            pass
