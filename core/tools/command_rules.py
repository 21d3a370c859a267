"""What an allow-list prefix vouches for: per-program tables of options, in one place.

An allow-list entry (config ``tools.run_command.allow``, or a workspace's
"always allow") names the start of a command; this module decides whether
the rest of the command's words still only do what those words say. A
program's options that run another program, write or delete files, or pipe
to a pager make the command need the person's approval even under an allowed
prefix (:func:`needs_approval` gives the reason, or None). The tables follow
codex's ``is_safe_command.rs`` and go further where this module says so.

Which way each table leans:

- :data:`READERS` (``cat``, ``ls``, ``grep``, ``head`` …): programs with no
  option that runs, writes or deletes; any option is fine, except the few
  named in :data:`_READER_LIMITS` (``date -s``, ``tree -o``, ``uniq IN OUT``).
- ``find``: leans allow: every primary but those that run (``-exec``,
  ``-execdir``, ``-ok``, ``-okdir``), delete (``-delete``) or write
  (``-fprint``, ``-fprint0``, ``-fprintf``, ``-fls``).
- ``rg``: leans allow, but ``--pre``, ``--hostname-bin`` and ``-z``
  (``--search-zip``, which starts decompressors) ask.
- ``sort``: leans allow, but ``-o``/``--output`` and
  ``--compress-program`` ask (so does a short cluster holding ``o``).
- ``git``: leans deny. Global options before the subcommand: only
  ``--no-pager``, ``--no-optional-locks``, ``--literal-pathspecs`` and the
  like; ``-c``, ``--config-env``, ``-C``, ``--git-dir``, ``--work-tree``,
  ``-p``/``--paginate``, ``--exec-path`` and any other ask. The subcommand
  must be one of :data:`_GIT_READ` (a read-only one; an alias or any other
  asks); its options lean allow, except ``--output``, ``--ext-diff``,
  ``--textconv``, ``--filters``, ``--exec``, ``--show-signature``,
  ``-O``/``--open-files-in-pager`` and ``--paginate``; ``git branch`` only
  lists. What a repository's own ``.git/config`` could run
  (``core.fsmonitor``, ``diff.external``, a pager, filter and diff drivers)
  is switched off by the environment the command runs with
  (:func:`wisp.core.tools.run_command.git_overrides`).
- ``sed``: leans deny: only ``-n``, ``-E``/``-r``, ``-s``, ``-z``, ``-u``,
  ``--posix``, ``--debug`` and a script of printing commands (``p``, ``d``,
  ``q``, ``=``, ``l``, ``n``, ``N``, addresses, ``s/A/B/`` with flags
  ``g``, ``p``, ``i``, ``I`` or a number); ``-i``, ``-f``, ``e``, ``w``,
  ``W``, ``r``, ``R``, ``s///e`` and ``s///w`` ask.
- ``awk`` (``gawk``, ``mawk``, ``nawk``): leans deny: ``-F`` and ``-v``
  only, and a program holding no ``system``, ``getline``, ``|``, ``>``,
  ``close``, ``fflush``, ``@`` (gawk's ``@load``/``@include``) or
  ``ENVIRON``; anything else asks.
- ``tar``: leans deny: listing only (``-t``/``--list``, with ``-v``,
  ``-f FILE``, ``-z``/``-j``/``-J``/``--zstd`` and the like); extracting,
  creating, ``--checkpoint-action``, ``--to-command``,
  ``--use-compress-program``/``-I``, ``--info-script``, ``--rsh-command``,
  ``--index-file``, ``-g`` and an archive name with ``:`` (a remote tape)
  ask.
- Editors, pagers and manuals (:data:`NEVER_SAFE`: ``vim``, ``vi``,
  ``ex``, ``less``, ``more``, ``man`` …) always ask: each can run a shell.
- Programs that write, delete or reach the network (:data:`WRITERS`:
  ``cp``, ``mv``, ``rm``, ``tee``, ``dd``, ``touch``, ``curl``, ``wget`` …)
  always ask.
- Wrappers (:data:`WRAPPERS`: ``env``, ``xargs``, ``nice``, ``timeout``,
  ``nohup``, ``time``, ``command``, ``exec``, ``stdbuf``): the wrapped
  command is judged as if it stood alone, and must itself be on the allow
  list or be a reader; their own options lean deny (``env -S``, ``env
  NAME=VALUE``, ``xargs -a``, ``time -o`` ask). ``sudo``, ``doas``, ``su``
  and the like always ask.
- Interpreters and shells (:data:`INTERPRETERS`: ``python*``, ``node``,
  ``perl``, ``ruby``, ``sh``, ``bash``, ``zsh`` …): ask whenever their words
  run code the prefix did not name: ``-c``/``-e`` code, a script, ``-m
  MODULE``, unless the allowed prefix itself holds that code, script or
  module (``python -m pytest`` vouches for ``python -m pytest -q``; a bare
  ``python3`` vouches for ``python3 --version`` only).
- Any other program is the person's to vouch for: its prefix lets it run
  (read-only, in the sandbox).

:func:`offered_prefix` narrows the prefix an "always allow" suggests, and
:func:`standing_refusal` refuses to save one that names an interpreter,
shell, wrapper, ``git`` alone or ``find`` alone.
"""

