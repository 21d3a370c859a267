"""The replay check of the layered context (issue "Layered context", "Tests and what this must show").

A scripted 60-turn session against the fake endpoint: file reads, test
runs, decisions, a branch change, a task, and long replies. Then 20
questions whose answers lie in early turns (which test failed first, the
branch, the chosen library, …). For every question the answer must be in
the composed context of the last request, or one named recall away: an
entry the context names (``entry N``) on a line that also names the
question's clue (the file, the command) holds it, read back in full. The
last request must use at most a quarter of the tokens of the full history
(every entry whole, as a request without layers would send it).

    python benchmarks/replay_context.py [--window 4096] [--reserve 1024] [--small-model] [--verbose]

Prints the coverage and the token ratio. tests/test_context_replay.py runs
the same function and asserts on it.

``--small-model`` (issue "Compaction you can see and trust"): the fake's
summaries miss half the identifiers, first time and when asked again, as a
small model's do; wisp completes each version itself, and the coverage must
stay at 98 % or more. The report then also gives the identifier coverage of
every summary version (what the coverage check requires, found in the
summary, the facts or the references) and how many versions wisp completed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.support.fakes

TURNS = 60

WORDS = ("the client keeps its state in one place and every request goes through the same path so that "
         "retries timeouts and errors are handled once we looked at how the session is opened how the token "
         "is refreshed and what happens when the server is slow or answers with a redirect the plan is to "
         "keep the change small test it well and write down what we learn along the way").split()


def filler(rng: random.Random, words: int) -> str:
    """Plain prose without identifiers, ``words`` words long."""
    out = []
    for i in range(words):
        w = rng.choice(WORDS)
        out.append(w.capitalize() if i % 14 == 0 else w)
    text = " ".join(out)
    return ". ".join(s.strip() for s in text.split("  ")) + "."


def project_files(root: Path) -> None:
    """The working directory's files (and a git HEAD on main)."""
    (root / ".git").mkdir(parents=True, exist_ok=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "src" / "app").mkdir(parents=True, exist_ok=True)
    (root / "docs").mkdir(exist_ok=True)
    (root / "tests").mkdir(exist_ok=True)
    rng = random.Random(7)
    config = ['"""Settings of the API client."""', "", "REQUEST_TIMEOUT = 30  # seconds",
              'LOG_LEVEL = "INFO"', "BASE_URL = \"https://api.example.test\"", ""]
    for i in range(110):
        config.append(f"OPTION_{i:03d} = {rng.randint(0, 999)}  # {filler(rng, 6)}")
    (root / "src/app/config.py").write_text("\n".join(config) + "\n")
    retry = ['"""Retries with backoff."""', "", "MAX_RETRIES = 5", "BASE_DELAY = 0.5", ""]
    for i in range(70):
        retry.append(f"def step_{i}(attempt):  # {filler(rng, 5)}\n    return BASE_DELAY * 2 ** attempt")
    (root / "src/app/retry.py").write_text("\n".join(retry) + "\n")
    deploy = ["# Deploying", "", "The server listens on port 8443 behind the proxy.", ""]
    deploy += [filler(rng, 18) for _ in range(60)]
    (root / "docs/deploy.md").write_text("\n".join(deploy) + "\n")
    design = ["# Design", ""] + [filler(rng, 20) for _ in range(40)] + \
        ["", "The cache TTL is 300 seconds, after which entries are fetched again.", ""] + \
        [filler(rng, 20) for _ in range(50)]
    (root / "docs/design.md").write_text("\n".join(design) + "\n")
    (root / "pyproject.toml").write_text('[project]\nname = "apiclient"\nrequires-python = ">=3.11"\n' +
                                         "".join(f'# {filler(rng, 8)}\n' for _ in range(40)))
    (root / "src/app/settings.toml").write_text('oauth_client_id = "wisp-demo-client"\n')


