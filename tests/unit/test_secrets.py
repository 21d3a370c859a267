"""Secrets stay out of what wisp shows, stores and hands on (wisp.core.redact): the
one redaction rule, the key taken out of the environment, a key typed where its
variable's name goes, and the boundaries that apply the rule (endpoint errors,
the audit log, stderr)."""

from __future__ import annotations

import json
import re
import os
import string
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
import threading

import pytest
from hypothesis import given, settings, strategies as st

from wisp.core import redact as R
from wisp.core.audit import AuditLog
from wisp.core.config import Config, ConfigError
from wisp.core.model.base import BadRequest, EndpointError, ServerError
from wisp.core.model.resolve import EndpointSettings, read_api_key, resolve_endpoint

KEYISH = string.ascii_letters + string.digits + "-_"
key_values = st.text(KEYISH, min_size=R.MIN_SECRET_CHARS, max_size=60).filter(
    lambda v: v.strip() == v and not re.fullmatch(r"[0-9.eE+-]+", v))  # a number's digits are not remembered


@pytest.fixture(autouse=True)
def _clean() -> None:
    R.forget_all()


# --- the rule ------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(secret=key_values, before=st.text(max_size=80), after=st.text(max_size=80))
def test_a_remembered_secret_never_survives(secret: str, before: str, after: str) -> None:
    R.forget_all()
    R.remember(secret)
    out = R.redact(before + secret + after + secret)
    assert secret not in out
    assert R.redact(out) == out  # idempotent


@settings(max_examples=300, deadline=None)
@given(user=st.text(string.ascii_letters + string.digits + "._-", max_size=12),
       password=st.text(string.ascii_letters + string.digits + "!$%&()*+,;=-._~", min_size=1, max_size=24),
       host=st.from_regex(r"[a-z][a-z0-9]{0,10}(\.[a-z]{2,4})?(:[0-9]{2,5})?", fullmatch=True),
       scheme=st.sampled_from(["http", "https", "postgres", "redis"]))
def test_a_urls_password_is_masked_and_the_rest_kept(user: str, password: str, host: str, scheme: str) -> None:
    url = f"{scheme}://{user}:{password}@{host}/v1"
    out = R.redact(f"Cannot connect to {url}.")
    assert out == f"Cannot connect to {scheme}://{user}:{R.MASK}@{host}/v1."


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=40),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20),
       key_values)
def test_redacted_json_text_is_still_the_same_json(obj, secret: str) -> None:
    """The audit log masks the JSON line as written: it must stay JSON, and hold no secret."""
    R.forget_all()
    R.remember(secret)
    wrapped = {"payload": obj, "error": f"HTTP 401 for Bearer {secret}", "url": f"http://me:{secret}@h:1"}
    text = R.redact(json.dumps(wrapped, ensure_ascii=False))
    back = json.loads(text)
    assert secret not in text
    assert back == R.redact_obj(json.loads(json.dumps(wrapped)))


def test_a_value_a_number_could_hold_is_not_remembered_and_the_json_stays_json() -> None:
    """Found by hypothesis: a remembered "00000000" masked inside the number 2500000000 broke the
    audit log's JSON line."""
    R.forget_all()
    R.remember("00000000")
    R.remember("1.5e-10+7")
    line = json.dumps({"payload": {"tokens": 2500000000, "ratio": 1.5e-10}})
    assert R.redact(line) == line and json.loads(R.redact(line))["payload"]["tokens"] == 2500000000
    R.remember("sk-00000000")
    assert R.redact("key sk-00000000") == f"key {R.MASK}"


@given(st.text(string.ascii_letters + string.digits + " .,:;!?()'\n", max_size=200))
def test_prose_without_secrets_is_left_alone(text: str) -> None:
    if "earer" in text or "uthorization" in text.lower():
        return
    assert R.redact(text) == text


@pytest.mark.parametrize("text", [
    "the token budget is 8,192 tokens", "Bearer tokens are sent by the client", "a bearer of bad news",
    "see https://example.org/a@b", "mail me at me@example.org", "http://127.0.0.1:11434/api/chat",
])
def test_ordinary_text_is_not_masked(text: str) -> None:
    assert R.redact(text) == text


@pytest.mark.parametrize("text,gone", [
    ('{"error": "invalid token: Authorization: Bearer sk-abc123def456"}', "sk-abc123def456"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("echo: Bearer abc.def-123_456", "abc.def-123_456"),
])
def test_bearer_and_authorization_values_are_masked(text: str, gone: str) -> None:
    assert gone not in R.redact(text)


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "WORK_KEY", "work_key", "MyApiKey", "WORK_KEY_2024",
                                  "ASIA_REGION_TOKEN", "A", "_X", "HF_TOKEN", "GITHUB_TOKEN"])