from __future__ import annotations

import re
import shlex
from typing import Callable, Sequence

__all__ = ["needs_approval", "offered_prefix", "standing_refusal", "program_name", "git_overrides",
           "repository_config_names", "git_repository_asks", "GIT_ENV", "READERS",
           "WRITERS", "NEVER_SAFE", "WRAPPERS", "PRIVILEGE", "INTERPRETERS"]

READERS = frozenset({
    "cat", "ls", "head", "tail", "wc", "nl", "pwd", "echo", "printf", "true", "false", "id", "uname",
    "whoami", "basename", "dirname", "realpath", "readlink", "tac", "rev", "seq", "cut", "tr", "paste",
    "stat", "du", "df", "cmp", "comm", "diff", "od", "hexdump", "strings", "md5sum", "sha1sum",
    "sha256sum", "sha512sum", "b2sum", "cksum", "grep", "egrep", "fgrep", "column", "fold", "fmt",
    "expand", "unexpand", "join", "printenv", "date", "tree", "uniq", "which", "jq", "numfmt", "test",
})
WRITERS = frozenset({
    "cp", "mv", "rm", "rmdir", "tee", "dd", "touch", "mkdir", "ln", "chmod", "chown", "chgrp",
    "truncate", "install", "shred", "unlink", "mkfifo", "mknod", "rsync", "scp", "sftp", "ssh", "patch",
    "split", "csplit", "curl", "wget", "nc", "ncat", "netcat", "socat", "telnet", "ftp", "kill",
    "pkill", "killall", "mount", "umount", "crontab", "at", "git-receive-pack", "sponge",
})
NEVER_SAFE = frozenset({
    "vim", "vi", "view", "ex", "nvim", "gvim", "rvim", "rview", "vimdiff", "emacs", "nano", "pico",
    "ed", "less", "more", "most", "pg", "man", "info", "pager", "sensible-pager", "w3m", "lynx",
})
WRAPPERS = frozenset({"env", "xargs", "nice", "timeout", "nohup", "time", "command", "exec", "stdbuf"})
PRIVILEGE = frozenset({
    "sudo", "doas", "su", "runuser", "pkexec", "chroot", "unshare", "nsenter", "setsid", "ionice",
    "chrt", "taskset", "flock", "watch", "strace", "ltrace", "gdb", "script", "busybox", "bwrap",
    "firejail", "parallel", "unbuffer", "eval", "source", ".", "builtin", "trap",
})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "ash", "rbash"})
_PYTHON = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?$")
INTERPRETERS = frozenset({
    "node", "nodejs", "deno", "bun", "perl", "ruby", "irb", "php", "lua", "luajit", "tclsh", "wish",
    "Rscript", "R", "julia", "osascript", "awk-f", "expect", "guile", "racket", "ocaml", "swift",
}) | _SHELLS

