"""The ``run_command`` tool: a shell command in the conversation's working directory.

Rules (issue "Tools that act", "run_command"):

- Nothing runs without approval: the tool asks ``ToolContext.approve`` (see
  :mod:`wisp.core.tools.approval`) first; a denied command, or one that needs
  approval no one can give, never starts, and the model is told which.
- The command runs under ``/bin/sh -c -- COMMAND`` (:func:`~wisp.core.tools.shell.shell_argv`)
  in its own process group (a new session), with no standard input, in the
  conversation's working directory.
- It runs in the sandbox (:mod:`wisp.core.tools.sandbox`, bubblewrap): its
  own PID namespace, no network unless config ``tools.run_command.network``,
  the file system read-only, wisp's home and data hidden. A command the
  allow list let run sees its working directory read-only too (unless
  config ``tools.run_command.allow_writes``); one the person approved may
  write it. Without a sandbox it runs under ``/bin/sh``
  directly, and only after the person approved it (see :mod:`.approval`).
- It gets a clean environment, never wisp's (:func:`command_environment`):
  ``PATH`` without relative or empty entries (an allowed name must not run
  the repository's own file), ``HOME``, ``LANG``, ``LC_*``, ``TERM``, ``TZ``,
  the names config ``tools.run_command.env_pass`` lists, and the settings
  that keep pagers off, and for a command the allow list let run, those that
  keep a repository's config from running programs
  (:func:`allow_list_environment`). The variable config
  ``model.api_key_env`` names, and every name matching config
  ``tools.run_command.env_drop``, are never passed, even when listed.
- It dies with wisp, even on ``kill -9`` (same issue, "Nothing is lost"):
  on Linux the shell gets ``PR_SET_PDEATHSIG`` = SIGKILL, and a watchdog
  (:data:`WATCHDOG`, a tiny ``/bin/sh`` outside the group) holds a pipe from
  wisp; when the pipe closes without wisp's "done" line, wisp is gone and the
  watchdog kills the whole process group, grandchildren included.
- Config ``tools.run_command.timeout_s`` (seconds) bounds it. On timeout the
  whole process group, children included, gets SIGTERM, then SIGKILL after
  :data:`KILL_GRACE_S` seconds, and the result says so.
- Standard output and standard error are read together, in order. At most
  ``tools.run_command.max_output_bytes`` bytes are kept, in memory too: the
  first half and the last half; the middle is dropped and a marker says how
  many bytes. A command printing 100 MB holds about the cap in memory, never
  the 100 MB.
- Output that is not valid UTF-8 is decoded with replacement characters
  (U+FFFD) and flagged (``meta["non_utf8"]`` and a line in the text).
- Output streams to the person through ``ToolContext.emit`` while the
  command runs (up to the cap; then the end is shown when it finishes).
  The agent writes what is emitted into the tool result's entry as it
  comes, at most once a second (:class:`wisp.core.streamed.StreamedEntry`),
  so a crash keeps it (issue "Nothing runs, leaks, hangs or is lost that
  shouldn't be", "Nothing is lost").
- Cancellation (Esc stops the turn) ends the process group the same way and
  the tool *returns* a result that says it was stopped, so that the agent
  can record it before it stops the turn.
- After the shell exits, processes it left in the background that still
  hold its output are ended too after :data:`DRAIN_S` seconds (otherwise the
  tool would wait for them until the timeout), and the result says so.
- ``meta``: ``command``, ``workdir``, ``exit_status`` (the shell's; negative
  for a signal), ``duration_s``, ``output_bytes`` (all the output),
  ``dropped_bytes``, ``non_utf8``, ``timed_out``, ``stopped``,
  ``background_ended``, ``approval`` and, when the output held a test run,
  ``tests`` (a :class:`~wisp.core.outputs.TestRun` as a dict).
"""

from __future__ import annotations

import asyncio
import codecs
import fnmatch
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ..config import SCHEMA
from . import command_rules, sandbox
from .approval import ApprovalRequest, ask_approver, suggest_prefix
from .base import ToolContext, ToolResult
from .shell import SHELL, NotSimple, shell_argv, simple_words

