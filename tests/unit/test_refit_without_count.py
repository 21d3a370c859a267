"""No refusal for size ends a turn, on a server that never says its count.

An older llama.cpp (:class:`tests.support.harsh_server.OldLlamaCpp`: a
tokenizer denser than wisp's estimate, no usage in its stream, no
``/tokenize``) refuses an oversized request with only "the request exceeds
the available context size". The agent then fits the request again with a
larger margin, at most twice (each time with a notice), and keeps what the
refusal showed as the model's calibration floor, so the next request is
planned with the denser count and is not refused. When the refits run out,
the error says what is true (the server counts more than wisp estimates)
and what to do, and never advises the window the endpoint already has.
Real HTTP servers on 127.0.0.1, a real store and audit log.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from wisp.core import agent as agent_mod
from wisp.core import events as ev
from wisp.core.session import Session, SessionOptions
from tests.support.fakes import FakeOpenAI, fault, reply, text
from tests.support.harsh_server import REFUSAL, OldLlamaCpp
from tests.support.home import write_config
from tests.support.sidecalls import SummarisingSideCall

WORDS = ("the service listens on port 8437 and the worker pool keeps twelve workers while retries back off "
         "exponentially; we decided the gateway returns 502 when the upstream closes early, and the cache "
         "expires after ninety seconds so that stale entries never reach a client").split()


def prose(rng: random.Random, chars: int) -> str:
    """About ``chars`` characters of plain sentences (wisp estimates ~4.7 characters a token)."""
    out: list[str] = []
    size = 0
    while size < chars:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 18))).capitalize() + "."
        out.append(sentence)
        size += len(sentence) + 1
    return " ".join(out)


def configure(home: Path, srv: FakeOpenAI, window: int = 4096, model: str = "old-llama") -> None:
    write_config(home, {"model.provider": "openai", "model.endpoint": srv.base_url, "model.name": model,
                        "model.timeout_s": 10, "model.load_wait_s": 1, "model.context_window": window})


async def open_session(workdir: Path, side: SummarisingSideCall | None = None) -> Session:
    session = await Session.open(SessionOptions(workdir=workdir, tools=["read_file"],
                                                side_call=side or SummarisingSideCall()))
    assert await session.connect(), session.endpoint_error
    return session


async def run(session: Session, prompt: str) -> list:
    return [item async for item in session.run_turn(prompt)]


def refit_notices(events: list) -> list[ev.Notice]:
    return [e for e in events if isinstance(e, ev.Notice) and e.key == "fit" and "without saying" in e.text]


def errors(events: list) -> list[ev.Error]:
    return [e for e in events if isinstance(e, ev.Error)]


#: Where an advice names a window size: "at least N", "model.context_window (to) N", a server's flag.
ADVISED = re.compile(r"(?:at least|context_window(?: to)?|--ctx-size|--n_ctx|--max-model-len)\s+([\d,]+)")


def advised_sizes(message: str) -> list[int]:
    """Every window size (tokens) a message advises setting."""
    return [int(n.replace(",", "")) for n in ADVISED.findall(message)]


# --- the fake ----------------------------------------------------------------------------------------


async def test_the_fake_gives_wisp_no_count() -> None:
    """OldLlamaCpp is the harsh case only if wisp cannot count against it: no /tokenize, no usage in
    its stream or its tool probe, and a refusal for size with no n_prompt_tokens; a refused request
    takes no script entry."""
    from wisp.core.model import base as mb
    from wisp.core.model.openai import OpenAIEndpoint

    with OldLlamaCpp(window=512, chars_per_token=2.0) as srv:
        srv.push(reply(text("Small."), usage=(10, 2)))
        async with OpenAIEndpoint(srv.base_url, "m", timeout_s=5) as endpoint:
            assert await endpoint.count_tokens("some text to count") is None
            assert await endpoint.probe_tools() is None
            with pytest.raises(mb.BadRequest) as info:
                async for _ in endpoint.stream_chat([{"role": "user", "content": "x" * 1100}], None):
                    pass
            got = [item async for item in endpoint.stream_chat([{"role": "user", "content": "hi"}], None)]
    assert info.value.context_overflow and info.value.prompt_tokens is None and info.value.window is None
    assert srv.refusals == [{"counted": 555, "asked": 0, "window": 512}]  # 1,100 / 2 + 5 of chat template
    assert [i.text for i in got if isinstance(i, mb.StreamText)] == ["Small."]
    assert not [i for i in got if isinstance(i, mb.StreamUsage)]
    assert srv.counted == [555, 6] and len(srv.chat_bodies) == 2 and len(srv.accepted_bodies) == 1


# --- the refit ---------------------------------------------------------------------------------------


async def test_a_refusal_without_a_count_is_fitted_again_and_answers(wisp_home: Path, tmp_path: Path) -> None:
    """A 12,000-character prompt: wisp plans it inside the 3,072-token budget of a 4,096-token window, the
    server counts it at 2.7 characters a token (about 4,450) and refuses without a count. The agent
    fits it again once, with a notice, and the reply comes; the prompt is kept whole."""
    rng = random.Random(1)
    paste = prose(rng, 12_000)
    with OldLlamaCpp(window=4096) as srv:
        configure(wisp_home, srv)
        srv.push(reply(text("Read it.")))
        async with await open_session(tmp_path) as s:
            events = await run(s, paste)
            stored = (await s.store.entries(s.conversation_id))[0]
        assert len(srv.refusals) == 1 and len(srv.chat_bodies) == 2
        assert srv.counted[0] >= 4096 > srv.counted[1]
    assert not errors(events) and events[-1] == ev.TurnEnded(1, "done")
    assert stored.content == paste
    [notice] = refit_notices(events)
    assert "refit 1 of 2" in notice.text and "× wisp's estimate" in notice.text


async def test_at_most_two_refits_then_they_answer(wisp_home: Path, tmp_path: Path) -> None:
    """A server that also holds back 500 tokens of its window (beyond the reply's cap it is asked, the
    1,024-token reserve) refuses the first refit too; the second, planned from what both refusals showed,
    is taken."""
    paste = prose(random.Random(2), 12_000)
    with OldLlamaCpp(window=4096, reserve=500) as srv:
        configure(wisp_home, srv)
        srv.push(reply(text("Read it.")))
        async with await open_session(tmp_path) as s:
            events = await run(s, paste)
        assert len(srv.refusals) == 2 and len(srv.chat_bodies) == 3
    assert not errors(events) and events[-1].state == "done"
    assert [n.text.split("(refit ")[1][:6] for n in refit_notices(events)] == ["1 of 2", "2 of 2"]


async def test_a_third_refusal_ends_the_turn_with_what_to_do_and_loses_nothing(wisp_home: Path,
                                                                              tmp_path: Path) -> None:
    """After two refits the turn ends in error: the message says the server counts more than wisp
    estimates, names /compact, a shorter prompt and a window larger than the current one, and the
    turns before, and this turn's prompt, stay recorded whole."""
    paste = prose(random.Random(3), 12_000)
    with OldLlamaCpp(window=4096) as srv:
        configure(wisp_home, srv)
        srv.push(reply(text("Hello to you.")))
        async with await open_session(tmp_path) as s:
            first = await run(s, "hello")
            srv.reserve = 3_900  # from now on the server takes nothing this session can send
            events = await run(s, paste)
            entries = await s.store.entries(s.conversation_id)
            turns = await s.store.turns(s.conversation_id)
        assert len(srv.refusals) == 3  # the first try and two refits, no more
    assert first[-1].state == "done"
    assert len(refit_notices(events)) == 2
    [error] = errors(events)
    assert events[-1].state == "error" and error.kind == "bad_request"
    message = error.message
    assert "counts more tokens than wisp estimates" in message
    assert "/compact" in message and "shorter prompt" in message
    assert "larger window than 4,096 tokens" in message and f"/show entry {entries[2].number}" in message
    assert all(size > 4096 for size in advised_sizes(message)) and advised_sizes(message)
    assert [(e.kind, e.content) for e in entries] == [("prompt", "hello"), ("reply", "Hello to you."),
                                                      ("prompt", paste)]
    assert [t.state for t in turns] == ["done", "error"]