#: Subcommands of git that only read (and whose options this module checks).
_GIT_READ = frozenset({
    "status", "log", "diff", "show", "branch", "rev-parse", "ls-files", "ls-tree", "cat-file", "blame",
    "shortlog", "describe", "grep", "show-ref", "rev-list", "merge-base", "version", "count-objects",
    "diff-tree", "diff-files", "diff-index", "name-rev", "for-each-ref", "whatchanged", "annotate",
})
#: git's global options that are fine before the subcommand (all others ask).
_GIT_GLOBAL_OK = frozenset({"--no-pager", "--no-optional-locks", "--literal-pathspecs",
                            "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-replace-objects"})
_GIT_BAD = ("--output", "--ext-diff", "--textconv", "--filters", "--exec", "--show-signature",
            "--open-files-in-pager", "--paginate", "--upload-pack", "--receive-pack")
_GIT_BRANCH_OK = frozenset({"--list", "-l", "--show-current", "-a", "--all", "-r", "--remotes", "-v",
                            "-vv", "--verbose", "--no-color", "--color", "--contains", "--merged",
                            "--no-merged", "--no-contains", "--sort", "--points-at", "--column",
                            "--no-column", "--ignore-case", "-i"})


def program_name(word: str) -> str:
    """The program a first word names, without its directory (``/usr/bin/git`` → ``git``)."""
    return word.rsplit("/", 1)[-1]


Allowed = Callable[[list[str]], "list[str] | None"]


def needs_approval(words: Sequence[str], prefix: Sequence[str] = (),
                   allowed: Allowed | None = None) -> str | None:
    """Why the simple command ``words`` (program first), allowed by the
    allow-list entry ``prefix`` (its words), still needs the person's
    approval; None when its words only read. ``allowed(words)`` gives the
    allow-list entry (words) a wrapped command matches, or None; without it a
    wrapped command must be a reader. Never raises."""
    words = list(words)
    if not words:
        return "there is no command"
    program = program_name(words[0])
    args = words[1:]
    if program in NEVER_SAFE:
        return f"{program} can run a shell command from inside it (editors, pagers and manuals always ask)"
    if program in WRITERS:
        return f"{program} writes, deletes, signals or reaches the network"
    if program in PRIVILEGE:
        return f"{program} runs another program in another way (it always asks)"
    if program in WRAPPERS:
        return _wrapper(program, args, allowed)
    if program in INTERPRETERS or _PYTHON.match(program):
        return _interpreter(program, words, list(prefix))
    if program in READERS:
        return _reader(program, args)
    rule = _TABLES.get(program)
    if rule is not None:
        return rule(args)
    return None


# --- readers --------------------------------------------------------------------------------


def _positionals(args: Sequence[str]) -> list[str]:
    out, options = [], True
    for a in args:
        if options and a == "--":
            options = False
        elif options and a.startswith("-") and a != "-":
            continue
        else:
            out.append(a)
    return out


def _reader(program: str, args: list[str]) -> str | None:
    if program == "date" and any(a in ("-s", "--set") or a.startswith(("--set=", "-s")) for a in args):
        return "date -s sets the clock"
    if program == "tree" and any(a == "-o" or a.startswith("-o") for a in args):
        return "tree -o writes its listing to a file"
    if program == "uniq" and len(_positionals(args)) > 1:
        return "uniq INPUT OUTPUT writes OUTPUT"
    if program == "jq" and any(a in ("--run-tests",) for a in args):
        return None
    return None


# --- find, rg, sort -------------------------------------------------------------------------------

_FIND_BAD = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
                       "-fls"})


def _find(args: list[str]) -> str | None:
    bad = next((a for a in args if a in _FIND_BAD), None)
    return f"find {bad} runs, deletes or writes" if bad else None


def _rg(args: list[str]) -> str | None:
    for a in args:
        if a == "--":
            break
        if a in ("--pre", "--hostname-bin", "--search-zip") or a.startswith(("--pre=", "--hostname-bin=")):
            return f"rg {a.split('=')[0]} runs another program"
        if re.match(r"^-[A-Za-z]*z", a) and not a.startswith("--"):
            return "rg -z runs decompressors"
    return None


def _sort(args: list[str]) -> str | None:
    for a in args:
        if a == "--":
            break
        if a in ("--output", "--compress-program") or a.startswith(("--output=", "--compress-program=")):
            return f"sort {a.split('=')[0]} writes a file or runs a program"
        if not a.startswith("--") and re.match(r"^-[A-Za-z]*o", a):
            return "sort -o writes a file"
    return None


