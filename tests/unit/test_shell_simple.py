"""The simple-command check against the real shell (issue "Nothing runs, leaks, hangs or is lost
that shouldn't be", "Security": the allow list can be bypassed).

- A property test: for any string the check calls simple, the real ``/bin/sh`` (and bash and dash,
  where installed) runs exactly one command, with exactly the words the check saw. Two witnesses:
  a printer put in front (``printf '%s\\0' <command>`` prints the words sh parsed), and a recorder
  installed under the program's own name on an otherwise empty PATH (it records the one call and its
  arguments, so that keywords, assignments and a second command would all show).
- A table of bypass attempts: each one is proven real against ``/bin/sh`` where it has a payload, is
  not simple, and runs without approval neither in ``wisp ask`` with an allow list (a real process
  against a fake endpoint) nor through the approval path the TUI uses (the person is asked).
"""

from __future__ import annotations

import json
import os
import shutil
import string
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from wisp.core.audit import AuditLog
from wisp.core.config import Config
from wisp.core.tools.approval import (ApprovalRequest, Approvals, WorkspaceAllowList, is_simple_command,
                                      prefix_matches, suggest_prefix)
from wisp.core.tools.base import ToolContext
from wisp.core.tools.run_command import RunCommand
from wisp.core.tools.shell import NotSimple, shell_argv, simple_words
from tests.support.fakes import FakeOllama, reply, tool_calls
from tests.support.home import write_config

WISP = str(Path(sys.executable).parent / "wisp")

#: The shells the property is checked against: /bin/sh always, bash and dash where installed
#: (bash may be /bin/sh elsewhere).
SHELLS = ["/bin/sh"] + [p for p in (shutil.which("bash"), shutil.which("dash"), shutil.which("busybox"))
                        if p and os.path.realpath(p) != os.path.realpath("/bin/sh")]


def _argv(shell: str, command: str) -> list[str]:
    argv = shell_argv(command)  # exactly how run_command starts it, with another shell binary in front
    if shell.endswith("busybox"):
        return [shell, "sh", *argv[1:]]
    return [shell, *argv[1:]]


