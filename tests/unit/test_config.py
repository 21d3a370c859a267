"""Config and paths (issue "wisp runs end to end", "Config"; DESIGN.md "Where things live")."""

from __future__ import annotations

import json
import os
import stat
import string
import tempfile
from pathlib import Path

import pytest

from tests.support.home import DATA
from tests.support.mcp_strategies import MCP_ALLOW, MCP_SERVERS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wisp.core import paths
from wisp.core.config import SCHEMA, Config, ConfigError, format_value, parse_value, suggest_keys


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    """A fake home and WISP_HOME, so no test touches the real home."""
    monkeypatch.setenv("HOME", str(tmp_path / "realhome"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("WISP_HOME", str(tmp_path / "wisp"))
    return tmp_path / "wisp"


def mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


# --- paths ------------------------------------------------------------------------


def test_wisp_home_follows_env(home):
    assert paths.wisp_home() == home
    assert paths.config_path() == home / "config.json"
    assert paths.default_data_dir() == home / "data"


def test_wisp_home_default_is_dot_wisp(tmp_path, monkeypatch):
    monkeypatch.delenv("WISP_HOME")
    assert paths.wisp_home() == tmp_path / "realhome" / ".wisp"
    monkeypatch.setenv("WISP_HOME", "")
    assert paths.wisp_home() == tmp_path / "realhome" / ".wisp"


def test_data_dir_without_wisp_home_is_platformdirs(tmp_path, monkeypatch):
    import platformdirs

    monkeypatch.delenv("WISP_HOME")
    assert paths.default_data_dir() == Path(platformdirs.user_data_dir("wisp", appauthor=False))
    assert str(paths.default_data_dir()).startswith(str(tmp_path))


def test_private_dir_and_file_modes_ignore_umask(tmp_path):
    old = os.umask(0)
    try:
        d = paths.ensure_private_dir(tmp_path / "a" / "b")
        f = paths.create_private_file(tmp_path / "c" / "f.txt")
    finally:
        os.umask(old)
    assert mode(tmp_path / "a") == 0o700 and mode(d) == 0o700
    assert mode(f) == 0o600 and mode(f.parent) == 0o700


def test_ensure_private_dir_leaves_existing_dirs_alone(tmp_path):
    existing = tmp_path / "mine"
    existing.mkdir(mode=0o755)
    os.chmod(existing, 0o755)
    paths.ensure_private_dir(existing / "new")
    assert mode(existing) == 0o755
    assert mode(existing / "new") == 0o700


def test_atomic_write_private_replaces_whole_file(tmp_path):
    target = tmp_path / "x.json"
    target.write_text("old")
    os.chmod(target, 0o644)
    paths.atomic_write_private(target, b"new")
    assert target.read_bytes() == b"new"
    assert mode(target) == 0o600
    assert os.listdir(tmp_path) == ["x.json"]


def test_atomic_write_failure_leaves_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "x.json"
    target.write_text("old")

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(paths.os, "replace", boom)
    with pytest.raises(OSError):
        paths.atomic_write_private(target, b"new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["x.json"]


# --- schema and defaults --------------------------------------------------------------

EXPECTED_DEFAULTS = {
    "model.provider": "auto",
    "model.endpoint": None,
    "model.name": None,
    "model.context_window": None,
    "model.api_key_env": None,
    "model.think": "auto",
    "model.gguf": None,
    "model.tool_mode": "auto",
    "model.embedded_idle_s": 300.0,
    "model.embedded_threads": 0,
    "model.timeout_s": 120.0,
    "model.load_wait_s": 60.0,
    "model.reply_timeout_s": 900.0,
    "model.max_tokens": None,
    "model.repeat_stop_chars": 600,
    "agent.max_steps": 20,
    "tools.enabled": ["read_file", "system_info"],
    "tools.read_file.allow_outside_workdir": False,
    "tools.read_file.max_bytes": 262144,
    "tools.run_command.timeout_s": 120.0,
    "tools.run_command.max_output_bytes": 1048576,
    "tools.run_command.allow": [],
    "tools.run_command.env_drop": SCHEMA["tools.run_command.env_drop"].default,
    "tools.run_command.env_pass": [],
    "tools.run_command.network": False,
    "tools.run_command.allow_writes": False,
    "tools.edit_file.allow": False,
    "tools.edit_file.max_bytes": 1048576,
    "tools.mcp.allow": [],
    "tools.mcp.timeout_s": 60.0,
    "tools.mcp.start_timeout_s": 30.0,
    "tools.mcp.max_output_bytes": 262144,
    "mcpServers": {},
    "context.reserve": 1024,
    "context.recent_turns": 0,
    "context.memory": False,
    "context.distill": False,
    "context.distill_tokens": 1024,
    "context.assess": False,
    "audit.enabled": True,
    "audit.max_bytes": 10485760,
    "audit.keep": 5,
    "audit.dir": None,
    "store.path": None,
    "memory.enabled": True,
    "memory.timezone": None,
    "memory.workspace": None,
    "memory.serve_allow_non_loopback": False,
    "ui.theme": "auto",
}


def test_missing_file_gives_every_default(home):
    cfg = Config.load()
    assert cfg.path == home / "config.json"
    assert cfg.to_dict() == EXPECTED_DEFAULTS
    assert all(is_default for _, _, is_default in cfg.items())
    assert [k for k, _, _ in cfg.items()] == list(EXPECTED_DEFAULTS)
    assert not (home / "config.json").exists()


def test_empty_file_gives_defaults(home):
    home.mkdir()
    (home / "config.json").write_text("  \n")
    assert Config.load().to_dict() == EXPECTED_DEFAULTS


def test_get_returns_copies_of_lists():
    cfg = Config.load()
    cfg.get("tools.enabled").append("x")
    assert cfg.get("tools.enabled") == ["read_file", "system_info"]


def test_no_key_can_hold_an_api_key():
    assert [k for k in SCHEMA if "key" in k] == ["model.api_key_env"]
    cfg = Config.load()
    with pytest.raises(ConfigError, match="never the key itself"):
        cfg.set("model.api_key_env", "sk-abc123-secret")
    assert not cfg.path.exists()
    assert cfg.set("model.api_key_env", "OPENAI_API_KEY") == "OPENAI_API_KEY"


# --- unknown keys -------------------------------------------------------------------


@pytest.mark.parametrize(
    "typo, closest",
    [
        ("model.nme", "model.name"),
        ("max_steps", "agent.max_steps"),
        ("model.api_key", "model.api_key_env"),
        ("audit.maxbytes", "audit.max_bytes"),
        ("theme", "ui.theme"),
        ("tools.readfile.allow_outside_workdir", "tools.read_file.allow_outside_workdir"),
    ],
)
def test_unknown_key_names_the_closest(typo, closest):
    cfg = Config.load()
    with pytest.raises(ConfigError) as e:
        cfg.get(typo)
    assert e.value.suggestions[0] == closest
    assert f"unknown config key '{typo}'" in str(e.value)
    assert closest in str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=closest.replace(".", r"\.")):
        cfg.set(typo, "1")
    assert not cfg.path.exists()


def test_unknown_key_far_from_any_says_where_to_look():
    with pytest.raises(ConfigError, match="wisp config list") as e:
        Config.load().get("zzzzqqq")
    assert e.value.suggestions == []


def test_group_is_not_a_key():
    with pytest.raises(ConfigError, match="group of keys") as e:
        Config.load().get("model")
    assert "model.name" in e.value.suggestions


def test_suggest_keys_is_short():
    assert suggest_keys("model.nme") == ["model.name"]
    assert len(suggest_keys("x")) <= 3


# --- parsing by type ------------------------------------------------------------------


@pytest.mark.parametrize(
    "word, value",
    [("on", True), ("off", False), ("true", True), ("false", False), ("yes", True),
     ("no", False), ("ON", True), ("False", False), (" yes ", True), ("1", True), ("0", False)],
)
def test_bool_words(word, value):
    cfg = Config.load()
    assert cfg.set("context.memory", word) is value
    assert Config.load().get("context.memory") is value


@pytest.mark.parametrize("word", ["maybe", "2", "", "null"])
def test_bad_bool_names_the_type(word):
    with pytest.raises(ConfigError) as e:
        Config.load().set("context.memory", word)
    msg = str(e.value)
    assert msg.startswith("context.memory expects a boolean (on, off, true, false, yes or no)")
    assert "such as on" in msg


def test_int_parsing_and_errors():
    cfg = Config.load()
    assert cfg.set("agent.max_steps", "7") == 7
    assert cfg.get("agent.max_steps") == 7
    with pytest.raises(ConfigError, match=r"agent\.max_steps expects an integer .*such as 20; got 'seven'"):
        cfg.set("agent.max_steps", "seven")
    with pytest.raises(ConfigError, match="integer"):
        cfg.set("agent.max_steps", "2.5")
    with pytest.raises(ConfigError, match="at least 1"):
        cfg.set("agent.max_steps", "0")
    with pytest.raises(ConfigError, match=r"integer \(tokens\)"):
        cfg.set("model.context_window", "big")
    with pytest.raises(ConfigError, match="integer"):
        cfg.set("agent.max_steps", True)  # a bool is not an int
    assert cfg.get("agent.max_steps") == 7


def test_float_parsing_and_errors():
    cfg = Config.load()
    assert cfg.set("model.timeout_s", "30") == 30.0
    assert isinstance(Config.load().get("model.timeout_s"), float)
    assert cfg.set("model.timeout_s", 2) == 2.0
    for bad in ["soon", "nan", "inf", "0", "-1"]:
        with pytest.raises(ConfigError, match=r"model\.timeout_s expects a number \(seconds\)"):
            cfg.set("model.timeout_s", bad)
    assert cfg.set("model.load_wait_s", "0") == 0.0  # inclusive minimum


def test_lists_json_or_comma_separated():
    cfg = Config.load()
    assert cfg.set("tools.enabled", '["read_file", "memory"]') == ["read_file", "memory"]
    assert cfg.set("tools.enabled", "read_file, system_info ,memory") == [
        "read_file", "system_info", "memory"]
    assert cfg.set("tools.run_command.allow", "") == []
    assert cfg.set("tools.run_command.allow", "[]") == []
    assert Config.load().get("tools.enabled") == ["read_file", "system_info", "memory"]
    for bad in ['["a", 1]', "[broken", ["a", 2], "[\"\"]"]:
        with pytest.raises(ConfigError, match="list of strings"):
            cfg.set("tools.enabled", bad)


def test_choices():
    cfg = Config.load()
    assert cfg.set("model.provider", "ollama") == "ollama"
    assert cfg.set("model.provider", "OpenAI") == "openai"
    with pytest.raises(ConfigError, match=r"model\.provider expects one of ollama, openai, auto"):
        cfg.set("model.provider", "llamafile")
    assert cfg.set("model.think", "off") == "off"
    assert cfg.set("model.think", "true") == "on"  # bool words map onto on/off
    with pytest.raises(ConfigError, match="one of on, off, auto"):
        cfg.set("model.think", "sometimes")


def test_null_words_clear_an_optional(home):
    cfg = Config.load()
    cfg.set("model.name", "qwen3:8b")
    assert json.loads((home / "config.json").read_text()) == {"model": {"name": "qwen3:8b"}}
    for word in ["null", "none", "None", ""]:
        cfg.set("model.name", "qwen3:8b")
        assert cfg.set("model.name", word) is None
        assert cfg.get("model.name") is None
        assert not cfg.is_set("model.name")
        assert Config.load().get("model.name") is None
    assert json.loads((home / "config.json").read_text()) == {}


def test_null_does_not_clear_a_required_key():
    cfg = Config.load()
    with pytest.raises(ConfigError, match="integer"):
        cfg.set("agent.max_steps", "null")
    with pytest.raises(ConfigError, match="non-empty string"):
        cfg.set("ui.theme", "")


def test_endpoint_must_be_a_url():
    cfg = Config.load()
    with pytest.raises(ConfigError, match="http:// or https://"):
        cfg.set("model.endpoint", "localhost:11434")
    assert cfg.set("model.endpoint", "http://127.0.0.1:11434") == "http://127.0.0.1:11434"


def test_parse_value_from_file_is_strict_about_json_types():
    assert parse_value("agent.max_steps", 5, from_text=False) == 5
    with pytest.raises(ConfigError):
        parse_value("agent.max_steps", "5", from_text=False)
    with pytest.raises(ConfigError):
        parse_value("context.memory", "on", from_text=False)


def test_format_value_reads_back():
    for key in ["tools.enabled", "context.memory", "model.timeout_s", "agent.max_steps", "model.name"]:
        v = Config.load().get(key)
        assert parse_value(key, format_value(v)) == v


# --- set, unset, saving ------------------------------------------------------------------


def test_set_writes_nested_json_atomically_with_mode_0600(home):
    old = os.umask(0o022)
    try:
        cfg = Config.load()
        cfg.set("agent.max_steps", "9")
        cfg.set("tools.read_file.allow_outside_workdir", "on")
    finally:
        os.umask(old)
    data = json.loads((home / "config.json").read_text())
    assert data == {"agent": {"max_steps": 9}, "tools": {"read_file": {"allow_outside_workdir": True}}}
    assert mode(home / "config.json") == 0o600
    assert mode(home) == 0o700
    assert sorted(os.listdir(home)) == ["config.json"]  # no temp file left


def test_set_goes_through_a_temp_file_and_rename(home, monkeypatch):
    cfg = Config.load()
    cfg.set("agent.max_steps", "3")
    before = (home / "config.json").read_bytes()
    calls = []
    real_replace = os.replace

    def spy(src, dst):
        calls.append((Path(src), Path(dst)))
        assert Path(src).parent == home  # the temp file is in the same directory
        assert mode(Path(src)) == 0o600
        return real_replace(src, dst)

    monkeypatch.setattr(paths.os, "replace", spy)
    cfg.set("agent.max_steps", "4")
    assert len(calls) == 1 and calls[0][1] == home / "config.json"
    assert (home / "config.json").read_bytes() != before

    def boom(src, dst):
        raise OSError(5, "I/O error")

    monkeypatch.setattr(paths.os, "replace", boom)
    snapshot = (home / "config.json").read_bytes()
    with pytest.raises(ConfigError, match="cannot write"):
        cfg.set("agent.max_steps", "5")
    assert (home / "config.json").read_bytes() == snapshot
    assert sorted(os.listdir(home)) == ["config.json"]


def test_set_keeps_edits_made_meanwhile(home):
    a = Config.load()
    a.set("agent.max_steps", "3")
    b = Config.load()
    b.set("ui.theme", "dark")
    a.set("context.reserve", "2048")
    final = Config.load()
    assert final.get("ui.theme") == "dark"
    assert final.get("agent.max_steps") == 3
    assert final.get("context.reserve") == 2048


def test_unset_restores_the_default(home):
    cfg = Config.load()
    cfg.set("agent.max_steps", "3")
    cfg.unset("agent.max_steps")
    assert cfg.get("agent.max_steps") == 20
    assert Config.load().is_set("agent.max_steps") is False
    with pytest.raises(ConfigError, match="did you mean agent.max_steps"):
        cfg.unset("agent.max_step")


def test_items_mark_defaults():
    cfg = Config.load()
    cfg.set("ui.theme", "dark")
    items = {k: (v, d) for k, v, d in Config.load().items()}
    assert items["ui.theme"] == ("dark", False)
    assert items["agent.max_steps"] == (20, True)


def test_flat_dotted_keys_in_the_file_are_read(home):
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"model.name": "m", "tools": {"read_file.max_bytes": 10}}))
    cfg = Config.load()
    assert cfg.get("model.name") == "m"
    assert cfg.get("tools.read_file.max_bytes") == 10