#: Seconds between SIGTERM and SIGKILL when wisp ends a process group.
KILL_GRACE_S = 2.0
#: Seconds wisp waits for the output to end after the shell itself exited.
DRAIN_S = 1.0
#: Bytes read from the pipe at a time.
READ_CHUNK = 65536
#: Bytes of output the test-run parser reads as they stream; past them it
#: reads only the kept tail at the end, so a huge output costs no more to parse.
PARSE_STREAM_BYTES = 8 * 1024 * 1024
#: Seconds between two pieces of streamed output (pieces in between are joined).
EMIT_INTERVAL_S = 0.05

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_OUTPUT = 1048576

#: Config ``tools.run_command.env_drop``'s default (kept with the schema).
DEFAULT_ENV_DROP = SCHEMA["tools.run_command.env_drop"].default
#: Names a command always gets from wisp's environment (besides ``LC_*`` and
#: those config ``tools.run_command.env_pass`` lists): none holds a secret.
ENV_KEEP = ("PATH", "HOME", "LANG", "TERM", "TZ")
#: The ``PATH`` a command gets when wisp's own has no absolute entry.
FALLBACK_PATH = "/usr/local/bin:/usr/bin:/bin"

#: The watchdog's script (argument: nothing; stdin: wisp's pipe). It reads the
#: command's process group id, then waits: a line means the command ended and
#: wisp is alive; end of file without one means wisp died, so it kills the group.
WATCHDOG = 'read -r pg || exit 0; read -r _ && exit 0; kill -s KILL -- "-$pg" 2>/dev/null'


class OutputCapture:
    """The head and tail of a byte stream, within ``cap`` bytes.

    The first ``cap // 2`` bytes are kept as they come; of the rest only the
    last ``cap - cap // 2`` are kept (the buffer holding them never passes
    that by more than one :data:`READ_CHUNK`). ``total`` counts every byte
    seen, ``dropped`` the ones not kept. Invalid UTF-8 anywhere in the stream,
    dropped part included, sets ``non_utf8``.
    """

    def __init__(self, cap: int):
        if cap < 1:
            raise ValueError("the output cap must be at least 1 byte")
        self.cap = cap
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.non_utf8 = False
        self._strict = codecs.getincrementaldecoder("utf-8")("strict")

    def add(self, chunk: bytes) -> None:
        """Take the next piece of output."""
        self.total += len(chunk)
        if not self.non_utf8:
            try:
                self._strict.decode(chunk)
            except UnicodeDecodeError:
                self.non_utf8 = True
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            excess = len(self.tail) - self.tail_cap
            if excess > READ_CHUNK:
                del self.tail[:excess]

    def finish(self) -> None:
        """Mark the end of the stream (an unfinished UTF-8 sequence at the end is invalid)."""
        if not self.non_utf8:
            try:
                self._strict.decode(b"", final=True)
            except UnicodeDecodeError:
                self.non_utf8 = True
        excess = len(self.tail) - self.tail_cap
        if excess > 0:
            del self.tail[:excess]

    def kept_tail(self) -> bytes:
        """The last bytes kept (at most ``cap - cap // 2``), as bytes."""
        return bytes(self.tail[-self.tail_cap:]) if self.tail_cap else b""

    @property
    def dropped(self) -> int:
        """Bytes seen but not kept."""
        return self.total - len(self.head) - min(len(self.tail), self.tail_cap)

    def text(self) -> str:
        """What was kept, decoded (invalid bytes become U+FFFD), with a marker
        line where the middle was dropped. A UTF-8 character cut by the
        head's or tail's edge is left out, not shown as invalid."""
        self.finish()
        if not self.dropped:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        dec = codecs.getincrementaldecoder("utf-8")("replace")
        head = dec.decode(bytes(self.head), final=False)
        tail = bytes(self.tail)
        skip = 0
        while skip < min(3, len(tail)) and (tail[skip] & 0xC0) == 0x80:
            skip += 1
        tail_text = tail[skip:].decode("utf-8", errors="replace")
        marker = f"\n[… {self.dropped:,} bytes dropped from the middle of the output …]\n"
        return head + marker + tail_text


