"""The held-out replay: conversations of one kind, made by seed, and 20 questions about their early turns.

A generator writes a 60-turn working session on a small software project,
different in content, order and phrasing for every seed: the services,
hosts, people, numbers and versions come from pools. The facts the 20
questions ask about are established in turns 1–20, in the ways a real
conversation establishes them:

- ``stated``: the person says it in plain words ("The billing service
  listens on port 8437.", "We run 12 workers in production.");
- ``remembered``: the person asks it be kept ("Remember that staging is on
  host bravo-3.internal.");
- ``corrected``: the person corrects an earlier statement (a version and its
  change, a time that moved); the question asks for the value now;
- ``read``: a ``read_file`` of a config whose content holds the value;
- ``output``: a test or build run whose output holds an error code and its
  cause;
- ``reply``: the model's reply states a finding.

Turns 21–60 (and the early turns no fact needs) are filler work: reads of
long files, runs with long outputs, long prose prompts and long replies, so
that the running summary is written several times. No later turn repeats an
answer.

Three settings (``--setting``):

- ``faithful``: a summariser that keeps what it is given (it copies the
  turns' key sentences), an 8,192-token window, an Ollama-like endpoint
  that counts prompt tokens at about four characters a token;
- ``small``: a small model's summaries (half the identifiers, none of the
  person's words, and for some seeds a summary about something else
  entirely) at a 4,096-token window, on the same endpoint;
- ``old-llama``: the small model's summaries with the chat going to a server
  like an older llama.cpp: OpenAI-compatible, a tokenizer denser than
  wisp's estimate, a refusal for size that gives no count, and no usage in
  its stream.

The measures, for the last request of the session:

- ``in reach``: the share of answers in the request's text, or in an entry
  the request names (``entry N`` anywhere in it), read back whole;
- ``by search``: the share found with one search whose words are the
  question's content words (stopwords removed), run through the memory
  tool as the model would (``recall WORD WORD …``); found when the answer is
  in the result or in an entry the result names. Where the memory tool does
  not search yet (the request is an ``error:``), the search is made here
  over the store's entries with SQLite FTS5 (bm25, the first five entries)
  and the report says so;
- ``ratio``: the last request's tokens over the full history's (every entry
  whole, as a request without layers would send it), both by wisp's
  estimate; at most 0.25;
- ``failed turns``: turns that ended in error (the store's turn states, or
  an ``Error`` event); none.

    python benchmarks/replay_heldout.py --seed 3 --setting small [--verbose]

Prints the figures and every question with its kind, the turn that
established it and where its answer was found; exits 1 when a threshold is
not met. tests/unit/test_replay_heldout.py runs the same function.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sqlite3
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.support

TURNS = 60
EARLY = 20
QUESTIONS = 20
SETTINGS = ("faithful", "small", "old-llama")
#: The thresholds every setting must meet.
IN_REACH = 0.95
BY_SEARCH = 0.98
RATIO = 0.25

# --- pools --------------------------------------------------------------------------------

SERVICES = ["billing", "ledger", "gateway", "notifier", "scheduler", "inventory", "checkout", "ingest",
            "payments", "reporting", "catalog", "shipping", "accounts", "metering", "search", "exporter"]
PROJECTS = ["harbor", "lantern", "quarry", "meadow", "juniper", "tundra", "osprey", "cobalt", "willow", "ember"]
HOST_WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "kilo", "lima", "oscar", "tango"]
DOMAINS = ["internal", "corp", "lan", "prod.local"]
PEOPLE = ["Priya", "Marek", "Aiko", "Tomasz", "Leila", "Jonas", "Ngozi", "Sven", "Ines", "Ravi", "Olumide",
          "Katja", "Hamid", "Beatriz", "Yusuf", "Mirela"]
REGIONS = ["eu-west-1", "eu-central-1", "us-east-2", "us-west-2", "ap-south-1", "ap-northeast-1", "ca-central-1"]
JOBS = ["backup", "reindex", "export", "cleanup", "reconcile", "compaction", "digest"]
LIBS = ["asyncpg", "redis-py", "grpcio", "pydantic", "celery", "protobuf", "sqlalchemy", "uvicorn", "boto3"]
PURPOSES = [("the task queue", ["celery", "dramatiq", "arq", "rq"]),
            ("schema validation", ["pydantic", "attrs", "marshmallow", "msgspec"]),
            ("the HTTP client", ["httpx", "aiohttp", "requests", "urllib3"]),
            ("metrics", ["prometheus-client", "statsd", "opentelemetry"]),
            ("feature flags", ["unleash", "flagsmith", "growthbook"])]
DB_WORDS = ["orders", "ledger", "events", "accounts", "usage", "audit", "catalog"]
ERROR_PREFIXES = ["E", "ERR-", "BLD-", "SVC", "MIG-"]
TEST_VERBS = ["rounds", "retries", "expires", "rejects", "merges", "splits", "caches", "refunds", "flushes"]
TEST_NOUNS = ["refund", "invoice", "token", "batch", "cursor", "webhook", "ledger_entry", "quota", "session"]
FUNCS = ["flush_pending", "merge_batches", "load_rates", "resolve_account", "build_index", "parse_events",
         "refresh_cache", "apply_discount", "sync_quotas", "render_invoice"]
PROBLEMS = [("the slowdown", "slows every request down"), ("the memory leak", "keeps every batch alive"),
            ("the duplicate emails", "sends each notice twice"), ("the timeouts", "holds the lock too long"),
            ("the wrong totals", "rounds before it sums")]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
MONTHS = ["March", "April", "May", "June", "September", "October", "November"]

PROSE = ("the change keeps each part small and we want the code to stay easy to read so that anyone on the team "
         "can follow what happens when a request comes in goes through the queue and ends in the store we talked "
         "about the way errors are logged how retries are spaced out and what the dashboards should show when "
         "things go wrong there is also the question of how much to test by hand and how much to leave to the "
         "suite and whether the docs explain the setup well enough for someone new it would help to look at the "
         "slow paths first then the ones that fail often and only then at the rest because time is short and "
         "the release needs care the team prefers plain code over clever code and small steps over big ones").split()

STOPWORDS = set("""a an the is are was were be been do does did done we our us you your it its of to in on at for
from by with and or as which what who whom whose when where why how many much now this that these those there
here have has had can could should would will shall may might set sets say says said use used uses one any
all some into about than then so not no yes if""".split())


# --- the conversation -------------------------------------------------------------------------


@dataclass
class Question:
    """A question about an early turn: its ``text``, the exact ``answer``
    string, the ``kind`` of fact (``stated``, ``remembered``, ``corrected``,
    ``read``, ``output``, ``reply``) and the ``turn`` that established it.
    Judged by :meth:`found_in`: the answer as a whole phrase."""

    text: str
    answer: str
    kind: str
    turn: int = 0

    def found_in(self, text: str) -> bool:
        """Whether the answer is in ``text`` as a whole phrase (``12 workers``
        is not found in ``112 workers``, nor ``main`` in ``remains``)."""
        return re.search(r"(?<![\w-])" + re.escape(self.answer) + r"(?![\w-])", text) is not None

    def search_words(self) -> list[str]:
        """The question's content words, in order, once each (stopwords and
        punctuation removed; paths, hosts and codes kept whole)."""
        out: list[str] = []
        for raw in self.text.split():
            word = raw.strip("?.,;:!\"'()").lower()
            if word and word not in STOPWORDS and word not in out:
                out.append(word)
        return out


@dataclass
class Step:
    """One tool step of a turn: ``read`` a ``path``, or ``run`` a ``command``
    whose ``output`` and exit ``status`` the stub command tool returns."""

    kind: str
    path: str = ""
    command: str = ""
    output: str = ""
    status: int = 0


@dataclass
class Turn:
    """A turn as the generator wrote it: the person's ``prompt``, the tool
    ``steps`` the model takes, and the model's final ``reply``."""

    prompt: str
    steps: list[Step] = field(default_factory=list)
    reply: str = ""