async def test_the_calibration_learns_and_the_next_turn_is_not_refused(wisp_home: Path, tmp_path: Path) -> None:
    """The refusal and the refit the server took go into the model's calibration as a floor; the next
    turn's first request is planned with it and taken, and so is a new session's."""
    rng = random.Random(4)
    with OldLlamaCpp(window=4096) as srv:
        configure(wisp_home, srv)
        srv.push(reply(text("One.")), reply(text("Two.")), reply(text("Three.")))
        async with await open_session(tmp_path) as s:
            await run(s, prose(rng, 12_000))
            assert len(srv.refusals) == 1
            state = await s.context.calibration_state(s.conversation_id)
            assert state.floor is not None and state.floor > 1.3 and state.effective >= state.floor
            sent = len(srv.chat_bodies)
            events = await run(s, prose(rng, 12_000))
            assert not refit_notices(events) and events[-1].state == "done"
            assert len(srv.refusals) == 1 and len(srv.chat_bodies) == sent + 1
        async with await open_session(tmp_path) as s:  # kept in the store: a new session plans with it too
            events = await run(s, prose(rng, 12_000))
        assert len(srv.refusals) == 1 and events[-1].state == "done"


async def test_a_server_that_counts_is_refitted_to_its_count_as_before(wisp_home: Path, tmp_path: Path) -> None:
    """Where the server says its count (llama.cpp's n_prompt_tokens), that count sizes the one refit,
    as before, and no floor is learned from it."""
    with FakeOpenAI() as srv:
        configure(wisp_home, srv, window=2048)
        srv.push(fault.status(400, {"error": {"message": "the request exceeds the available context size, try "
                                                         "increasing it", "type": "exceed_context_size_error",
                                              "n_prompt_tokens": 3000, "n_ctx": 2048}}),
                 reply(text("Fine."), usage=(1500, 2)))
        async with await open_session(tmp_path) as s:
            events = await run(s, "z " * 6000)
            state = await s.context.calibration_state(s.conversation_id)
    assert events[-1].state == "done" and not refit_notices(events)
    assert any(isinstance(e, ev.Notice) and "The server counted 3,000 tokens" in e.text for e in events)
    assert state.floor is None