class _Emitter:
    """Streams decoded output to ``emit`` in pieces at most every
    :data:`EMIT_INTERVAL_S` seconds, up to ``limit`` bytes in all."""

    def __init__(self, emit: Callable[[str], None] | None, limit: int):
        self.emit = emit
        self.limit = limit
        self.sent = 0
        self.pending: list[str] = []
        self.last = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.paused = False

    def add(self, text: str, size: int) -> None:
        if self.emit is None or self.paused or not text:
            return
        if self.sent + size > self.limit:
            self.pending.append("\n[wisp: the output goes on; its end is shown when the command ends]\n")
            self.paused = True
            self.flush()
            return
        self.sent += size
        self.pending.append(text)
        now = time.monotonic()
        if now - self.last >= EMIT_INTERVAL_S:
            self.flush()
        elif self.timer is None:
            loop = asyncio.get_running_loop()
            self.timer = loop.call_later(EMIT_INTERVAL_S - (now - self.last), self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.pending and self.emit is not None:
            text = "".join(self.pending)
            self.pending.clear()
            self.last = time.monotonic()
            try:
                self.emit(text)
            except Exception:
                self.emit = None  # a broken listener must not stop the command


class RunCommand:
    """Run a shell command in the working directory, after the person approves it."""

    name = "run_command"
    read_only = False
    description = (
        "Run a shell command (/bin/sh -c) in the working directory and return its output "
        "(stdout and stderr together) and exit status. The person approves each command "
        "before it runs and may deny it. No input can be typed into it; long output is "
        "shortened in the middle; it is ended after a timeout."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "the command line, such as: pytest -q"},
        },
        "required": ["command"],
    }

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Ask for approval, then run ``arguments["command"]``; see the module docstring.
        Never raises for a failing command; returns a stopped result when cancelled."""
        command = str(arguments.get("command") or "").strip()
        if not command:
            return ToolResult('error: run_command needs a command, such as {"command": "ls"}', ok=False)
        workdir = Path(ctx.workdir).resolve()
        meta: dict[str, Any] = {"command": command, "workdir": str(workdir)}
        if not workdir.is_dir():
            return ToolResult(f"error: the working directory {workdir} does not exist", ok=False, meta=meta)
        request = ApprovalRequest("run_command", command, workdir, ctx.conversation_id, ctx.turn)
        decision = await ask_approver(
            ctx, request, meta, nobody="The command did not run: no one can approve commands here.",
            stopped="The turn was stopped before the person answered; the command did not run.")
        if isinstance(decision, str):
            return ToolResult(decision, ok=False, meta=meta)
        if not decision.allowed:
            return ToolResult(_refusal(decision.choice, command, ctx, getattr(decision, "reason", None)),
                              ok=False, meta=meta)
        return await self._execute(command, workdir, ctx, meta)

    async def _execute(self, command: str, workdir: Path, ctx: ToolContext,
                       meta: dict[str, Any]) -> ToolResult:
        timeout = float(ctx.setting("tools.run_command.timeout_s", DEFAULT_TIMEOUT_S))
        cap = int(ctx.setting("tools.run_command.max_output_bytes", DEFAULT_MAX_OUTPUT))
        capture = OutputCapture(cap)
        from ..outputs import TestOutputParser  # the test-run readers load with the first command run

        parser = TestOutputParser(command)
        emitter = _Emitter(ctx.emit, cap)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        fed = 0  # bytes the test parser read as they streamed

        def sink(chunk: bytes) -> None:
            nonlocal fed
            capture.add(chunk)
            parsing = fed < PARSE_STREAM_BYTES
            if parsing or not emitter.paused:
                text = decoder.decode(chunk)
                if parsing:
                    parser.feed(text)
                    fed += len(chunk)
                emitter.add(text, len(chunk))

        approval = meta.get("approval") or {}
        allowed = approval.get("choice") == "allow_list"  # run on the allow list's word alone
        env = allow_list_environment(ctx.config, workdir, command) if allowed else command_environment(ctx.config)
        found = sandbox.probe()
        argv = shell_argv(command)
        writable = approval.get("choice") != "allow_list" or bool(
            ctx.setting("tools.run_command.allow_writes", False))
        if found.available and found.bwrap:
            argv = sandbox.sandbox_argv(
                found.bwrap, argv, workdir, writable=writable,
                network=bool(ctx.setting("tools.run_command.network", False)), hidden=_wisp_dirs(ctx.config),
                env=env, home=os.environ.get("HOME"), own_home=allowed)
            env = sandbox.sandbox_environment(env, own_home=allowed)
            meta["sandbox"] = "workdir writable" if writable else "read-only"
        else:
            meta["sandbox"] = "none"
            notice = sandbox.notice_once(quiet=True)  # said in the result, where the person reads its output
            if notice:
                meta["sandbox_notice"] = notice
        loop = asyncio.get_running_loop()
        exited = asyncio.Event()

        class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
            # asyncio's Process.wait() also waits for the pipe to close, which a
            # background child can hold open; this says when the shell itself exits
            def process_exited(self) -> None:
                super().process_exited()
                exited.set()

        started = time.monotonic()
        watchdog = _Watchdog.start()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _Protocol(limit=READ_CHUNK, loop=loop),
                *argv, cwd=str(workdir), env=env,
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent())
        except (OSError, ValueError, subprocess.SubprocessError) as exc:  # ValueError: a NUL in the command
            watchdog.done()
            return ToolResult(f"error: could not start {argv[0]}: {getattr(exc, 'strerror', None) or exc}",
                              ok=False, meta=meta)
        watchdog.guard(transport.get_pid())
        proc = asyncio.subprocess.Process(transport, protocol, loop)
        assert proc.stdout is not None
        reader = asyncio.ensure_future(_pump(proc.stdout, sink))
        shell = asyncio.ensure_future(exited.wait())
        timed_out = stopped = background = False
        try:
            done, _ = await asyncio.wait({shell}, timeout=timeout)
            if shell in done:
                left = max(0.0, min(DRAIN_S, timeout - (time.monotonic() - started)))
                done, _ = await asyncio.wait({reader}, timeout=left)
                if reader not in done:
                    if time.monotonic() - started >= timeout:
                        timed_out = True
                    else:
                        background = True
                    await _end_group(proc, reader, shell)
            else:
                timed_out = True
                await _end_group(proc, reader, shell)
        except asyncio.CancelledError:
            stopped = True
            await _end_group(proc, reader, shell)
        finally:
            try:
                await _settle(reader, proc)
            finally:
                shell.cancel()
                watchdog.done()
        emitter.flush()
        if fed < PARSE_STREAM_BYTES:
            parser.feed(decoder.decode(b"", final=True))
        else:
            # the parser read the first PARSE_STREAM_BYTES; give it the kept tail it has not read
            tail = capture.kept_tail()
            tail_start = capture.total - len(tail)
            if tail_start > fed:
                parser.gap()
            parser.feed(tail[max(0, fed - tail_start):].decode("utf-8", errors="replace"))
        duration = time.monotonic() - started
        status = proc.returncode
        body = capture.text()
        meta.update(exit_status=status, duration_s=round(duration, 3), output_bytes=capture.total,
                    dropped_bytes=capture.dropped, non_utf8=capture.non_utf8, timed_out=timed_out,
                    stopped=stopped, background_ended=background)
        if status is not None and status < 0:
            try:
                meta["signal"] = signal.Signals(-status).name
            except ValueError:
                meta["signal"] = str(-status)
        tests = parser.result(None if (stopped or timed_out) else status)
        if tests is not None:
            meta["tests"] = tests.to_dict()
        lines = [body.rstrip("\n") if body else "(no output)"]
        if capture.non_utf8:
            lines.append("[the output is not valid UTF-8; the invalid bytes are shown as \ufffd]")
        if capture.dropped:
            lines.append(f"[the output was {capture.total:,} bytes; {capture.dropped:,} bytes from the "
                         f"middle were dropped (config tools.run_command.max_output_bytes = {cap:,})]")
        if stopped:
            lines.append("[stopped by the person (Esc): the command and the processes it started were ended]")
        elif timed_out:
            lines.append(f"[timed out after {timeout:g} s: the command and the processes it started were "
                         "ended (config tools.run_command.timeout_s)]")
        elif background:
            lines.append("[processes the command left running in the background, still writing to its "
                         "output, were ended]")
        if meta.get("sandbox_notice"):
            lines.append(f"[{meta['sandbox_notice']}]")
        if status is None:
            lines.append("[exit status: unknown, the process could not be waited for]")
        elif status < 0:
            lines.append(f"[ended by signal {meta['signal']}]")
        else:
            lines.append(f"[exit status {status}]")
        ok = status == 0 and not (stopped or timed_out)
        return ToolResult("\n".join(lines), ok=ok, meta=meta)


def command_environment(config: Any) -> dict[str, str]:
    """The environment a command runs with, built afresh, never wisp's own:
    ``PATH`` with only its absolute entries (a relative or empty entry would
    let an allowed name run a file of the working directory; none left gives
    :data:`FALLBACK_PATH`), ``HOME``, ``LANG``, ``TERM``, ``TZ``, every
    ``LC_*``, and the names config ``tools.run_command.env_pass`` lists; of
    those, the variable config ``model.api_key_env`` names and every name
    matching a glob pattern of config ``tools.run_command.env_drop`` (any
    case) are left out all the same. Pagers and colour are turned off
    (``PAGER=cat``, ``TERM=dumb`` …) so that no command waits on a
    terminal."""
    def setting(key: str, default: Any) -> Any:
        try:
            value = config.get(key) if config is not None else None
        except Exception:
            value = None
        return default if value is None else value

    patterns = [str(p).upper() for p in setting("tools.run_command.env_drop", DEFAULT_ENV_DROP)]
    key_name = setting("model.api_key_env", None)
    wanted = set(ENV_KEEP) | {str(n) for n in setting("tools.run_command.env_pass", [])}
    env = {}
    for name, value in os.environ.items():
        if name not in wanted and not name.startswith("LC_"):
            continue
        if name == key_name:
            continue
        if name not in ENV_KEEP and any(fnmatch.fnmatchcase(name.upper(), p) for p in patterns):
            continue
        env[name] = value
    entries = [e for e in env.get("PATH", "").split(os.pathsep) if e and os.path.isabs(e)]
    env["PATH"] = os.pathsep.join(dict.fromkeys(entries)) or FALLBACK_PATH
    env.update({"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0",
                "PYTHONUNBUFFERED": "1", "NO_COLOR": "1", "TERM": "dumb"})
    return env


def allow_list_environment(config: Any, workdir: Path, command: str) -> dict[str, str]:
    """:func:`command_environment` for a command that runs on the allow
    list's word alone, plus what keeps git to its words: no system or global
    config (:data:`~wisp.core.tools.command_rules.GIT_ENV`), and a
    repository's fsmonitor, pager, filters and text conversions switched off
    (:func:`~wisp.core.tools.command_rules.git_overrides`; the repository's
    settings are read only when the command mentions git). A command the
    person approved keeps git as the person has it (identity, LFS filters):
    a filter made ``cat`` would store a large file whole."""
    env = command_environment(config)
    env.update(command_rules.GIT_ENV)
    names = command_rules.repository_config_names(str(workdir)) if "git" in command else ()
    env.update(command_rules.git_overrides(names))
    return env


def _wisp_dirs(config: Any) -> list[Path]:
    """wisp's own directories, hidden from every command: its home (config,
    approvals), its data directory, and the database's and audit log's
    directories the config names."""
    from ..paths import default_data_dir, wisp_home

    dirs = [wisp_home(), default_data_dir()]
    for attr in ("db_path", "audit_dir"):
        try:
            value = getattr(config, attr)
        except Exception:
            continue
        if value is not None:
            dirs.append(Path(value) if attr == "audit_dir" else Path(value).parent)
    return dirs


_PRCTL: Any = None


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child killed (SIGKILL) when wisp dies
    (Linux ``prctl(PR_SET_PDEATHSIG)``), or None where that does not exist.

    The death signal fires when the *thread* that forked the child ends, so
    it is only set when the command is started from the main thread (wisp's
    event loop); the :class:`_Watchdog` covers every case. The function is
    looked up before the fork, so the child only makes one C call."""
    global _PRCTL
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    if _PRCTL is None:
        try:
            import ctypes

            prctl = ctypes.CDLL(None, use_errno=True).prctl
            prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
            prctl.restype = ctypes.c_int
            _PRCTL = prctl
        except (OSError, AttributeError):
            _PRCTL = False
    if not _PRCTL:
        return None
    prctl, parent = _PRCTL, os.getpid()

    def preexec() -> None:
        prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:  # wisp died before the call: go now
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


