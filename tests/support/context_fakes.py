"""A fake Ollama that also answers the running summary's side calls, like a terse model.

Chat requests are answered from the script as usual (FakeOllama). A request
whose system message is wisp's summary rules never takes a script entry: it
is answered by :meth:`SummarisingOllama.summarise`, which writes one short
line per new turn (the first words of the person's prompt) under the summary
so far, and, when the prompt names items the last summary left out, adds
them, as an obedient model would. It keeps no identifiers on the first
attempt beyond what those first words hold, so the coverage check's retry is
exercised. ``summary_mode`` changes that: ``"echo_items"`` keeps every item
named in the turns at once, ``"forgetful"`` never adds the missing items,
``"fail"`` answers HTTP 500, ``"verbose"`` writes far too much.
"""

from __future__ import annotations

import re
from typing import Any

from tests.support.fakes import FakeOllama, fault, reply

SUMMARY_MARKER = "You keep the running summary"


def is_summary_request(body: Any) -> bool:
    """Whether a chat body is wisp's running summary side call."""
    messages = body.get("messages", []) if isinstance(body, dict) else []
    return bool(messages) and messages[0].get("role") == "system" and \
        str(messages[0].get("content", "")).startswith(SUMMARY_MARKER)


class SummarisingOllama(FakeOllama):
    """FakeOllama plus a summariser (see the module doc). ``summary_bodies``
    holds the side calls' bodies; ``summary_mode`` picks the behaviour."""

    def __init__(self, *args: Any, summary_mode: str = "terse", words: int = 6, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.summary_mode = summary_mode
        self.words = words
        self.summary_bodies: list[Any] = []

    def _next_entry(self, body: Any) -> dict:
        if is_summary_request(body):
            with self._lock:
                self.summary_bodies.append(body)
            if self.summary_mode == "fail":
                return fault.status(500, {"error": "the summariser crashed"})
            return reply(self.summarise(body["messages"][-1]["content"]), usage=(200, 60))
        return super()._next_entry(body)

    def default_reply(self, body: Any) -> dict:
        """The base default reply, with prompt tokens counted as a tokenizer
        roughly would (four characters a token), not in words."""
        entry = FakeOllama.default_reply(body)
        messages = body.get("messages", []) if isinstance(body, dict) else []
        chars = sum(len(str(m.get("content") or "")) for m in messages if isinstance(m, dict))
        entry["usage"] = {"prompt": max(1, chars // 4 + 4 * len(messages)), "completion": entry["usage"]["completion"]}
        return entry

    @property
    def main_bodies(self) -> list[Any]:
        """Chat bodies that are not summary side calls."""
        return [b for b in self.chat_bodies if not is_summary_request(b)]

    def summarise(self, prompt: str) -> str:
        """The summary text for a side call's user prompt."""
        prev = ""
        m = re.search(r"Summary so far, of turns [^:]*:\n(.*?)\n\nNew turns to add:", prompt, re.S)
        if m:
            prev = m.group(1).strip()
        new = prompt.split("New turns to add:\n", 1)[-1]
        new = new.split("\n\nWrite the new running summary", 1)[0]
        lines = [prev] if prev else []
        for block in re.split(r"\n(?=Turn \d+:)", new.strip()):
            head = re.match(r"Turn (\d+):", block)
            if not head:
                continue
            person = re.search(r"^person \(entry \d+\): (.*)$", block, re.M)
            words = (person.group(1) if person else "").split()[: self.words]
            line = f"T{head.group(1)}: " + " ".join(words)
            if self.summary_mode == "echo_items":
                line += " " + block.replace("\n", " ")
            lines.append(line)
        text = "\n".join(lines)
        if self.summary_mode == "verbose":
            text += "\n" + ("and so on, at great length, " * 400)
        missing = re.search(r"Your last summary left out: (.*?)\. Write the whole summary again", prompt, re.S)
        if missing and self.summary_mode != "forgetful":
            text += "\nKept: " + missing.group(1)
        return text
