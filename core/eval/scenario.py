"""Scenarios: what ``wisp eval`` asks a model, in a documented JSON file each.

Issue "``wisp eval``: does the context help on your model? Measure it",
"Scenarios". The built-in ones ship as package data in
``core/eval/scenarios/`` (one ``NAME.json`` each); a person adds their own
with ``wisp eval --file my.json``. Adding a scenario is adding one file.
The format (``scenarios/README.md`` says the same with an example)::

    {
      "format": 1,
      "name": "recalling",                      lowercase letters, digits and -
      "title": "One line for the table",
      "about": "What it measures and why (wisp eval --list shows it).",
      "config": {"model.context_window": 4096,  wisp config keys for each run
                 "tools.enabled": ["read_file", "run_command"],
                 "tools.run_command.allow": ["python3 build.py"]},
      "quick": {"config": {...}},               overrides for --quick (optional)
      "files": {"build.py": "print('hi')\\n"},   the working directory's files
      "earlier": [                              conversations refined into
        {"when": "last tuesday - 6d 10:00",     episodic memories first
         "exchanges": [{"request": "…", "reply": "…"}]}
      ],
      "turns": [
        {"prompt": "Run `python3 build.py`.", "quick": false},
        {"prompt": "What checksum did it print?", "kind": "extraction",
         "answer": "5f1c9e2a0b7d"}
      ]
    }

A turn with ``answer`` or ``calls`` is a question; the others are the
script the person types. A question's checks (all must pass):

- ``answer``: a string (found in the reply as whole words, any case, any
  run of spaces), ``{"regex": "…"}`` (Python :mod:`re`, searched in the
  reply; write ``(?i)`` for any case), or a list of those (any one);
- ``calls``: ``{"require": [TOOL…], "forbid": [TOOL…]}``: tools the turn
  must and must not call.

``weight`` (default 1) is the question's share of the 10 points;
``kind`` names the kind of question (``extraction``, ``temporal``,
``knowledge-update``, ``abstention``, ``routing``, … after LongMemEval),
shown in the results. A turn with ``"quick": false`` is left out by
``--quick``; the short variant must keep at least one question.

``when`` of an earlier conversation is ``today``, ``yesterday``, ``N days
ago`` or ``last WEEKDAY`` (the most recent one before today), then
optionally ``- Nd`` or ``+ Nd``, then optionally ``HH:MM`` (default
10:00), in the memory time zone. Its exchanges are two minutes apart.
``"quick": false`` leaves an earlier conversation out with ``--quick``.

Config keys a scenario may not set, because the run sets them: the
endpoint (``model.provider``, ``model.endpoint``, ``model.name``,
``model.api_key_env``, ``model.gguf``), where data lives (``store.path``,
``audit.dir``), ``memory.workspace`` and ``context.memory`` (that is the
setting compared).

Every problem is a :class:`ScenarioError` whose message is one line that
names the file, the place in it and what to write.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timedelta, tzinfo
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, Iterable

from ..config import ConfigError, parse_value

__all__ = [
    "FORMAT", "ScenarioError", "Answer", "Question", "Turn", "Exchange", "Earlier", "Scenario",
    "parse_scenario", "load_scenario_file", "builtin_names", "builtin_scenario", "builtin_scenarios",
    "parse_when", "RESERVED_KEYS", "RESERVED_NAMES", "scenario_format_path", "SettingError", "parse_setting",
]

#: The format version this wisp reads.
FORMAT = 1
#: Config keys the run sets itself (see the module doc).
RESERVED_KEYS = ("model.provider", "model.endpoint", "model.name", "model.api_key_env", "model.gguf",
                 "store.path", "audit.dir", "memory.workspace", "context.memory")
#: Names a scenario cannot have: they are words of the command line.
RESERVED_NAMES = ("history",)
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
_TOOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
#: Files a scenario may hold, and their total size (bytes of UTF-8).
MAX_FILES = 200
MAX_FILES_BYTES = 4 * 1024 * 1024
MAX_TURNS = 500
MAX_TEXT = 64 * 1024
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WHEN = re.compile(
    r"^\s*(?P<base>today|yesterday|(?P<n>\d{1,3})\s+days?\s+ago|last\s+(?P<wd>" + "|".join(_WEEKDAYS) + r"))"
    r"(?:\s*(?P<sign>[+-])\s*(?P<off>\d{1,3})\s*d)?"
    r"(?:\s+(?:at\s+)?(?P<h>\d{1,2}):(?P<m>\d{2}))?\s*$", re.IGNORECASE)


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message is one line saying
    where (file and place) and what to write instead."""