class _Watchdog:
    """A ``/bin/sh`` outside the command's group that kills the group if wisp
    dies (see :data:`WATCHDOG`). :meth:`guard` tells it the group;
    :meth:`done` tells it the command ended (and closes the pipe). Never
    raises: without a watchdog the command still runs (the death signal
    still covers the shell itself)."""

    def __init__(self, pipe: int | None, proc: subprocess.Popen[bytes] | None) -> None:
        self.pipe = pipe
        self.proc = proc

    @classmethod
    def start(cls) -> "_Watchdog":
        try:
            read_end, write_end = os.pipe()
        except OSError:
            return cls(None, None)
        try:
            proc = subprocess.Popen([SHELL, "-c", WATCHDOG], stdin=read_end, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        except (OSError, subprocess.SubprocessError):
            os.close(write_end)
            proc = None
            write_end = None  # type: ignore[assignment]
        finally:
            os.close(read_end)
        return cls(write_end, proc)

    def _write(self, data: bytes) -> None:
        if self.pipe is None:
            return
        try:
            os.write(self.pipe, data)
        except OSError:
            pass

    def guard(self, pgid: int) -> None:
        """Watch process group ``pgid`` (the shell's pid: it leads a new session)."""
        self._write(f"{int(pgid)}\n".encode())

    def done(self) -> None:
        """The command ended (or never started): the watchdog exits without killing."""
        self._write(b"done\n")
        if self.pipe is not None:
            try:
                os.close(self.pipe)
            except OSError:
                pass
            self.pipe = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=0)  # reaped now if it already exited; else on a later call
            except subprocess.TimeoutExpired:
                _LINGERING.append(self.proc)
            self.proc = None
        _LINGERING[:] = [p for p in _LINGERING if p.poll() is None]


