"""An allow list means what its words say: 100 commands under a read-only allow list, in a scratch
git repository whose own .git/config would run programs, decided by the real approval policy and
run twice: straight under /bin/sh with the environment wisp gives commands (the tables and the git
settings alone must hold) and in the real bubblewrap sandbox. None may write, delete or run
another program without approval: each either asks, or runs and leaves no marker file, no
EXECUTED line, and keep.txt as it was."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from wisp.core.config import Config
from wisp.core.tools import sandbox
from wisp.core.tools.approval import ApprovalRequest, Approvals, WorkspaceAllowList
from wisp.core.tools.base import ToolContext
from wisp.core.tools.run_command import RunCommand, allow_list_environment
from wisp.core.tools.shell import shell_argv
from tests.unit.test_sandbox import bwrap  # noqa: F401 (the real bubblewrap, or a skip; a failure in CI)

ALLOW = ["git status", "git diff", "git log", "git show", "git grep", "grep", "find", "sed -n", "awk",
         "tar -tf", "tar -tvf", "cat", "ls", "head", "rg", "env", "sort", "vim -R", "xargs", "timeout",
         "nice", "wc"]
KEEP = "the file no allowed command may change\n"

#: (command, repository kind): "hostile" sets core.fsmonitor, core.pager, an alias, a clean and
#: smudge filter and a textconv driver, each touching a marker; "extdiff" sets diff.external.
TABLE: list[tuple[str, str]] = [
    # git, under "git status", "git diff", "git log", "git show", "git grep"
    ("git status", "hostile"), ("git status -s", "hostile"), ("git status --porcelain", "hostile"),
    ("git diff", "hostile"), ("git diff --stat", "hostile"), ("git diff HEAD", "hostile"),
    ("git log --oneline", "hostile"), ("git log -p", "hostile"), ("git log --format=%H", "hostile"),
    ("git show HEAD", "hostile"), ("git grep -n a", "hostile"),
    ("git grep -O'touch PWNED-grepO' a", "hostile"), ("git grep --open-files-in-pager=./evil.sh a", "hostile"),
    ("git diff --output=keep.txt", "hostile"), ("git log --output=keep.txt", "hostile"),
    ("git show --output=keep.txt HEAD", "hostile"), ("git diff --ext-diff", "hostile"),
    ("git diff --textconv", "hostile"), ("git log --show-signature", "hostile"),
    ("git -c core.pager='touch PWNED-c' log", "hostile"), ("git -c alias.x='!touch PWNED-x' x", "hostile"),
    ("git --config-env=core.pager=HOME log", "hostile"), ("git -C . status", "hostile"),
    ("git -p log", "hostile"), ("git st", "hostile"), ("git diff --no-index a.txt keep.txt", "hostile"),
    ("git status", "extdiff"), ("git diff", "extdiff"), ("git log -p", "extdiff"),
    # find
    ("find .", "hostile"), ("find . -name '*.txt'", "hostile"), ("find . -exec touch PWNED-exec \\;", "hostile"),
    ("find . -execdir touch PWNED-execdir '{}' +", "hostile"), ("find . -ok touch PWNED-ok \\;", "hostile"),
    ("find . -okdir touch PWNED-okdir \\;", "hostile"), ("find . -delete", "hostile"),
    ("find . -name keep.txt -delete", "hostile"), ("find . -fprint PWNED-fprint", "hostile"),
    ("find . -fprintf PWNED-fprintf '%p'", "hostile"), ("find . -fls PWNED-fls", "hostile"),
    ("find . -fprint0 PWNED-fprint0", "hostile"),
    # sed, under "sed -n"
    ("sed -n 1p a.txt", "hostile"), ("sed -n 1,3p a.txt", "hostile"), ("sed -n p a.txt", "hostile"),
    ("sed -n '1e touch PWNED-sede' a.txt", "hostile"), ("sed -n 's/a/touch PWNED-sedse/e' a.txt", "hostile"),
    ("sed -n 's/a/b/w PWNED-sedw' a.txt", "hostile"), ("sed -n '1w PWNED-sedw2' a.txt", "hostile"),
    ("sed -n '1W PWNED-sedW' a.txt", "hostile"), ("sed -n -i 's/the/XX/' keep.txt", "hostile"),
    ("sed -n --in-place=.bak p keep.txt", "hostile"), ("sed -n -f script.sed a.txt", "hostile"),
    ("sed -n '1r keep.txt' a.txt", "hostile"),
    # awk
    ("awk '{print $1}' a.txt", "hostile"), ("awk 'END{print NR}' a.txt", "hostile"),
    ("awk 'BEGIN{system(\"touch PWNED-awk\")}'", "hostile"), ("awk 'BEGIN{print 1 > \"PWNED-awkw\"}'", "hostile"),
    ("awk 'BEGIN{print 1 | \"sh ./evil.sh\"}'", "hostile"), ("awk 'BEGIN{\"./evil.sh\" | getline}'", "hostile"),
    ("awk -f prog.awk a.txt", "hostile"), ("awk -e 'BEGIN{system(\"./evil.sh\")}'", "hostile"),
    # tar, under "tar -tf" and "tar -tvf"
    ("tar -tf a.tar", "hostile"), ("tar -tvf a.tar", "hostile"),
    ("tar -tf a.tar --checkpoint=1 --checkpoint-action=exec=./evil.sh", "hostile"),
    ("tar -tf a.tar --to-command=./evil.sh", "hostile"), ("tar -tf a.tar -x", "hostile"),
    ("tar -tf a.tar --use-compress-program=./evil.sh", "hostile"), ("tar -tf a.tar -I ./evil.sh", "hostile"),
    ("tar -tf evilhost:a.tar", "hostile"), ("tar -tf a.tar --info-script=./evil.sh", "hostile"),
    ("tar -tvf a.tar --rsh-command=./evil.sh", "hostile"),
    # editors, under "vim -R"
    ("vim -R -es -c '!touch PWNED-vim' -c q", "hostile"), ("vim -R a.txt", "hostile"),
    # wrappers: "env", "xargs", "timeout", "nice"
    ("env", "hostile"), ("env ls", "hostile"), ("env git status", "hostile"), ("env touch PWNED-env", "hostile"),
    ("env -S 'touch PWNED-envS'", "hostile"), ("env LD_PRELOAD=./x.so ls", "hostile"),
    ("env sh -c 'touch PWNED-envsh'", "hostile"), ("env python3 -c 'open(\"PWNED-envpy\",\"w\")'", "hostile"),
    ("env find . -delete", "hostile"), ("xargs touch PWNED-xargs", "hostile"), ("xargs -a a.txt ls", "hostile"),
    ("xargs sh ./evil.sh", "hostile"), ("timeout 5 ls", "hostile"), ("timeout 5 touch PWNED-timeout", "hostile"),
    ("timeout 5 ./evil.sh", "hostile"), ("nice cat a.txt", "hostile"), ("nice -n 5 rm keep.txt", "hostile"),
    # rg
    ("rg a", "hostile"), ("rg --pre ./evil.sh a", "hostile"), ("rg --pre=./evil.sh a", "hostile"),
    ("rg -z a", "hostile"), ("rg --search-zip a", "hostile"), ("rg --hostname-bin=./evil.sh a", "hostile"),
    # sort
    ("sort a.txt", "hostile"), ("sort -o keep.txt a.txt", "hostile"), ("sort --output=keep.txt a.txt", "hostile"),
    ("sort -ro keep.txt a.txt", "hostile"), ("sort --compress-program=./evil.sh a.txt", "hostile"),
    # plain readers, and what no prefix allows
    ("cat a.txt", "hostile"), ("ls -la", "hostile"), ("head -n 1 a.txt", "hostile"), ("wc -l a.txt", "hostile"),
    ("grep -r a .", "hostile"), ("ls; touch PWNED-chain", "hostile"), ("cat a.txt | sh", "hostile"),
    ("cat $(./evil.sh)", "hostile"), ("./evil.sh", "hostile"), ("python3 -c 'open(\"PWNED-py\",\"w\")'", "hostile"),
]

EVIL = "#!/bin/sh\necho EXECUTED\ntouch \"$(dirname \"$0\")/PWNED-$$\" 2>/dev/null\ncat\n"


def make_repo(work: Path, kind: str) -> Path:
    """A scratch repository: a committed a.txt changed since, keep.txt, a.tar, evil.sh (prints
    EXECUTED and leaves a PWNED file beside itself), and a hostile .git/config."""
    work.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(work), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": "/dev/null"}
    git = lambda *a: subprocess.run(["git", *a], cwd=work, env=env, check=True, capture_output=True)  # noqa: E731
    git("init", "-q", ".")
    (work / "a.txt").write_text("alpha a\nbeta b\ngamma a\n")
    (work / "keep.txt").write_text(KEEP)
    (work / ".gitattributes").write_text("a.txt filter=x diff=y\n")
    git("add", "a.txt", "keep.txt", ".gitattributes")
    git("-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-qm", "one")
    (work / "a.txt").write_text("alpha a\nbeta b\ngamma a\ndelta a\n")
    os.utime(work / "a.txt", (946684800, 946684800))  # stat data the index must refresh
    evil = work / "evil.sh"
    evil.write_text(EVIL)
    evil.chmod(0o755)
    (work / "script.sed").write_text("1e ./evil.sh\n")
    (work / "prog.awk").write_text('BEGIN { system("./evil.sh") }\n')
    with tarfile.open(work / "a.tar", "w") as tar:
        tar.add(work / "a.txt", arcname="a.txt")
    hook = f"sh {evil}"
    if kind == "hostile":
        for key, value in (("core.fsmonitor", hook), ("core.pager", hook), ("alias.st", f"!{hook}"),
                           ("filter.x.clean", hook), ("filter.x.smudge", hook), ("diff.y.textconv", hook),
                           ("pager.log", hook)):
            git("config", key, value)
    else:
        git("config", "diff.external", hook)
    return work


def marks(work: Path) -> list[str]:
    return sorted(p.name for p in work.iterdir() if p.name.startswith("PWNED"))


@pytest.fixture
def repos(tmp_path: Path) -> dict[str, Path]:
    return {kind: make_repo(tmp_path / kind, kind) for kind in ("hostile", "extdiff")}


def test_the_table_has_80_commands_of_every_kind() -> None:
    assert len(TABLE) >= 80
    text = "\n".join(c for c, _ in TABLE)
    for needle in ("git grep -O", "--output", "find . -exec", "-delete", "sed -n '1e", "system(",
                   "--checkpoint-action", "vim -R", "env touch", "rg --pre", "sort -o", "xargs"):
        assert needle in text, needle


def test_the_hostile_repository_is_real(repos: dict[str, Path]) -> None:
    """Plain git, without wisp's settings, runs the repository's programs: the trap is not a straw man."""
    env = {"PATH": os.environ["PATH"], "HOME": str(repos["hostile"]), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "status"], cwd=repos["hostile"], env=env, capture_output=True, timeout=30)
    assert marks(repos["hostile"])
    out = subprocess.run(["git", "diff"], cwd=repos["extdiff"], env=env, capture_output=True, text=True,
                         timeout=30)
    assert "EXECUTED" in out.stdout and marks(repos["extdiff"])


async def _decide(policy: Approvals, command: str, work: Path) -> bool:
    decision = await policy(ApprovalRequest("run_command", command, work))
    return decision.allowed


async def test_no_allowed_command_writes_or_runs_another_program_outside_the_sandbox(
        repos: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The decision part alone: the tables and the git settings hold without bubblewrap (each
    allowed command runs straight under /bin/sh, with the environment wisp gives commands)."""
    monkeypatch.setattr(Approvals, "sandboxed", lambda self: True)  # the allow list is in use
    cfg = Config(tmp_path / "config.json", {"tools.run_command.allow": ALLOW})
    policy = Approvals(cfg, None, WorkspaceAllowList(tmp_path / "approvals.json"), ask=None, transport="ask")
    asked, ran, harmed = [], [], []
    for command, kind in TABLE:
        work = repos[kind]
        if not await _decide(policy, command, work):
            asked.append((command, kind))
            continue
        ran.append((command, kind))
        env = allow_list_environment(cfg, work, command)
        out = subprocess.run(shell_argv(command), cwd=work, env=env, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=30)
        if marks(work) or "EXECUTED" in out.stdout + out.stderr or (work / "keep.txt").read_text() != KEEP:
            harmed.append((command, marks(work), out.stdout[-300:]))
            for name in marks(work):
                (work / name).unlink()
            (work / "keep.txt").write_text(KEEP)
    print(f"\noutside the sandbox: {len(TABLE)} commands, {len(asked)} asked, {len(ran)} ran, "
          f"{len(harmed)} wrote or ran another program")
    assert harmed == []
    assert len(ran) >= 30 and len(asked) >= 50  # both kinds are really there
    for must_run in ("git status", "git diff", "git log -p", "find .", "sed -n 1p a.txt", "tar -tf a.tar",
                     "awk '{print $1}' a.txt", "env git status", "sort a.txt"):
        assert (must_run, "hostile") in ran, must_run
    assert not [c for c, k in ran if k == "extdiff"]  # a repository naming an external diff: git asks


