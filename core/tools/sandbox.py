"""The sandbox every ``run_command`` command runs in: bubblewrap (``bwrap``).

wisp does not build its own confinement; it starts the command under
bubblewrap (Debian's ``bubblewrap``, the tool Flatpak uses), as
``bwrap ARGS -- /bin/sh -c -- COMMAND``. What a command may do there:

- **Read**: the whole file system, read-only (``--ro-bind / /``), except
  wisp's own home (``WISP_HOME`` or ``~/.wisp``: config, approvals), its
  data directory (the database and the audit log) and the audit and store
  directories the config names, each covered by an empty ``--tmpfs``, and
  the usual credential stores of the home (``~/.ssh``, ``~/.gnupg``,
  ``~/.aws`` …, :data:`HIDDEN_IN_HOME`), covered the same way (files such
  as ``~/.netrc`` by ``/dev/null``). So no command reads the store, the
  audit log or a key file.
- **Write**: nothing, for a command the allow list let run (the working
  directory is read-only too, ``--ro-bind WD WD``). A command the person
  approved (once, or the first time of an "always") may write the working
  directory (``--bind WD WD``). Either way ``/tmp`` is a fresh, empty
  tmpfs of the command's own, gone when it ends; ``HOME`` points into it for
  an allowed command, and is the person's (read-only) for an approved one.
- **Processes**: its own PID namespace (``--unshare-all``): wisp's
  processes, and their ``/proc/PID/environ``, are not there to read; the
  command's PID 1 is bwrap itself, started with :func:`sandbox_environment`'s
  clean environment (``--clearenv`` alone would leave bwrap's own, which is
  wisp's, in ``/proc/1/environ``). ``--die-with-parent`` ends it with wisp,
  ``--new-session`` keeps it from typing into wisp's terminal (TIOCSTI).
- **Network**: none (``--unshare-all`` takes the network namespace too),
  unless config ``tools.run_command.network`` is true (``--share-net``).
- **Environment**: only what :func:`sandbox_environment` gives (``PATH``
  without relative or empty entries, ``HOME``, ``LANG``, ``LC_*``,
  ``TERM``, ``TZ``, the names config ``tools.run_command.env_pass`` lists,
  and the settings that keep pagers and git's repository hooks quiet).

Where bwrap is missing or cannot start (a container without user
namespaces), :func:`probe` says why; wisp then asks the person before
every command: the allow list is not used, since nothing would hold an
allowed command to its words. It says so where the person decides: the
TUI's approval modal shows :func:`approval_notice` for every command, and
``wisp ask`` prints it once with the first command it did not run; where
no question shows it (``wisp mcp serve``), :func:`notice_once` writes it
to standard error once. Both name the ``bubblewrap`` package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

__all__ = ["Probe", "probe", "reset", "sandbox_argv", "notice_once", "approval_notice", "BWRAP_CANDIDATES",
           "HIDDEN_IN_HOME", "HIDDEN_FILES_IN_HOME", "PACKAGE"]

#: Where wisp looks for bwrap, in order (absolute paths only: a relative or
#: repository-local ``bwrap`` on ``PATH`` is never the sandbox).
BWRAP_CANDIDATES: tuple[str, ...] = ("/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap")
#: The Debian package that brings bwrap, named in the notice.
PACKAGE = "bubblewrap"
#: Seconds the one probe may take.
PROBE_TIMEOUT_S = 10.0
#: Directories of the home (relative to ``HOME``) hidden under an empty tmpfs:
#: where keys and credentials usually live.
HIDDEN_IN_HOME = (".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker",
                  ".password-store", ".local/share/keyrings")
#: Files of the home hidden behind ``/dev/null``.
HIDDEN_FILES_IN_HOME = (".netrc", ".git-credentials", ".pypirc", ".npmrc", ".pgpass")


@dataclass(frozen=True)
class Probe:
    """Whether the sandbox works here: ``available``; ``bwrap``, the program's
    path (None when none was found); ``reason``, one line saying why not."""

    available: bool
    bwrap: str | None
    reason: str = ""


_LOCK = threading.Lock()
_PROBED: Probe | None = None
_NOTICED = False


def reset() -> None:
    """Forget the probe and the notice (tests that change :data:`BWRAP_CANDIDATES`)."""
    global _PROBED, _NOTICED
    with _LOCK:
        _PROBED, _NOTICED = None, False


def _find_bwrap() -> str | None:
    for candidate in BWRAP_CANDIDATES:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def probe() -> Probe:
    """Find bwrap and start it once (``/bin/true`` in a read-only sandbox
    with its own namespaces); the answer is kept for the life of the process.
    Never raises."""
    global _PROBED
    with _LOCK:
        if _PROBED is not None:
            return _PROBED
        bwrap = _find_bwrap()
        if bwrap is None:
            _PROBED = Probe(False, None, "bubblewrap (bwrap) is not installed")
            return _PROBED
        argv = sandbox_argv(bwrap, ["/bin/true"], Path("/"), writable=False, network=False, hidden=())
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                  env=sandbox_environment({}), timeout=PROBE_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            _PROBED = Probe(False, bwrap, f"{bwrap} could not start: {exc}")
            return _PROBED
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            _PROBED = Probe(False, bwrap, f"{bwrap} cannot make a sandbox here"
                            + (f" ({said[-1][:200]})" if said else f" (exit status {done.returncode})"))
            return _PROBED
        _PROBED = Probe(True, bwrap)
        return _PROBED


def approval_notice() -> str | None:
    """The line a question about a command shows first when commands have no
    sandbox here (the TUI's approval modal, ``wisp ask``'s line about a
    command it did not run): why, what that means, and how to get one;
    None when the sandbox works."""
    found = probe()
    if found.available:
        return None
    why = f"{PACKAGE} not found" if found.bwrap is None else found.reason
    return (f"No sandbox ({why}): this command would run with your permissions, and no allow list is used. "
            f"Install {PACKAGE} (apt-get install {PACKAGE}) to run commands in a sandbox.")


def notice_once(quiet: bool = False) -> str | None:
    """The one-line notice that commands run without a sandbox, the first
    time it is asked for in this process (written to standard error then
    too, unless ``quiet``: the caller shows it); None after that, and None
    when the sandbox works."""
    global _NOTICED
    found = probe()
    if found.available:
        return None
    with _LOCK:
        if _NOTICED:
            return None
        _NOTICED = True
    text = (f"wisp: commands have no sandbox here ({found.reason}), so every command is asked about "
            f"and the allow list is not used; install it with: apt-get install {PACKAGE}")
    if not quiet:
        try:
            print(text, file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass
    return text


def _hidden_paths(hidden: Iterable[Path], home: str | None) -> list[tuple[str, str]]:
    """(kind, path) pairs to cover: ``dir`` by a tmpfs, ``file`` by /dev/null.
    Only paths that exist, resolved."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()

    def add(kind: str, path: Path) -> None:
        try:
            real = path.resolve()
            ok = real.is_dir() if kind == "dir" else real.is_file()
        except (OSError, RuntimeError):
            return
        if ok and str(real) not in seen and str(real) != "/":
            seen.add(str(real))
            out.append((kind, str(real)))

    for path in hidden:
        add("dir", Path(path))
    if home:
        for name in HIDDEN_IN_HOME:
            add("dir", Path(home) / name)
        for name in HIDDEN_FILES_IN_HOME:
            add("file", Path(home) / name)
    return out