#: Watchdogs that had not exited yet when their command ended (reaped later).
_LINGERING: list[subprocess.Popen[bytes]] = []


async def _pump(stream: asyncio.StreamReader, sink: Callable[[bytes], None]) -> None:
    """Read ``stream`` to its end, handing each piece to ``sink``."""
    while True:
        chunk = await stream.read(READ_CHUNK)
        if not chunk:
            return
        sink(chunk)


async def _end_group(proc: asyncio.subprocess.Process, reader: asyncio.Future[Any],
                     shell: asyncio.Future[Any]) -> None:
    """End the command's process group: SIGTERM, up to :data:`KILL_GRACE_S`
    seconds for it to go (its output to close), then SIGKILL to whatever of
    the group is left."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    await asyncio.wait({reader, shell}, timeout=KILL_GRACE_S, return_when=asyncio.ALL_COMPLETED)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def _settle(reader: asyncio.Future[Any], proc: asyncio.subprocess.Process) -> None:
    """Let the reader finish; a process outside the group (it called setsid)
    that still holds the pipe is not waited for."""
    if not reader.done():
        done, _ = await asyncio.wait({reader}, timeout=KILL_GRACE_S)
        if not done:
            reader.cancel()
            transport = getattr(proc, "_transport", None)
            if transport is not None:
                transport.close()
    if proc.returncode is None:
        try:
            await asyncio.wait_for(proc.wait(), timeout=KILL_GRACE_S)
        except asyncio.TimeoutError:
            pass


def _refusal(choice: str, command: str, ctx: ToolContext, reason: str | None = None) -> str:
    """The text the model gets for a command that did not run."""
    if choice == "needs_approval":
        allow = ctx.setting("tools.run_command.allow", []) or []
        listed = ", ".join(allow) if allow else "nothing"
        head = (f"The command did not run: it needs the person's approval, and no one can give it "
                f"here. Without the TUI, wisp runs only simple commands that begin with a prefix listed "
                f"in config tools.run_command.allow (now: {listed}).")
        if not sandbox.probe().available:
            return (f"{head} Commands have no sandbox here ({sandbox.probe().reason}), so the allow list is "
                    f"not used and every command needs the person's approval (apt-get install "
                    f"{sandbox.PACKAGE} brings the sandbox).")
        if reason:
            return (f"{head} An allowed prefix matched, but {reason}, so it still needs approval. Tell "
                    "the person which command you wanted to run and why, or run a plainer one.")
        try:
            simple_words(command)
        except NotSimple as exc:
            return (f"{head} This one is not a simple command ({exc.reason}), so no prefix allows it. "
                    "Run one program with plain words, or tell the person which command you wanted to "
                    "run and why.")
        prefix = suggest_prefix(command)
        if not prefix:
            return (f"{head} No standing prefix can allow this one (an interpreter, shell or wrapper, or a "
                    "program that writes): tell the person which command you wanted to run and why.")
        return (f"{head} Tell the person which command you wanted to run and why; they can allow it "
                f"with: wisp config set tools.run_command.allow '[\"{prefix}\"]'")
    if choice == "stopped":
        return "The turn was stopped before the person answered; the command did not run."
    return ("The person denied this command; it did not run. Do not run it again unless the person "
            "asks you to; say what you wanted it for, or go on another way.")