def test_variable_names_are_not_keys(name: str) -> None:
    assert not R.looks_like_key(name)


@pytest.mark.parametrize("key", ["sk-proj-abc123def456ghi789", "sk_live_51HxYzAbCdEf", "ghp_aBcD1234eFgH5678iJkLmN",
                                 "hf_AbCdEfGhIjKlMnOpQrStUv", "AKIAIOSFODNN7EXAMPLE", "Xk29dLq81MzpQ0wErTy7",
                                 "0123456789abcdef0123456789abcdef", "xoxb-1234-5678-abcd", "glpat-AbCdEf123456"])
def test_keys_are_told_apart(key: str) -> None:
    assert R.looks_like_key(key)


@settings(max_examples=200)
@given(st.text(string.ascii_letters + string.digits, min_size=24, max_size=64))
def test_random_mixed_tokens_look_like_keys(token: str) -> None:
    if not (any(c.islower() for c in token) and any(c.isupper() for c in token) and any(c.isdigit() for c in token)):
        return
    assert R.looks_like_key(token)


# --- the key is taken out of the environment --------------------------------------------------


def test_the_key_leaves_the_environment_and_stays_in_memory(monkeypatch) -> None:
    monkeypatch.setenv("WISP_TEST_KEY", "sk-test-0123456789")
    assert read_api_key("WISP_TEST_KEY") == "sk-test-0123456789"
    assert "WISP_TEST_KEY" not in os.environ  # a child started from now on cannot inherit it
    assert read_api_key("WISP_TEST_KEY") == "sk-test-0123456789"  # read again (a /profile switch): kept
    assert R.redact("it was sk-test-0123456789") == "it was ***"
    monkeypatch.setenv("WISP_TEST_KEY", "sk-test-another-key")
    assert read_api_key("WISP_TEST_KEY") == "sk-test-another-key"  # set again: the new one wins
    assert read_api_key(None) is None and read_api_key("WISP_NOT_SET_ANYWHERE") is None


# --- a key typed where its variable's name goes ---------------------------------------------


@pytest.mark.parametrize("value", ["sk-proj-abc123def456ghi789", "ghp_aBcD1234eFgH5678iJkLmN", "Xk29dLq81MzpQ0wErTy7"])
def test_a_key_in_api_key_env_is_refused_without_being_repeated(wisp_home: Path, value: str) -> None:
    cfg = Config.load()
    with pytest.raises(ConfigError) as err:
        cfg.set("model.api_key_env", value)
    message = str(err.value)
    assert value not in message
    assert "NAME of the environment variable" in message and "not shown" in message
    assert not cfg.path.exists()


def test_a_key_in_the_config_file_is_refused_without_being_repeated(wisp_home: Path) -> None:
    (wisp_home / "config.json").write_text(json.dumps({"model": {"api_key_env": "sk-proj-abc123def456ghi789"}}))
    with pytest.raises(ConfigError) as err:
        Config.load()
    assert "sk-proj-abc123def456ghi789" not in str(err.value) and "NAME" in str(err.value)


def test_a_password_in_a_refused_value_is_masked(wisp_home: Path) -> None:
    cfg = Config.load()
    with pytest.raises(ConfigError) as err:
        cfg.set("model.endpoint", "ftp://me:hunter22secret@host")
    assert "hunter22secret" not in str(err.value)


# --- the boundaries ---------------------------------------------------------------------


def test_endpoint_errors_are_masked_when_made() -> None:
    R.remember("sk-live-0123456789")
    for err in (EndpointError("got sk-live-0123456789"), ServerError("x sk-live-0123456789", 401),
                BadRequest("bad", detail="Bearer sk-live-0123456789")):
        assert "sk-live-0123456789" not in str(err) + str(getattr(err, "detail", ""))
    assert "pw" not in str(EndpointError("Cannot connect to http://u:pw@127.0.0.1:9"))