@dataclass(frozen=True)
class Answer:
    """An exact answer: ``patterns`` (compiled; any one matching passes)
    and ``shown`` (as the results show it: the string, or ``/regex/``)."""

    patterns: tuple[re.Pattern[str], ...]
    shown: str

    def matches(self, reply: str) -> str | None:
        """The text of ``reply`` the answer matched, or ``None``."""
        for pattern in self.patterns:
            m = pattern.search(reply or "")
            if m:
                return m.group(0)
        return None


@dataclass(frozen=True)
class Question:
    """What a question turn checks: ``answer`` (or ``None``), the tools it
    must (``require``) and must not (``forbid``) call, its ``weight`` (a
    share of the 10 points) and ``kind``."""

    answer: Answer | None = None
    require: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()
    weight: float = 1.0
    kind: str = "extraction"


@dataclass(frozen=True)
class Turn:
    """One prompt of the script; ``question`` when it is scored; ``quick``
    false when ``--quick`` leaves it out."""

    prompt: str
    question: Question | None = None
    quick: bool = True


@dataclass(frozen=True)
class Exchange:
    """One request and reply of an earlier conversation."""

    request: str
    reply: str


@dataclass(frozen=True)
class Earlier:
    """An earlier conversation: ``when`` (as written), its exchanges, and
    ``quick`` false when ``--quick`` leaves it out."""

    when: str
    exchanges: tuple[Exchange, ...]
    quick: bool = True


@dataclass(frozen=True)
class Scenario:
    """A parsed scenario (see the module doc). ``source`` is where it came
    from (a file path, or ``built-in``)."""

    name: str
    title: str
    about: str
    config: dict[str, Any]
    files: dict[str, str]
    turns: tuple[Turn, ...]
    earlier: tuple[Earlier, ...] = ()
    quick_config: dict[str, Any] = field(default_factory=dict)
    source: str = "built-in"

    @property
    def questions(self) -> list[tuple[int, Question]]:
        """``(turn index, question)`` for each question, in order."""
        return [(i, t.question) for i, t in enumerate(self.turns) if t.question is not None]

    def quick(self) -> "Scenario":
        """The short variant: turns and earlier conversations marked
        ``"quick": false`` left out, the ``quick`` config applied over the
        config."""
        return replace(self, turns=tuple(t for t in self.turns if t.quick),
                       earlier=tuple(e for e in self.earlier if e.quick),
                       config={**self.config, **self.quick_config})


# --- parsing ------------------------------------------------------------------------------


def _fail(where: str, what: str) -> ScenarioError:
    return ScenarioError(f"{where}: {what}")


def _text(obj: Any, where: str, *, empty: bool = False, limit: int = MAX_TEXT) -> str:
    if not isinstance(obj, str) or (not empty and not obj.strip()):
        raise _fail(where, "write a non-empty string")
    if len(obj.encode("utf-8", "surrogatepass")) > limit:
        raise _fail(where, f"at most {limit:,} bytes")
    try:
        obj.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail(where, "text that is valid Unicode (no lone surrogates)") from None
    return obj


def _object(obj: Any, where: str, keys: Iterable[str], required: Iterable[str] = ()) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise _fail(where, "write a JSON object")
    allowed = set(keys)
    for key in obj:
        if key not in allowed:
            raise _fail(where, f"unknown field {key!r}; the fields are {', '.join(sorted(allowed))}")
    for key in required:
        if key not in obj:
            raise _fail(where, f"the field {key!r} is missing")
    return obj


def _answer(obj: Any, where: str) -> Answer:
    items = obj if isinstance(obj, list) else [obj]
    if not items:
        raise _fail(where, 'write a string, {"regex": "…"}, or a list of those')
    patterns: list[re.Pattern[str]] = []
    shown: list[str] = []
    for k, item in enumerate(items):
        at = f"{where}[{k}]" if isinstance(obj, list) else where
        if isinstance(item, str):
            text = _text(item, at, limit=1000).strip()
            words = [re.escape(w) for w in text.split()]
            body = r"\s+".join(words)
            patterns.append(re.compile(r"(?<!\w)" + body + r"(?!\w)", re.IGNORECASE))
            shown.append(text)
        elif isinstance(item, dict):
            _object(item, at, ("regex",), ("regex",))
            source = _text(item["regex"], f"{at}.regex", limit=1000)
            try:
                patterns.append(re.compile(source))
            except (re.error, OverflowError, RecursionError) as exc:
                raise _fail(f"{at}.regex", f"not a regular expression Python reads ({exc})") from None
            shown.append(f"/{source}/")
        else:
            raise _fail(at, 'write a string, {"regex": "…"}, or a list of those')
    return Answer(tuple(patterns), " or ".join(shown))