def pytest_output(target: str, failing: list[str], passed: int) -> tuple[str, int]:
    """A pytest run's output (with warnings to give it a realistic size) and its exit status."""
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0",
             f"collected {passed + len(failing)} items", ""]
    lines.append(f"{target} " + "." * passed + "F" * len(failing) + "  [100%]")
    if failing:
        lines += ["", "=================================== FAILURES ==================================="]
        for name in failing:
            short = name.split("::")[-1]
            lines += [f"____________________________ {short} _____________________________", "",
                      f"    def {short}(client):", "        resp = client.get('/x')",
                      ">       assert resp.status_code == 302", "E       assert 200 == 302", "",
                      f"{name.split('::')[0]}:41: AssertionError"]
    lines += ["=============================== warnings summary ==============================="]
    for i in range(40):
        lines.append(f"tests/conftest.py:{i + 10}: DeprecationWarning: the fixture style {i} is old")
    if failing:
        lines += ["=========================== short test summary info ============================"]
        lines += [f"FAILED {n} - assert 200 == 302" for n in failing]
        lines.append(f"========================= {len(failing)} failed, {passed} passed in 0.42s =========================")
        return "\n".join(lines), 1
    lines.append(f"============================== {passed} passed in 0.40s ===============================")
    return "\n".join(lines), 0


class RunTests:
    """A stub command tool (not read-only) that "runs" a command and returns
    canned output with its exit status, as run_command would."""

    name = "run_tests"
    read_only = False
    description = "Run a test or lint command in the working directory."
    parameters: dict[str, Any] = {"type": "object", "properties": {"command": {"type": "string"}},
                                  "required": ["command"]}

    def __init__(self) -> None:
        self.outputs: dict[str, list[tuple[str, int]]] = {}

    def queue(self, command: str, output: str, status: int) -> None:
        self.outputs.setdefault(command, []).append((output, status))

    async def run(self, arguments: dict[str, Any], ctx: Any) -> Any:
        from wisp.core.tools.base import ToolResult

        command = arguments.get("command", "")
        output, status = self.outputs.get(command, [("(nothing queued)", 0)]).pop(0)
        return ToolResult(output, ok=status == 0, meta={"exit_status": status, "command": command})


@dataclass
class Question:
    """A question about an early turn: the ``answer`` text, and a ``clue``
    that names where it came from (a file, a command)."""

    text: str
    answer: str
    clue: str

    def found_in(self, text: str) -> bool:
        """Whether the answer is in ``text`` as a whole phrase (``main`` is not
        found in ``remains``)."""
        return re.search(r"(?<![\w-])" + re.escape(self.answer) + r"(?![\w-])", text) is not None


QUESTIONS = [
    Question("Which test failed first?", "test_login_redirect", "tests/test_auth.py"),
    Question("Which branch did the session start on?", "main", "branch"),
    Question("Which HTTP library did we choose?", "httpx", "http library"),
    Question("What is the task's objective?", "the client retries 5 times", "objective"),
    Question("What timeout does src/app/config.py set?", "REQUEST_TIMEOUT = 30", "src/app/config.py"),
    Question("Which port does the server listen on?", "port 8443", "docs/deploy.md"),
    Question("Which database did we decide on?", "SQLite", "database"),
    Question("Which lint error did ruff report first?", "E501", "ruff"),
    Question("Which commit introduced the retry bug?", "3f9a2c1b", "commit"),
    Question("Which test failed in the second auth run?", "test_refresh_token_expiry", "tests/test_auth.py"),
    Question("How should answers be written?", "short, with code", "preference"),
    Question("What is the release codename?", "BLUE HERON", "codename"),
    Question("How many retries does src/app/retry.py allow?", "MAX_RETRIES = 5", "src/app/retry.py"),
    Question("Which file holds the OAuth client id?", "src/app/settings.toml", "settings.toml"),
    Question("Which error code does the API give for an expired token?", "AUTH-401", "AUTH"),
    Question("Which branch are we on now?", "feature/retry-backoff", "branch"),
    Question("Which test failed in tests/test_retry.py?", "test_backoff_caps_delay", "tests/test_retry.py"),
    Question("What cache TTL does docs/design.md give?", "TTL is 300 seconds", "docs/design.md"),
    Question("Which Python does pyproject.toml require?", 'requires-python = ">=3.11"', "pyproject.toml"),
    Question("What log level does src/app/config.py default to?", 'LOG_LEVEL = "INFO"', "src/app/config.py"),
]