@pytest.fixture(scope="module")
def playground(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A directory where a glob, a tilde or a variable would change the words: files named a, b,
    ab, [a], a*; HOME elsewhere; variables X and MY_API_KEY set; and a recorder for the program."""
    root = tmp_path_factory.mktemp("shellplay")
    work = root / "work"
    work.mkdir()
    for name in ("a", "b", "ab", "[a]", "a*", "-x"):
        (work / name).write_text("")
    bindir = root / "bin"
    bindir.mkdir()
    recorder = root / "recorder"
    recorder.write_text('#!/bin/sh\nfor a do printf \'%s\\0\' "$a" >> "$WISP_REC"; done\n'
                        'printf \'\\001\' >> "$WISP_REC"\n')
    recorder.chmod(0o755)
    return {"root": root, "work": work, "bin": bindir, "recorder": recorder}


def _env(playground: dict[str, Path], **extra: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(playground["root"] / "home"),
            "X": "from X", "MY_API_KEY": "sk-secret", "IFS": " \t\n", "LC_ALL": "C", **extra}


def printed_words(shell: str, command: str, playground: dict[str, Path]) -> tuple[list[str], str]:
    """The words sh runs for ``command``, seen through a printer put in front of it."""
    r = subprocess.run(_argv(shell, "printf '%s\\0' " + command), capture_output=True,
                       cwd=playground["work"], env=_env(playground), timeout=10)
    out = r.stdout.decode("latin-1")
    assert out.endswith("\0") or out == "", (command, out)
    return out.split("\0")[:-1], r.stderr.decode("latin-1")


def recorded_calls(shell: str, command: str, words: list[str], playground: dict[str, Path]) -> list[list[str]] | None:
    """The calls of the program ``words[0]`` when sh runs ``command`` with a PATH that holds only a
    recorder of that name; None when the name cannot be a file or the shell has a builtin by it."""
    name = words[0]
    if not name or "/" in name or name in (".", "..") or len(name) > 100:
        return None
    bindir = playground["bin"] / "x"
    if bindir.exists():
        shutil.rmtree(bindir)
    bindir.mkdir()
    (bindir / name).symlink_to(playground["recorder"])
    env = _env(playground, PATH=str(bindir), WISP_REC=str(playground["root"] / "rec"))
    found = subprocess.run(_argv(shell, 'command -v -- "$0"')[:-1] + ['command -v -- "$0"', name],
                           capture_output=True, env=env, timeout=10).stdout.decode("latin-1").strip()
    if found != str(bindir / name):
        return None  # a builtin, a keyword or a function: the printer witness covers it
    rec = playground["root"] / "rec"
    rec.write_bytes(b"")
    r = subprocess.run(_argv(shell, command), capture_output=True, cwd=playground["work"], env=env, timeout=10)
    assert r.stderr == b"", (command, r.stderr)
    data = rec.read_bytes().decode("latin-1")
    return [call.split("\0")[:-1] for call in data.split("\1")[:-1]]


# --- strategies -------------------------------------------------------------------------------------

PLAIN = string.ascii_letters + string.digits + "-_./:=@%+,^"
PRINTABLE = "".join(chr(c) for c in range(0x20, 0x7F))
HOSTILE = [";", "&", "&&", "|", "||", "<", ">", ">>", "2>&1", "1>&2", "<<<", "<<", "(", ")", "$", "$X", "${X}",
           "$(id)", "`id`", "$((1))", "#", " #", "~", "~root", "*", "?", "[a]", "]", "{a,b}", "{", "}", "!",
           "\n", "\r", "\t", "\\", "'", '"', "A=b ", "if ", "then", "time ", "function ", "\x00", "\x1b[2J",
           "\u037e", "\uff1b", "\u01c0", "\u00a0", "\u200b", "\u202e", "\\\n", "=", "-", "--"]

plain = st.text(PLAIN, min_size=1, max_size=6)
single_quoted = st.text(PRINTABLE.replace("'", ""), max_size=8).map(lambda t: f"'{t}'")
double_quoted = st.text(PRINTABLE, max_size=8).map(lambda t: '"' + t.replace('"', '\\"') + '"')
escaped = st.sampled_from(PRINTABLE).map(lambda c: "\\" + c)
blank = st.sampled_from([" ", "  ", "\t"])
word = st.lists(st.one_of(plain, single_quoted, double_quoted, escaped), min_size=1, max_size=4).map("".join)


@st.composite
def likely_simple(draw: st.DrawFn) -> str:
    """Commands made of plain, quoted and escaped pieces, sometimes with 2>&1: mostly simple."""
    words = draw(st.lists(word, min_size=1, max_size=5))
    parts = [words[0]]
    for w in words[1:]:
        parts.append(draw(blank))
        parts.append(w if draw(st.integers(0, 9)) else "2>&1")
    return "".join(parts)


hostile = st.lists(st.one_of(plain, single_quoted, double_quoted, escaped, blank, st.sampled_from(HOSTILE)),
                   min_size=1, max_size=8).map("".join)
anything = st.text(st.sampled_from(list(PRINTABLE) + ["\n", "\t", "\r", "\u037e", "\x1b"]), max_size=20)


def check_against_shells(command: str, playground: dict[str, Path]) -> None:
    try:
        words = simple_words(command)
    except NotSimple as exc:
        event(f"not simple: {exc.reason.split(' ')[0]}")
        return
    event("simple")
    assert is_simple_command(command)
    for shell in SHELLS:
        printed, stderr = printed_words(shell, command, playground)
        assert printed == words, (shell, command, printed, words)
        assert stderr == "", (shell, command, stderr)
        calls = recorded_calls(shell, command, words, playground)
        if calls is not None:
            assert calls == [words[1:]], (shell, command, calls, words)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(command=likely_simple())
def test_what_the_check_calls_simple_is_one_command_with_those_words(command: str, playground) -> None:
    check_against_shells(command, playground)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(command=st.one_of(hostile, anything))
def test_hostile_text_is_refused_or_means_what_the_check_says(command: str, playground) -> None:
    check_against_shells(command, playground)


def test_the_property_test_can_fail(playground) -> None:
    """The witnesses see a wrong word list: shlex's reading of the issue's example is not sh's."""
    import shlex

    command = "ls a#; touch PWNED"
    assert shlex.split(command, comments=True) == ["ls", "a"]  # what the old check saw
    printed, _ = printed_words("/bin/sh", "ls a#", playground)
    assert printed != ["ls", "a"] and printed == ["ls", "a#"]


@pytest.mark.parametrize("command,words", [
    ("pytest -q tests", ["pytest", "-q", "tests"]),
    ("git log -n 3 'a b'", ["git", "log", "-n", "3", "a b"]),
    ('echo "a\\"b" \'c\'"d"', ["echo", 'a"b', "cd"]),
    ('echo "\\x" \\; \\# \\$X', ["echo", "\\x", ";", "#", "$X"]),
    ("pytest -q 2>&1", ["pytest", "-q"]),
    ("echo ''", ["echo", ""]),
    ("echo\ta", ["echo", "a"]),
    ("-x --y", ["-x", "--y"]),
    ("echo a=b", ["echo", "a=b"]),
    ("git show HEAD^", ["git", "show", "HEAD^"]),
])
def test_words_of_simple_commands(command: str, words: list[str], playground) -> None:
    assert simple_words(command) == words
    assert printed_words("/bin/sh", command, playground)[0] == words


# --- the bypass table ---------------------------------------------------------------------------------

#: (command, runs the payload under /bin/sh if it were run). ``{m}`` is a marker file the payload
#: creates; ``None`` for attempts whose harm is not a file (a secret printed, a lookalike character,
#: a home directory listed) or that only bash would run.
BYPASSES: list[tuple[str, bool | None]] = [
    ("ls a#; touch {m}", True),                    # the example: # inside a word
    ("ls #; touch {m}", None),                     # a real comment: hides from a reader
    ("ls a #\ntouch {m}", True),
    ("ls; touch {m}", True),
    ("ls;touch {m}", True),
    ("ls && touch {m}", True),
    ("ls nothing-here || touch {m}", True),
    ("ls | touch {m}", True),
    ("ls & touch {m}", True),
    ("ls\ntouch {m}", True),
    ("ls\r\ntouch {m}", True),
    ("ls \\\n; touch {m}", True),                  # a backslash-newline joins lines
    ("ls $(touch {m})", True),
    ("ls `touch {m}`", True),
    ('ls "$(touch {m})"', True),
    ('ls "`touch {m}`"', True),
    ("ls ${X:-$(touch {m})}", True),
    ("ls $((1))$(touch {m})", True),
    ("ls -- \"${X:=`touch {m}`}\"", True),
    ("echo $MY_API_KEY", None),                    # parameter expansion prints a secret
    ("echo ${MY_API_KEY}", None),
    ("echo \"$MY_API_KEY\"", None),
    ("echo $'\\x3b'", None),                       # bash's ANSI-C quoting
    ("ls > {m}", True),
    ("ls >> {m}", True),
    ("ls 2> {m}", True),
    ("ls >| {m}", True),
    ("ls &> {m}", True),                           # dash: ls & then > m; bash: both into m
    ("ls 2>&1 > {m}", True),
    ("ls 2>&1x", None),
    ("cat < /etc/hostname", None),
    ("cat <<< x > {m}", None),                     # bash's here-string
    ("cat << EOF > {m}\nx\nEOF", True),
    ("cat <(touch {m})", None),                    # bash's process substitution
    ("ls >(touch {m})", None),
    ("ls 'a\\'; touch {m}", True),                 # no escapes inside single quotes
    ('ls "a\\\\"; touch {m}', True),               # an escaped backslash ends the quote
    ("ls 'a';touch {m}", True),
    ("ls \"a;b\" ; touch {m}", True),
    ("ls {{a,b}}", None),                          # brace expansion (bash)
    ("ls ~", None),                                # tilde expansion
    ("ls ~root", None),
    ("ls *", None),
    ("ls ?", None),
    ("ls [a]", None),
    ("PATH=. ls", True),                           # runs ./ls, which touches the marker
    ("X=1 ls", None),
    ("LD_PRELOAD=/tmp/evil.so ls", None),
    ("if true; then touch {m}; fi", True),
    ("! touch {m}", True),
    ("{{ touch {m}; }}", True),
    ("(touch {m})", True),
    ("ls \uff1btouch {m}", None),                  # fullwidth semicolon: a lookalike
    ("ls \u037etouch {m}", None),                  # Greek question mark looks like ;
    ("ls \u01c0 touch {m}", None),                 # Latin letter dental click looks like |
    ("ls\u00a0; touch {m}", True),                 # a no-break space, then a real ;
    ("ls \u200b; touch {m}", True),                # zero-width space
    ("ls \u202e; touch {m}", True),                # right-to-left override
    ("ls\x00; touch {m}", None),
    ("ls \x1b[2J", None),                          # a control sequence
    ("ls\x0btouch {m}", None),                     # vertical tab
    ("ls 'unclosed", None),
]


def _payload_dir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    fake_ls = work / "ls"  # PATH=. ls runs this
    fake_ls.write_text("#!/bin/sh\n: > PWNED-path\n")
    fake_ls.chmod(0o755)
    return work


def _marked(command: str, i: int) -> tuple[str, str]:
    marker = f"PWNED-{i}"
    return command.replace("{m}", marker).replace("{{", "{").replace("}}", "}"), marker


def test_the_table_has_forty_attempts_of_every_kind() -> None:
    assert len(BYPASSES) >= 40
    text = "\n".join(c for c, _ in BYPASSES)
    for needle in (";", "#", "'", '"', "$(", "`", "${", ">", "<<<", "<(", "\n", "\uff1b", "\\\n", "&&", "|"):
        assert needle in text, needle


@pytest.mark.parametrize("i", range(len(BYPASSES)))
def test_each_bypass_attempt_is_real_and_not_simple(i: int, tmp_path: Path) -> None:
    command, runs = BYPASSES[i]
    command, marker = _marked(command, i)
    with pytest.raises(NotSimple):
        simple_words(command)
    assert not prefix_matches(command, "ls") and not prefix_matches(command, command.split(" ")[0])
    assert suggest_prefix(command) == ""
    if runs and "\x00" not in command:  # the attack works when sh runs it: the table is not a straw man
        work = _payload_dir(tmp_path)
        subprocess.run(shell_argv(command), cwd=work, capture_output=True, timeout=10,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)})
        assert (work / (marker if "{m}" in BYPASSES[i][0] else "PWNED-path")).exists(), command