# --- git ----------------------------------------------------------------------------------------


def _git(args: list[str]) -> str | None:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        a = args[i]
        if a not in _GIT_GLOBAL_OK:
            return f"git {a.split('=')[0]} before the subcommand can change what git runs or where"
        i += 1
    if i >= len(args):
        return None  # git alone prints its usage
    sub, rest = args[i], args[i + 1:]
    if sub not in _GIT_READ:
        return f"git {sub} is not one of the subcommands that only read (an alias or a writer asks)"
    for a in rest:
        if a == "--":
            break
        if a.startswith(_GIT_BAD) and (a in _GIT_BAD or "=" in a):
            return f"git {sub} {a.split('=')[0]} writes a file, runs a program or a pager"
        if sub == "grep" and re.match(r"^-[A-Za-z]*O", a):
            return "git grep -O opens the files in a pager (any program)"
    if sub == "branch":
        for a in rest:
            if a not in _GIT_BRANCH_OK and not a.startswith(("--format=", "--sort=", "--contains=",
                                                             "--merged=", "--points-at=", "--color=")):
                return "git branch with these words can create, rename or delete branches"
    return None


# --- sed -----------------------------------------------------------------------------------------

_SED_OPTS = frozenset({"-n", "--quiet", "--silent", "-E", "-r", "--regexp-extended", "-s", "--separate",
                       "-z", "--null-data", "-u", "--unbuffered", "--posix", "--debug", "--sandbox"})
_SED_ADDR = r"(\d+|\$|/(?:[^/\\\n]|\\.)*/)"
_SED_CMD = re.compile(
    rf"^\s*({_SED_ADDR}(\s*,\s*{_SED_ADDR})?)?\s*(!\s*)?"
    r"([pdqQ=lnNgGhHxD]|s/(?:[^/\\\n]|\\.)*/(?:[^/\\\n]|\\.)*/[gpiI0-9]*)\s*$")


def _sed_script_ok(script: str) -> bool:
    parts = [p for p in re.split(r"[;\n]", script) if p.strip()]
    return bool(parts) and all(_SED_CMD.match(p) for p in parts)


def _sed(args: list[str]) -> str | None:
    scripts: list[str] = []
    positional: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            positional += args[i + 1:]
            break
        if a in ("-e", "--expression"):
            if i + 1 >= len(args):
                return "sed -e needs a script"
            scripts.append(args[i + 1])
            i += 2
            continue
        if a.startswith("--expression="):
            scripts.append(a.split("=", 1)[1])
        elif a.startswith("-") and a != "-":
            if a not in _SED_OPTS:
                return f"sed {a} may edit files in place, read a script file or is not known to only read"
        else:
            positional.append(a)
        i += 1
    if not scripts:
        if not positional:
            return "sed without a script"
        scripts.append(positional.pop(0))
    bad = next((s for s in scripts if not _sed_script_ok(s)), None)
    if bad is not None:
        return (f"the sed script {bad!r} is not only printing, deleting and substituting "
                "(e, w, W, r, R and s///e, s///w run programs or write files)")
    return None


# --- awk ------------------------------------------------------------------------------------------

_AWK_BAD = re.compile(r"system|getline|close|fflush|ENVIRON|PROCINFO|[|>@]")


def _awk(args: list[str]) -> str | None:
    i = 0
    program: str | None = None
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if a in ("-F", "-v"):
            i += 2
            continue
        if a.startswith(("-F", "-v")) and len(a) > 2:
            i += 1
            continue
        if a.startswith("-") and a != "-":
            return f"awk {a} may load code, write files or is not known to only read"
        break
    if i < len(args):
        program = args[i]
    if program is None:
        return "awk without a program"
    found = _AWK_BAD.search(program)
    if found:
        return (f"the awk program holds {found.group(0)!r}: awk programs that run commands, write, "
                "pipe or read commands' output ask")
    return None


# --- tar -----------------------------------------------------------------------------------------