async def test_a_count_the_server_gives_later_lowers_the_floor(wisp_home: Path, tmp_path: Path) -> None:
    """The floor is a bound from a refusal; the server's own count of a request it took is the better
    witness, so a later usage count below the floor lowers it to that count's ratio."""
    with FakeOpenAI() as srv:
        configure(wisp_home, srv)
        async with await open_session(tmp_path) as s:
            cal = s.context.calibration
            await cal.observe_floor("old-llama", 1.6)
            assert (await cal.get("old-llama")).effective == pytest.approx(1.6)
            assert await cal.observe_floor("old-llama", 1.2) is None  # a floor only rises
            assert await cal.observe_floor("old-llama", 0.9) is None  # at or below 1 it says nothing
            state = await cal.observe("old-llama", 1100, 1000)
    assert state is not None and state.floor == pytest.approx(1.1)


# --- the advice is true -------------------------------------------------------------------------------


async def test_an_uncounted_refusal_advises_no_window_size_from_the_endpoint(wisp_home: Path) -> None:
    """The endpoint does not know the window it runs: it names no size (a guess was 4,096, on a
    4,096-token server)."""
    from wisp.core.model.base import BadRequest
    from wisp.core.model.openai import OpenAIEndpoint

    with FakeOpenAI([fault.status(400, REFUSAL)]) as srv:
        async with OpenAIEndpoint(srv.base_url, "m", timeout_s=5) as endpoint:
            with pytest.raises(BadRequest) as info:
                async for _ in endpoint.stream_chat([{"role": "user", "content": "hi"}], None):
                    pass
    error = info.value
    assert error.context_overflow and error.prompt_tokens is None and error.window is None
    assert error.detail and "exceeds the available context size" in error.detail
    assert not advised_sizes(str(error)) and "larger window than it has" in str(error)


@pytest.mark.parametrize("window", [2048, 4096, 8192, 32768])
async def test_the_error_never_advises_the_window_the_endpoint_has(wisp_home: Path, tmp_path: Path,
                                                                  window: int) -> None:
    """A table over windows: a server that refuses everything without a count, on the window wisp
    planned for; the turn's error advises only windows larger than it."""
    with OldLlamaCpp(window=window, reserve=window) as srv:
        configure(wisp_home, srv, window=window)
        async with await open_session(tmp_path) as s:
            events = await run(s, "hello")
    [error] = errors(events)
    sizes = advised_sizes(error.message)
    assert sizes and min(sizes) > window, error.message
    assert f"the {window:,}-token window" in error.message


def advisors(window: int, trained: int) -> list:
    """Each endpoint's ``window_advice(tokens)``, for an embedded model trained on ``trained`` tokens and
    started at ``window`` (capped at ``trained``)."""
    from types import SimpleNamespace

    from wisp.core.model._transport import HttpEndpoint
    from wisp.core.model.embedded import EmbeddedEndpoint
    from wisp.core.model.link import ModelLink
    from wisp.core.model.ollama import OllamaEndpoint

    embedded = SimpleNamespace(server=SimpleNamespace(trained_context_length=trained, n_ctx=min(window, trained)))
    return [lambda t: HttpEndpoint.window_advice(None, t), lambda t: OllamaEndpoint.window_advice(None, t),
            lambda t: EmbeddedEndpoint.window_advice(embedded, t)] + [
        lambda t, p=p, e=e: ModelLink.window_advice(SimpleNamespace(provider=p, embedded=e), t)
        for p, e in (("openai", False), ("ollama", False), ("openai", True))]