@dataclass
class Conversation:
    """A generated session: ``turns`` (1–60), the working directory's
    ``files`` (path: text) and the ``questions``, each with its turn."""

    seed: int
    project: str
    turns: dict[int, Turn]
    files: dict[str, str]
    questions: list[Question]

    def write_files(self, root: Path) -> None:
        (root / ".git").mkdir(parents=True, exist_ok=True)
        (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        for path, text in self.files.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)


@dataclass
class _Moment:
    """What one fact adds to one early turn: sentences of the prompt and of
    the reply, tool steps, and the questions it answers. ``group`` and
    ``order`` keep a correction after what it corrects."""

    prompt: list[str] = field(default_factory=list)
    reply: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    group: int = -1
    order: int = 0
    alone: bool = False  # a turn of its own (a read or a run the prompt asks for)


class Generator:
    """Conversations of the kind, by seed: ``Generator(seed).conversation()``."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.used: set[str] = set()
        self.files: dict[str, str] = {}
        self._groups = 0

    # values, each used once in the conversation
    def _fresh(self, make: Any) -> Any:
        for _ in range(1000):
            value = make()
            if str(value) not in self.used:
                self.used.add(str(value))
                return value
        raise RuntimeError("the pools ran out of values")

    def _pick(self, pool: list[Any]) -> Any:
        return self._fresh(lambda: self.rng.choice(pool))

    def _host(self) -> str:
        r = self.rng
        return self._fresh(lambda: f"{r.choice(HOST_WORDS)}-{r.randint(1, 9)}.{r.choice(DOMAINS)}")

    def _version(self) -> str:
        r = self.rng
        return self._fresh(lambda: f"{r.randint(1, 5)}.{r.randint(0, 12)}.{r.randint(0, 9)}")

    def _number(self, lo: int, hi: int) -> int:
        return self._fresh(lambda: self.rng.randint(lo, hi))

    def prose(self, words: int, *, names: bool = True) -> str:
        """Plain prose without numbers or identifiers, about ``words`` words,
        now and then naming one of the project's services."""
        r = self.rng
        out: list[str] = []
        sentence: list[str] = []
        for _ in range(words):
            if names and r.random() < 0.03:
                sentence.append(f"the {r.choice(self.services)} service")
            else:
                sentence.append(r.choice(PROSE))
            if len(sentence) >= r.randint(9, 18):
                out.append(" ".join(sentence).capitalize() + ".")
                sentence = []
        if sentence:
            out.append(" ".join(sentence).capitalize() + ".")
        return " ".join(out)

    def say(self, *templates: str, **values: Any) -> str:
        return self.rng.choice(templates).format(**values)

    # --- facts -------------------------------------------------------------------------

    def _port(self) -> list[_Moment]:
        svc = self.rng.choice(self.services)
        port = self._number(7000, 9899)
        q = Question(self.say("Which port does the {svc} service listen on?", "What port is {svc} listening on?",
                              svc=svc), str(port), "stated")
        if self.rng.random() < 0.3:  # said, then corrected
            wrong = self._number(7000, 9899)
            group = self._group()
            first = _Moment(prompt=[f"The {svc} service listens on port {wrong}."], group=group, order=0)
            second = _Moment(prompt=[self.say("Sorry, I was wrong earlier: {svc} listens on port {port}, not {wrong}.",
                                              "Correction: the {svc} port is {port}; {wrong} was the old one.",
                                              svc=svc, port=port, wrong=wrong)],
                             questions=[Question(q.text, q.answer, "corrected")], group=group, order=1)
            return [first, second]
        sentence = self.say("The {svc} service listens on port {port}.", "{Svc} listens on port {port}, by the way.",
                            "For the record, port {port} is where {svc} listens.", svc=svc, Svc=svc.capitalize(),
                            port=port)
        return [_Moment(prompt=[sentence], questions=[q])]

    def _workers(self) -> list[_Moment]:
        n = self._number(3, 64)
        svc = self.rng.choice(self.services)
        sentence = self.say("We run {n} workers in production.", "Production runs {n} workers for {svc}.",
                            "In production there are {n} workers behind {svc}.", n=n, svc=svc)
        q = Question(self.say("How many workers do we run in production?",
                              "How many production workers does {svc} have?", svc=svc), f"{n} workers", "stated")
        return [_Moment(prompt=[sentence], questions=[q])]

    def _schedule(self) -> list[_Moment]:
        job = self._pick(JOBS)
        r = self.rng
        time = self._fresh(lambda: f"{r.randint(0, 5):02d}:{r.choice([0, 15, 30, 45]):02d} UTC")
        q = Question(self.say("When does the nightly {job} job start?", "What time does the {job} job run each night?",
                              job=job), time, "stated")
        if r.random() < 0.35:
            old = self._fresh(lambda: f"{r.randint(0, 5):02d}:{r.choice([0, 15, 30, 45]):02d} UTC")
            group = self._group()
            return [_Moment(prompt=[f"The nightly {job} job starts at {old}."], group=group, order=0),
                    _Moment(prompt=[self.say("The {job} job moved: it starts at {time} now.",
                                             "Update: we shifted the nightly {job} to {time}.", job=job, time=time)],
                            questions=[Question(q.text, q.answer, "corrected")], group=group, order=1)]
        sentence = self.say("The nightly {job} job starts at {time}.", "Our {job} job kicks off at {time} every night.",
                            job=job, time=time)
        return [_Moment(prompt=[sentence], questions=[q])]

    def _staging_host(self) -> list[_Moment]:
        host = self._host()
        env = self.rng.choice(["staging", "the canary", "the load-test box"])
        sentence = self.say("Remember that {env} is on host {host}.", "Keep in mind: {env} runs on {host}.",
                            "Please remember {env} lives on {host}.", env=env, host=host)
        q = Question(f"Which host is {env} on?", host, "remembered")
        return [_Moment(prompt=[sentence], questions=[q])]

    def _owner(self) -> list[_Moment]:
        person = self._pick(PEOPLE)
        svc = self.rng.choice(self.services)
        sentence = self.say("{person} owns the {svc} deploys, so ask them before touching production.",
                            "Ask {person} before any {svc} deploy; they own it.",
                            "The {svc} deploys belong to {person}.", person=person, svc=svc)
        kind = "remembered" if "Ask" in sentence else "stated"
        return [_Moment(prompt=[sentence], questions=[Question(f"Who owns the {svc} deploys?", person, kind)])]

    def _freeze(self) -> list[_Moment]:
        r = self.rng
        date = self._fresh(lambda: f"{r.choice(MONTHS)} {r.randint(2, 28)}")
        sentence = self.say("The code freeze is on {date}.", "Remember the code freeze starts {date}.",
                            "We freeze the code on {date}, no exceptions.", date=date)
        kind = "remembered" if sentence.startswith("Remember") else "stated"
        return [_Moment(prompt=[sentence], questions=[Question("When is the code freeze?", date, kind)])]

    def _region(self) -> list[_Moment]:
        region = self._pick(REGIONS)
        sentence = self.say("Production is in {region}.", "All of production sits in {region}.",
                            "We deploy production to {region} only.", region=region)
        return [_Moment(prompt=[sentence], questions=[Question("Which region is production in?", region, "stated")])]

    def _retention(self) -> list[_Moment]:
        days = self._number(7, 400)
        kind_of = self.rng.choice(["logs", "audit records", "raw events"])
        sentence = self.say("We keep {what} for {days} days.", "{What} are kept {days} days, then deleted.",
                            what=kind_of, What=kind_of.capitalize(), days=days)
        return [_Moment(prompt=[sentence],
                        questions=[Question(f"How long do we keep {kind_of}?", f"{days} days", "stated")])]

    def _database(self) -> list[_Moment]:
        svc = self.rng.choice(self.services)
        db = self._fresh(lambda: f"{self.rng.choice(DB_WORDS)}_v{self.rng.randint(2, 9)}")
        sentence = self.say("The {svc} data lives in the {db} database.", "{Svc} writes to the {db} database.",
                            svc=svc, Svc=svc.capitalize(), db=db)
        return [_Moment(prompt=[sentence],
                        questions=[Question(f"Which database holds the {svc} data?", db, "stated")])]

    def _decision(self) -> list[_Moment]:
        purpose, options = self.rng.choice([p for p in PURPOSES if p[0] not in self.used] or PURPOSES)
        self.used.add(purpose)
        lib = self._pick(options)
        sentence = self.say("We decided to use {lib} for {purpose}.", "Let's go with {lib} for {purpose}.",
                            "For {purpose} we'll use {lib}; that's settled.", lib=lib, purpose=purpose)
        return [_Moment(prompt=[sentence],
                        questions=[Question(f"Which library did we pick for {purpose}?", lib, "stated")])]

    def _version_change(self) -> list[_Moment]:
        lib = self._pick(LIBS)
        old, new = sorted((self._version(), self._version()), key=lambda v: tuple(map(int, v.split("."))))
        group = self._group()
        first = _Moment(prompt=[self.say("We're on {lib} {old} at the moment.", "The service pins {lib} {old}.",
                                         lib=lib, old=old)], group=group, order=0)
        second = _Moment(prompt=[self.say("Correction: we moved from {lib} {old} to {new} last week.",
                                          "Actually we upgraded {lib} from {old} to {new}.", lib=lib, old=old,
                                          new=new)],
                         questions=[Question(f"Which {lib} version are we on now?", new, "corrected")],
                         group=group, order=1)
        if self.rng.random() < 0.5:
            second.questions.append(Question(f"Which {lib} version did we move away from?", old, "corrected"))
        return [first, second]

    def _config_read(self) -> list[_Moment]:
        """A config file whose content holds one to three asked values among many others."""
        r = self.rng
        svc = r.choice(self.services)
        style = r.choice(["toml", "yaml", "env"])
        path = {"toml": f"config/{svc}.toml", "yaml": f"deploy/{svc}.yaml", "env": f"{svc}/.env.production"}[style]
        if path in self.files:
            path = path.replace(svc, f"{svc}-worker", 1)
        keys = [("max_connections", lambda: self._number(50, 900)), ("request_timeout_ms", lambda: self._number(1200, 9900)),
                ("queue_name", lambda: self._fresh(lambda: f"{svc}-{r.choice(['jobs', 'tasks', 'events'])}-{r.randint(2, 9)}")),
                ("cache_ttl_s", lambda: self._number(120, 3600)), ("pool_size", lambda: self._number(4, 48)),
                ("upstream_host", self._host)]
        asked = r.sample(keys, r.randint(1, 3))

        def line(key: str, value: Any) -> str:
            if style == "toml":
                return f'{key} = "{value}"' if isinstance(value, str) else f"{key} = {value}"
            if style == "yaml":
                return f"  {key}: {value}"
            return f"{key.upper()}={value}"

        lines = {"toml": [f"# settings of the {svc} service", "[service]"],
                 "yaml": [f"# {svc} deployment", f"{svc}:"], "env": [f"# {svc} production environment"]}[style]
        body: list[str] = []
        for i in range(r.randint(60, 110)):
            body.append(line(f"option_{chr(97 + i % 26)}{i}", r.choice(["true", "false", "on", "off"])))
            if i % 9 == 0:
                body.append(("# " if style != "yaml" else "  # ") + self.prose(10, names=False))
        questions = []
        for key, make in asked:
            value = make()
            text = line(key, value).strip()
            body.insert(r.randint(0, len(body)), line(key, value))
            shown = key.upper() if style == "env" else key
            questions.append(Question(f"What {shown} does {path} set?", text, "read"))
        self.files[path] = "\n".join(lines + body) + "\n"
        prompt = self.say("Read {path}.", "Let's look at {path} first.", "Can you open {path}?", path=path)
        reply = self.say("It is the {svc} service's configuration, mostly feature switches.",
                         "That's the {svc} config: a long list of options.", svc=svc)
        return [_Moment(prompt=[prompt], reply=[reply], steps=[Step("read", path=path)], questions=questions,
                        alone=True)]

    def _failing_run(self) -> list[_Moment]:
        """A test or build run that fails with an error code and its cause, in a long log."""
        r = self.rng
        svc = r.choice(self.services)
        code = self._fresh(lambda: f"{r.choice(ERROR_PREFIXES)}{r.randint(1000, 9899)}")
        host = self._host()
        port = self._number(2000, 6999)
        cause = r.choice([f"connection refused by {host}:{port}", f"certificate expired for {host}",
                          f"missing setting {svc.upper()}_API_KEY", f"disk full on /var/lib/{svc}",
                          f"schema mismatch in table {svc}_{r.choice(DB_WORDS)}"])
        self.used.add(cause)
        test = self._fresh(lambda: f"test_{r.choice(TEST_NOUNS)}_{r.choice(TEST_VERBS)}")
        kind = r.choice(["pytest", "build"])
        if kind == "pytest":
            command = f"pytest -q tests/integration/test_{svc}.py"
            passed = r.randint(8, 30)
            lines = ["============================= test session starts ==============================",
                     "platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0", f"collected {passed + 1} items",
                     "", f"tests/integration/test_{svc}.py " + "." * passed + "F", "",
                     "=================================== FAILURES ===================================",
                     f"____________________________ {test} ____________________________", "",
                     f"    def {test}(client):", f"        resp = client.post('/{svc}/run')",
                     ">       assert resp.ok", f"E       RuntimeError: [{code}] {cause}", ""]
            lines += [f"tests/conftest.py:{i + 12}: DeprecationWarning: fixture style {i} is deprecated"
                      for i in range(r.randint(25, 50))]
            lines += [f"FAILED tests/integration/test_{svc}.py::{test} - RuntimeError: [{code}] {cause}",
                      f"========================= 1 failed, {passed} passed in 3.21s ========================="]
            questions = [Question(f"Which test failed in the {svc} integration run?", test, "output")]
        else:
            command = f"make build SERVICE={svc}"
            lines = [f"[build] step {i}/40: " + self.prose(8, names=False) for i in range(1, r.randint(30, 40))]
            lines += [f"[build] ERROR {code}: {cause}", "[build] the build stopped; see the log above",
                      "make: *** [Makefile:41: build] Error 2"]
            questions = []
        questions.insert(0, Question(f"Which error code did the {svc} {'tests' if kind == 'pytest' else 'build'} "
                                     "fail with?", code, "output"))
        questions.append(Question(f"What caused the {code} failure?", cause, "output"))
        prompt = self.say("Run {command}.", "Let's see what {command} says.", "Please run {command} again.",
                          command=command)
        reply = self.say("It failed; the log has the details.", "The run failed, as expected after the change.",
                         "That did not pass. Let me look at why.")
        return [_Moment(prompt=[prompt], reply=[reply], steps=[Step("run", command=command, output="\n".join(lines),
                                                                    status=1 if kind == "pytest" else 2)],
                        questions=questions, alone=True)]

    def _finding(self) -> list[_Moment]:
        """The model's reply states a finding: where a problem comes from."""
        r = self.rng
        problem, effect = r.choice([p for p in PROBLEMS if p[0] not in self.used] or PROBLEMS)
        self.used.add(problem)
        svc = r.choice(self.services)
        func = self._pick(FUNCS)
        path = self._fresh(lambda: f"src/{svc}/{r.choice(['worker', 'views', 'store', 'jobs', 'rates'])}.py")
        prompt = self.say("Where does {problem} come from?", "Any idea what causes {problem}?",
                          "Can you find the cause of {problem}?", problem=problem)
        sentence = self.say("I found it: {problem} comes from {func}() in {path}, which {effect}.",
                            "The cause of {problem} is {func}() in {path}: it {effect}.", problem=problem, func=func,
                            path=path, effect=effect)
        questions = [Question(f"Which file did {problem} come from?", path, "reply")]
        if r.random() < 0.6:
            questions.append(Question(f"Which function caused {problem}?", f"{func}()", "reply"))
        return [_Moment(prompt=[prompt], reply=[sentence], questions=questions, alone=True)]

    def _group(self) -> int:
        self._groups += 1
        return self._groups

    # --- assembling -----------------------------------------------------------------------

    def conversation(self) -> Conversation:
        r = self.rng
        self.project = r.choice(PROJECTS)
        self.services = r.sample(SERVICES, 4)
        self.used.update(self.services)
        plain = [self._port, self._workers, self._schedule, self._staging_host, self._owner, self._freeze,
                 self._region, self._retention, self._database, self._decision]
        moments: list[_Moment] = []

        asked: set[str] = set()

        def add(made: list[_Moment]) -> None:
            for m in made:  # a question asked already (the same service twice) is not asked again
                m.questions = [q for q in m.questions if q.text not in asked]
                asked.update(q.text for q in m.questions)
            moments.extend(made)

        def count() -> int:
            return sum(len(m.questions) for m in moments)

        # every kind, then more until there are 20 questions (each plain kind at most once)
        r.shuffle(plain)
        for make in [self._config_read, self._failing_run, self._finding, self._version_change, *plain[:6]]:
            add(make())
        extra = [self._config_read, self._failing_run, self._finding, self._version_change]
        while count() < QUESTIONS:
            add(plain.pop(6)() if len(plain) > 6 and r.random() < 0.5 else r.choice(extra)())
        questions = [q for m in moments for q in m.questions]
        while len(questions) > QUESTIONS:  # drop the last question of a moment that has more than one
            m = next(m for m in reversed(moments) if len(m.questions) > 1)
            m.questions.pop()
            questions = [q for m in moments for q in m.questions]
        early = self._place(moments)
        turns: dict[int, Turn] = {}
        for n in range(1, EARLY + 1):
            here = early.get(n, [])
            if not here:
                turns[n] = self._filler_turn(n)
                continue
            prompt = [s for m in here for s in m.prompt]
            if r.random() < 0.6:
                prompt.append(self.prose(r.randint(15, 70)))
            reply = [s for m in here for s in m.reply] or [r.choice(["Noted.", "Got it.", "Understood.", "OK."])]
            reply.append(self.prose(r.randint(60, 200)))
            turns[n] = Turn(" ".join(prompt), [s for m in here for s in m.steps], " ".join(reply))
            for m in here:
                for q in m.questions:
                    q.turn = n
        for n in range(EARLY + 1, TURNS):
            turns[n] = self._filler_turn(n)
        turns[TURNS] = Turn(self.say("Let's wrap up for today. What is left to do?",
                                     "That's enough for now; give me a short plan for tomorrow."),
                            reply=self.prose(120))
        return Conversation(self.seed, self.project, turns, dict(self.files), questions)

    def _place(self, moments: list[_Moment]) -> dict[int, list[_Moment]]:
        """Moments over turns 1–20: each ``alone`` one a turn of its own, the
        others one or two to a turn; a correction after what it corrects."""
        r = self.rng
        r.shuffle(moments)
        # a correction comes after its first statement: order each group's moments as they appear
        by_group: dict[int, list[int]] = {}
        for i, m in enumerate(moments):
            if m.group >= 0:
                by_group.setdefault(m.group, []).append(i)
        for idx in by_group.values():
            ordered = sorted((moments[i] for i in idx), key=lambda m: m.order)
            for i, m in zip(idx, ordered):
                moments[i] = m
        slots: list[list[_Moment]] = []
        for m in moments:
            if not m.alone and slots and not slots[-1][0].alone and len(slots[-1]) < 2 and r.random() < 0.4 \
                    and all(o.group != m.group or m.group < 0 for o in slots[-1]):
                slots[-1].append(m)
            else:
                slots.append([m])
        while len(slots) > EARLY:  # merge the smallest neighbours of plain statements
            i = next((i for i in range(len(slots) - 1) if not slots[i][0].alone and not slots[i + 1][0].alone
                      and all(a.group != b.group or a.group < 0 for a in slots[i] for b in slots[i + 1])), None)
            if i is None:
                i = min(range(len(slots) - 1), key=lambda k: len(slots[k]) + len(slots[k + 1]))
            slots[i] += slots.pop(i + 1)
        turns = sorted(r.sample(range(1, EARLY + 1), len(slots)))
        return dict(zip(turns, slots))

    def _filler_turn(self, n: int) -> Turn:
        """Work that asks nothing the questions need: a long read, a run, a long prompt or a long reply."""
        r = self.rng
        kind = r.choice(["read", "read", "run", "prose", "reply"])
        if kind == "read":
            path = self._filler_file()
            return Turn(self.say("Read {path}.", "Open {path}, please.", "What does {path} say?", path=path),
                        [Step("read", path=path)], self.prose(r.randint(60, 160)))
        if kind == "run":
            svc = r.choice(self.services)
            command = r.choice([f"pytest -q tests/unit/test_{svc}.py", f"ruff check src/{svc}",
                                f"make lint SERVICE={svc}", f"pytest -q tests/unit"])
            passed = r.randint(12, 90)
            out = ["============================= test session starts =============================="] + \
                  [f"tests/unit/test_{svc}_{i}.py " + "." * r.randint(3, 20) for i in range(r.randint(10, 30))] + \
                  [f"tests/conftest.py:{i + 3}: DeprecationWarning: the old fixture style" for i in range(r.randint(10, 40))] + \
                  [f"============================== {passed} passed in 1.{r.randint(10, 99)}s =============================="]
            return Turn(self.say("Run {command}.", "Now run {command}.", command=command),
                        [Step("run", command=command, output="\n".join(out), status=0)],
                        r.choice(["All green.", "It passes.", "Clean run."]) + " " + self.prose(r.randint(50, 140)))
        if kind == "prose":
            return Turn(self.prose(r.randint(120, 300)), [], self.prose(r.randint(80, 200)))
        return Turn(self.say("Explain how the {svc} service handles a failed request.",
                             "What would you change in the {svc} code next?",
                             "Walk me through the {svc} request path.", svc=r.choice(self.services)),
                    [], self.prose(r.randint(200, 380)))

    def _filler_file(self) -> str:
        r = self.rng
        if self.files and r.random() < 0.2:  # a file read again
            fillers = [p for p in self.files if p.startswith(("docs/", "src/"))]
            if fillers:
                return r.choice(fillers)
        svc = r.choice(self.services)
        for _ in range(50):
            path = r.choice([f"docs/{svc}-{r.choice(['design', 'runbook', 'notes', 'faq'])}.md",
                             f"src/{svc}/{r.choice(['handlers', 'models', 'client', 'queue', 'util'])}.py"])
            if path not in self.files:
                break
        if path.endswith(".md"):
            text = f"# {svc} {path.rsplit('-', 1)[-1][:-3]}\n\n" + "\n\n".join(self.prose(r.randint(40, 90))
                                                                               for _ in range(r.randint(8, 16)))
        else:
            text = f'"""The {svc} service: {self.prose(8, names=False)}"""\n\n' + "\n\n".join(
                f"def {r.choice(['load', 'save', 'check', 'route', 'send'])}_{r.choice(['item', 'batch', 'page', 'user'])}"
                f"_{i}(item):\n    # {self.prose(10, names=False)}\n    return item" for i in range(r.randint(20, 45)))
        self.files[path] = text + "\n"
        return path