def _tools(obj: Any, where: str) -> tuple[str, ...]:
    if not isinstance(obj, list) or not all(isinstance(t, str) and _TOOL.match(t) for t in obj):
        raise _fail(where, 'write a list of tool names, such as ["system_info"]')
    return tuple(dict.fromkeys(obj))


def _turn(obj: Any, where: str) -> Turn:
    if isinstance(obj, str):
        return Turn(_text(obj, where))
    _object(obj, where, ("prompt", "answer", "calls", "weight", "kind", "quick", "note"), ("prompt",))
    prompt = _text(obj["prompt"], f"{where}.prompt")
    quick = obj.get("quick", True)
    if not isinstance(quick, bool):
        raise _fail(f"{where}.quick", "write true or false")
    if "answer" not in obj and "calls" not in obj:
        for key in ("weight", "kind"):
            if key in obj:
                raise _fail(f"{where}.{key}", "only a question (a turn with answer or calls) has it")
        return Turn(prompt, None, quick)
    answer = _answer(obj["answer"], f"{where}.answer") if "answer" in obj else None
    require: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()
    if "calls" in obj:
        calls = _object(obj["calls"], f"{where}.calls", ("require", "forbid"))
        if not calls:
            raise _fail(f"{where}.calls", 'write {"require": [TOOL], "forbid": [TOOL]}')
        require = _tools(calls.get("require", []), f"{where}.calls.require")
        forbid = _tools(calls.get("forbid", []), f"{where}.calls.forbid")
        both = set(require) & set(forbid)
        if both:
            raise _fail(f"{where}.calls", f"{sorted(both)[0]!r} is both required and forbidden")
    weight = obj.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not (0 < weight <= 100):
        raise _fail(f"{where}.weight", "write a number above 0 and at most 100")
    kind = obj.get("kind", "extraction")
    if not isinstance(kind, str) or not re.match(r"^[a-z][a-z-]{0,39}$", kind):
        raise _fail(f"{where}.kind", "write a lowercase word, such as extraction, temporal or abstention")
    return Turn(prompt, Question(answer, require, forbid, float(weight), kind), quick)


def _reserved(key: str) -> str | None:
    """Why a scenario's ``config`` or ``--set`` may not give ``key``, or ``None``
    (the one place of the rule; see the module doc)."""
    if key == "context.memory":
        return "the run sets this key itself (it is the setting compared: use --memory on, off or both)"
    if key in RESERVED_KEYS:
        return "the run sets this key itself; leave it out"
    return None