def test_paths_from_config(home, tmp_path):
    cfg = Config.load()
    assert cfg.db_path == home / "data" / "wisp.db"
    assert cfg.audit_dir == home / "data" / "audit"
    cfg.set("store.path", "~/elsewhere/w.db")
    cfg.set("audit.dir", "logs")
    assert cfg.db_path == tmp_path / "realhome" / "elsewhere" / "w.db"
    assert cfg.audit_dir == home / "logs"  # relative to the config file's directory


# --- malformed and unknown content in the file -----------------------------------------


def test_malformed_file_gives_path_line_column_and_is_never_overwritten(home):
    home.mkdir()
    path = home / "config.json"
    raw = b'{\n  "model": {\n    "name": "x",\n  }\n}\n'
    path.write_bytes(raw)
    os.chmod(path, 0o644)
    before = os.stat(path)
    with pytest.raises(ConfigError) as e:
        Config.load()
    msg = str(e.value)
    assert str(path) in msg and "line 4, column 3" in msg and "\n" not in msg
    assert (e.value.line, e.value.column) == (4, 3)

    cfg = Config(path)  # e.g. a running session whose file was broken meanwhile
    for action in (lambda: cfg.set("agent.max_steps", "3"), lambda: cfg.unset("agent.max_steps"),
                   lambda: cfg.set("model.name", "null")):
        with pytest.raises(ConfigError, match="line 4, column 3"):
            action()
    assert path.read_bytes() == raw
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns, stat.S_IMODE(after.st_mode)) == (
        before.st_ino, before.st_mtime_ns, 0o644)
    assert sorted(os.listdir(home)) == ["config.json"]


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"text"', b"\xff\xfe{}", b"nul"])
def test_other_bad_files_are_left_alone(home, raw):
    home.mkdir()
    (home / "config.json").write_bytes(raw)
    with pytest.raises(ConfigError, match=str(home / "config.json")):
        Config.load()
    with pytest.raises(ConfigError):
        Config(home / "config.json").set("ui.theme", "x")
    assert (home / "config.json").read_bytes() == raw


