"""wisp's prompted tool protocol: tools described in the system prompt, calls parsed from the reply.

For a server that drops ``tools`` from the request (llama-cpp-python's server
without a function-calling chat format, many small local setups), the tools
still reach the model this way (issue 10, "Tools reach the model, on every
server"):

* :func:`render_tools` turns the tool schemas (OpenAI's function shape) into
  a short text for the system prompt, which tells the model to call a tool by
  writing one fixed block::

      <tool_call>
      {"name": "read_file", "arguments": {"path": "README.md"}}
      </tool_call>

  The block is the one Hermes, Qwen and SmolLM2's own function-calling data
  use, so small models know it.
* :class:`PromptedParser` reads the streamed reply incrementally: the text
  outside blocks is shown (:class:`Shown`), each block becomes a
  :class:`PromptedCall` and is never shown. A block may be split across
  stream chunks at any character; the result never depends on the split.
* :func:`to_prompted_messages` rewrites a conversation in the neutral message
  shape (see :mod:`wisp.core.model.base`) so that earlier calls and results
  travel as plain text: an assistant's ``tool_calls`` become blocks in its
  content, and ``tool`` messages become ``user`` messages that say which call
  they answer.

This module is a leaf: it imports neither the model endpoints nor the
context; it works on plain dicts and strings.

Usage::

    messages = to_prompted_messages(neutral_messages, schemas)   # send with tools=None
    parser = PromptedParser()
    for chunk in text_deltas:
        for item in parser.feed(chunk):      # Shown | PromptedCall
            ...
    for item in parser.flush():              # at the end of the reply
        ...
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Union

from ..messages import CONTEXT_AT, CONTEXT_JOIN, TOOLS_AT
from .thinking import after_tag

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"

#: Longest body of a block kept while waiting for its closing tag (characters).
#: A model that opens a block and never closes it ends as a malformed call at
#: :meth:`PromptedParser.flush`, or here, without holding the whole reply back.
MAX_BLOCK_CHARS = 64_000


@dataclass(frozen=True)
class Shown:
    """A piece of the reply to show the person (outside any tool-call block)."""

    text: str


@dataclass(frozen=True)
class PromptedCall:
    """One tool call written as a block.

    ``name`` is the tool's name (``""`` when the block named none);
    ``arguments`` the decoded JSON object (``{}`` when it could not be
    decoded); ``raw`` the block's text as written when it could not be decoded
    into a call with object arguments, else ``None``. The agent reports a
    call with ``raw`` set back to the model as malformed.
    """

    name: str
    arguments: dict[str, Any]
    raw: str | None = None

    @property
    def well_formed(self) -> bool:
        """True when the block named a tool and its arguments decoded to an object."""
        return bool(self.name) and self.raw is None


Item = Union[Shown, PromptedCall]


# --- rendering -------------------------------------------------------------


def _type_of(spec: dict[str, Any]) -> str:
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = "|".join(str(k) for k in kind)
    text = str(kind or "any")
    if isinstance(spec.get("enum"), list):
        text = " | ".join(json.dumps(v) for v in spec["enum"])
    return text


def _example_value(spec: dict[str, Any], name: str) -> Any:
    if isinstance(spec.get("enum"), list) and spec["enum"]:
        return spec["enum"][0]
    kind = spec.get("type")
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return "..."


def _function(schema: dict[str, Any]) -> dict[str, Any]:
    fn = schema.get("function") if isinstance(schema, dict) else None
    return fn if isinstance(fn, dict) else (schema if isinstance(schema, dict) else {})


def render_tools(schemas: Iterable[dict[str, Any]]) -> str:
    """The tool layer for the system prompt: each tool with its arguments, and
    how to call one (the ``<tool_call>`` block). Returns ``""`` for no tools.

    ``schemas`` are in OpenAI's function shape (``{"type": "function",
    "function": {"name", "description", "parameters"}}``); a bare
    ``{"name", ...}`` is accepted too. The text is deterministic, so it keeps
    the server's prompt cache warm from one request to the next.
    """
    fns = [_function(s) for s in schemas or []]
    fns = [fn for fn in fns if fn.get("name")]
    if not fns:
        return ""
    lines = ["# Tools", "", "You can call these tools:"]
    for fn in fns:
        params = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {}
        props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
        required = set(params.get("required") or [])
        lines.append("")
        lines.append(f"## {fn['name']}")
        if fn.get("description"):
            lines.append(" ".join(str(fn["description"]).split()))
        for pname, pspec in props.items():
            pspec = pspec if isinstance(pspec, dict) else {}
            need = "required" if pname in required else "optional"
            desc = " ".join(str(pspec.get("description") or "").split())
            lines.append(f"- {pname} ({_type_of(pspec)}, {need})" + (f": {desc}" if desc else ""))
    example = {"name": fns[0]["name"], "arguments": _example_arguments(fns[0])}
    lines += [
        "",
        "To call a tool, write exactly this block, with the tool's name and its arguments as JSON:",
        OPEN_TAG,
        json.dumps(example, ensure_ascii=False),
        CLOSE_TAG,
        "Then stop and wait: the tool's result comes back in the next message. "
        "When you need no tool, answer in plain text.",
    ]
    return "\n".join(lines)


#: Worked exchanges for wisp's own tools: (request, tool, arguments, result, answer).
#: A small model follows a protocol it has seen used far better than one it is
#: only told about: on SmolLM2-135M, the system text alone gave 0 blocks in 30
#: prompts that called for a tool, the text with these exchanges 13 of 30, and
#: no block for 6 prompts that needed none (benchmarks/tool_calls_smollm2.py).
EXAMPLES: dict[str, tuple[str, dict[str, Any], str, str]] = {
    "read_file": ("Read the file main.py", {"path": "main.py"}, "1\tprint('hi')", "main.py prints hi."),
    "system_info": ("How much memory does this machine have?", {"topic": "memory"},
                    "memory: 16 GiB total, 9 GiB available", "It has 16 GiB of memory, 9 GiB of it free."),
    "run_command": ("Run ls", {"command": "ls"}, "exit status 0\na.txt", "The directory holds one file, a.txt."),
    "edit_file": ("In notes.txt, change red to blue", {"path": "notes.txt", "search": "red", "replace": "blue"},
                  "edited notes.txt: 1 replacement (line 1), 1 line added, 1 removed.", "notes.txt says blue now."),
    "memory": ("What did we call the release?", {"request": "recall fact codename"},
               "codename = BLUE HERON", "The release is called BLUE HERON."),
}
MAX_EXAMPLES = 3


def example_messages(schemas: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Worked exchanges that show the protocol, for the offered tools only: for
    each (at most :data:`MAX_EXAMPLES`), a ``user`` request, the ``assistant``'s
    block, the result as a ``user`` message and the ``assistant``'s answer. A
    tool without a known example gets one built from its schema. Deterministic,
    so the prompt cache stays warm. ``[]`` for no tools."""
    out: list[dict[str, Any]] = []
    fns = [fn for fn in (_function(s) for s in schemas or []) if fn.get("name")]
    known = [fn for fn in fns if fn["name"] in EXAMPLES]
    others = [fn for fn in fns if fn["name"] not in EXAMPLES]
    for fn in (known + others)[:MAX_EXAMPLES]:
        name = fn["name"]
        if name in EXAMPLES:
            request, args, result, answer = EXAMPLES[name]
        else:
            args = _example_arguments(fn)
            request, result, answer = f"Use the {name} tool.", "done", f"{name} is done."
        out += [
            {"role": "user", "content": request},
            {"role": "assistant", "content": render_call(name, args)},
            {"role": "user", "content": render_result(name, result)},
            {"role": "assistant", "content": answer},
        ]
    return out