def generate(seed: int) -> Conversation:
    """The conversation of ``seed`` (the same seed, the same conversation)."""
    return Generator(seed).conversation()


# --- settings ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """A setting: the summariser's ``mode`` (a :class:`SummarisingSideCall`
    mode), the ``window`` (tokens), and the ``server`` the chat goes to
    (``ollama``: counts usage; ``old-llama``)."""

    name: str
    mode: str
    window: int
    server: str


def setting(name: str) -> Setting:
    return {"faithful": Setting("faithful", "faithful", 8192, "ollama"),
            "small": Setting("small", "paraphrase", 4096, "ollama"),
            "old-llama": Setting("old-llama", "paraphrase", 4096, "old-llama")}[name]


def offtopic_calls(seed: int) -> frozenset[int]:
    """The side calls (numbers from 1) the small model answers off topic, by
    seed: none for about a third of the seeds, else one or two."""
    r = random.Random(f"offtopic-{seed}")
    return frozenset(r.sample(range(2, 9), r.choice([0, 1, 1, 2])))


def old_llama_server(window: int) -> Any:
    """The fake of a server like an older llama.cpp: tests/support/harsh_server.py's
    ``OldLlamaCpp`` when it is there, else :class:`_OldLlama` below."""
    try:
        from tests.support.harsh_server import OldLlamaCpp  # type: ignore[import-not-found]
    except ImportError:
        return _OldLlama(window=window, chars_per_token=2.7)
    return OldLlamaCpp(window=window)  # its own density: 2.7 characters a token


def _old_llama_class() -> Any:
    from tests.support.fakes import FakeOpenAI

    class OldLlama(FakeOpenAI):
        """A minimal server like an older llama.cpp: OpenAI's protocol; it
        counts a request at ``chars_per_token`` characters a token (denser
        than wisp's estimate), refuses one over its ``window`` with llama.cpp's
        message and no count, and sends no usage in its stream."""

        def __init__(self, *, window: int, chars_per_token: float = 2.7, **kw: Any) -> None:
            super().__init__(context_length=window, **kw)
            self.window = window
            self.chars_per_token = chars_per_token
            #: The bodies it refused.
            self.refusals: list[Any] = []

        def count(self, body: Any) -> int:
            chars = sum(len(str(m.get("content") or "")) + len(json.dumps(m.get("tool_calls") or []))
                        for m in body.get("messages") or [])
            chars += len(json.dumps(body.get("tools") or []))
            return int(chars / self.chars_per_token) + 4 * len(body.get("messages") or [])

        def _next_entry(self, body: Any) -> dict:
            if isinstance(body, dict) and body.get("messages") is not None:
                asked = self.count(body) + int(body.get("max_tokens") or 0)
                if asked > self.window:
                    with self._lock:
                        self.refusals.append(body)
                    return {"fault": "status", "status": 400, "body": {"error": {
                        "code": 400, "type": "invalid_request_error",
                        "message": "the request exceeds the available context size, try increasing it"}}}
            entry = dict(super()._next_entry(body))
            entry.pop("usage", None)  # no usage in the stream
            return entry

    return OldLlama


def _OldLlama(**kw: Any) -> Any:  # noqa: N802 - a class made on first use (tests.support is imported late)
    return _old_llama_class()(**kw)


# --- the run ----------------------------------------------------------------------------------


@dataclass
class Found:
    """Where a question's answer was found: ``reach`` (``request``,
    ``entry N`` or ``missing``) and ``search`` (``result``, ``entry N`` or
    ``missing``)."""

    question: Question
    reach: str
    search: str
    #: The same search made here over the store (FTS5, bm25, the first five entries), for comparison.
    store_search: str = ""


@dataclass
class HeldOutResult:
    """The figures of one setting and seed: per question where its answer
    was found, the last request's and the full history's tokens (wisp's
    estimate), the turns that failed, and how the search was made."""

    seed: int
    setting: str
    found: list[Found]
    last_tokens: int
    full_tokens: int
    failed_turns: list[tuple[int, str]]
    search_via: str
    summary_versions: int = 0
    side_calls: int = 0
    offtopic: list[int] = field(default_factory=list)
    refusals: int = 0
    requests: int = 0
    notices: list[str] = field(default_factory=list)

    @property
    def in_reach(self) -> float:
        return sum(1 for f in self.found if f.reach != "missing") / len(self.found)

    @property
    def by_search(self) -> float:
        return sum(1 for f in self.found if f.search != "missing") / len(self.found)

    @property
    def by_store_search(self) -> float:
        """The share the stand-in search over the store finds (for comparison; no threshold)."""
        return sum(1 for f in self.found if f.store_search not in ("missing", "")) / len(self.found)

    @property
    def ratio(self) -> float:
        return self.last_tokens / self.full_tokens if self.full_tokens else 0.0

    def problems(self) -> list[str]:
        """The thresholds not met, one line each (empty when all are)."""
        out = []
        if self.in_reach < IN_REACH:
            out.append(f"in reach {self.in_reach:.0%} < {IN_REACH:.0%}")
        if self.by_search < BY_SEARCH:
            out.append(f"by search {self.by_search:.0%} < {BY_SEARCH:.0%}")
        if self.ratio > RATIO:
            out.append(f"ratio {self.ratio:.3f} > {RATIO}")
        if self.failed_turns:
            out.append(f"{len(self.failed_turns)} turns failed")
        return out

    def report(self, verbose: bool = False) -> str:
        n = len(self.found)
        in_request = sum(1 for f in self.found if f.reach == "request")
        in_search = sum(1 for f in self.found if f.search == "result")
        lines = [f"held-out replay, setting {self.setting}, seed {self.seed}",
                 f"in reach: {n - sum(f.reach == 'missing' for f in self.found)}/{n} = {self.in_reach:.0%} "
                 f"({in_request} in the last request, the rest in an entry it names; at least {IN_REACH:.0%})",
                 f"by search: {n - sum(f.search == 'missing' for f in self.found)}/{n} = {self.by_search:.0%} "
                 f"({in_search} in the result, the rest in an entry it names; {self.search_via}; "
                 f"at least {BY_SEARCH:.0%})",
                 f"  (for comparison, a plain FTS5 search over the store, bm25, 5 entries whole: "
                 f"{self.by_store_search:.0%})",
                 f"tokens: last request {self.last_tokens:,} of a full history of {self.full_tokens:,} "
                 f"= ratio {self.ratio:.3f} (at most {RATIO})",
                 f"failed turns: {len(self.failed_turns)}" + "".join(f"\n  turn {t}: {why}" for t, why in self.failed_turns),
                 f"running summary: {self.summary_versions} versions from {self.side_calls} side calls"
                 + (f", calls {', '.join(map(str, self.offtopic))} answered off topic" if self.offtopic else "")
                 + f"; {self.requests} chat requests, {self.refusals} refused for size"]
        lines.append("  [in reach  | search    | FTS5 here] kind       turn: question -> answer")
        for f in self.found:
            q = f.question
            lines.append(f"  [{f.reach:>9} | {f.search:>9} | {f.store_search:>9}] {q.kind:<10} turn {q.turn:>2}: {q.text} -> {q.answer}")
        if verbose and self.notices:
            lines.append("notices:")
            lines += [f"  {x}" for x in self.notices]
        problems = self.problems()
        lines.append("held-out replay: " + ("passed" if not problems else "FAILED (" + "; ".join(problems) + ")"))
        return "\n".join(lines)


def _request_text(messages: list[dict[str, Any]], tools: Any) -> str:
    parts = []
    for m in messages:
        parts.append(str(m.get("content") or ""))
        for c in m.get("tool_calls") or []:
            parts.append(json.dumps(c, ensure_ascii=False))
    parts.append(json.dumps(tools or [], ensure_ascii=False))
    return "\n".join(parts)


async def _named(session: Any, conversation: int, text: str, q: Question) -> int | None:
    """The first entry ``text`` names whose whole content holds ``q``'s answer."""
    from wisp.core.context.recall import recall_entry
    from wisp.core.context.references import referenced_entries

    for number in referenced_entries(text):
        recalled = await recall_entry(session.store, session.audit, conversation, number)
        if recalled is not None and q.found_in(recalled.content):
            return number
    return None