@settings(max_examples=200, deadline=None)
@given(window=st.integers(min_value=256, max_value=1 << 21), refits=st.integers(0, 2),
       trained=st.integers(min_value=2048, max_value=1 << 21))
def test_the_refusal_message_advises_only_larger_windows(window: int, refits: int, trained: int) -> None:
    """For any window wisp planned for and every endpoint's advice, the sizes advised are larger than the
    window (the embedded model already at its trained length advises none)."""
    for advice in advisors(window, trained):
        message = agent_mod.uncounted_refusal_message("the request exceeds the available context size", window,
                                                      window // 2, refits, 1.25, 7, advice)
        sizes = advised_sizes(message)
        assert all(size > window for size in sizes), message
        assert sizes or "trained maximum" in message, message


def test_the_refit_ratios_grow_and_stop_after_two() -> None:
    """The first refit plans at least 1.5 × the first try's ratio, the second 2 ×, or more where the
    refusal bounds the server's count (it refused ``window`` tokens of room for that estimate); no third."""
    refits = agent_mod._Refits(first_ratio=1.0)
    loose = agent_mod.uncounted_refit_ratio(refits, 4096, 4000, None)  # the bound says ~1.08: the step wins
    assert loose == pytest.approx(1.5)
    assert agent_mod.uncounted_refit_ratio(refits, 4096, 2000, None) == pytest.approx(4096 / 2000 * 1.05)
    refits.tries = 1
    assert agent_mod.uncounted_refit_ratio(refits, 4096, 4000, None) == pytest.approx(2.0)
    assert agent_mod.uncounted_refit_ratio(refits, 4096, 100, None) == pytest.approx(2.5)  # capped
    refits.tries = 2
    assert agent_mod.uncounted_refit_ratio(refits, 4096, 4000, None) is None


# --- a long chat ---------------------------------------------------------------------------------------


async def chat(home: Path, workdir: Path, turns: int, seed: int = 7, model: str = "old-llama") -> dict:
    """``turns`` turns of long prompts (1,500-9,000 characters) and replies (800-3,000) against an
    older llama.cpp of 4,096 tokens; the figures: turns failed, refits, refusals, summaries."""
    rng = random.Random(seed)
    side = SummarisingSideCall()
    failed: list[int] = []
    refits = 0
    with OldLlamaCpp(window=4096) as srv:
        configure(home, srv, model=model)
        async with await open_session(workdir, side) as s:
            for n in range(1, turns + 1):
                srv.push(reply(text(prose(rng, rng.randint(800, 3000)))))
                events = await run(s, f"Turn {n}. " + prose(rng, rng.choice([1500, 3000, 6000, 9000])))
                refits += len(refit_notices(events))
                if errors(events) or events[-1].state != "done":
                    failed.append(n)
                    srv.script.clear()
            summaries = len(await s.context.summaries.versions(s.conversation_id))
        return {"failed": failed, "refits": refits, "refusals": len(srv.refusals), "summaries": summaries,
                "requests": len(srv.chat_bodies)}


async def test_a_long_chat_on_an_old_llama_cpp_loses_no_turn(wisp_home: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """24 turns with long prompts and replies on a 4,096-token older llama.cpp: no turn fails, the
    refusals are few (the calibration learns from the first), and older turns left under a running
    summary. Without the refits (no steps) the same chat loses turns: the figure this guards."""
    after = await chat(wisp_home, tmp_path, 24)
    print(f"\nwith refits: {after}")
    assert after["failed"] == [], after
    assert 1 <= after["refusals"] <= 4 and after["refits"] == after["refusals"]
    assert after["summaries"] >= 1

    # as before: no refit, nothing learned (another model name: the first chat's floor is not its)
    monkeypatch.setattr(agent_mod, "REFIT_STEPS", ())
    monkeypatch.setattr(agent_mod, "refusal_floor", lambda budget, estimate: None)
    other = tmp_path / "before"
    other.mkdir()
    before = await chat(wisp_home, other, 24, model="old-llama-before")
    print(f"without refits: {before}")
    assert before["failed"], before