def test_unknown_keys_in_the_file_are_reported(home):
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"model": {"nme": "x", "name": "y"}}))
    with pytest.raises(ConfigError) as e:
        Config.load()
    assert "unknown config key 'model.nme'; did you mean model.name?" in str(e.value)
    assert str(home / "config.json") in str(e.value)


def test_wrong_types_in_the_file_are_reported(home):
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"agent": {"max_steps": "ten"}}))
    with pytest.raises(ConfigError, match=r"config\.json: agent\.max_steps expects a whole number "
                                          r"\(in config\.json, without quotes\)"):
        Config.load()


def test_a_quoted_boolean_in_the_file_says_to_drop_the_quotes(home):
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"audit": {"enabled": "off"}}))
    with pytest.raises(ConfigError) as e:
        Config.load()
    assert "true or false (in config.json, without quotes)" in str(e.value) and "'off'" in str(e.value)


def test_values_that_would_break_every_run_are_refused(home):
    cfg = Config.load()
    with pytest.raises(ConfigError, match="'bogus' is not one"):
        cfg.set("tools.enabled", "read_file,bogus")
    with pytest.raises(ConfigError, match="port from 1 to 65535"):
        cfg.set("model.endpoint", "http://127.0.0.1:99999")
    with pytest.raises(ConfigError, match="existing GGUF file"):
        cfg.set("model.gguf", "/nonexistent.gguf")
    assert cfg.get("tools.enabled") == ["read_file", "system_info"]


