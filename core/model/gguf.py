"""Read a GGUF file's metadata: the model's architecture and trained context length.

The embedded server's window is capped at what the model was trained on,
``<architecture>.context_length`` in the GGUF header (issue 10, "No request
that cannot fit"). Reading it takes a few hundred microseconds and never
loads the model.

Layout (ggml's GGUF specification, versions 2 and 3; little-endian)::

    magic "GGUF" | version u32 | tensor_count u64 | kv_count u64 |
    kv_count × (key: string, value_type u32, value)

    string = length u64, UTF-8 bytes
    value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 8 string,
                 9 array (item_type u32, count u64, items), 10 u64, 11 i64, 12 f64

Version 1 used u32 for the counts and string lengths; it is read too.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterable

MAGIC = b"GGUF"
#: Longest string or array this reader accepts (a bad file fails fast instead of allocating gigabytes).
MAX_STRING_BYTES = 1 << 24
MAX_ARRAY_ITEMS = 1 << 26
MAX_KV = 1 << 20

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


class GGUFError(ValueError):
    """The file is not a GGUF file this reader understands, or it is cut short. One line."""


@dataclass(frozen=True)
class GGUFInfo:
    """What wisp needs from a GGUF header. ``context_length`` in tokens (``None``
    when the file does not say); ``metadata`` holds the scalar and string
    values read (arrays are skipped and not kept)."""

    path: str
    version: int
    architecture: str | None
    context_length: int | None
    name: str | None
    metadata: dict[str, Any]


class _Reader:
    def __init__(self, fh: BinaryIO, version: int) -> None:
        self.fh = fh
        self.wide = version >= 2

    def exact(self, n: int) -> bytes:
        data = self.fh.read(n)
        if len(data) != n:
            raise GGUFError("the GGUF file ends in the middle of its header")
        return data

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.exact(struct.calcsize(fmt)))[0]

    def count(self) -> int:
        return int(self.unpack("<Q" if self.wide else "<I"))

    def string(self) -> str:
        n = self.count()
        if n > MAX_STRING_BYTES:
            raise GGUFError(f"the GGUF header holds a string of {n:,} bytes; the file is damaged")
        return self.exact(n).decode("utf-8", "replace")

    def skip(self, n: int) -> None:
        if n:
            self.fh.seek(n, os.SEEK_CUR)

    def value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item = int(self.unpack("<I"))
            n = self.count()
            if n > MAX_ARRAY_ITEMS:
                raise GGUFError(f"the GGUF header holds an array of {n:,} items; the file is damaged")
            if item in _SCALARS:
                self.skip(n * struct.calcsize(_SCALARS[item]))
            elif item == _STRING:
                for _ in range(n):
                    length = self.count()
                    if length > MAX_STRING_BYTES:
                        raise GGUFError("the GGUF header holds a string too long to be real; the file is damaged")
                    self.skip(length)
            elif item == _ARRAY:
                for _ in range(n):
                    self.value(_ARRAY)
            else:
                raise GGUFError(f"the GGUF header has an array of unknown type {item}")
            return None
        raise GGUFError(f"the GGUF header has a value of unknown type {kind}")


def read_gguf(path: str | os.PathLike[str], keys: Iterable[str] | None = None) -> GGUFInfo:
    """Read the metadata of the GGUF file at ``path``.

    With ``keys``, stop as soon as all of them were read (the architecture
    and context length are always looked for). Raises :class:`GGUFError` for
    a file that is not GGUF, is damaged or cut short, and ``OSError`` when
    it cannot be read.
    """
    wanted = set(keys or ())
    with open(path, "rb") as fh:
        if fh.read(4) != MAGIC:
            raise GGUFError(f"{path} is not a GGUF file (it does not start with GGUF)")
        version = struct.unpack("<I", fh.read(4).ljust(4, b"\0"))[0]
        if version not in (1, 2, 3):
            raise GGUFError(f"{path} is GGUF version {version}; wisp reads versions 1 to 3")
        r = _Reader(fh, version)
        r.count()  # tensors
        n_kv = r.count()
        if n_kv > MAX_KV:
            raise GGUFError(f"{path} claims {n_kv:,} metadata entries; the file is damaged")
        meta: dict[str, Any] = {}
        arch: str | None = None
        for _ in range(n_kv):
            key = r.string()
            kind = int(r.unpack("<I"))
            value = r.value(kind)
            if value is not None:
                meta[key] = value
            if key == "general.architecture" and isinstance(value, str):
                arch = value
            if arch and f"{arch}.context_length" in meta and wanted <= meta.keys():
                break
    length = meta.get(f"{arch}.context_length") if arch else None
    if length is None:
        length = next((v for k, v in meta.items() if k.endswith(".context_length")), None)
    try:
        context_length = int(length) if length is not None and int(length) > 0 else None
    except (TypeError, ValueError):
        context_length = None
    name = meta.get("general.name")
    return GGUFInfo(str(path), version, arch, context_length, name if isinstance(name, str) else None, meta)


def trained_context_length(path: str | os.PathLike[str]) -> int | None:
    """The model's trained context length in tokens, or ``None`` when the file
    does not say or cannot be read as GGUF (never raises)."""
    try:
        return read_gguf(path).context_length
    except (GGUFError, OSError, struct.error):
        return None
