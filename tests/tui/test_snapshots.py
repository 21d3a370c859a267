"""Visual regression: a snapshot of each main view (issue 9, "Visual regression").

Each test drives the real app against a fake endpoint (Pilot, in
``run_before``) and compares the screen with its accepted SVG in
``__snapshots__/test_snapshots/``, through pytest-textual-snapshot's
``snap_compare``. A change in how a view looks fails here until the
snapshots are accepted again on purpose::

    .venv/bin/python -m pytest tests/tui/test_snapshots.py --snapshot-update

(then look at the new SVGs, or at the HTML report pytest writes on a failure).
The fixed paths, port and clocks of :func:`tests.tui.conftest.fixed_place`
keep a re-run identical. The views: chat (a streamed reply with thinking, a
tool call and code), the side panels (facts, task, running summary), inspect
context (F5), the approval modal (with a sandbox and without; an edit's diff), ``/memory``,
``/compact``'s preview, help (F1) and no endpoint.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from tests.support.context_fakes import CountingOllama
from tests.support.episodes_util import add_exchange, add_memory
from tests.support.fakes import FakeOllama, reply, text, thinking, tool_call
from tests.support.home import write_config
from tests.support.pilot import send, started, until
from tests.support.sidecalls import SummarisingSideCall
from tests.tui.conftest import FIXED_NOW, FixedPlace
from wisp.core.session import SessionOptions
from wisp.tui.app import WispApp

SIZE = (110, 36)
WIDE = (120, 38)


def still(app: WispApp) -> None:
    """No blinking cursor: the screen must not depend on when it is taken."""
    app.prompt_input.cursor_blink = False


async def command(pilot: Any, app: WispApp, line: str) -> None:
    """Send a slash command and let the app draw its answer."""
    app.prompt_input.load_text(line)
    await pilot.press("enter")
    await pilot.pause()


async def screen_named(pilot: Any, app: WispApp, name: str) -> None:
    await until(pilot, lambda: type(app.screen).__name__ == name, f"the {name}")
    await pilot.pause()


def prepared(app: WispApp, steps: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
    """``run_before`` for ``snap_compare``: open the session, still the cursor, run ``steps``."""
    async def run_before(pilot: Any) -> None:
        await started(pilot, app)
        still(app)
        await steps(pilot)
        await pilot.pause()
    return run_before


def test_chat_view(snap_compare, fixed_place: FixedPlace) -> None:
    """A streamed reply: collapsed thinking, a read_file call and its result, Markdown with highlighted code."""
    (fixed_place.workdir / "answer.py").write_text("def answer():\n    return 42\n")
    with FakeOllama(port=fixed_place.port) as srv:
        srv.push(reply(thinking("They ask what answer() returns; read the file first."), text("Let me read it."),
                       tool_call("read_file", {"path": "answer.py"}, id="call_1"), finish="tool_calls",
                       usage=(540, 30)),
                 reply(text("`answer()` returns **42**:\n\n```python\ndef answer():\n"),
                       text("    return 42\n```\n\nNothing else is in the file."), usage=(610, 24)))
        app = WispApp(SessionOptions(workdir=fixed_place.workdir))

        async def steps(pilot: Any) -> None:
            await send(pilot, app, "what does answer() return?")

        assert snap_compare(app, terminal_size=SIZE, run_before=prepared(app, steps))


def test_side_panels(snap_compare, fixed_place: FixedPlace) -> None:
    """The facts (the person's and the tools'), the task and the running summary panels."""
    # the fake model echoes each prompt, whose filler is one word 80 times: the loop rule would stop that
    fixed_place.configure({"model.context_window": 1500, "context.reserve": 300, "model.repeat_stop_chars": 0})
    side = SummarisingSideCall()
    with CountingOllama(port=fixed_place.port):
        app = WispApp(SessionOptions(workdir=fixed_place.workdir, tools=[], side_call=side))

        async def steps(pilot: Any) -> None:
            await command(pilot, app, "/fact decision http library = httpx")
            await command(pilot, app, "/task ship the retry work; objective: tests/test_retry.py passes")
            for n in range(8):
                await send(pilot, app, f"question {n} about src/m{n}.py " + "padding " * 80)
            bar = app.query_one("ContextSidebar")
            await until(pilot, lambda: "version" in bar.summary_panel.plain, "the summary panel")
            await until(pilot, lambda: "ship the retry work" in bar.task_panel.plain, "the task panel")

        assert snap_compare(app, terminal_size=WIDE, run_before=prepared(app, steps))
        assert side.calls, "no running summary was asked for"


def test_inspect_context_f5(snap_compare, fixed_place: FixedPlace) -> None:
    """F5: the layers of the next request, its tokens, and its messages."""
    (fixed_place.workdir / "notes.py").write_text("def answer():\n    return 42\n")
    with FakeOllama(port=fixed_place.port) as srv:
        srv.push(reply(text("Reading."), tool_call("read_file", {"path": "notes.py"}, id="call_1"),
                       finish="tool_calls"),
                 reply(text("It returns 42.")))
        app = WispApp(SessionOptions(workdir=fixed_place.workdir))

        async def steps(pilot: Any) -> None:
            await send(pilot, app, "what does notes.py return?")
            await command(pilot, app, "/task keep it short")
            await pilot.press("f5")
            await screen_named(pilot, app, "InspectContextScreen")

        assert snap_compare(app, terminal_size=WIDE, run_before=prepared(app, steps))


def test_approval_modal(snap_compare, fixed_place: FixedPlace) -> None:
    """The model wants to run a command: allow once, always allow a prefix, or deny."""
    with FakeOllama(port=fixed_place.port) as srv:
        srv.push(reply(text("Let me run it."), tool_call("run_command", {"command": "make notes"}, id="call_1"),
                       finish="tool_calls"),
                 reply(text("Done.")))
        app = WispApp(SessionOptions(workdir=fixed_place.workdir, tools=["run_command"]))

        async def steps(pilot: Any) -> None:
            app.prompt_input.load_text("make a notes file")
            await pilot.press("enter")
            await until(pilot, lambda: type(app.screen).__name__ == "ApprovalScreen"
                        and getattr(app.screen, "armed", False), "the approval modal")
            await pilot.pause()

        assert snap_compare(app, terminal_size=SIZE, run_before=prepared(app, steps))
        assert not (fixed_place.workdir / "notes.txt").exists()


def test_approval_modal_without_a_sandbox(snap_compare, fixed_place: FixedPlace, no_sandbox) -> None:
    """bwrap absent: the modal says, under the command, that it would run with the person's permissions."""
    with FakeOllama(port=fixed_place.port) as srv:
        srv.push(reply(text("Let me run it."), tool_call("run_command", {"command": "make notes"}, id="call_1"),
                       finish="tool_calls"),
                 reply(text("Done.")))
        app = WispApp(SessionOptions(workdir=fixed_place.workdir, tools=["run_command"]))

        async def steps(pilot: Any) -> None:
            app.prompt_input.load_text("make a notes file")
            await pilot.press("enter")
            await until(pilot, lambda: type(app.screen).__name__ == "ApprovalScreen"
                        and getattr(app.screen, "armed", False), "the approval modal")
            await pilot.pause()

        assert snap_compare(app, terminal_size=SIZE, run_before=prepared(app, steps))