def script(rng: random.Random) -> dict[int, dict[str, Any]]:
    """What happens in each turn: commands before it, a branch change, tool
    steps (``read`` PATH, ``test`` COMMAND OUTPUT STATUS), the prompt and the reply."""
    s: dict[int, dict[str, Any]] = {}
    s[1] = {"prompt": "Let's work on the API client in this repository. Read src/app/config.py first.",
            "steps": [("read", "src/app/config.py")],
            "reply": "The client's settings: REQUEST_TIMEOUT is 30 seconds and LOG_LEVEL is INFO. " + filler(rng, 90)}
    s[2] = {"before": ["/fact preference answers = short, with code"],
            "prompt": "Keep answers short and show code when it helps. What does docs/deploy.md say?",
            "steps": [("read", "docs/deploy.md")],
            "reply": "It says the server listens on port 8443 behind the proxy. " + filler(rng, 80)}
    s[3] = {"before": ["/task add retry with backoff to the API client; objective: tests/test_retry.py passes and "
                       "the client retries 5 times"],
            "prompt": "That is the task now. Where should retries live?", "steps": [],
            "reply": "In src/app/retry.py, beside the backoff helpers. " + filler(rng, 110)}
    s[4] = {"prompt": "Run the auth tests to see where we stand.",
            "steps": [("test", "pytest -q tests/test_auth.py", *pytest_output("tests/test_auth.py",
                                                                             ["tests/test_auth.py::test_login_redirect"], 11))],
            "reply": "One auth test fails: the login redirect answers 200 instead of 302. " + filler(rng, 90)}
    s[5] = {"prompt": "The OAuth client id lives in src/app/settings.toml, keep that in mind.", "steps": [],
            "reply": "Noted. " + filler(rng, 60)}
    s[6] = {"before": ["/fact decision http library = httpx"],
            "prompt": "We'll use httpx for HTTP. How do we set timeouts with it?", "steps": [],
            "reply": "Pass a timeout to the client and let retries wrap each request. " + filler(rng, 140)}
    s[7] = {"before": ["/fact entity release codename = BLUE HERON"],
            "prompt": "The release is called BLUE HERON. Read src/app/retry.py.",
            "steps": [("read", "src/app/retry.py")],
            "reply": "MAX_RETRIES is 5 and the delay doubles from BASE_DELAY. " + filler(rng, 90)}
    s[8] = {"prompt": "When did the retry bug come in?", "steps": [],
            "reply": "The retry bug came in with commit 3f9a2c1b, which removed the jitter. " + filler(rng, 100)}
    s[9] = {"before": ["/fact decision database = SQLite"],
            "prompt": "We store the token cache in SQLite. Anything to watch?", "steps": [],
            "reply": "Open it once and keep writes short. " + filler(rng, 130)}
    s[10] = {"prompt": "Read docs/design.md for the cache rules.", "steps": [("read", "docs/design.md")],
             "reply": "The design keeps cached entries for a while, then fetches them again. " + filler(rng, 90)}
    s[12] = {"prompt": "Run the linter.",
             "steps": [("test", "ruff check src/",
                        "src/app/client.py:88:101: E501 Line too long (104 > 100)\n"
                        + "\n".join(f"src/app/x{i}.py:1:1: I001 Import block is un-sorted" for i in range(25))
                        + "\nFound 26 errors.", 1)],
             "reply": "Ruff found a long line and unsorted imports. " + filler(rng, 70)}
    s[14] = {"prompt": "What does the API answer for an expired token?", "steps": [],
             "reply": "The API answers AUTH-401 for an expired token, with a JSON body. " + filler(rng, 100)}
    s[16] = {"prompt": "Run the auth tests again after the redirect fix.",
             "steps": [("test", "pytest -q tests/test_auth.py",
                        *pytest_output("tests/test_auth.py", ["tests/test_auth.py::test_refresh_token_expiry"], 11))],
             "reply": "The redirect passes now; the refresh test fails on expiry. " + filler(rng, 90)}
    s[18] = {"prompt": "Read pyproject.toml.", "steps": [("read", "pyproject.toml")],
             "reply": "It needs Python 3.11 or newer. " + filler(rng, 60)}
    s[24] = {"prompt": "Run the retry tests.",
             "steps": [("test", "pytest -q tests/test_retry.py",
                        *pytest_output("tests/test_retry.py", ["tests/test_retry.py::test_backoff_caps_delay"], 7))],
             "reply": "The cap on the delay is not applied yet. " + filler(rng, 90)}
    s[30] = {"branch": "feature/retry-backoff",
             "prompt": "I switched to a feature branch for this work. Carry on.", "steps": [],
             "reply": "Carrying on on the new branch. " + filler(rng, 100)}
    s[40] = {"prompt": "Run the whole suite.",
             "steps": [("test", "pytest -q", *pytest_output("tests", [], 24))],
             "reply": "Everything passes. " + filler(rng, 80)}
    s[52] = {"prompt": "Run the whole suite once more.",
             "steps": [("test", "pytest -q", *pytest_output("tests", [], 24))],
             "reply": "Still green. " + filler(rng, 80)}
    for n in range(1, TURNS + 1):
        s.setdefault(n, {"prompt": f"Next, about step {n}: " + filler(rng, 25), "steps": [],
                         "reply": filler(rng, rng.randint(110, 190))})
    s[TURNS]["prompt"] = "Before we stop, sum up what we know. " + " ".join(q.text for q in QUESTIONS)
    return s


