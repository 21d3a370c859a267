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

    def __init__(self, mode: str = "terse", words: int = 6, shaped: bool = True) -> None:
        super().__init__(default=self.summarise)
        self.mode = mode
        self.words = words
        self.shaped = shaped

    def summarise(self, record: SideCallRecord) -> str:
        text = self._summary(record)
        if record.schema is not None and self.shaped:
            return json.dumps({"summary": text, "decisions": [], "open": []})
        return text

    def _summary(self, record: SideCallRecord) -> str:
        if self.mode == "fail":
            raise SideCallError("the summariser crashed (HTTP 500)", "server_error")
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