def test_edit_approval_modal(snap_compare, fixed_place: FixedPlace) -> None:
    """The model wants to edit a file: the file, the lines added and removed, the diff highlighted;
    allow once, allow edits to this file for the conversation, or deny."""
    (fixed_place.workdir / "retry.py").write_text(
        "import time\n\n\ndef fetch(url, tries=3):\n    for n in range(tries):\n        try:\n"
        "            return get(url)\n        except OSError:\n            time.sleep(1)\n    raise RuntimeError(url)\n")
    change = {"path": "retry.py", "edits": [
        {"search": "def fetch(url, tries=3):", "replace": "def fetch(url, tries=5, wait=0.5):"},
        {"search": "            time.sleep(1)", "replace": "            time.sleep(wait * 2 ** n)  # back off"}]}
    with FakeOllama(port=fixed_place.port) as srv:
        srv.push(reply(text("I'll make the retries back off."), tool_call("edit_file", change, id="call_1"),
                       finish="tool_calls", usage=(640, 60)),
                 reply(text("Done."), usage=(720, 4)))
        app = WispApp(SessionOptions(workdir=fixed_place.workdir, tools=["read_file", "edit_file"]))

        async def steps(pilot: Any) -> None:
            app.prompt_input.load_text("make fetch() back off between tries")
            await pilot.press("enter")
            await until(pilot, lambda: type(app.screen).__name__ == "ApprovalScreen"
                        and getattr(app.screen, "armed", False), "the approval modal")
            await pilot.pause()

        assert snap_compare(app, terminal_size=SIZE, run_before=prepared(app, steps))
        assert "tries=3" in (fixed_place.workdir / "retry.py").read_text()  # nothing before the person's say


def test_memory_list(snap_compare, fixed_place: FixedPlace) -> None:
    """``/memory``: the recent memories, newest first, with their origin and time (in UTC)."""
    with FakeOllama(port=fixed_place.port):
        app = WispApp(SessionOptions(workdir=fixed_place.workdir))

        async def steps(pilot: Any) -> None:
            store = app.session.store
            first = await add_exchange(store, "plan the website launch for Friday", "Friday it is.",
                                       workspace="project", transport="tui", requested_at=FIXED_NOW)
            second = await add_exchange(store, "and email the team", "I drafted the email.",
                                        workspace="project", transport="tui",
                                        requested_at="2025-03-04T14:07:30.000000Z")
            third = await add_exchange(store, "which port does the API use?", "8080, from config.toml.",
                                       workspace="api", transport="ask", channel="2",
                                       requested_at="2025-03-05T09:12:00.000000Z")
            await add_memory(store, "Agreed to launch the website on Friday; the team is to be emailed.",
                             [first, second])
            await add_memory(store, "The API listens on port 8080 (config.toml).", [third])
            await command(pilot, app, "/memory")
            await screen_named(pilot, app, "MemoryScreen")

        assert snap_compare(app, terminal_size=SIZE, run_before=prepared(app, steps))


