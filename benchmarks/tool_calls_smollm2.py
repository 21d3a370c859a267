"""How often SmolLM2-135M writes a well-formed tool call, by each way of giving it tools (issue 10).

Two ways are measured on the same prompts, each of which calls for a tool:

* ``native``: llama-cpp-python's server started with ``--chat_format
  chatml-function-calling``; the request carries ``tools`` and
  ``tool_choice: "auto"`` and is not streamed (the server refuses to stream a
  tool call: "Automatic streaming tool choice is not supported").
* ``prompted``: the server's own chat template (which drops ``tools``); the
  tools are described in the system prompt, with worked exchanges, by
  :func:`wisp.core.model.prompted.to_prompted_messages`, and the streamed reply
  is read by :class:`~wisp.core.model.prompted.PromptedParser`.
* ``prompted+rewrite``: what wisp does (:class:`wisp.core.model.tool_modes.ToolModeEndpoint`):
  the same, and a block that came out malformed is written again at once
  under the call-only grammar (:func:`~wisp.core.model.prompted.tool_grammar`
  with ``allow_text=False``), on the prompt the server just cached.
* ``prompted+grammar``: the same as ``prompted``, with llama.cpp's ``grammar``
  field set to the full grammar (text, or a well-formed call) on every request.

*median s* is per tool prompt, for the first request (and its rewrite);
*text s* is per prompt that needs no tool (a text reply, where a grammar on
every request costs most). Times depend on the machine's load.

A call is *well-formed* when it names one of the offered tools and its
arguments are a JSON object that passes the tool's schema (required
arguments present, types and enums right). *Right tool* counts calls of the
tool the prompt asks for. *Answers after the result* sends the tool's
result back (as a user message: chatml-function-calling's template drops
``tool`` messages) and counts text replies. *False calls* counts calls on
prompts that need no tool.

    python benchmarks/tool_calls_smollm2.py            # starts both servers itself
    python benchmarks/tool_calls_smollm2.py --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

from wisp.core.tools.registry import build_registry  # noqa: E402
from wisp.core.tools.base import check_arguments  # noqa: E402
from wisp.core.model.prompted import (  # noqa: E402
    PromptedCall, PromptedParser, to_prompted_messages, tool_grammar,
)

SYSTEM = ("You are wisp, a helpful assistant running on the person's own machine. "
          "Answer clearly and briefly. Use the tools when you need to read files or "
          "learn about the machine; do not guess at a file's contents.")

#: (prompt, the tool it calls for)
PROMPTS: list[tuple[str, str]] = [
    ("Use the read_file tool with path README.md", "read_file"),
    ("Read the file setup.py and tell me what it does.", "read_file"),
    ("What is in notes.txt?", "read_file"),
    ("Show me the contents of src/main.py", "read_file"),
    ("Open config.json and list its keys.", "read_file"),
    ("Please read docs/install.md", "read_file"),
    ("Summarise the file CHANGELOG.md for me.", "read_file"),
    ("Read lines 10 to 20 of app.py", "read_file"),
    ("Can you look at requirements.txt and tell me which packages it needs?", "read_file"),
    ("Find the bug in utils/strings.py", "read_file"),
    ("What does the Makefile in this directory do?", "read_file"),
    ("Read the file named LICENSE.", "read_file"),
    ("How much RAM does this machine have?", "system_info"),
    ("What CPU is this computer using?", "system_info"),
    ("How much free disk space is left?", "system_info"),
    ("Which operating system am I running?", "system_info"),
    ("Use the system_info tool to check the memory.", "system_info"),
    ("Tell me about this machine's processor.", "system_info"),
    ("Is my disk nearly full?", "system_info"),
    ("What OS version is installed here?", "system_info"),
    ("Run the tests with pytest.", "run_command"),
    ("List the files in the current directory.", "run_command"),
    ("Run `git status` and tell me what changed.", "run_command"),
    ("Use run_command to print the current date.", "run_command"),
    ("Count the lines in main.py using wc.", "run_command"),
    ("Check which version of Python is installed by running python --version.", "run_command"),
    ("Run make build and tell me if it succeeded.", "run_command"),
    ("Show the last 5 commits with git log.", "run_command"),
    ("Install the dependencies with pip install -r requirements.txt", "run_command"),
    ("Execute ls -la in the docs folder.", "run_command"),
]

#: Prompts that need no tool: a call here is a false call.
NO_TOOL_PROMPTS = [
    "What is the capital of France?", "Write a haiku about autumn.", "What is 2 + 2?",
    "Translate 'good morning' into Spanish.", "Tell me a short joke.",
    "Explain what a Python list is in one sentence.",
]

FAKE_RESULTS = {
    "read_file": "1\t# Demo\n2\tA small demo project that prints hello.\n",
    "system_info": "memory: 7.6 GiB total, 3.1 GiB available",
    "run_command": "exit status 0\nhello\n",
}


def schemas() -> list[dict[str, Any]]:
    return build_registry(["read_file", "system_info", "run_command"]).schemas()


def verdict(name: str, arguments: Any, raw: str | None, tools: list[dict[str, Any]]) -> bool:
    """Well-formed: an offered tool, object arguments that pass its schema."""
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    if raw is not None or name not in by_name or not isinstance(arguments, dict):
        return False
    tool = SimpleNamespace(name=name, parameters=by_name[name])
    return check_arguments(tool, dict(arguments)) is None


async def native_once(client: httpx.AsyncClient, url: str, prompt: str, tools: list[dict[str, Any]],
                      max_tokens: int, follow_up: bool = True) -> dict[str, Any]:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    body = {"model": "m", "messages": messages, "tools": tools, "tool_choice": "auto",
            "max_tokens": max_tokens, "temperature": 0.0, "stream": False}
    started = time.monotonic()
    reply = (await client.post(url + "/v1/chat/completions", json=body)).json()
    elapsed = time.monotonic() - started
    msg = reply["choices"][0]["message"]
    calls = []
    for call in msg.get("tool_calls") or []:
        fn = call.get("function") or {}
        try:
            args, raw = json.loads(fn.get("arguments") or "{}"), None
        except ValueError:
            args, raw = {}, fn.get("arguments")
        calls.append((str(fn.get("name") or ""), args, raw, call.get("id")))
    after = None
    if calls and follow_up:
        # The result goes back as a user message: chatml-function-calling's template drops
        # role "tool" messages altogether, so this is the best case for this way.
        name, args, _, call_id = calls[0]
        follow = messages + [
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]},
            {"role": "user", "content": f"[result of {name}]\n" + FAKE_RESULTS.get(name, "ok")},
        ]
        body2 = dict(body, messages=follow)
        r2 = (await client.post(url + "/v1/chat/completions", json=body2)).json()
        if "choices" not in r2:
            raise SystemExit(f"the server refused the follow-up: {r2}")
        r2 = r2["choices"][0]["message"]
        after = bool((r2.get("content") or "").strip()) and not r2.get("tool_calls")
    return {"calls": calls, "text": msg.get("content") or "", "seconds": elapsed, "answers_after": after,
            "prompt_tokens": reply.get("usage", {}).get("prompt_tokens")}


async def stream_text(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> str:
    text = ""
    async with client.stream("POST", url + "/v1/chat/completions", json=dict(body, stream=True)) as resp:
        async for line in resp.aiter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            obj = json.loads(line[5:])
            for choice in obj.get("choices") or []:
                text += (choice.get("delta") or {}).get("content") or ""
    return text


async def prompted_once(client: httpx.AsyncClient, url: str, prompt: str, tools: list[dict[str, Any]],
                        max_tokens: int, follow_up: bool = True, grammar: bool = False) -> dict[str, Any]:
    neutral = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    messages = to_prompted_messages(neutral, tools)
    body = {"model": "m", "messages": messages, "max_tokens": max_tokens, "temperature": 0.0}
    if grammar:
        body["grammar"] = tool_grammar(tools)
    started = time.monotonic()
    text = await stream_text(client, url, body)
    elapsed = time.monotonic() - started
    parser = PromptedParser()
    items = parser.feed(text) + parser.flush()
    calls = [(c.name, c.arguments, c.raw, "call_1") for c in items if isinstance(c, PromptedCall)]
    shown = "".join(i.text for i in items if not isinstance(i, PromptedCall))
    after = None
    if calls and follow_up:
        name, args, _, call_id = calls[0]
        follow = neutral + [
            {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "name": name, "arguments": args}]},
            {"role": "tool", "tool_call_id": call_id, "name": name, "content": FAKE_RESULTS.get(name, "ok")},
        ]
        body2 = dict(body, messages=to_prompted_messages(follow, tools))
        text2 = await stream_text(client, url, body2)
        shown2, calls2 = _split(text2)
        after = bool(shown2.strip()) and not calls2
    return {"calls": calls, "text": shown, "seconds": elapsed, "answers_after": after, "raw": text}


def _split(text: str) -> tuple[str, list[PromptedCall]]:
    parser = PromptedParser()
    items = parser.feed(text) + parser.flush()
    return ("".join(i.text for i in items if not isinstance(i, PromptedCall)),
            [i for i in items if isinstance(i, PromptedCall)])


async def measure(way: str, url: str, max_tokens: int, verbose: bool) -> dict[str, Any]:
    tools = schemas()
    rows = []
    async with httpx.AsyncClient(timeout=300, trust_env=False) as client:
        for prompt, expected in PROMPTS:
            r = await ONCE[way](client, url, prompt, tools, max_tokens)
            well = bool(r["calls"]) and all(verdict(n, a, raw, tools) for n, a, raw, _ in r["calls"])
            right = bool(r["calls"]) and r["calls"][0][0] == expected
            rows.append({"prompt": prompt, "expected": expected, "called": bool(r["calls"]), "well_formed": well,
                         "right_tool": right, "answers_after": r["answers_after"], "seconds": r["seconds"],
                         "calls": [(n, a, raw) for n, a, raw, _ in r["calls"]], "text": r["text"][:120]})
            if verbose:
                print(f"  [{way}] {'OK ' if well else 'BAD'} {prompt[:50]:50} -> {rows[-1]['calls'] or rows[-1]['text'][:60]!r}",
                      file=sys.stderr)
        false_calls = 0
        text_seconds = []
        for prompt in NO_TOOL_PROMPTS:
            r = await ONCE[way](client, url, prompt, tools, max_tokens, follow_up=False)
            false_calls += bool(r["calls"])
            text_seconds.append(r["seconds"])
            if verbose:
                print(f"  [{way}] {'CALL' if r['calls'] else 'text'} {prompt[:50]:50}", file=sys.stderr)
    n = len(rows)
    called = [r for r in rows if r["called"]]
    return {
        "way": way, "prompts": n,
        "called": len(called),
        "well_formed": sum(r["well_formed"] for r in rows),
        "right_tool": sum(r["right_tool"] for r in rows),
        "answers_after_result": sum(1 for r in called if r["answers_after"]),
        "false_calls": false_calls, "no_tool_prompts": len(NO_TOOL_PROMPTS),
        "median_text_s": sorted(text_seconds)[len(text_seconds) // 2],
        "median_s": sorted(r["seconds"] for r in rows)[n // 2],
        "rows": rows,
    }


async def grammar_once(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return await prompted_once(*args, grammar=True, **kwargs)


async def rewrite_once(client: httpx.AsyncClient, url: str, prompt: str, tools: list[dict[str, Any]],
                       max_tokens: int, follow_up: bool = True) -> dict[str, Any]:
    """wisp's own path: ToolModeEndpoint over the OpenAI endpoint, with malformed blocks
    written again under the call-only grammar."""
    from wisp.core.model.base import ChatOptions, StreamText, ToolCallRequest
    from wisp.core.model.openai import OpenAIEndpoint
    from wisp.core.model.tool_modes import ToolModeEndpoint

    inner = OpenAIEndpoint(url, "m", timeout_s=300)
    inner.accepts_grammar = True
    endpoint = ToolModeEndpoint(inner, "prompted")
    neutral = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    options = ChatOptions(max_tokens=max_tokens, temperature=0.0)
    try:
        started = time.monotonic()
        events = [e async for e in endpoint.stream_chat(neutral, tools, options)]
        elapsed = time.monotonic() - started
        calls = [(e.name, e.arguments, e.raw_arguments, e.id) for e in events if isinstance(e, ToolCallRequest)]
        shown = "".join(e.text for e in events if isinstance(e, StreamText))
        after = None
        if calls and follow_up:
            name, args, _, call_id = calls[0]
            follow = neutral + [
                {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "name": name, "arguments": args}]},
                {"role": "tool", "tool_call_id": call_id, "name": name, "content": FAKE_RESULTS.get(name, "ok")},
            ]
            events2 = [e async for e in endpoint.stream_chat(follow, tools, options)]
            after = bool("".join(e.text for e in events2 if isinstance(e, StreamText)).strip()) and not any(
                isinstance(e, ToolCallRequest) for e in events2)
    finally:
        await endpoint.aclose()
    return {"calls": calls, "text": shown, "seconds": elapsed, "answers_after": after}


ONCE = {"native": native_once, "prompted": prompted_once, "prompted+rewrite": rewrite_once,
        "prompted+grammar": grammar_once}


async def start(chat_format: str | None, log: Path) -> Any:
    from wisp.core.model.embedded import EmbeddedServer

    server = EmbeddedServer(log_path=log, chat_format=chat_format)
    await server.start()
    return server


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--native-url", help="a server already started with --chat_format chatml-function-calling")
    ap.add_argument("--prompted-url", help="a server already started with its own chat template")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="wisp-toolbench-"))
    servers = []
    try:
        native_url, prompted_url = args.native_url, args.prompted_url
        if not native_url:
            servers.append(await start("chatml-function-calling", tmp / "native.log"))
            native_url = servers[-1].base_url
        if not prompted_url:
            servers.append(await start(None, tmp / "prompted.log"))
            prompted_url = servers[-1].base_url
        results = [await measure(way, native_url if way == "native" else prompted_url, args.max_tokens,
                                 args.verbose) for way in ONCE]
    finally:
        for server in servers:
            await server.stop()
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print(f"SmolLM2-135M-Instruct, {len(PROMPTS)} prompts that each call for a tool (temperature 0)")
    print(f"{'way':17} {'called':>8} {'well-formed':>12} {'right tool':>11} {'answers after result':>21} "
          f"{'false calls':>12} {'median s':>9} {'text s':>7}")
    for r in results:
        n = r["prompts"]
        print(f"{r['way']:17} {r['called']:>5}/{n} {r['well_formed']:>9}/{n} {r['right_tool']:>8}/{n} "
              f"{r['answers_after_result']:>15}/{r['called']:<5} {r['false_calls']:>9}/{r['no_tool_prompts']} "
              f"{r['median_s']:>9.2f} {r['median_text_s']:>7.2f}")


if __name__ == "__main__":
    asyncio.run(main())
