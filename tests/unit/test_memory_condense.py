"""condense: chunk by chunk through the conversation's own model (fake endpoints, then llama.cpp)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wisp.core.memory.condense import NOTHING, chunk_lines
from wisp.core.memory.limits import MAX_CHUNKS, chunk_budget
from wisp.core.model.ollama import OllamaEndpoint
from wisp.core.model.openai import OpenAIEndpoint
from tests.support.home import require_local
from tests.support.fakes import FakeOllama, FakeOpenAI, fault, reply
from tests.support.memory_harness import make_harness

QUESTION = "why did the link step fail"


def link_log(lines: int) -> str:
    out = [f"[{i % 100:3d}%] Building C object src/CMakeFiles/app.dir/file_{i}.c.o" for i in range(lines)]
    out[lines // 2] = "/usr/bin/ld: cannot find -lssl: No such file or directory"
    return "\n".join(out)


def test_chunks_cover_every_line_once_within_the_budget() -> None:
    lines = link_log(3000).split("\n")
    chunks = chunk_lines(lines, 500)
    assert chunks[0].first == 1 and chunks[-1].last == 3000
    for a, b in zip(chunks, chunks[1:]):
        assert b.first == a.last + 1
    assert all(len(c.text) <= 500 * 4 for c in chunks)
    assert chunks[0].text.startswith("1\t[  0%] Building")


@pytest.mark.parametrize("server_cls", [FakeOllama, FakeOpenAI])
async def test_condense_asks_each_chunk_and_counts_the_ones_that_fail(tmp_path: Path, server_cls) -> None:
    with server_cls() as srv:
        endpoint = (OllamaEndpoint if server_cls is FakeOllama else OpenAIEndpoint)(srv.base_url, "wisp-fake",
                                                                                     timeout_s=5, load_wait_s=1)
        h = await make_harness(tmp_path, endpoint=endpoint, context_window=2048)
        await h.begin()
        out = await h.tool_output("run_command", {"command": "make"}, link_log(1000), meta={"exit_status": 2})
        await h.end()
        n_chunks = len(chunk_lines(link_log(1000).split("\n"), chunk_budget(2048)))
        assert 4 <= n_chunks <= MAX_CHUNKS
        script = []
        for i in range(n_chunks):
            if i == 1:
                script.append(fault.status(500, {"error": "the model crashed"}))
            elif i == n_chunks // 2 or i == (1000 // 2) * n_chunks // 1000:
                script.append(reply("Line 601: /usr/bin/ld: cannot find -lssl, so the link failed."))
            else:
                script.append(reply("Nothing here."))
        srv.push(*script)
        await h.begin()
        text = await h.ask(f"condense entry {out.number}: {QUESTION}")
        lines = text.splitlines()
        assert lines[0] == f'condensed by the model wisp-fake, not by an exact reader: "{QUESTION}"'
        assert lines[1].startswith(f"read: lines 1–1,000 of 1,000 of entry {out.number} (run_command output), "
                                   f"in {n_chunks} chunks; 1 said something, {n_chunks - 2} said nothing here")
        failed = next(x for x in lines if "failed and was not read" in x)
        assert failed.startswith("1 chunk failed and was not read: chunk 2 (lines ")
        assert "cannot find -lssl" in text
        assert lines[-1] == "[end of what condense found]"
        # every chunk was a fresh side call: no tools, thinking off, the question and the chunk
        bodies = srv.chat_bodies
        assert len(bodies) == n_chunks
        for body in bodies:
            assert not body.get("tools")
            assert [m["role"] for m in body["messages"]] == ["system", "user"]
            assert NOTHING in body["messages"][0]["content"]
            assert QUESTION in body["messages"][1]["content"]
        if server_cls is FakeOllama:
            assert all(b.get("think") is False for b in bodies)
        event = h.memory_events()[-1]
        assert event["action"] == "condense" and event["chunks_read"] == n_chunks
        assert event["chunks_failed"] == 1 and event["failed_chunks"][0]["chunk"] == 2
        assert event["target"] == {"kind": "entry", "entry": out.number}
        await h.close()
        await endpoint.aclose()


async def test_condense_without_a_model_points_at_summarise(tmp_path: Path) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    out = await h.tool_output("run_command", {"command": "make"}, "ld: cannot find -lz")
    await h.end()
    await h.begin()
    text = await h.ask(f"condense entry {out.number}: {QUESTION}")
    assert text.startswith("memory: no model is attached here to condense with; summarise entry ")
    assert h.memory_events()[-1]["failure"] == "no model"
    await h.close()


async def test_more_than_48_chunks_reads_48_and_says_so(tmp_path: Path) -> None:
    with FakeOllama() as srv:
        endpoint = OllamaEndpoint(srv.base_url, "wisp-fake", timeout_s=5, load_wait_s=1)
        h = await make_harness(tmp_path, endpoint=endpoint, context_window=1024)
        await h.begin()
        out = await h.tool_output("run_command", {"command": "make"}, link_log(6000))
        await h.end()
        srv.push(*[reply(NOTHING) for _ in range(60)])
        await h.begin()
        text = await h.ask(f"condense entry {out.number}: {QUESTION}")
        assert len(srv.chat_bodies) == MAX_CHUNKS
        more = next(x for x in text.splitlines() if x.startswith("the output makes "))
        m = re.match(r"the output makes (\d+) chunks and at most 48 are read: lines ([\d,]+)–6,000 were not read", more)
        assert m and int(m.group(1)) > MAX_CHUNKS
        assert "no chunk had anything for the question" in text
        await h.close()
        await endpoint.aclose()


async def test_answers_that_do_not_fit_are_combined_once(tmp_path: Path) -> None:
    with FakeOllama() as srv:
        endpoint = OllamaEndpoint(srv.base_url, "wisp-fake", timeout_s=5, load_wait_s=1)
        h = await make_harness(tmp_path, endpoint=endpoint, context_window=1200)
        await h.begin()
        out = await h.tool_output("run_command", {"command": "make"}, link_log(500))
        await h.end()
        n = len(chunk_lines(link_log(500).split("\n"), chunk_budget(1200)))
        srv.push(*[reply("A long note: " + "the linker ran and many objects were built; " * 12) for _ in range(n)])
        srv.push(reply("Combined: the link failed because -lssl was missing (line 401)."))
        await h.begin()
        text = await h.ask(f"condense entry {out.number}: {QUESTION}")
        assert len(srv.chat_bodies) == n + 1
        combine = srv.chat_bodies[-1]["messages"]
        assert "Combine" in combine[0]["content"] and QUESTION in combine[1]["content"]
        assert f"combined from {n} chunk answers: Combined: the link failed" in text
        assert h.memory_events()[-1]["combined"] is True
        await h.close()
        await endpoint.aclose()


@pytest.mark.real_model
async def test_condense_against_llama_cpp_with_smollm2(tmp_path: Path) -> None:
    require_local()
    from wisp.core.model.embedded import EmbeddedServer

    async with EmbeddedServer(n_ctx=2048) as server:
        endpoint = OpenAIEndpoint(server.base_url, server.model, timeout_s=120, load_wait_s=60)
        try:
            h = await make_harness(tmp_path, endpoint=endpoint, context_window=2048)
            await h.begin()
            log = "\n".join(["[ 10%] Building C object a.o", "[ 50%] Building C object b.o",
                             "/usr/bin/ld: cannot find -lssl: No such file or directory",
                             "collect2: error: ld returned 1 exit status",
                             "make: *** [Makefile:12: app] Error 1"] * 3)
            out = await h.tool_output("run_command", {"command": "make"}, log, meta={"exit_status": 2})
            await h.end()
            await h.begin()
            text = await h.ask(f"condense entry {out.number}: {QUESTION}")
            lines = text.splitlines()
            assert lines[0] == f'condensed by the model {server.model}, not by an exact reader: "{QUESTION}"'
            assert lines[1].startswith(f"read: lines 1–15 of 15 of entry {out.number} (run_command output), in 1 chunk;")
            assert lines[-1] == "[end of what condense found]"
            event = h.memory_events()[-1]
            assert event["chunks_read"] == 1 and event["chunks_failed"] == 0
            await h.close()
        finally:
            await endpoint.aclose()