async def test_no_allowed_command_writes_or_runs_another_program_in_the_sandbox(
        bwrap: str, repos: dict[str, Path], tmp_path: Path) -> None:
    """The same table through run_command, as `wisp ask` runs it (no one to ask), in bubblewrap."""
    cfg = Config(tmp_path / "config.json", {"tools.run_command.allow": ALLOW})
    policy = Approvals(cfg, None, WorkspaceAllowList(tmp_path / "approvals.json"), ask=None, transport="ask")
    asked, ran, harmed = [], [], []
    for command, kind in TABLE:
        work = repos[kind]
        ctx = ToolContext(workdir=work, config=cfg, conversation_id=1, turn=1, approve=policy)
        result = await RunCommand().run({"command": command}, ctx)
        if result.meta["approval"]["choice"] != "allow_list":
            assert "exit_status" not in result.meta, command
            asked.append(command)
            continue
        ran.append(command)
        assert result.meta["sandbox"] == "read-only", command
        if marks(work) or "EXECUTED" in result.content or (work / "keep.txt").read_text() != KEEP:
            harmed.append((command, marks(work), result.content[-300:]))
    print(f"\nin the sandbox: {len(TABLE)} commands, {len(asked)} asked, {len(ran)} ran, "
          f"{len(harmed)} wrote or ran another program")
    assert harmed == []
    assert len(ran) >= 30
    status = await RunCommand().run({"command": "git status"},
                                    ToolContext(workdir=repos["hostile"], config=cfg, approve=policy))
    assert status.ok and "a.txt" in status.content, status.content  # git really ran, in the sandbox