_TAR_LONG_OK = ("--list", "--verbose", "--file", "--gzip", "--gunzip", "--bzip2", "--xz", "--lzma",
                "--zstd", "--lzip", "--lzop", "--auto-compress", "--wildcards", "--no-wildcards",
                "--exclude", "--numeric-owner", "--full-time", "--utc", "--force-local", "--quoting-style",
                "--show-transformed-names", "--ignore-case", "--anchored", "--no-anchored", "--totals",
                "--blocking-factor", "--record-size", "--occurrence", "--null", "--verbatim-files-from")
_TAR_SHORT_OK = set("tvfzjJaZb")


def _tar(args: list[str]) -> str | None:
    if not args:
        return None
    words = list(args)
    if not words[0].startswith("-"):  # old style: tar tvf x.tar
        words[0] = "-" + words[0]
    listing = False
    archive_next = False
    for a in words:
        if archive_next:
            archive_next = False
            if ":" in a and "--force-local" not in words:
                return "tar -f HOST:FILE runs a remote shell"
            continue
        if a == "--":
            break
        if a.startswith("--"):
            name = a.split("=", 1)[0]
            if name not in _TAR_LONG_OK:
                return f"tar {name} can extract, create, write or run a program"
            if name == "--list":
                listing = True
            if name == "--file":
                if "=" in a:
                    if ":" in a.split("=", 1)[1] and "--force-local" not in words:
                        return "tar -f HOST:FILE runs a remote shell"
                else:
                    archive_next = True
            continue
        if a.startswith("-") and len(a) > 1:
            letters = a[1:]
            for j, ch in enumerate(letters):
                if ch not in _TAR_SHORT_OK:
                    return f"tar -{ch} can extract, create, write or run a program"
                if ch == "t":
                    listing = True
                if ch in "fb":
                    if j + 1 < len(letters):
                        value = letters[j + 1:]
                        if ch == "f" and ":" in value and "--force-local" not in words:
                            return "tar -f HOST:FILE runs a remote shell"
                    else:
                        archive_next = True
                    break
    return None if listing else "tar without -t (--list) extracts or creates"


# --- wrappers -------------------------------------------------------------------------------------


def _wrapped(program: str, args: list[str]) -> tuple[list[str] | None, str | None]:
    """The command a wrapper runs (None for none), or why it asks."""
    i = 0
    if program == "env":
        while i < len(args):
            a = args[i]
            if a in ("-i", "--ignore-environment", "-0", "--null"):
                i += 1
            elif a in ("-u", "--unset"):
                i += 2
            elif a.startswith("--unset="):
                i += 1
            elif a == "--":
                i += 1
                break
            elif a.startswith("-"):
                return None, f"env {a} can split words into a command or change how it runs"
            elif "=" in a:
                return None, "env NAME=VALUE changes the environment of the command it runs (LD_PRELOAD …)"
            else:
                break
    elif program == "xargs":
        while i < len(args):
            a = args[i]
            if a in ("-0", "--null", "-r", "--no-run-if-empty", "-t", "--verbose", "-x", "--exit"):
                i += 1
            elif a in ("-n", "-L", "-s", "-P", "-d", "-E", "-I") or a.startswith(("--max-args=", "--max-lines=",
                                                                                    "--max-procs=")):
                i += 2 if "=" not in a else 1
            elif a == "--":
                i += 1
                break
            elif a.startswith("-"):
                return None, f"xargs {a} reads arguments from a file or is not known"
            else:
                break
        if i >= len(args):
            return ["echo"], None
    elif program == "nice":
        if i < len(args) and args[i] in ("-n", "--adjustment"):
            i += 2
        elif i < len(args) and re.match(r"^(-n?-?\d+|--adjustment=-?\d+)$", args[i]):
            i += 1
    elif program == "timeout":
        while i < len(args) and args[i].startswith("-"):
            a = args[i]
            if a in ("-s", "--signal", "-k", "--kill-after"):
                i += 2
            elif a in ("--preserve-status", "--foreground", "-v", "--verbose") or a.startswith(
                    ("--signal=", "--kill-after=", "-s", "-k")):
                i += 1
            else:
                return None, f"timeout {a} is not known"
        i += 1  # the duration
    elif program == "time":
        while i < len(args) and args[i].startswith("-"):
            a = args[i]
            if a in ("-p", "--portability", "-v", "--verbose", "-q", "--quiet"):
                i += 1
            else:
                return None, f"time {a} writes a file or is not known"
    elif program == "command":
        if i < len(args) and args[i] in ("-v", "-V"):
            return None, None  # only says what a name is
        if i < len(args) and args[i] == "-p":
            i += 1
    elif program == "stdbuf":
        while i < len(args) and args[i].startswith("-"):
            a = args[i]
            if re.match(r"^(-[ioe]\S+|--(input|output|error)=\S+)$", a):
                i += 1
            elif a in ("-i", "-o", "-e"):
                i += 2
            else:
                return None, f"stdbuf {a} is not known"
    if i < len(args) and args[i] == "--":
        i += 1
    rest = args[i:]
    return (rest or None), None


