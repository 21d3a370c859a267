"""A scripted model: it reads each chat request and answers by rule.

Made for ``wisp eval``'s tests (issue "``wisp eval``", "Tests and what this
must show"), it plugs into a fake server as its ``responder``::

    model = ScriptedModel(builtin_scenarios(), uses_tools=True)
    with FakeOllama(responder=model) as srv: ...

It knows the scenarios' questions (by their prompts) and answers a
question exactly when the answer is in what it was sent, other than the
question itself: the system message (facts, task, running summary),
the earlier turns and the current turn's tool results. It is an oracle of
what the context holds, not a reader of English.

With ``uses_tools`` it uses its tools perfectly:

- a prompt that says to read or run something in backticks
  (``Read `a.py```, ``Run `make test```) gets that tool call;
- a question whose scenario requires tools (``calls.require``) gets those
  calls first (``system_info`` with the topic the prompt names);
- a question whose answer is not in view is looked for with the memory
  tool when there is one: the references whose tool call names a
  backticked word of the question (``recall entry N``), then the earlier
  conversations' memories (``memories``, then ``recall MEM-…``) for a
  scenario that has some, then the turns from the first on (``recall
  turn N``); without the memory tool it calls a read-only tool again
  when a reference says so;
- when nothing is left to try it answers "I don't know."

Without ``uses_tools`` it never calls a tool: it answers what it sees, or
"I don't know."

Side calls (requests without tools) are answered as wisp asks: the
running summary tersely (the first words of each prompt, plus the items
wisp names as ones to keep: it forgets facts stated in passing, and the
person's own words that wisp added to the summary so far, which wisp
keeps itself, the newest of them, in its completion), episodic
refinement with one memory per exchange holding its request and reply,
the fact distiller (issue "The model's own bookkeeping") with a decision
for each of the person's statements of one
(:func:`wisp.core.statements.statements`), its value the
statement from its decision word to its first comma, and anything else
with "nothing here".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from wisp.core.statements import DECISION, statements
from wisp.core.eval.scenario import Question, Scenario

from .servers import reply, tool_call, tool_calls

__all__ = ["ScriptedModel"]

DONT_KNOW = "I don't know."
_READ = re.compile(r"(?i)\bread\s+`([^`]+)`")
_RUN = re.compile(r"(?i)\brun\s+`([^`]+)`")
_TICKS = re.compile(r"`([^`]+)`")
_INDEX_LINE = re.compile(r"^- entry (\d+) \(turn \d+\): (\S+)(.*)$", re.M)
_REFERENCE = re.compile(r"\[output of entry (\d+) not repeated: (\w+)[^\]]*\]")
_MEM = re.compile(r"\bMEM-\d{6,}\b")
_STOP = {"the", "and", "for", "use", "uses", "every", "all", "its", "our", "that", "this", "with", "not", "should",
         "must", "shown", "written", "show", "keep"}


def _words(text: str) -> str:
    return " ".join(str(text or "").split())


def _arguments(call: dict) -> dict:
    args = (call.get("function") or {}).get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            args = {}
    return args if isinstance(args, dict) else {}


@dataclass
class _Request:
    """One agent request, read: the prompt, what this turn called so far,
    the context lines other than the prompt, and the tool names offered."""

    prompt: str
    tools: list[str]
    calls: list[tuple[str, dict]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    last_result: str = ""

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _read_request(body: dict) -> _Request:
    messages = body.get("messages") or []
    tools = [((t.get("function") or {}).get("name") or "") for t in body.get("tools") or []]
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    from wisp.core.context.composer import context_part, person_part

    # the person's words are the last user message before the facts and task wisp puts at its end
    last_text = str(messages[last_user].get("content") or "") if last_user >= 0 else ""
    context, person = context_part(last_text), person_part(last_text)
    req = _Request(person, tools)
    if context:
        req.lines.extend(context.split("\n"))
    for i, m in enumerate(messages):
        if i == last_user:
            continue
        if m.get("content"):
            req.lines.extend(str(m["content"]).split("\n"))
        for call in m.get("tool_calls") or []:
            name = (call.get("function") or {}).get("name") or ""
            args = _arguments(call)
            req.lines.append(f"call {name} {json.dumps(args, ensure_ascii=False)}")
            if i > last_user:
                req.calls.append((name, args))
        if i > last_user and m.get("role") == "tool":
            req.last_result = str(m.get("content") or "")
    return req


class ScriptedModel:
    """The responder (see the module doc): ``scenarios`` whose questions it
    knows; ``uses_tools``; ``requests``/``side_calls`` count what it answered."""

    def __init__(self, scenarios: Iterable[Scenario], *, uses_tools: bool = True) -> None:
        self.uses_tools = uses_tools
        self.questions: dict[str, tuple[Scenario, Question]] = {}
        for s in scenarios:
            for turn in s.turns:
                if turn.question is not None:
                    self.questions[_words(turn.prompt)] = (s, turn.question)
        self.requests = 0
        self.side_calls = 0

    # -- the responder -----------------------------------------------------------

    def __call__(self, body: Any) -> dict:
        if not isinstance(body, dict):
            return reply(DONT_KNOW)
        if not body.get("tools"):
            self.side_calls += 1
            return self._say(self._side_call(body), body)
        self.requests += 1
        req = _read_request(body)
        known = self.questions.get(_words(req.prompt))
        if known is None:
            return self._script_turn(req, body)
        return self._question(req, known[0], known[1], body)

    @staticmethod
    def _say(text: str, body: dict) -> dict:
        sent = sum(len(str(m.get("content") or "")) for m in body.get("messages") or [])
        return reply(text, usage=(max(1, sent // 4), max(1, len(text) // 4)))

    @staticmethod
    def _call(name: str, arguments: dict, body: dict) -> dict:
        sent = sum(len(str(m.get("content") or "")) for m in body.get("messages") or [])
        return reply(tool_call(name, arguments), usage=(max(1, sent // 4), 8))

    # -- the person's script ---------------------------------------------------------

    def _script_turn(self, req: _Request, body: dict) -> dict:
        if self.uses_tools and not req.calls:
            calls = [{"name": "read_file", "arguments": {"path": p}} for p in _READ.findall(req.prompt)
                     if "read_file" in req.tools]
            calls += [{"name": "run_command", "arguments": {"command": c}} for c in _RUN.findall(req.prompt)
                      if "run_command" in req.tools]
            if len(calls) == 1:
                return self._call(calls[0]["name"], calls[0]["arguments"], body)
            if calls:
                sent = sum(len(str(m.get("content") or "")) for m in body.get("messages") or [])
                return reply(tool_calls(*calls), usage=(max(1, sent // 4), 8 * len(calls)))
        return self._say("Done.", body)

    # -- questions -------------------------------------------------------------------

    def _question(self, req: _Request, scenario: Scenario, question: Question, body: dict) -> dict:
        called = [name for name, _ in req.calls]
        if self.uses_tools:
            for name in question.require:
                if name not in called and name in req.tools:
                    return self._call(name, self._arguments_for(name, req.prompt), body)
        if question.answer is not None:
            seen = question.answer.matches(req.text)
            if seen is not None:
                return self._say(f"The answer is {seen}.", body)
        elif question.require and all(n in called for n in question.require):
            return self._say(f"Here is what {question.require[0]} says: {req.last_result}", body)
        if self.uses_tools:
            step = self._next_lookup(req, scenario)
            if step is not None:
                return self._call(step[0], step[1], body)
        return self._say(DONT_KNOW, body)

    @staticmethod
    def _arguments_for(tool: str, prompt: str) -> dict:
        if tool == "system_info":
            low = prompt.lower()
            topic = "cpu" if "cpu" in low else "disk" if "disk" in low else "os" if "operating" in low else "memory"
            return {"topic": topic}
        return {}

    def _next_lookup(self, req: _Request, scenario: Scenario) -> tuple[str, dict] | None:
        """The next tool call that could bring the answer into view, or None."""
        tried = {json.dumps(a, sort_keys=True) for _, a in req.calls}
        ticks = set(_TICKS.findall(req.prompt))

        def fresh(args: dict) -> bool:
            return json.dumps(args, sort_keys=True) not in tried

        if "memory" in req.tools:
            for entry in self._references(req, ticks):
                args = {"request": f"recall entry {entry}"}
                if fresh(args):
                    return "memory", args
            if scenario.earlier:
                args = {"request": "memories"}
                if fresh(args):
                    return "memory", args
                for ref in dict.fromkeys(_MEM.findall(req.text)):
                    args = {"request": f"recall {ref}"}
                    if fresh(args):
                        return "memory", args
            last = req.last_result
            if last.startswith("memory: ") and "recall turn" in json.dumps(req.calls[-1][1] if req.calls else {}):
                return None  # past the turns there are
            for number in range(1, 200):
                args = {"request": f"recall turn {number}"}
                if fresh(args):
                    return "memory", args
            return None
        for name, args in self._read_again(req, ticks):
            if name in req.tools and fresh(args):
                return name, args
        return None

    @staticmethod
    def _references(req: _Request, ticks: set[str]) -> list[int]:
        """Entries standing as references whose tool call names a backticked
        word of the question, oldest first."""
        found: list[int] = []
        for i, line in enumerate(req.lines):
            for m in _INDEX_LINE.finditer(line):
                if any(t in m.group(3) for t in ticks):
                    found.append(int(m.group(1)))
            for m in _REFERENCE.finditer(line):
                before = req.lines[i - 1] if i > 0 else ""
                if before.startswith("call ") and any(t in before for t in ticks):
                    found.append(int(m.group(1)))
        return list(dict.fromkeys(found))

    @staticmethod
    def _read_again(req: _Request, ticks: set[str]) -> list[tuple[str, dict]]:
        """Read-only calls a reference says to make again, when they name a
        backticked word of the question."""
        out = []
        for line in req.lines:
            if line.startswith("call ") and any(t in line for t in ticks):
                name, _, raw = line[5:].partition(" ")
                try:
                    out.append((name, json.loads(raw)))
                except ValueError:
                    continue
        return out

    # -- side calls -----------------------------------------------------------------

    def _side_call(self, body: dict) -> str:
        messages = body.get("messages") or []
        system = str(messages[0].get("content") or "") if messages else ""
        prompt = str(messages[-1].get("content") or "") if messages else ""
        for rules in ("You write episodic memories", "You keep the running summary",
                      "You read one turn of a conversation and list the facts"):
            if prompt.startswith(rules):  # a side call that sends the chat's rules first and its own in the prompt
                system, prompt = prompt, prompt.split("\n\n", 1)[-1]
                break
        if system.startswith("You write episodic memories"):
            blocks = re.split(r"\n(?=\[\d+\] )", "\n" + prompt)
            out = []
            for block in blocks:
                head = re.match(r"\[(\d+)\] ", block)
                if not head:
                    continue
                request = re.search(r"REQUEST:\n(.*?)\nREPLY:", block, re.S)
                answer = re.search(r"REPLY:\n(.*)", block, re.S)
                text = " ".join(((request.group(1) if request else "") + " " +
                                 (answer.group(1) if answer else "")).split())
                out.append(f"MEMORY {head.group(1)}\n{text}\nEND")
            return "\n".join(out) or "NONE"
        if system.startswith("You keep the running summary"):
            return self._summary(prompt)
        if system.startswith("You read one turn of a conversation and list the facts"):
            return self._distil(prompt)
        return "nothing here"

    @staticmethod
    def _distil(prompt: str) -> str:
        """The distiller's JSON: a decision for each statement of the person's part."""
        person = re.search(r"^The person \(entry [^)]*\):\n(.*?)\n\nThe assistant's reply", prompt, re.S | re.M)
        facts = []
        for sentence in statements(person.group(1) if person else ""):
            at = DECISION.search(sentence)
            said = sentence[at.end():] if at else sentence
            value = re.split(r"[,;:]", said, maxsplit=1)[0].strip(" .-")
            words = [w for w in re.findall(r"[a-z0-9]+", value.lower()) if len(w) > 2 and w not in _STOP][:3]
            if value and words:
                facts.append({"subject": "decision", "name": " ".join(words), "value": value})
        return json.dumps({"facts": facts[:12]})

    @staticmethod
    def _summary(prompt: str) -> str:
        lines = []
        previous = re.search(r"Summary so far, of turns [^:]*:\n(.*?)\n\nNew turns to add:", prompt, re.S)
        if previous:  # without wisp's block of the person's own words: a terse summary forgets them
            lines.append(re.sub(r"(?m)^The person's own words, kept by wisp:\n(?:- .*(?:\n|$))*", "",
                                previous.group(1)).strip())
        new = prompt.split("New turns to add:\n", 1)[-1]
        for block in re.split(r"\n(?=Turn \d+:)", new):
            head = re.match(r"Turn (\d+):", block)
            person = re.search(r"^person \(entry \d+\): (.*)$", block, re.M)
            if head:
                lines.append(f"T{head.group(1)}: " + " ".join((person.group(1) if person else "").split()[:6]))
        keep = re.findall(r"Keep each of these exactly as written: (.*?)\.\n", prompt + "\n")
        keep += re.findall(r"Your last summary left out: (.*?)\. Write the whole summary again", prompt)
        if keep:
            lines.append("Kept: " + ", ".join(keep))
        return "\n".join(line for line in lines if line)