ALLOW = ["ls", "echo", "cat", "touch", "PATH=. ls", "X=1 ls", "if", "!", "(touch", "{"]


async def test_no_bypass_runs_through_the_tuis_approval_path(tmp_path: Path) -> None:
    """The TUI's path: the config allow list and the workspace's "always allow" prefixes hold
    every program the attempts begin with; each attempt is still put to the person (who denies)."""
    work = _payload_dir(tmp_path)
    audit = AuditLog(tmp_path / "audit")
    allow_file = tmp_path / "approvals.json"
    for prefix in ("ls", "echo", "cat"):
        WorkspaceAllowList(allow_file).add(work, prefix)
    asked: list[str] = []

    async def ask(request: ApprovalRequest):
        asked.append(request.command)
        return ("always", suggest_prefix(request.command) or request.command.split(" ")[0])

    cfg = Config(tmp_path / "config.json", {"tools.run_command.allow": ALLOW})
    policy = Approvals(cfg, audit, WorkspaceAllowList(allow_file), ask=ask)
    commands = [_marked(c, i)[0] for i, (c, _) in enumerate(BYPASSES)]
    for command in commands:
        decision = await policy(ApprovalRequest("run_command", command, work))
        assert decision.choice == "once" and decision.source == "person", command  # asked; "always" refused
    assert asked == commands
    assert WorkspaceAllowList(allow_file).prefixes(work) == ["ls", "echo", "cat"]  # no prefix was saved

    async def deny(request: ApprovalRequest):
        return ("deny", None)

    policy = Approvals(cfg, audit, WorkspaceAllowList(allow_file), ask=deny)
    ctx = ToolContext(workdir=work, config=cfg, conversation_id=1, turn=1, approve=policy)
    for command in commands:
        result = await RunCommand().run({"command": command}, ctx)
        assert result.meta["approval"]["choice"] == "deny", command
    assert not list(work.glob("PWNED*"))