def _wrapper(program: str, args: list[str], allowed: Allowed | None) -> str | None:
    inner, why = _wrapped(program, args)
    if why:
        return why
    if inner is None:
        return None if program in ("env", "command", "nice", "time") else f"{program} runs nothing here"
    hit = allowed(inner) if allowed is not None else None
    inner_program = program_name(inner[0])
    if hit is None and inner_program not in READERS:
        return (f"{program} runs {inner_program}, which is not on the allow list (a wrapper vouches for "
                "nothing of its own)")
    reason = needs_approval(inner, hit or [], allowed)
    return f"{program} runs {shlex.join(inner)}: {reason}" if reason else None


# --- interpreters --------------------------------------------------------------------------------

#: Options of an interpreter whose next word is code or a module to run.
_CODE_OPTS = frozenset({"-c", "-e", "-E", "-m", "--eval", "-p", "--print", "-r", "--require", "--import",
                        "-i", "--command", "-x"})
#: Options that take a value that is not code.
_VALUE_OPTS = frozenset({"-W", "-X", "-o", "-O", "--input-type"})
_HARMLESS = frozenset({"--version", "-V", "--help", "-h", "-VV"})


def _interpreter(program: str, words: list[str], prefix: list[str]) -> str | None:
    """An interpreter's words are fine when they run no code, or only code
    the prefix itself names (everything up to and including the code, the
    script or the module's name is in the prefix)."""
    args = words[1:]
    if all(a in _HARMLESS for a in args):
        return None
    i = 0
    end = None  # index in words of the last word naming code to run
    while i < len(args):
        a = args[i]
        if a in _CODE_OPTS:
            end = i + 2
            break
        if a in _VALUE_OPTS:
            i += 2
            continue
        if a.startswith("-") and a != "-":
            if re.match(r"^-[A-Za-z]*[ceEm]", a) and not a.startswith("--"):  # -ic 'code', -mpytest
                end = i + (1 if re.match(r"^-[A-Za-z]*[ceEm].", a) else 2)
                break
            i += 1
            continue
        end = i + 1  # a script, or - (standard input)
        break
    if end is None:
        return None if len(args) == 0 else f"{program} with these options may run code"
    if len(prefix) >= end + 1 and prefix[:end + 1] == words[:end + 1]:
        return None
    return (f"{program} runs code its words give ({shlex.join(words[1:end + 1])}); an interpreter or shell "
            "is only vouched for up to the code, script or module the allowed prefix names")


_TABLES: dict[str, Callable[[list[str]], str | None]] = {
    "find": _find, "rg": _rg, "sort": _sort, "git": _git, "sed": _sed, "awk": _awk, "gawk": _awk,
    "mawk": _awk, "nawk": _awk, "tar": _tar,
}


# --- what "always allow" offers and saves ---------------------------------------------------------


def standing_refusal(prefix: Sequence[str]) -> str | None:
    """Why ``prefix`` (words) may not be saved as an "always allow" prefix,
    or None. Interpreters, shells, wrappers, programs that always ask, ``git``
    alone and ``find`` alone are refused: each would vouch for whatever its
    later words run (the tables would still ask, but a standing prefix must
    mean what it says)."""
    words = list(prefix)
    if not words:
        return "the prefix is empty"
    program = program_name(words[0])
    if program in WRAPPERS or program in PRIVILEGE:
        return f"{program} runs another program: allow that program instead"
    if program in INTERPRETERS or _PYTHON.match(program):
        if _PYTHON.match(program) and len(words) >= 3 and words[1] == "-m":
            return None
        return f"{program} runs whatever code it is given: allow it once"
    if program in NEVER_SAFE or program in WRITERS:
        return f"{program} always asks, so an \"always\" could not hold"
    if program in ("git", "find", "xargs", "awk", "gawk", "mawk", "nawk", "sed", "tar") and len(words) == 1:
        return f"{program} alone is too wide: name its subcommand or options"
    if program == "git" and words[1].startswith("-"):
        return "git's options before the subcommand can change what it runs"
    return None