def test_compact_preview(snap_compare, fixed_place: FixedPlace) -> None:
    """``/compact focus on …``: the turns that would leave with their tokens, the summary the model
    proposes and the part wisp completed, the identifiers kept and missed, what stays, the tokens."""
    side = SummarisingSideCall("small")
    with CountingOllama(port=fixed_place.port):
        app = WispApp(SessionOptions(workdir=fixed_place.workdir, tools=[], side_call=side))

        async def steps(pilot: Any) -> None:
            await command(pilot, app, "/task fix the payment bug; objective: tests/test_pay.py passes")
            await command(pilot, app, "/fact decision amounts = cents")
            for prompt in ("We'll fix the payment bug in src/pay/charge.py first.",
                           "The failing test is tests/test_pay.py::test_refund_rounding, error PAY-402.",
                           "Look at commit 3f9a2c1b, it changed the rounding.",
                           "Keep amounts in cents from now on."):
                await send(pilot, app, prompt)
            await command(pilot, app, "/compact focus on the payment bug")
            await screen_named(pilot, app, "CompactScreen")

        assert snap_compare(app, terminal_size=WIDE, run_before=prepared(app, steps))
        assert side.calls, "the preview asked for no summary"


def test_help_f1(snap_compare, fixed_place: FixedPlace) -> None:
    """F1: the keys and the slash commands, in the order of the one explicit table."""
    with FakeOllama(port=fixed_place.port):
        app = WispApp(SessionOptions(workdir=fixed_place.workdir))

        async def steps(pilot: Any) -> None:
            await pilot.press("f1")
            await screen_named(pilot, app, "HelpScreen")

        assert snap_compare(app, terminal_size=SIZE, run_before=prepared(app, steps))


def test_no_endpoint(snap_compare, fixed_place: FixedPlace) -> None:
    """Nothing listens on the endpoint: wisp opens, says so once, and keeps a prompt that was not sent."""
    write_config(fixed_place.home, {"model.provider": "ollama", "model.endpoint": fixed_place.url})
    app = WispApp(SessionOptions(workdir=fixed_place.workdir))

    async def steps(pilot: Any) -> None:
        assert app.status.state == "no endpoint"
        await send(pilot, app, "anyone there?")

    assert snap_compare(app, terminal_size=SIZE, run_before=prepared(app, steps))


def test_model_picker(snap_compare, fixed_place: FixedPlace) -> None:
    """``/model``: the endpoint's models in a picker, the one in use marked (issue 16)."""
    with FakeOllama(port=fixed_place.port, models=["wisp-fake:latest", "qwen3:8b", "llama3.2:latest",
                                                   "gemma3:4b"]):
        app = WispApp(SessionOptions(workdir=fixed_place.workdir))

        async def steps(pilot: Any) -> None:
            await command(pilot, app, "/model")
            await screen_named(pilot, app, "ModelPickerScreen")
            app.screen.query_one("Input").cursor_blink = False

        assert snap_compare(app, terminal_size=SIZE, run_before=prepared(app, steps))


def test_retried_reply(snap_compare, fixed_place: FixedPlace) -> None:
    """``/retry``: the new reply shown, the bar under it says version 2 of 2 and how to see the first (issue 16)."""
    with FakeOllama(port=fixed_place.port) as srv:
        # the server counts the prompt as sent (a count far below wisp's estimate is a warning of its own)
        srv.push(reply(text("The capital of France is **Lyon**."), usage=(520, 9)),
                 reply(text("The capital of France is **Paris**."), usage=(520, 9)))
        app = WispApp(SessionOptions(workdir=fixed_place.workdir))

        async def steps(pilot: Any) -> None:
            await send(pilot, app, "what is the capital of France?")
            app.prompt_input.load_text("/retry")
            await pilot.press("enter")
            await until(pilot, lambda: len(app.query("VersionBar")) == 1, "the version bar")
            await app.turn_worker.wait()
            await pilot.pause()

        assert snap_compare(app, terminal_size=SIZE, run_before=prepared(app, steps))


def test_light_theme(snap_compare, fixed_place: FixedPlace) -> None:
    """``ui.theme light``: wisp's light theme, code highlighted to match (issue 16, "Themes")."""
    fixed_place.configure({"ui.theme": "light"})
    with FakeOllama(port=fixed_place.port) as srv:
        srv.push(reply(thinking("A one-liner will do."),
                       text("Use `sum`:\n\n```python\ndef total(xs):\n    return sum(xs)\n```\n\nThat is all.")))
        app = WispApp(SessionOptions(workdir=fixed_place.workdir))

        async def steps(pilot: Any) -> None:
            await command(pilot, app, "/fact decision style = short answers")
            await send(pilot, app, "how do I add up a list?")

        assert snap_compare(app, terminal_size=WIDE, run_before=prepared(app, steps))