def _config(obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise _fail(where, 'write an object of wisp config keys, such as {"model.context_window": 4096}')
    out: dict[str, Any] = {}
    for key, value in obj.items():
        why = _reserved(key)
        if why:
            raise _fail(f"{where}.{key}", why)
        try:
            out[key] = parse_value(key, value, from_text=False)
        except ConfigError as exc:
            raise _fail(f"{where}.{key}", str(exc)) from None
    return out


class SettingError(ValueError):
    """A ``wisp eval --set KEY=VALUE`` that cannot be used; the message is
    one line saying what to write."""


#: ``--set`` text longer than this (characters) is refused unread.
MAX_SETTING = 4096


def parse_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` (``wisp eval --set``, typed by the person) → ``(key,
    value)``: the key a known wisp config key that a run lets one set, the
    value parsed from text as ``wisp config set`` parses it
    (:func:`wisp.core.config.parse_value`; ``None`` for an optional key
    cleared with ``null`` or nothing after the ``=``). Spaces around the
    key are dropped; the value is everything after the first ``=``.

    Raises :class:`SettingError` (one line) for text without ``=``, an
    unknown key (naming the closest ones), a key the run sets itself (the
    same refusal as a scenario's ``config``), or a value of the wrong type."""
    if not isinstance(text, str) or len(text) > MAX_SETTING:
        raise SettingError(f"--set takes KEY=VALUE of at most {MAX_SETTING:,} characters, "
                           "such as --set context.distill=on")
    key, eq, value = text.partition("=")
    key = key.strip()
    if not eq or not key:
        raise SettingError(f"--set takes KEY=VALUE, such as --set context.distill=on; got {_shown(text)}")
    why = _reserved(key)
    if why:
        raise SettingError(f"--set {key}: {why}")
    try:
        return key, parse_value(key, value, from_text=True)
    except ConfigError as exc:
        raise SettingError(f"--set: {exc}") from None


def _shown(text: str, limit: int = 60) -> str:
    """``text`` quoted on one line for an error, cut to ``limit`` characters."""
    quoted = json.dumps(text, ensure_ascii=False)
    return quoted if len(quoted) <= limit else quoted[: limit - 4] + '..."'


def _files(obj: Any, where: str) -> dict[str, str]:
    if not isinstance(obj, dict):
        raise _fail(where, 'write an object of relative paths and texts, such as {"src/app.py": "…"}')
    if len(obj) > MAX_FILES:
        raise _fail(where, f"at most {MAX_FILES} files")
    out: dict[str, str] = {}
    total = 0
    for path, text in obj.items():
        pure = PurePosixPath(path)
        if (not path or pure.is_absolute() or "\\" in path or any(p in ("..", ".", "") for p in path.split("/"))
                or "\x00" in path):
            raise _fail(f"{where}[{path!r}]", "write a relative path with / between names, without .. or .")
        out[path] = _text(text, f"{where}[{path!r}]", empty=True, limit=MAX_FILES_BYTES)
        total += len(out[path].encode("utf-8"))
        if total > MAX_FILES_BYTES:
            raise _fail(where, f"the files hold more than {MAX_FILES_BYTES:,} bytes in all")
    names = set(out)
    for path in out:  # a file cannot also be a folder of another
        parts = path.split("/")
        for k in range(1, len(parts)):
            if "/".join(parts[:k]) in names:
                raise _fail(f"{where}[{path!r}]", f"{'/'.join(parts[:k])!r} is a file, so it cannot be a folder")
    return out


def _earlier(obj: Any, where: str) -> tuple[Earlier, ...]:
    if not isinstance(obj, list):
        raise _fail(where, 'write a list of {"when": "…", "exchanges": [{"request": "…", "reply": "…"}]}')
    out = []
    for k, conv in enumerate(obj):
        at = f"{where}[{k}]"
        _object(conv, at, ("when", "exchanges", "quick", "note"), ("when", "exchanges"))
        quick = conv.get("quick", True)
        if not isinstance(quick, bool):
            raise _fail(f"{at}.quick", "write true or false")
        when = _text(conv["when"], f"{at}.when", limit=100)
        try:
            parse_when(when, datetime(2025, 1, 1, 12, 0).astimezone())
        except ValueError as exc:
            raise _fail(f"{at}.when", str(exc)) from None
        exchanges = conv["exchanges"]
        if not isinstance(exchanges, list) or not exchanges:
            raise _fail(f"{at}.exchanges", 'write a non-empty list of {"request": "…", "reply": "…"}')
        items = []
        for j, ex in enumerate(exchanges):
            ex_at = f"{at}.exchanges[{j}]"
            _object(ex, ex_at, ("request", "reply"), ("request",))
            items.append(Exchange(_text(ex["request"], f"{ex_at}.request"),
                                  _text(ex.get("reply", ""), f"{ex_at}.reply", empty=True)))
        out.append(Earlier(when, tuple(items), quick))
    return tuple(out)


def parse_scenario(obj: Any, source: str = "built-in") -> Scenario:
    """A :class:`Scenario` from a decoded JSON value (see the module doc).
    Raises :class:`ScenarioError` naming ``source`` and the place."""
    doc = _object(obj, source, ("format", "name", "title", "about", "config", "quick", "files", "earlier",
                                "turns", "$schema", "note"), ("format", "name", "turns"))
    if doc["format"] != FORMAT or isinstance(doc["format"], bool):
        raise _fail(f"{source}: format", f"this wisp reads format {FORMAT}; write \"format\": {FORMAT}")
    name = doc["name"]
    if not isinstance(name, str) or not _NAME.match(name):
        raise _fail(f"{source}: name", "write lowercase letters, digits and -, such as my-scenario")
    if name in RESERVED_NAMES:
        raise _fail(f"{source}: name", f"{name!r} is a word of the command line; choose another name")
    title = _text(doc.get("title", name), f"{source}: title", limit=200)
    about = _text(doc.get("about", ""), f"{source}: about", empty=True, limit=4000)
    config = _config(doc.get("config", {}), f"{source}: config")
    quick = _object(doc.get("quick", {}), f"{source}: quick", ("config",))
    quick_config = _config(quick.get("config", {}), f"{source}: quick.config")
    files = _files(doc.get("files", {}), f"{source}: files")
    earlier = _earlier(doc.get("earlier", []), f"{source}: earlier")
    turns_obj = doc["turns"]
    if not isinstance(turns_obj, list) or not turns_obj:
        raise _fail(f"{source}: turns", 'write a non-empty list of turns, such as [{"prompt": "…"}]')
    if len(turns_obj) > MAX_TURNS:
        raise _fail(f"{source}: turns", f"at most {MAX_TURNS} turns")
    turns = tuple(_turn(t, f"{source}: turns[{k}]") for k, t in enumerate(turns_obj))
    if not any(t.question for t in turns):
        raise _fail(f"{source}: turns", "no turn is a question; give one an answer or calls to score")
    if not any(t.question for t in turns if t.quick):
        raise _fail(f"{source}: turns", 'every question has "quick": false; keep one for --quick')
    return Scenario(name, title.strip(), about.strip(), config, files, turns, earlier, quick_config, source)


def load_scenario_file(path: str | Path) -> Scenario:
    """Read and parse a scenario file. Raises :class:`ScenarioError` for a
    file that cannot be read, is not JSON (with its line and column), or
    is not a scenario."""
    p = Path(path).expanduser()
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot read it ({exc.strerror or exc}); give a scenario file's path") from None
    if len(raw) > 2 * MAX_FILES_BYTES:
        raise ScenarioError(f"{p}: larger than {2 * MAX_FILES_BYTES:,} bytes; a scenario is smaller")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ScenarioError(f"{p}: not UTF-8 text; save it as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{p}: not JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ScenarioError(f"{p}: nested too deeply to be a scenario") from None
    return parse_scenario(obj, str(p))


# --- the built-in scenarios -------------------------------------------------------------------


def _folder() -> Any:
    return resources.files("wisp.core.eval").joinpath("scenarios")


def scenario_format_path() -> str:
    """Where the format is described for people: the installed ``scenarios/README.md``."""
    return str(_folder().joinpath("README.md"))


def builtin_names() -> list[str]:
    """The built-in scenarios' names, in the order the table shows them
    (the order of :data:`ORDER`, then any other file by name)."""
    found = sorted(p.name[:-5] for p in _folder().iterdir() if p.name.endswith(".json"))
    return [n for n in ORDER if n in found] + [n for n in found if n not in ORDER]


#: The reference document's scenarios first, in its order.
ORDER = ("sustained", "recalling", "noting", "routing", "across")


def builtin_scenario(name: str) -> Scenario:
    """The built-in scenario ``name``. Raises :class:`ScenarioError` naming
    the ones there are."""
    if name not in builtin_names():
        raise ScenarioError(f"no scenario {name!r}; wisp has {', '.join(builtin_names())} "
                            "(or give your own with --file my.json)")
    item = _folder().joinpath(f"{name}.json")
    obj = json.loads(item.read_text(encoding="utf-8"))
    return parse_scenario(obj, f"built-in {name}.json")


def builtin_scenarios() -> list[Scenario]:
    """Every built-in scenario, in :func:`builtin_names` order."""
    return [builtin_scenario(n) for n in builtin_names()]


# --- dates of earlier conversations ---------------------------------------------------------------


def parse_when(text: str, now: datetime, tz: tzinfo | None = None) -> datetime:
    """The moment ``text`` names (see the module doc), as an aware datetime
    in ``tz`` (default ``now``'s zone). ``last tuesday`` is the most recent
    Tuesday before ``now``'s day (a week ago on a Tuesday). Raises
    ``ValueError`` with what to write."""
    m = _WHEN.match(text or "")
    if not m:
        raise ValueError("write today, yesterday, N days ago or last WEEKDAY, then optionally - Nd or + Nd, "
                         "then optionally HH:MM, such as \"last tuesday - 6d 10:00\"")
    zone = tz or now.tzinfo
    today = now.astimezone(zone).date() if zone is not None else now.date()
    base = m.group("base").lower()
    if base == "today":
        day = today
    elif base == "yesterday":
        day = today - timedelta(days=1)
    elif m.group("n") is not None:
        day = today - timedelta(days=int(m.group("n")))
    else:
        wanted = _WEEKDAYS.index(m.group("wd").lower())
        back = (today.weekday() - wanted) % 7 or 7
        day = today - timedelta(days=back)
    if m.group("off"):
        delta = timedelta(days=int(m.group("off")))
        day = day - delta if m.group("sign") == "-" else day + delta
    hour, minute = (int(m.group("h")), int(m.group("m"))) if m.group("h") else (10, 0)
    if hour > 23 or minute > 59:
        raise ValueError(f"{hour:02d}:{minute:02d} is not a time of day; write HH:MM from 00:00 to 23:59")
    return _at(day, time(hour, minute), zone)


def _at(day: date, at: time, zone: tzinfo | None) -> datetime:
    naive = datetime.combine(day, at)
    if zone is None:
        return naive.astimezone()
    return naive.replace(tzinfo=zone)
