"""Side calls tests hand in (issue "One core, built once": tests hand in a scripted
side call; they do not recognise one by sniffing a prompt's text).

:class:`ScriptedSideCall` answers from a script and records every call.
:class:`SummarisingSideCall` answers like a terse model asked for a running
summary: one short line per new turn (the first words of the person's
prompt) under the summary so far, and, when the prompt names items the last
summary left out, it adds them, as an obedient model would. It keeps no
identifiers on the first attempt beyond what those first words hold, so the
coverage check's retry is exercised. ``mode`` changes that: ``"echo_items"``
keeps every item named in the turns at once, ``"forgetful"`` never adds the
missing items, ``"fail"`` fails every call, ``"verbose"`` writes far too much,
``"small"`` is a small model (issue "Compaction you can see and trust": its
summaries miss half the identifiers): it keeps every other identifier the
prompt names, and asked again, every other one of those it left out.
``"faithful"`` keeps what it is given: the summary so far whole, and for
each new turn its key sentences copied as written (those holding a number,
an identifier such as a path, host or version, or a name), its tool calls
with their entries, and every item it is asked to keep.
``"paraphrase"`` is a small model that rewrites instead of copying: half of
the summary so far, one generic line per turn (which tools it used; none of
the person's words), and every other item it is asked to keep, then every
other one of those it left out. ``offtopic`` (call numbers, from 1) makes
those calls answer a long summary of something the conversation never
mentioned (Docker Desktop), in any mode.

Asked with a ``schema`` (the running summary's sections), it answers a JSON
object as an endpoint with constrained decoding would (``{"summary": …,
"decisions": [], "open": []}``), unless ``shaped`` is false (a server that
ignored the schema).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from wisp.core.sidecall import SideCallError, SideCallInfo


@dataclass
class SideCallRecord:
    """One call: ``messages``, ``max_tokens``, ``schema``, ``temperature``."""

    messages: list[dict[str, Any]]
    max_tokens: int
    schema: dict[str, Any] | None = None
    temperature: float | None = None

    @property
    def prompt(self) -> str:
        """The last message's text (the side call's prompt)."""
        return str(self.messages[-1].get("content") or "") if self.messages else ""


@dataclass
class ScriptedSideCall:
    """Answers from ``answers`` in order (a string, or a :class:`SideCallError`
    to raise), then from ``default(record)``; ``calls`` records each call."""

    answers: list[Any] = field(default_factory=list)
    default: Callable[[SideCallRecord], str] | None = None
    model: str = "scripted-model"
    context_window: int | None = 8192
    calls: list[SideCallRecord] = field(default_factory=list)

    async def info(self) -> SideCallInfo:
        return SideCallInfo(self.model, self.context_window)

    async def complete(self, messages: list[dict[str, Any]], *, max_tokens: int,
                       schema: dict[str, Any] | None = None, temperature: float | None = None) -> str:
        record = SideCallRecord([dict(m) for m in messages], max_tokens, schema, temperature)
        self.calls.append(record)
        if self.answers:
            answer = self.answers.pop(0)
        elif self.default is not None:
            answer = self.default(record)
        else:
            raise SideCallError("the scripted side call has no answer left", "side_call")
        if isinstance(answer, BaseException):
            raise answer
        return str(answer)


class SummarisingSideCall(ScriptedSideCall):
    """A terse summariser (see the module doc)."""

    def __init__(self, mode: str = "terse", words: int = 6, shaped: bool = True,
                 offtopic: frozenset[int] | set[int] = frozenset()) -> None:
        super().__init__(default=self.summarise)
        self.mode = mode
        self.words = words
        self.shaped = shaped
        self.offtopic = frozenset(offtopic)
        #: The call numbers (from 1) answered off topic so far.
        self.offtopic_answered: list[int] = []

    def summarise(self, record: SideCallRecord) -> str:
        text = self._summary(record)
        if record.schema is not None and self.shaped:
            return json.dumps({"summary": text, "decisions": [], "open": []})
        return text

    def _summary(self, record: SideCallRecord) -> str:
        if self.mode == "fail":
            raise SideCallError("the summariser crashed (HTTP 500)", "server_error")
        if len(self.calls) in self.offtopic:
            self.offtopic_answered.append(len(self.calls))
            return OFFTOPIC_SUMMARY
        if self.mode in ("faithful", "paraphrase"):
            return self._rewrite(record.prompt)
        prompt = record.prompt
        prev = ""
        m = re.search(r"Summary so far, of turns [^:]*:\n(.*?)\n\nNew turns to add:", prompt, re.S)
        if m:
            prev = m.group(1).strip()
        new = prompt.split("New turns to add:\n", 1)[-1]
        new = new.split("\n\nWrite the new running summary", 1)[0]
        if prev and self.mode == "small":  # a small model rewriting the summary so far loses half of it
            prev = "\n".join(prev.splitlines()[::2])
        lines = [prev] if prev else []
        for block in re.split(r"\n(?=Turn \d+:)", new.strip()):
            head = re.match(r"Turn (\d+):", block)
            if not head:
                continue
            person = re.search(r"^person \(entry \d+\): (.*)$", block, re.M)
            words = (person.group(1) if person else "").split()[: self.words]
            if self.mode == "small":  # a small model's note names no identifier of its own
                words = [w for w in words if not re.search(r"[/._:0-9]|^[A-Z]+-?\d|^test_|^entry$", w)]
            line = f"T{head.group(1)}: " + " ".join(words)
            if self.mode == "echo_items":
                line += " " + block.replace("\n", " ")
            lines.append(line)
        text = "\n".join(lines)
        if self.mode == "verbose":
            text += "\n" + ("and so on, at great length, " * 400)
        missing = re.search(r"Your last summary left out: (.*?)\. Write the whole summary again", prompt, re.S)
        if self.mode == "small":
            named = re.search(r"Keep each of these exactly as written: (.*?)\.\n", prompt + "\n", re.S)
            if named:
                text += "\nAlso: " + ", ".join(named.group(1).split(", ")[::2])
            if missing:
                text += "\nKept: " + ", ".join(missing.group(1).split(", ")[1::2])
            return text
        if missing and self.mode != "forgetful":
            text += "\nKept: " + missing.group(1)
        return text

    def _rewrite(self, prompt: str) -> str:
        """The ``faithful`` and ``paraphrase`` modes (see the module doc)."""
        faithful = self.mode == "faithful"
        m = re.search(r"Summary so far, of turns [^:]*:\n(.*?)\n\nNew turns to add:", prompt, re.S)
        prev = m.group(1).strip() if m else ""
        if prev and not faithful:
            prev = "\n".join(prev.splitlines()[::2])
        new = prompt.split("New turns to add:\n", 1)[-1].split("\n\nWrite the new running summary", 1)[0]
        new = re.split(r"\n\nKeep each of these exactly as written: ", new, maxsplit=1)[0]
        lowered = set(re.findall(r"\b[a-z][a-z']*\b", new))  # words the transcript writes in lower case
        lines = [prev] if prev else []
        for block in re.split(r"\n(?=Turn \d+:)", new.strip()):
            head = re.match(r"Turn (\d+):", block)
            if not head:
                continue
            tools = re.findall(r"^assistant called (\S+) (.*) \(entry (\d+)\)$", block, re.M)
            if not faithful:
                used = sorted({t[0] for t in tools})
                lines.append(f"T{head.group(1)}: the assistant " +
                             (f"used {', '.join(used)} and " if used else "") + "answered the person.")
                continue
            said = []
            for who, text in re.findall(r"^(person|assistant) \(entry \d+\): (.*)$", block, re.M):
                key = [s for s in _sentences(text) if _is_key(s, lowered)]
                if key:
                    said.append(("the person: " if who == "person" else "the assistant: ") + " ".join(key))
            said += [f"{name} {args} (entry {n})" for name, args, n in tools]
            lines.append(f"T{head.group(1)}: " + ("; ".join(said) if said else "work went on."))
        text = "\n".join(lines)
        named = re.search(r"Keep each of these exactly as written: (.*?)\.\n", prompt + "\n", re.S)
        missing = re.search(r"Your last summary left out: (.*?)\. Write the whole summary again", prompt, re.S)
        if named:
            items = named.group(1).split(", ")
            text += "\nAlso: " + ", ".join(items if faithful else items[::2])
        if missing:
            items = missing.group(1).split(", ")
            text += "\nKept: " + ", ".join(items if faithful else items[1::2])
        return text


def _sentences(text: str) -> list[str]:
    """``text`` cut into sentences (at ``.``, ``!`` or ``?`` and a space, or a line's end)."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


_IDENTIFIER = re.compile(r"\d|\w[/_.:@-]\w")


def _is_key(sentence: str, lowered: set[str]) -> bool:
    """A sentence worth copying: it holds a number, an identifier (a path,
    host, version, ``snake_case``), or a capitalised word the transcript never
    writes in lower case (a name)."""
    if len(sentence.split()) > 60:
        return False
    for word in re.findall(r"[\w/.:@-]+", sentence):
        word = word.strip(".:-")
        if _IDENTIFIER.search(word):
            return True
        if word[:1].isupper() and word.lower() not in lowered and word.upper() != word:
            return True
    return False


#: What a small model wrote as a running summary of a chat about a service's configuration:
#: nothing the conversation mentioned (about 1,400 tokens, as observed).
OFFTOPIC_SUMMARY = " ".join([
    "The user is setting up Docker Desktop on their workstation and wants containers to start reliably.",
    "We discussed enabling the WSL 2 backend, allocating more memory to the Docker Desktop virtual machine,",
    "and turning on Kubernetes from the settings panel. The assistant explained how Docker Desktop stores",
    "images in its own disk image, how to prune unused images and volumes, and how to reset to factory",
    "defaults when the engine will not start. The user asked about file sharing between the host and",
    "containers, and the assistant described bind mounts, named volumes and the performance trade-offs of",
    "each. Next steps: update Docker Desktop to the latest release, check the resource limits, and rebuild",
    "the development images with the new base image.",
] * 7)