async def _search(session: Any, conversation: int, turn: int, q: Question, entries: list[Any]) -> tuple[str, str]:
    """One search with ``q``'s content words: through the memory tool when it
    searches, else over the store here. Returns (where, how)."""
    from wisp.core.tools.base import ToolContext

    words = q.search_words()
    tool = session.tools.get("memory")
    if tool is not None:
        result = await tool.run({"request": "recall " + " ".join(words)},
                                ToolContext(session.workdir, session.config, conversation, turn))
        if not result.content.startswith("error:"):
            if q.found_in(result.content):
                return "result", "the memory tool's search"
            number = await _named(session, conversation, result.content, q)
            return (f"entry {number}" if number is not None else "missing"), "the memory tool's search"
    # the memory tool does not search (its answer is an error:): the stand-in over the store
    return _store_search(entries, q), "searched here over the store (FTS5, bm25, 5 entries): no memory search yet"


def _store_search(entries: list[Any], q: Question) -> str:
    """``entry N`` for the first of the best five entries (FTS5, bm25) for
    ``q``'s content words that holds its answer, else ``missing``."""
    for number in _fts_search(entries, q.search_words(), limit=5):
        entry = next(e for e in entries if e.number == number)
        if q.found_in(_entry_text(entry)):
            return f"entry {number}"
    return "missing"