def test_lenient_load_lists_problems_and_set_preserves_them(home):
    home.mkdir()
    path = home / "config.json"
    path.write_text(json.dumps({"model": {"nme": "x"}, "agent": {"max_steps": "ten"}, "ui": {"theme": "t"}}))
    cfg = Config.load(strict=False)
    assert len(cfg.problems) == 2
    assert cfg.get("agent.max_steps") == 20 and cfg.get("ui.theme") == "t"
    cfg.set("context.reserve", "10")
    data = json.loads(path.read_text())
    assert data["model"]["nme"] == "x"  # never silently dropped
    assert data["agent"]["max_steps"] == "ten"
    assert data["context"]["reserve"] == 10
    cfg.set("agent.max_steps", "5")  # replacing an invalid value fixes it
    assert len(cfg.problems) == 1
    cfg.unset("model.nme")  # a stale key can be removed
    assert cfg.problems == []
    assert Config.load().get("agent.max_steps") == 5
    assert "nme" not in path.read_text()


def test_values_that_conflict_with_the_layout_are_not_overwritten(home):
    home.mkdir()
    path = home / "config.json"
    raw = json.dumps({"model": "llama3"})
    path.write_text(raw)
    cfg = Config.load(strict=False)
    with pytest.raises(ConfigError, match="'model' is both a value and a group of keys"):
        cfg.set("model.name", "x")
    assert path.read_text() == raw