@dataclass
class ReplayResult:
    """What the replay found: per question where its answer was
    (``context``, ``recall entry N`` or ``missing``), the last request's and
    the full history's tokens (wisp's estimate), and what the summary did."""

    answers: list[tuple[Question, str]]
    last_tokens: int
    full_tokens: int
    summary_versions: int
    side_calls: int
    requests: int
    facts: list[str] = field(default_factory=list)
    last_text: str = ""
    requests_with_references: int = 0
    #: Per summary version: (required identifiers, those found in its summary layer, facts and references).
    version_coverage: list[tuple[int, int]] = field(default_factory=list)
    #: Summary versions with a part wisp completed, and the identifiers the model's parts left out.
    completed_versions: int = 0
    model_missed: int = 0
    mode: str = "terse"

    @property
    def identifier_coverage(self) -> float:
        """The share of required identifiers every version keeps (1.0 with no version)."""
        need = sum(n for n, _ in self.version_coverage)
        return sum(k for _, k in self.version_coverage) / need if need else 1.0

    @property
    def covered(self) -> int:
        return sum(1 for _, where in self.answers if where != "missing")

    @property
    def ratio(self) -> float:
        return self.last_tokens / self.full_tokens if self.full_tokens else 0.0

    def report(self) -> str:
        in_ctx = sum(1 for _, w in self.answers if w == "context")
        lines = [f"coverage: {self.covered}/{len(self.answers)} answers "
                 f"({in_ctx} in the last request's context, {self.covered - in_ctx} one named recall away)",
                 f"tokens: last request {self.last_tokens:,} of a full history of {self.full_tokens:,} "
                 f"= ratio {self.ratio:.3f} (at most 0.25)",
                 f"running summary ({self.mode} summariser): {self.summary_versions} versions from "
                 f"{self.side_calls} side calls; {self.requests} model requests, "
                 f"{self.requests_with_references} with tool outputs as references",
                 f"identifiers: {self.identifier_coverage:.1%} of those the coverage check requires are kept "
                 f"by every version; {self.completed_versions} versions completed by wisp "
                 f"({self.model_missed} identifiers the model's parts left out)"]
        for q, where in self.answers:
            lines.append(f"  [{where:>16}] {q.text} -> {q.answer}")
        return "\n".join(lines)