def sandbox_argv(bwrap: str, argv: Sequence[str], workdir: Path, *, writable: bool, network: bool,
                 hidden: Iterable[Path], env: dict[str, str] | None = None,
                 home: str | None = None, own_home: bool = True) -> list[str]:
    """The bwrap command line that runs ``argv`` in ``workdir`` (see the
    module docstring for what it allows). ``hidden``: directories covered
    by an empty tmpfs (wisp's home and data); ``home``: the real home, whose
    credential stores are hidden too. A hidden directory that holds the
    working directory is covered first and the working directory bound
    over it; one inside the working directory is covered after, so the
    working directory never shows what it hides. ``env``: the command's
    environment (given with ``--setenv`` after ``--clearenv``; see
    :func:`sandbox_environment`, which ``own_home`` is passed to)."""
    wd = str(Path(workdir).resolve())
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    covers = _hidden_paths(hidden, home)
    before = [(k, p) for k, p in covers if k == "dir" and (wd == p or wd.startswith(p.rstrip("/") + "/"))]
    after = [c for c in covers if c not in before]

    def cover(kind: str, path: str) -> list[str]:
        if path == "/tmp" or path.startswith("/tmp/") and not (path == wd or path.startswith(wd + "/")):
            return []  # already under the command's own empty /tmp
        return ["--tmpfs", path] if kind == "dir" else ["--ro-bind", "/dev/null", path]

    for kind, path in before:
        args += cover(kind, path)
    if wd != "/":
        args += ["--bind" if writable else "--ro-bind", wd, wd]
    for kind, path in after:
        args += cover(kind, path)
    args += ["--unshare-all"]
    if network:
        args += ["--share-net"]
    args += ["--dir", SANDBOX_HOME, "--die-with-parent", "--new-session", "--clearenv"]
    for name, value in sandbox_environment(env or {}, own_home=own_home).items():
        args += ["--setenv", name, value]
    args += ["--chdir", wd, "--", *argv]
    return args


#: HOME inside the sandbox: in its own tmpfs /tmp.
SANDBOX_HOME = "/tmp/home"


def sandbox_environment(passed: dict[str, str], own_home: bool = True) -> dict[str, str]:
    """The environment bwrap itself starts with (and that ``--setenv`` gives
    the command after ``--clearenv``): ``passed`` (what
    :func:`wisp.core.tools.run_command.command_environment` chose) with
    ``HOME`` moved into the sandbox's own /tmp when ``own_home`` (a command
    the allow list let run: no dotfile of the person's steers it), else the
    person's (read-only, its credential stores hidden). Nothing of wisp's own
    environment beyond ``passed`` reaches bwrap, so ``/proc/1/environ``
    (bwrap, in the command's PID namespace) shows no more than the command's."""
    env = dict(passed)
    if own_home or "HOME" not in env:
        env["HOME"] = SANDBOX_HOME
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env