# --- round trip (hypothesis) -----------------------------------------------------------

from wisp.core.redact import looks_like_key  # noqa: E402

_ENV = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True).filter(
    lambda s: not looks_like_key(s))  # a name that looks like a key itself is refused, by design
_TEXT = st.text(min_size=1, max_size=30).filter(
    lambda s: s == s.strip() and s.lower() not in {"null", "none"})


def _values(spec):
    if spec.type == "bool":
        return st.booleans()
    if spec.type == "int":
        return st.integers(min_value=int(spec.minimum or 0) + (1 if spec.exclusive_min else 0),
                           max_value=int(spec.maximum) if spec.maximum is not None else 10**12)
    if spec.type == "float":
        lo = float(spec.minimum or 0)
        return st.floats(min_value=lo, max_value=1e9, allow_nan=False, allow_infinity=False,
                         exclude_min=spec.exclusive_min)
    if spec.key == "tools.enabled":  # names of tools wisp has
        from wisp.core.tool_names import TOOL_NAMES
        return st.lists(st.sampled_from(sorted(TOOL_NAMES)), max_size=4)
    if spec.key == "mcpServers":  # issue 15: servers in Claude Desktop's shape
        return MCP_SERVERS
    if spec.key == "tools.mcp.allow":
        return MCP_ALLOW
    if spec.key == "tools.run_command.env_drop":  # glob patterns of variable names
        return st.lists(st.from_regex(r"[A-Za-z0-9_*?]{1,12}", fullmatch=True), max_size=5)
    if spec.key == "tools.run_command.env_pass":  # names of variables
        return st.lists(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,11}", fullmatch=True), max_size=5)
    if spec.type == "list":
        return st.lists(st.text(min_size=1, max_size=10), max_size=5)
    if spec.type == "choice":
        return st.sampled_from(spec.choices)
    if spec.key == "model.endpoint":
        return st.builds(lambda h, p: f"http://{h}:{p}",
                         st.text(string.ascii_lowercase, min_size=1, max_size=10),
                         st.integers(1, 65535))
    if spec.key == "model.api_key_env":
        return _ENV
    if spec.key == "model.gguf":  # an existing file, when typed
        return st.just(__file__)
    if spec.key == "ui.theme":  # a name wisp or Textual knows, when typed (issue 16, "Themes")
        from wisp.core.config import theme_names
        return st.sampled_from(theme_names())
    if spec.key == "memory.timezone":  # checked against the tz database (issue "Episodic memory")
        return st.sampled_from(["Europe/London", "America/New_York", "Asia/Tokyo", "UTC"])
    return _TEXT


