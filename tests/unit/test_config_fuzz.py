"""Config files from a hostile or careless hand (issue "Nothing runs, leaks, hangs or is lost that
shouldn't be", "Config files"): deeply nested JSON, numbers past a double's range, NaN, lone
surrogates in unknown keys. Each gives the malformed-file message, leaves the file as it was, and
`wisp config …` exits 2; a hypothesis fuzz of whole files counts 0 other exceptions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wisp.core.config import SCHEMA, Config, ConfigError

WISP = str(Path(sys.executable).parent / "wisp")

CASES = {
    "deep": '{"a":' * 100_000 + "1" + "}" * 100_000,
    "deep-list": '{"model": ' + "[" * 5000 + "]" * 5000 + "}",
    "int-past-a-double": '{"model": {"timeout_s": 1' + "0" * 400 + "}}",
    "float-past-a-double": '{"model": {"timeout_s": 1e400}}',
    "int-past-the-digit-limit": '{"agent": {"max_steps": ' + "9" * 5000 + "}}",
    "nan": '{"model": {"timeout_s": NaN}}',
    "surrogate-key": '{"model": {"name": "x"}, "junk\\ud800": "ok"}',
    "surrogate-value": '{"unknown": {"deep": "\\udc00"}}',
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_bad_file_gives_the_malformed_message_and_exit_2(name: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    path = home / "config.json"
    path.write_text(CASES[name])
    before = path.read_bytes()
    with pytest.raises(ConfigError, match="malformed JSON.*fix it by hand, wisp left the file unchanged"):
        Config.load(path)
    with pytest.raises(ConfigError, match="malformed JSON"):
        Config.load(path, strict=False).set("ui.theme", "x")
    env = {**os.environ, "WISP_HOME": str(home)}
    for args in (["config", "list"], ["config", "set", "ui.theme", "x"], ["config", "get", "ui.theme"]):
        r = subprocess.run([WISP, *args], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 2, (args, r.stderr)
        assert "malformed JSON" in r.stderr and "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1
    assert path.read_bytes() == before


def test_the_malformed_message_says_where() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.json"
        path.write_text('{\n  "model": {\n    "timeout_s": 1e999\n  }\n}\n')
        with pytest.raises(ConfigError) as info:
            Config.load(path)
        assert info.value.line == 3 and info.value.column == 18 and "1e999 is too large" in str(info.value)


def test_numbers_typed_on_the_command_line_are_bounded(tmp_path: Path) -> None:
    cfg = Config(tmp_path / "config.json")
    for key, value in (("model.timeout_s", "1" + "0" * 400), ("agent.max_steps", "9" * 5000),
                       ("agent.max_steps", str(2 ** 63)), ("model.timeout_s", "1e400")):
        with pytest.raises(ConfigError, match=f"{key} expects"):
            cfg.set(key, value)
    assert not (tmp_path / "config.json").exists()


# --- fuzz ---------------------------------------------------------------------------------------------

_PARTS = sorted({p for k in SCHEMA for p in k.split(".")})
_keys = st.one_of(st.sampled_from(_PARTS), st.sampled_from(list(SCHEMA)), st.text(max_size=8),
                  st.sampled_from(["\ud800", "a\udfffb", "", ".", "model.", "..x"]))
_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.just(10 ** 400), st.just(-(10 ** 30)),
                     st.floats(), st.text(max_size=12), st.sampled_from(["\ud800", "on", "off", "120", "null"]))
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(_keys, inner, max_size=4)),
                       max_leaves=20)
_documents = st.one_of(
    st.dictionaries(_keys, _values, max_size=6).map(lambda d: json.dumps(d, allow_nan=True)),
    _values.map(lambda v: json.dumps(v, allow_nan=True)),
    st.integers(1, 3000).map(lambda n: '{"a": ' + "[" * n + "]" * n + "}"),
    st.text(max_size=60),
    st.binary(max_size=60).map(lambda b: b.decode("latin-1")),
)

FUZZ_STATS = {"examples": 0, "malformed": 0, "loaded": 0}


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(document=_documents, key=st.sampled_from(list(SCHEMA)), value=st.text(max_size=12))
def test_any_config_file_loads_or_gives_a_config_error(tmp_path_factory, document: str, key: str,
                                                         value: str) -> None:
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_bytes(document.encode("utf-8", "surrogatepass"))
    before = path.read_bytes()
    FUZZ_STATS["examples"] += 1
    for strict in (True, False):
        try:
            cfg = Config.load(path, strict=strict)
            cfg.to_dict()
        except ConfigError as exc:
            assert str(exc) and "\n" not in str(exc)
    try:
        stored = Config.load(path, strict=False).set(key, value)
    except ConfigError as exc:
        assert str(exc) and "\n" not in str(exc)
        if "malformed JSON" in str(exc) or "not UTF-8" in str(exc):
            FUZZ_STATS["malformed"] += 1
            assert path.read_bytes() == before  # a malformed file is never overwritten
        return
    FUZZ_STATS["loaded"] += 1
    again = Config.load(path, strict=False)  # what set wrote reads back
    assert again.get(key) == (SCHEMA[key].default if stored is None else stored)