def offered_prefix(words: Sequence[str], suggested: Sequence[str]) -> list[str]:
    """The narrowest prefix of ``words`` worth offering for "always allow",
    from the usual ``suggested`` one: empty when no standing prefix can hold
    (see :func:`standing_refusal`), or when the command itself would ask
    even under that prefix (its words run, write or pipe)."""
    words, suggested = list(words), list(suggested)
    if not suggested:
        return []
    program = program_name(words[0])
    if program in ("find", "sed", "awk", "gawk", "mawk", "nawk", "tar") and len(suggested) == 1:
        return []
    if standing_refusal(suggested) is not None:
        return []
    if needs_approval(words, suggested) is not None:
        return []
    return suggested


# --- a repository's own config ----------------------------------------------------------------------

#: Settings git reads from every repository's own config that would run a
#: program during a read, and what they are set to for every command, so that
#: ``git status`` never runs a repository's ``core.fsmonitor`` (given as
#: ``GIT_CONFIG_COUNT`` settings, which outrank every config file).
GIT_FIXED = (("core.fsmonitor", "false"), ("core.pager", "cat"), ("log.showSignature", "false"),
             ("gpg.program", "false"), ("gpg.ssh.program", "false"), ("gpg.x509.program", "false"),
             ("diff.ignoreSubmodules", "all"), ("status.submoduleSummary", "false"))
#: Patterns of a repository's settings that run a program and can be made
#: harmless: a filter or a text conversion becomes ``cat`` (the file as it
#: is), a pager ``cat``.
_GIT_NEUTRAL = (re.compile(r"^filter\.(.+)\.(clean|smudge)$"), re.compile(r"^diff\.(.+)\.textconv$"),
                re.compile(r"^pager\.[^.]+$"))
#: A repository's settings that run a program and cannot be made harmless
#: (an external diff replaces git's own): a git command in such a repository asks.
_GIT_ASKS = (re.compile(r"^diff\.external$"), re.compile(r"^diff\.(.+)\.command$"),
             re.compile(r"^filter\.(.+)\.process$"), re.compile(r"^core\.alternaterefscommand$"))

#: The environment that keeps git to the settings above.
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_PAGER": "cat",
           "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}


def repository_config_names(workdir: str, timeout_s: float = 5.0) -> list[str]:
    """The names (lower case) of the settings the git repository at
    ``workdir`` sets, read by ``git config --list --name-only`` (which runs
    nothing a repository names) with :data:`GIT_ENV`; empty when there is no
    repository or no git. Never raises."""
    import subprocess

    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", **GIT_ENV}
    try:
        done = subprocess.run(["git", "config", "--list", "--name-only"], cwd=workdir, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:
        return []
    return [line.strip().lower() for line in done.stdout.decode("utf-8", "replace").splitlines() if line.strip()]


def git_overrides(names: Sequence[str]) -> dict[str, str]:
    """``GIT_CONFIG_COUNT``/``KEY_n``/``VALUE_n`` variables giving
    :data:`GIT_FIXED` and, for each of the repository's own settings
    ``names`` that a pattern of ``_GIT_NEUTRAL`` matches, ``cat``."""
    pairs = list(GIT_FIXED)
    for name in names:
        if any(p.match(name) for p in _GIT_NEUTRAL):
            pairs.append((name, "cat"))
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def git_repository_asks(names: Sequence[str]) -> str | None:
    """Why a git command in a repository whose settings are ``names`` asks
    (an external diff or a long-running filter it names), or None."""
    hit = next((n for n in names if any(p.match(n) for p in _GIT_ASKS)), None)
    return f"this repository's git config sets {hit}, a program git would run" if hit else None