def test_no_bypass_runs_in_wisp_ask_with_an_allow_list(wisp_home: Path, tmp_path: Path) -> None:
    """A real `wisp ask` whose model asks for every attempt, with an allow list holding every
    program they begin with: none runs, and the audit log says each needed approval."""
    work = _payload_dir(tmp_path)
    commands = [_marked(c, i)[0] for i, (c, _) in enumerate(BYPASSES)]
    calls = [{"name": "run_command", "arguments": {"command": c}, "id": f"call_{i}"}
             for i, c in enumerate(commands)]
    with FakeOllama([reply(tool_calls(*calls), finish="tool_calls"), reply("done")]) as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake:latest", "tools.enabled": ["run_command"],
                                 "tools.run_command.allow": ALLOW})
        r = subprocess.run([WISP, "ask", "try them all"], capture_output=True, text=True, cwd=work,
                           env=os.environ.copy(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert not list(work.glob("PWNED*")), sorted(p.name for p in work.glob("PWNED*"))
    events = []
    for f in sorted((wisp_home / "data").rglob("audit-*.jsonl")):
        events += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    approvals = [e["payload"] for e in events if e["kind"] == "approval"]
    assert [a["command"] for a in approvals] == commands
    assert {a["choice"] for a in approvals} == {"needs_approval"}
    assert r.stderr.count("not a simple command") == len(commands)