def _example_arguments(fn: dict[str, Any]) -> dict[str, Any]:
    params = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {}
    props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
    required = [p for p in (params.get("required") or []) if p in props] or list(props)[:1]
    return {p: _example_value(props[p] if isinstance(props[p], dict) else {}, p) for p in required}


def render_call(name: str, arguments: dict[str, Any] | None) -> str:
    """One call as the block the model writes (used for calls in the history)."""
    body = json.dumps({"name": name, "arguments": arguments or {}}, ensure_ascii=False)
    return f"{OPEN_TAG}\n{body}\n{CLOSE_TAG}"


def render_result(name: str, content: str) -> str:
    """A tool result as the text of a ``user`` message (the tool's name, then its output)."""
    return f"[result of {name or 'the tool'}]\n{content}"


def to_prompted_messages(messages: list[dict[str, Any]],
                         schemas: Iterable[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Neutral messages → the messages sent under the prompted protocol.

    Assistant ``tool_calls`` are appended to its content as blocks
    (:func:`render_call`); a ``tool`` message becomes a ``user`` message
    (:func:`render_result`), its name taken from the message or from the call
    it answers. With ``schemas`` (OpenAI's function shape), the tool layer is
    added: :func:`render_tools`' text at the end of the first system message
    (or as a system message of its own at the start when there is none), and
    :func:`example_messages` right after it, before the conversation. A
    system message whose :data:`TOOLS_AT` key gives a character offset of its
    content gets the tool text there instead (the composer marks where its
    running summary begins: the summary changes, the tools do not, and a
    server's prompt cache keeps only an unchanged start). The facts and
    task a user message ends with (from its :data:`CONTEXT_AT` offset) go
    to the very end of the system message instead, after the tools: on
    SmolLM2-135M, 30 prompts that call for a tool got 16 calls with them in
    the system message and none with them anywhere after it (in the
    prompt's message, before or after the person's words, or in a message
    of their own), where the model echoed them (benchmarks/tool_calls_smollm2.py
    measures the protocol). A changed fact then makes the server evaluate
    the turns again; an unchanged one leaves the request as cached. The
    result has no ``tool_calls`` and no ``tool`` role; the input is not
    changed.
    """
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    context: list[str] = []
    for msg in messages:
        role = msg.get("role", "user")
        content = str(msg.get("content") or "")
        at = msg.get(CONTEXT_AT)
        if role == "user" and isinstance(at, int) and 0 <= at <= len(content):
            content, kept = content[:at], content[at:]
            kept = kept[len(CONTEXT_JOIN):] if kept.startswith(CONTEXT_JOIN) else kept
            if kept.strip():
                context.append(kept.strip("\n"))
            if not content:
                continue
        if role == "assistant":
            calls = msg.get("tool_calls") or []
            parts = [content] if content else []
            for call in calls:
                names[str(call.get("id", ""))] = str(call.get("name", ""))
                parts.append(render_call(str(call.get("name", "")), call.get("arguments") or {}))
            out.append({"role": "assistant", "content": "\n".join(parts)})
        elif role == "tool":
            name = str(msg.get("name") or names.get(str(msg.get("tool_call_id", "")), ""))
            out.append({"role": "user", "content": render_result(name, content)})
        else:
            out.append({"role": role, "content": content})
    schemas = list(schemas or [])
    tool_text = render_tools(schemas)
    if not tool_text:
        return _with_context_last(out, context)
    at = 0
    if out and out[0]["role"] == "system":
        first = out[0]
        split = messages[0].get(TOOLS_AT) if messages and messages[0].get("role") == "system" else None
        text = first["content"]
        if isinstance(split, int) and 0 < split < len(text):
            first["content"] = text[:split].rstrip("\n") + "\n\n" + tool_text + "\n\n" + text[split:].lstrip("\n")
        else:
            first["content"] = (text + "\n\n" + tool_text) if text else tool_text
        at = 1
    else:
        out.insert(0, {"role": "system", "content": tool_text})
        at = 1
    out[at:at] = example_messages(schemas)
    return _with_context_last(out, context)


def _with_context_last(out: list[dict[str, Any]], context: list[str]) -> list[dict[str, Any]]:
    """``out`` with the facts and task (``context``) at the end of its first
    system message (a system message of their own at the start when it has
    none)."""
    if not context:
        return out
    text = "\n\n".join(context)
    if out and out[0]["role"] == "system":
        out[0]["content"] = (out[0]["content"].rstrip("\n") + "\n\n" + text) if out[0]["content"] else text
    else:
        out.insert(0, {"role": "system", "content": text})
    return out


# --- grammar (llama.cpp servers) -------------------------------------------

_GBNF_COMMON = r"""
str ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] )* "\""
int ::= "-"? [0-9]+
num ::= "-"? [0-9]+ ( "." [0-9]+ )?
bool ::= "true" | "false"
value ::= obj | arr | str | num | bool | "null"
obj ::= "{" ( str ": " value ( ", " str ": " value )* )? "}"
arr ::= "[" ( value ( ", " value )* )? "]"
"""


def _gbnf_literal(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid GBNF literal for the characters wisp uses


def _gbnf_value(spec: Any) -> str:
    spec = spec if isinstance(spec, dict) else {}
    if isinstance(spec.get("enum"), list) and spec["enum"]:
        return "( " + " | ".join(_gbnf_literal(json.dumps(v, ensure_ascii=False)) for v in spec["enum"]) + " )"
    return {"string": "str", "integer": "int", "number": "num", "boolean": "bool"}.get(str(spec.get("type")), "value")


def tool_grammar(schemas: Iterable[dict[str, Any]], *, allow_text: bool = True) -> str | None:
    """A GBNF grammar (llama.cpp's ``grammar`` request field) for a reply under
    this protocol: either plain text that does not start with ``<`` (only with
    ``allow_text``), or exactly one block whose JSON names an offered tool and
    gives its required arguments (then its optional ones, each or not, in
    schema order) with the right JSON types. ``None`` for no tools.

    With it, every block the model opens is a well-formed call: on
    SmolLM2-135M, 16 of 30 prompts that called for a tool gave a well-formed
    call, against 7 of 30 without it (benchmarks/tool_calls_smollm2.py). But
    llama.cpp checks every token of the reply against it, which made a
    200-token text reply about 1.3 times slower (91 against 70 ms a token on
    2 busy cores); so wisp sends it with ``allow_text=False`` only to rewrite
    a block that came out malformed (:class:`wisp.core.model.tool_modes.ToolModeEndpoint`),
    on a prompt the server has just cached.
    """
    fns = [fn for fn in (_function(s) for s in schemas or []) if fn.get("name")]
    if not fns:
        return None
    rules = ["root ::= call | text", 'text ::= [^<] [^\\x00]*'] if allow_text else ["root ::= call"]
    alts = []
    for i, fn in enumerate(fns):
        params = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {}
        props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
        required = [p for p in (params.get("required") or []) if p in props]
        optional = [p for p in props if p not in required]
        head = _gbnf_literal(json.dumps(fn["name"], ensure_ascii=False) + ', "arguments": {')
        parts = []
        for j, name in enumerate(required):
            sep = "" if j == 0 else ", "
            parts.append(_gbnf_literal(f"{sep}{json.dumps(name)}: ") + " " + _gbnf_value(props[name]))
        for name in optional:
            if required:
                parts.append("( " + _gbnf_literal(f", {json.dumps(name)}: ") + " " + _gbnf_value(props[name]) + " )?")
        if not required and optional:  # any one optional argument, or none
            first = " | ".join(_gbnf_literal(f"{json.dumps(n)}: ") + " " + _gbnf_value(props[n]) for n in optional)
            parts.append(f"( {first} )?")
        rules.append(f"tool{i} ::= {head} {' '.join(parts)} " + _gbnf_literal("}"))
        alts.append(f"tool{i}")
    rules.insert(1, "call ::= " + _gbnf_literal(OPEN_TAG + '\n{"name": ') + " ( " + " | ".join(alts) + " ) "
                 + _gbnf_literal("}\n" + CLOSE_TAG))
    return "\n".join(rules) + "\n" + _GBNF_COMMON.strip() + "\n"


# --- parsing ---------------------------------------------------------------

_FENCE_RE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?|\n?```\s*$")
_NAME_RE = re.compile(r'"name"\s*:\s*"([^"\\]{1,200})"')


def _partial_tag_len(buf: str, tag: str) -> int:
    """Length of the longest proper prefix of ``tag`` that ``buf`` ends with (characters)."""
    for n in range(min(len(tag) - 1, len(buf)), 0, -1):
        if buf.endswith(tag[:n]):
            return n
    return 0


def _clean_name(name: Any) -> str:
    text = str(name or "").strip()
    for prefix in ("functions.", "function.", "tools."):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text


def _one_call(obj: Any, raw: str) -> PromptedCall:
    if not isinstance(obj, dict):
        return PromptedCall("", {}, raw)
    fn = obj.get("function") if isinstance(obj.get("function"), dict) else obj
    name = _clean_name(fn.get("name") or fn.get("tool") or fn.get("tool_name"))
    args: Any = fn.get("arguments", fn.get("parameters", fn.get("args", {})))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return PromptedCall(name, {}, raw)
    if args is None:
        args = {}
    if not isinstance(args, dict) or not name:
        return PromptedCall(name, {}, raw)
    return PromptedCall(name, args, None)


def parse_block(body: str) -> list[PromptedCall]:
    """The calls in one block's text (between the tags).

    Accepts a JSON object ``{"name", "arguments"}`` (``arguments`` may be an
    object or JSON text; ``parameters`` is read as ``arguments``; a
    ``functions.`` prefix on the name is dropped), a JSON list of such objects,
    several objects one after another, and a Markdown code fence around them.
    Text that is not JSON gives one call with ``raw`` set and the name found
    in it, if any. Never raises.
    """
    text = _FENCE_RE.sub("", body.strip()).strip()
    if not text:
        return [PromptedCall("", {}, body)]
    decoder = json.JSONDecoder()
    calls: list[PromptedCall] = []
    pos = 0
    while pos < len(text):
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text):
            break
        try:
            obj, end = decoder.raw_decode(text, pos)
        except ValueError:
            found = _NAME_RE.search(text)
            return calls + [PromptedCall(_clean_name(found.group(1)) if found else "", {}, body)]
        chunk = text[pos:end]
        if isinstance(obj, list):
            calls.extend(_one_call(item, chunk) for item in obj)
        else:
            calls.append(_one_call(obj, chunk))
        pos = end
    return calls or [PromptedCall("", {}, body)]


class PromptedParser:
    """An incremental reader of a reply written under the prompted protocol.

    :meth:`feed` takes the next piece of the reply's text and returns what it
    completes: :class:`Shown` text (outside blocks; a tail that might be the
    start of ``<tool_call>`` is held back until the next piece says what it
    is) and :class:`PromptedCall` objects (one per call in a closed block).
    :meth:`flush` ends the reply: held-back text is shown, and an unclosed
    block still becomes its calls (the server may stop generating right at
    the closing tag). Whitespace right after a block is dropped, so the blank
    line a model puts after a call does not show as an empty reply.

    Concatenating the ``Shown`` texts and listing the calls gives the same
    result however the reply was split into pieces. Not thread-safe; one per
    reply. ``calls`` counts the calls parsed so far.
    """

    def __init__(self) -> None:
        self._buf = ""
        self._in_block = False
        self._strip_ws = False
        self.calls = 0

    @property
    def in_block(self) -> bool:
        """True while the text seen so far ends inside an open block."""
        return self._in_block

    def feed(self, chunk: str) -> list[Item]:
        """Take the next piece of the reply (any length, split anywhere)."""
        if not chunk:
            return []
        self._buf += chunk
        out: list[Item] = []
        while self._buf:
            if self._in_block:
                idx = self._buf.find(CLOSE_TAG)
                if idx < 0:
                    if len(self._buf) > MAX_BLOCK_CHARS + len(CLOSE_TAG):
                        self._emit_calls(self._buf, out)
                        self._buf = ""
                        self._in_block = False
                        self._strip_ws = True
                    break
                self._emit_calls(self._buf[:idx], out)
                self._buf = self._buf[idx + len(CLOSE_TAG):]
                self._in_block = False
                self._strip_ws = True
                continue
            idx = self._buf.find(OPEN_TAG)
            if idx >= 0:
                self._show(self._buf[:idx], out)
                self._buf = self._buf[idx + len(OPEN_TAG):]
                self._in_block = True
                continue
            keep = _partial_tag_len(self._buf, OPEN_TAG)
            self._show(self._buf[: len(self._buf) - keep], out)
            self._buf = self._buf[len(self._buf) - keep:]
            break
        return out

    def flush(self) -> list[Item]:
        """End of the reply: release what is held back. The parser is reset afterwards."""
        out: list[Item] = []
        if self._in_block:
            self._emit_calls(self._buf, out)
        else:
            self._show(self._buf, out)
        self._buf = ""
        self._in_block = False
        self._strip_ws = False
        return out

    def _emit_calls(self, body: str, out: list[Item]) -> None:
        for call in parse_block(body):
            self.calls += 1
            out.append(call)

    def _show(self, text: str, out: list[Item]) -> None:
        text, self._strip_ws = after_tag(text, self._strip_ws)
        if text:
            out.append(Shown(text))


_LINE_NUMBER = re.compile(r"(?m)^ *\d+\t")


def call_key(name: str, arguments: dict[str, Any]) -> str:
    """One call's identity (its tool and its arguments, key order aside)."""
    return json.dumps([name, arguments], ensure_ascii=False, sort_keys=True, default=str)


def quoted_calls(messages: list[dict[str, Any]]) -> set[str]:
    """The :func:`call_key` of every call written as a block in the latest
    tool results (the ``tool`` messages after the last ``user`` one), read as
    the model would read them (``read_file``'s line numbers taken off). A
    file, a command's output or an MCP answer can hold ``<tool_call>``
    blocks; a model that echoes them has not chosen to make those calls, so
    the prompted path does not run a call found here: only calls the model
    wrote itself count."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    keys: set[str] = set()
    for msg in messages[last_user + 1:]:
        if msg.get("role") != "tool":
            continue
        text = _LINE_NUMBER.sub("", str(msg.get("content") or ""))
        if OPEN_TAG not in text:
            continue
        parser = PromptedParser()
        for item in parser.feed(text) + parser.flush():
            if isinstance(item, PromptedCall) and item.name:
                keys.add(call_key(item.name, item.arguments))
    return keys


def call_problem(call: PromptedCall, schemas: Iterable[dict[str, Any]]) -> str | None:
    """Why ``call`` cannot be run as written, or ``None``: a block that did not
    decode, a tool that was not offered, or a required argument left out."""
    if call.raw is not None:
        return "the block is not valid JSON"
    fns = {fn["name"]: fn for fn in (_function(s) for s in schemas or []) if fn.get("name")}
    if call.name not in fns:
        return f"no tool named {call.name!r} was offered"
    params = fns[call.name].get("parameters") if isinstance(fns[call.name].get("parameters"), dict) else {}
    missing = [p for p in (params.get("required") or []) if p not in call.arguments]
    return f"{call.name} needs {', '.join(missing)}" if missing else None


def parse_reply(text: str) -> tuple[str, list[PromptedCall]]:
    """Read a whole reply at once: ``(shown_text, calls)``."""
    parser = PromptedParser()
    items = parser.feed(text) + parser.flush()
    shown = "".join(i.text for i in items if isinstance(i, Shown))
    return shown, [i for i in items if isinstance(i, PromptedCall)]


__all__ = [
    "OPEN_TAG", "CLOSE_TAG", "Shown", "PromptedCall", "PromptedParser", "render_tools", "render_call",
    "render_result", "example_messages", "to_prompted_messages", "tool_grammar", "call_problem", "parse_block", "parse_reply",
]