def _entry_text(entry: Any) -> str:
    args = entry.arguments if isinstance(entry.arguments, str) else json.dumps(entry.arguments or {})
    return f"{entry.content or ''}\n{args if entry.kind == 'tool_call' else ''}"


def _fts_search(entries: list[Any], words: list[str], limit: int) -> list[int]:
    """Entry numbers holding any of ``words`` (word prefixes, stemmed), best
    first by bm25, at most ``limit``."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE f USING fts5(content, tokenize = 'porter unicode61')")
        db.executemany("INSERT INTO f (rowid, content) VALUES (?, ?)", [(e.number, _entry_text(e)) for e in entries])
        terms = [t for w in words for t in re.findall(r"\w+", w)]
        if not terms:
            return []
        query = " OR ".join('"' + t.replace('"', '""') + '"*' for t in terms)
        return [r[0] for r in db.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT ?", (query, limit))]
    finally:
        db.close()


async def run_heldout(home: Path, workdir: Path, *, seed: int, setting_name: str,
                      verbose: bool = False) -> HeldOutResult:
    """Run the conversation of ``seed`` in ``workdir`` with WISP_HOME ``home``
    (set in the environment by the caller) in setting ``setting_name``, and
    measure it (see the module doc)."""
    from benchmarks.replay_context import RunTests
    from tests.support.context_fakes import CountingOllama
    from tests.support.fakes import reply, text, tool_call
    from tests.support.sidecalls import SummarisingSideCall
    from wisp.core import events as ev
    from wisp.core.context.composer import SYSTEM_RULES
    from wisp.core.context.history import entries_to_messages
    from wisp.core.session import Session, SessionOptions
    from wisp.core.tokens import estimate_messages

    chosen = setting(setting_name)
    convo = generate(seed)
    convo.write_files(workdir)
    offtopic = offtopic_calls(seed) if chosen.mode == "paraphrase" else frozenset()
    side = SummarisingSideCall(chosen.mode, offtopic=offtopic)
    runner = RunTests()
    srv = CountingOllama() if chosen.server == "ollama" else old_llama_server(chosen.window)
    provider = "ollama" if chosen.server == "ollama" else "openai"
    notices: list[str] = []
    errors: dict[int, str] = {}
    with srv:
        (home / "config.json").write_text(json.dumps({
            "model": {"provider": provider, "endpoint": srv.base_url, "name": "replay-model",
                      "context_window": chosen.window, "timeout_s": 10, "load_wait_s": 1},
            "tools": {"enabled": ["read_file", "memory"]}}))
        session = await Session.open(SessionOptions(workdir=workdir, tools=["read_file", "memory"], side_call=side,
                                                    extra_tools=(runner,)))
        try:
            assert await session.connect(), session.endpoint_error
            for n in range(1, TURNS + 1):
                turn = convo.turns[n]
                for step in turn.steps:
                    if step.kind == "read":
                        srv.push(reply(text("Reading it."), tool_call("read_file", {"path": step.path}),
                                       finish="tool_calls", usage=None))
                    else:
                        runner.queue(step.command, step.output, step.status)
                        srv.push(reply(text("Running it."), tool_call("run_tests", {"command": step.command}),
                                       finish="tool_calls", usage=None))
                srv.push(reply(text(turn.reply), usage=None))
                async for item in session.run_turn(turn.prompt):
                    if isinstance(item, ev.Error):
                        errors[n] = f"{item.kind}: {item.message}"
                    if type(item).__name__ in ("Notice", "Error", "SummaryChanged"):
                        notices.append(f"turn {n}: {item}")
                        if verbose:
                            print(f"  turn {n}: {item}")
                # a turn that failed leaves its script unplayed: drop it, so the next turn is answered as written
                with srv._lock:
                    srv.script.clear()
            conversation = session.conversation_id
            assert conversation is not None
            tools = session.agent.tools.schemas()
            bodies = srv.chat_bodies
            answered = getattr(srv, "accepted_bodies", bodies)  # the last request the server answered
            last = answered[-1]["messages"]
            last_text = _request_text(last, answered[-1].get("tools") or tools)
            entries = await session.store.entries(conversation)
            full = [{"role": "system", "content": SYSTEM_RULES}, *entries_to_messages(entries)]
            full_tokens = estimate_messages(full, tools)
            last_tokens = estimate_messages(last, tools)
            turns = await session.store.turns(conversation)
            for t in turns:
                if t.state == "error":
                    errors.setdefault(t.number, t.error or "error")
            found: list[Found] = []
            search_via = ""
            for q in convo.questions:
                if q.found_in(last_text):
                    reach = "request"
                else:
                    number = await _named(session, conversation, last_text, q)
                    reach = f"entry {number}" if number is not None else "missing"
                where, search_via = await _search(session, conversation, TURNS, q, entries)
                found.append(Found(q, reach, where, _store_search(entries, q)))
            versions = await session.context.summaries.versions(conversation)
            return HeldOutResult(seed, chosen.name, found, last_tokens, full_tokens, sorted(errors.items()), search_via,
                                 len(versions), len(side.calls), list(side.offtopic_answered),
                                 len(getattr(srv, "refusals", [])), len(bodies), notices)
        finally:
            await session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1, help="which conversation (the same seed, the same one)")
    parser.add_argument("--setting", choices=SETTINGS, default="faithful")
    parser.add_argument("--verbose", action="store_true", help="print notices and summaries as they come, "
                                                               "and the conversation's questions first")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="wisp-heldout-home-"))
    os.environ["WISP_HOME"] = str(home)
    workdir = Path(tempfile.mkdtemp(prefix="wisp-heldout-work-"))
    result = asyncio.run(run_heldout(home, workdir, seed=args.seed, setting_name=args.setting, verbose=args.verbose))
    print(result.report(verbose=args.verbose))
    raise SystemExit(0 if not result.problems() else 1)


if __name__ == "__main__":
    main()