class _EchoAuth(BaseHTTPRequestHandler):
    """A server that refuses every request with a 401 whose body echoes the Authorization header."""

    def log_message(self, *a: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._refuse()

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._refuse()

    def _refuse(self) -> None:
        body = json.dumps({"error": {"message": f"invalid credentials: {self.headers.get('Authorization')}"}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def echo_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _EchoAuth)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


async def test_a_401_that_echoes_the_token_shows_no_token(echo_server: str, monkeypatch) -> None:
    monkeypatch.setenv("WISP_TEST_KEY", "sk-live-echoed-0123456789")
    with pytest.raises(ServerError) as err:
        await resolve_endpoint(EndpointSettings(provider="openai", endpoint=echo_server, api_key_env="WISP_TEST_KEY"))
    message = str(err.value)
    assert "refused access (HTTP 401: invalid credentials: Bearer ***)" in message
    assert "sk-live-echoed-0123456789" not in message


async def test_a_401_that_echoes_the_urls_password_shows_neither_it_nor_its_basic_form(echo_server: str) -> None:
    import base64

    url = echo_server.replace("http://", "http://me:pass-in-url-77@")
    with pytest.raises(ServerError) as err:
        await resolve_endpoint(EndpointSettings(provider="openai", endpoint=url))
    message = str(err.value)
    assert "refused access (HTTP 401" in message and "http://me:***@127.0.0.1" in message
    assert "pass-in-url-77" not in message and base64.b64encode(b"me:pass-in-url-77").decode() not in message


def test_the_audit_log_holds_no_secret(tmp_path: Path) -> None:
    R.remember("sk-live-0123456789")
    log = AuditLog(tmp_path / "audit")
    log.write("error", {"message": "HTTP 401 (sk-live-0123456789)", "endpoint": "http://u:pw123456@h:1",
                        "nested": [{"header": "Authorization: Bearer abc123def456"}]})
    text = "".join(p.read_text() for p in log.files())
    assert "sk-live-0123456789" not in text and "pw123456" not in text and "abc123def456" not in text
    event = next(iter(log.iter_events()))
    assert event["payload"]["endpoint"] == "http://u:***@h:1"


def test_the_redacting_stream_masks_what_it_writes(capsys) -> None:
    import sys

    R.remember("sk-live-0123456789")
    stream = R.RedactingStream(sys.stderr)
    stream.write("wisp: error: refused sk-live-0123456789\n")
    stream.flush()
    assert capsys.readouterr().err == "wisp: error: refused ***\n"


def _as_plain_user() -> dict:
    """Popen arguments that run a child as an unprivileged user when the tests run as root
    (root reads every process's /proc files; the rule is about other processes of the same user)."""
    if os.geteuid() != 0:
        return {}

    def drop() -> None:
        os.setgid(65534)
        os.setuid(65534)

    return {"preexec_fn": drop, "cwd": "/"}


@pytest.mark.parametrize("undumpable", [True, False])
def test_make_undumpable_hides_proc_environ_from_another_process(undumpable: bool) -> None:
    """A child python marks itself (or not, the control), then a process of the same user reads its environ."""
    import subprocess
    import sys

    import shutil
    import tempfile

    where = Path(tempfile.mkdtemp())  # the module alone, where an unprivileged user can read it
    try:
        where.chmod(0o755)
        shutil.copy(R.__file__, where / "redact_copy.py")
        (where / "redact_copy.py").chmod(0o644)
        code = ("import os, sys, subprocess; from redact_copy import make_undumpable; "
                f"ok = make_undumpable() if {undumpable} else True; "
                "r = subprocess.run(['cat', f'/proc/{os.getpid()}/environ'], capture_output=True); "
                "print(ok, r.returncode, b'WISP_TEST_SECRET_X' in r.stdout)")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "WISP_TEST_SECRET_X": "value",
               "PYTHONPATH": str(where)}
        python = sys.executable if os.geteuid() != 0 else shutil.which("python3", path="/usr/bin:/bin")
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                             **_as_plain_user())
    finally:
        shutil.rmtree(where)
    expected = ["True", "1", "False"] if undumpable else ["True", "0", "True"]
    assert out.stdout.split() == expected, out.stderr


async def test_wisp_mcp_serve_logs_no_request_lines_and_no_password(ollama_home, tmp_path: Path) -> None:
    """The SDK's INFO logging (each request, and through the root logger httpx's line naming every
    URL) stays off: a password in model.endpoint's URL never reaches serve's stderr."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from tests.support.fakes import reply, text
    from tests.support.mcp_helpers import add_config
    import sys

    home, srv = ollama_home
    add_config(home, {"model": {"endpoint": srv.base_url.replace("http://", "http://me:pw-in-url-4242@")}})
    srv.push(reply(text("Hello from the model.")))
    env = {k: os.environ[k] for k in ("WISP_HOME", "HOME", "XDG_DATA_HOME", "PATH") if k in os.environ}
    wisp = str(Path(sys.executable).parent / "wisp")
    params = StdioServerParameters(command=wisp, args=["mcp", "serve", "--workdir", str(tmp_path)], env=env)
    log = tmp_path / "serve.log"
    with open(log, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            out = await client.call_tool("respond", {"prompt": "hi there"})
            assert out.structured_content["reply"] == "Hello from the model."
    said = log.read_text()
    assert "pw-in-url-4242" not in said
    assert "Processing request" not in said and "HTTP Request" not in said, said[:500]
