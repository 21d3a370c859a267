"""Reading a GGUF header: the trained context length caps the embedded server's window (issue 10)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from wisp.core.model.embedded import DEFAULT_N_CTX, default_gguf_path, window_for
from wisp.core.model.gguf import GGUFError, read_gguf, trained_context_length


def s(text: str, wide: bool = True) -> bytes:
    data = text.encode()
    return struct.pack("<Q" if wide else "<I", len(data)) + data


def kv(key: str, kind: int, payload: bytes, wide: bool = True) -> bytes:
    return s(key, wide) + struct.pack("<I", kind) + payload


def gguf(entries: list[bytes], version: int = 3) -> bytes:
    wide = version >= 2
    count = "<Q" if wide else "<I"
    return b"GGUF" + struct.pack("<I", version) + struct.pack(count, 0) + struct.pack(count, len(entries)) + b"".join(entries)


def typical(context_length: int = 8192, version: int = 3) -> bytes:
    wide = version >= 2
    vocab = struct.pack("<I", 8) + struct.pack("<Q" if wide else "<I", 3) + b"".join(s(t, wide) for t in ("a", "bc", "<|im_start|>"))
    scores = struct.pack("<I", 6) + struct.pack("<Q" if wide else "<I", 3) + struct.pack("<3f", 0.1, 0.2, 0.3)
    return gguf([
        kv("general.architecture", 8, s("llama", wide), wide),
        kv("general.name", 8, s("Tiny", wide), wide),
        kv("tokenizer.ggml.tokens", 9, vocab, wide),
        kv("tokenizer.ggml.scores", 9, scores, wide),
        kv("llama.block_count", 4, struct.pack("<I", 30), wide),
        kv("llama.context_length", 4, struct.pack("<I", context_length), wide),
        kv("llama.rope.freq_base", 6, struct.pack("<f", 10000.0), wide),
    ], version)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_reads_architecture_and_context_length(tmp_path: Path, version: int) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(typical(32768, version))
    info = read_gguf(path)
    assert (info.version, info.architecture, info.context_length, info.name) == (version, "llama", 32768, "Tiny")
    assert info.metadata["llama.block_count"] == 30
    assert "tokenizer.ggml.tokens" not in info.metadata  # arrays are skipped
    assert trained_context_length(path) == 32768


def test_a_file_that_does_not_say_has_no_length(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(gguf([kv("general.architecture", 8, s("qwen2"))]))
    assert read_gguf(path).context_length is None and trained_context_length(path) is None


@pytest.mark.parametrize("data, words", [
    (b"not a gguf file", "not a GGUF file"),
    (b"GGUF" + struct.pack("<I", 9), "version 9"),
    (typical()[:60], "ends in the middle"),
    (gguf([kv("x", 8, struct.pack("<Q", 1 << 40))]), "damaged"),
    (gguf([kv("x", 42, b"")]), "unknown type 42"),
])
def test_bad_files_fail_clearly(tmp_path: Path, data: bytes, words: str) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(GGUFError, match=words):
        read_gguf(path)
    assert trained_context_length(path) is None
    assert trained_context_length(tmp_path / "missing.gguf") is None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300), st.integers(min_value=0, max_value=400))
def test_any_damage_is_a_gguf_error_never_a_crash(tmp_path: Path, noise: bytes, cut: int) -> None:
    path = tmp_path / "fuzz.gguf"
    good = typical()
    path.write_bytes(good[:cut] + noise)
    try:
        read_gguf(path)
    except GGUFError:
        pass
    length = trained_context_length(path)  # never raises
    assert length is None or (isinstance(length, int) and length > 0)


def test_the_window_is_capped_at_the_trained_length(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(typical(8192))
    assert window_for(path, None) == (DEFAULT_N_CTX, 8192)
    assert window_for(path, 16384) == (8192, 8192)  # what the advice got wrong
    assert window_for(path, 4096) == (4096, 8192)
    path.write_bytes(typical(131072))
    assert window_for(path, None) == (DEFAULT_N_CTX, 131072)  # the default stays modest
    assert window_for(path, 32768) == (32768, 131072)


def test_smollm2_was_trained_on_8192_tokens() -> None:
    path = default_gguf_path()
    if path is None:
        pytest.skip("the local extra is not installed")
    info = read_gguf(path)
    assert info.architecture == "llama" and info.context_length == 8192