def _request_text(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    parts = []
    for m in messages:
        parts.append(str(m.get("content") or ""))
        for c in m.get("tool_calls") or []:
            parts.append(json.dumps(c, ensure_ascii=False))
    parts.append(json.dumps(tools, ensure_ascii=False))
    return "\n".join(parts)


async def run_replay(home: Path, workdir: Path, *, window: int = 4096, reserve: int = 1024,
                     verbose: bool = False, small_model: bool = False) -> ReplayResult:
    """Run the 60-turn session in ``workdir`` with WISP_HOME ``home`` (set in
    the environment by the caller) and check the 20 questions; with
    ``small_model`` the fake's summaries miss half the identifiers."""
    from tests.support.context_fakes import CountingOllama
    from tests.support.sidecalls import SummarisingSideCall
    from tests.support.fakes import reply, text, tool_call
    from wisp.core.commands import run_command
    from wisp.core.context.history import entries_to_messages
    from wisp.core.context.recall import recall_entry
    from wisp.core.context.references import referenced_entries
    from wisp.core.tokens import estimate_messages
    from wisp.core.context.composer import SYSTEM_RULES
    from wisp.core.session import Session, SessionOptions

    project_files(workdir)
    rng = random.Random(42)
    plan = script(rng)
    side = SummarisingSideCall("small" if small_model else "terse")
    runner = RunTests()
    with CountingOllama() as srv:
        (home / "config.json").write_text(json.dumps({
            "model": {"provider": "ollama", "endpoint": srv.base_url, "name": "replay-model",
                      "context_window": window, "timeout_s": 10, "load_wait_s": 1},
            "context": {"reserve": reserve}, "tools": {"enabled": ["read_file"]}}))
        session = await Session.open(SessionOptions(workdir=workdir, tools=["read_file"], side_call=side,
                                                    extra_tools=(runner,)))
        try:
            assert await session.connect(), session.endpoint_error
            for n in range(1, TURNS + 1):
                turn = plan[n]
                for cmd in turn.get("before", []):
                    result = await run_command(session, cmd)
                    assert not result.error, result.text
                if turn.get("branch"):
                    (workdir / ".git" / "HEAD").write_text(f"ref: refs/heads/{turn['branch']}\n")
                for step in turn["steps"]:
                    if step[0] == "read":
                        srv.push(reply(text("Reading it."), tool_call("read_file", {"path": step[1]}),
                                       finish="tool_calls", usage=None))
                    else:
                        runner.queue(step[1], step[2], step[3])
                        srv.push(reply(text("Running it."), tool_call("run_tests", {"command": step[1]}),
                                       finish="tool_calls", usage=None))
                srv.push(reply(text(turn["reply"]), usage=None))
                async for item in session.run_turn(turn["prompt"]):
                    if verbose and type(item).__name__ in ("SummaryChanged", "FactChanged", "Notice", "Error"):
                        print(f"  turn {n}: {item}")
            conversation = session.conversation_id
            tools = session.agent.tools.schemas()
            composed = [body["messages"] for body in srv.chat_bodies]  # every request, as sent
            last = composed[-1]
            last_text = _request_text(last, tools)
            entries = await session.store.entries(conversation)
            full = [{"role": "system", "content": SYSTEM_RULES}, *entries_to_messages(entries)]
            full_tokens = estimate_messages(full, tools)
            last_tokens = estimate_messages(last, tools)
            answers: list[tuple[Question, str]] = []
            lines = last_text.split("\n")
            for q in QUESTIONS:
                if q.found_in(last_text):
                    answers.append((q, "context"))
                    continue
                where = "missing"
                for line in lines:
                    if q.clue not in line:
                        continue
                    for number in referenced_entries(line):
                        recalled = await recall_entry(session.store, session.audit, conversation, number)
                        if recalled is not None and q.found_in(recalled.content):
                            where = f"recall entry {number}"
                            break
                    if where != "missing":
                        break
                answers.append((q, where))
            versions = await session.context.summaries.versions(conversation)
            facts = [f"{f.label} = {f.value} [{f.source}]" for f in await session.context.facts.current(conversation)]
            coverage = _version_coverage(versions, session.context.flags, facts)
            with_refs = sum(1 for msgs in composed
                            if any(m.get("role") == "tool" and str(m.get("content", "")).startswith("[output of entry")
                                   for m in msgs))
            return ReplayResult(answers, last_tokens, full_tokens, len(versions), len(side.calls),
                                len(srv.chat_bodies), facts, last_text, with_refs, coverage,
                                sum(1 for v in versions if v.completion), sum(len(v.missed) for v in versions),
                                side.mode)
        finally:
            await session.close()


def _version_coverage(versions: list[Any], flags: Any, facts: list[str]) -> list[tuple[int, int]]:
    """For each version: how many identifiers the coverage check requires of
    its turns, and how many its summary layer (text and references) and the
    facts hold."""
    from wisp.core.context.coverage import Item, is_present
    from wisp.core.context.summary import summary_layer_text

    out = []
    for v in versions:
        layer, _ = summary_layer_text(v, flags)
        haystack = "\n".join([layer, *facts])
        keys = {k for turn in v.covers for k in v.items.get(turn, [])}
        found = sum(1 for k in keys if is_present(Item(*k.split(":", 1)), haystack))
        out.append((len(keys), found))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, default=4096, help="the model's context window (tokens)")
    parser.add_argument("--reserve", type=int, default=1024, help="config context.reserve (tokens)")
    parser.add_argument("--verbose", action="store_true", help="print facts, summaries and notices as they come")
    parser.add_argument("--small-model", action="store_true",
                        help="the fake's summaries miss half the identifiers, as a small model's do")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="wisp-replay-home-"))
    os.environ["WISP_HOME"] = str(home)
    workdir = Path(tempfile.mkdtemp(prefix="wisp-replay-work-"))
    result = asyncio.run(run_replay(home, workdir, window=args.window, reserve=args.reserve, verbose=args.verbose,
                                    small_model=args.small_model))
    print(result.report())
    ok = result.covered == len(result.answers) and result.ratio <= 0.25
    if args.small_model:
        ok = ok and result.covered / len(result.answers) >= 0.98 and result.identifier_coverage >= 0.98
    print("replay check:", "passed" if ok else "FAILED")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