@st.composite
def key_and_value(draw):
    key = draw(st.sampled_from(list(SCHEMA)))
    spec = SCHEMA[key]
    value = draw(_values(spec))
    return key, value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=st.lists(key_and_value(), min_size=1, max_size=6), as_text=st.booleans())
def test_set_then_load_round_trips(pairs, as_text):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.json"
        cfg = Config.load(path)
        expected = {}
        for key, value in pairs:
            given_value = format_value(value) if as_text and not isinstance(value, str) else value
            stored = cfg.set(key, given_value)
            assert stored == value
            expected[key] = value
        loaded = Config.load(path)
        for key, value in expected.items():
            assert loaded.get(key) == value
            assert type(loaded.get(key)) is type(value)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_context_window_out_of_any_models_range_is_refused(tmp_path, monkeypatch) -> None:
    """Found by a new user: 10 and 99999999 were taken (one started a 256-token server, the other
    planned requests for room no server has)."""
    import subprocess
    import sys
    from pathlib import Path

    from wisp.core.config import MAX_CONTEXT_WINDOW, MIN_CONTEXT_WINDOW

    wisp = str(Path(sys.executable).parent / "wisp")
    env = {**__import__("os").environ, "WISP_HOME": str(tmp_path)}
    for bad in ("10", "99999999", str(MIN_CONTEXT_WINDOW - 1), str(MAX_CONTEXT_WINDOW + 1)):
        r = subprocess.run([wisp, "config", "set", "model.context_window", bad], capture_output=True, text=True,
                           env=env, timeout=60)
        assert r.returncode == 2 and f"at least {MIN_CONTEXT_WINDOW} and at most {MAX_CONTEXT_WINDOW}" in r.stderr
    for good in (str(MIN_CONTEXT_WINDOW), "8192", str(MAX_CONTEXT_WINDOW)):
        r = subprocess.run([wisp, "config", "set", "model.context_window", good], capture_output=True, text=True,
                           env=env, timeout=60)
        assert r.returncode == 0, r.stderr
