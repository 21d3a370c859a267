"""wisp's prompted tool protocol (wisp.core.model.prompted; issue 10, "Tools reach the model, on every server")."""

from __future__ import annotations

import json

import pytest

from hypothesis import assume, given, settings, strategies as st

from wisp.core.model.prompted import (
    CLOSE_TAG, OPEN_TAG, PromptedCall, call_problem, PromptedParser, Shown, example_messages, parse_block, parse_reply,
    render_call, render_tools, to_prompted_messages, tool_grammar,
)

READ_FILE = {"type": "function", "function": {
    "name": "read_file", "description": "Read a text file.",
    "parameters": {"type": "object", "properties": {
        "path": {"type": "string", "description": "file path"},
        "limit": {"type": "integer"}}, "required": ["path"]}}}
SYSTEM_INFO = {"type": "function", "function": {
    "name": "system_info", "description": "This machine's RAM, cpu, disk or os.",
    "parameters": {"type": "object", "properties": {"topic": {"type": "string", "enum": ["memory", "cpu"]}},
                   "required": ["topic"]}}}
CUSTOM = {"type": "function", "function": {"name": "weather", "description": "The weather.",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}


def run(chunks: list[str]) -> tuple[str, list[PromptedCall]]:
    parser = PromptedParser()
    items = []
    for chunk in chunks:
        items += parser.feed(chunk)
    items += parser.flush()
    assert all(isinstance(i, (Shown, PromptedCall)) for i in items)
    return "".join(i.text for i in items if isinstance(i, Shown)), [i for i in items if isinstance(i, PromptedCall)]


# --- rendering -------------------------------------------------------------


def test_render_tools_names_each_tool_its_arguments_and_the_block() -> None:
    text = render_tools([READ_FILE, SYSTEM_INFO])
    assert "## read_file" in text and "## system_info" in text
    assert "- path (string, required): file path" in text
    assert "- limit (integer, optional)" in text
    assert '- topic ("memory" | "cpu", required)' in text
    assert f'{OPEN_TAG}\n{{"name": "read_file", "arguments": {{"path": "..."}}}}\n{CLOSE_TAG}' in text
    assert render_tools([]) == "" and render_tools([{"type": "function", "function": {}}]) == ""
    assert render_tools([READ_FILE]) == render_tools([READ_FILE])  # deterministic: the prompt cache stays warm


def test_the_example_in_the_tool_text_parses_as_a_call() -> None:
    text = render_tools([SYSTEM_INFO])
    _, calls = parse_reply(text[text.index(OPEN_TAG):text.index(CLOSE_TAG) + len(CLOSE_TAG)])
    assert calls == [PromptedCall("system_info", {"topic": "memory"})]


def test_examples_use_only_the_offered_tools() -> None:
    messages = example_messages([CUSTOM, SYSTEM_INFO])
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"] * 2
    named = [parse_reply(m["content"])[1][0].name for m in messages if m["role"] == "assistant" and OPEN_TAG in m["content"]]
    assert named == ["system_info", "weather"]  # known examples first, then one built from the schema
    assert example_messages([]) == []


def test_to_prompted_messages_turns_calls_and_results_into_text() -> None:
    neutral = [
        {"role": "system", "content": "RULES"},
        {"role": "user", "content": "read a.txt"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "1\thello"},
        {"role": "assistant", "content": "It says hello."},
    ]
    out = to_prompted_messages(neutral, [READ_FILE])
    assert neutral[2]["tool_calls"]  # the input is not changed
    assert out[0]["role"] == "system" and out[0]["content"].startswith("RULES\n\n# Tools")
    examples = example_messages([READ_FILE])
    assert out[1:1 + len(examples)] == examples
    rest = out[1 + len(examples):]
    assert [m["role"] for m in rest] == ["user", "assistant", "user", "assistant"]
    assert rest[1]["content"] == render_call("read_file", {"path": "a.txt"})
    assert rest[2]["content"] == "[result of read_file]\n1\thello"
    assert all("tool_calls" not in m for m in out)
    # without tools only the history is rewritten; without a system message one is added
    assert to_prompted_messages(neutral)[0] == {"role": "system", "content": "RULES"}
    bare = to_prompted_messages([{"role": "user", "content": "hi"}], [READ_FILE])
    assert bare[0]["role"] == "system" and bare[0]["content"].startswith("# Tools") and bare[-1]["content"] == "hi"



def test_the_tools_go_where_the_system_message_says_before_the_summary() -> None:
    """A new running summary changed the system message before the tool text, and the embedded server
    (its cache keeps an unchanged start) evaluated the tools again: 4,473 tokens after SmolLM2's first
    summary, where 102 were cached."""
    from wisp.core.messages import TOOLS_AT

    tools = render_tools([READ_FILE])
    first = to_prompted_messages([{"role": "system", "content": "RULES\n\nSUMMARY ONE", TOOLS_AT: 5},
                                  {"role": "user", "content": "hi"}], [READ_FILE])
    later = to_prompted_messages([{"role": "system", "content": "RULES\n\nSUMMARY TWO, longer", TOOLS_AT: 5},
                                  {"role": "user", "content": "hi"}], [READ_FILE])
    assert first[0] == {"role": "system", "content": f"RULES\n\n{tools}\n\nSUMMARY ONE"}
    assert later[0]["content"].startswith(f"RULES\n\n{tools}\n\nSUMMARY TWO")
    # an offset that is not inside the content, or none, puts the tools at its end
    for bad in (0, 99, "5", None):
        out = to_prompted_messages([{"role": "system", "content": "RULES", TOOLS_AT: bad}], [READ_FILE])
        assert out[0] == {"role": "system", "content": f"RULES\n\n{tools}"}


# --- parsing ---------------------------------------------------------------


def test_a_block_is_a_call_and_is_not_shown() -> None:
    shown, calls = run([f'Let me look.\n{OPEN_TAG}\n{{"name": "read_file", "arguments": {{"path": "a"}}}}\n{CLOSE_TAG}\n\nDone'])
    assert shown == "Let me look.\nDone"
    assert calls == [PromptedCall("read_file", {"path": "a"})] and calls[0].well_formed


def test_lenient_bodies() -> None:
    assert parse_block('{"name": "functions.read_file", "parameters": {"path": "a"}}') == [
        PromptedCall("read_file", {"path": "a"})]
    assert parse_block('{"name": "read_file", "arguments": "{\\"path\\": \\"a\\"}"}') == [
        PromptedCall("read_file", {"path": "a"})]
    assert parse_block('```json\n[{"name": "a", "arguments": {}}, {"name": "b"}]\n```') == [
        PromptedCall("a", {}), PromptedCall("b", {})]
    assert parse_block('{"name": "a", "arguments": {}}\n{"name": "b", "arguments": {"x": 1}}') == [
        PromptedCall("a", {}), PromptedCall("b", {"x": 1})]
    assert parse_block('{"function": {"name": "a", "arguments": {"x": 2}}}') == [PromptedCall("a", {"x": 2})]


def test_malformed_bodies_become_calls_that_say_so() -> None:
    bad = parse_block('{"name": "run_command", "arguments": {"x": pytest.Thing()}}')
    assert bad == [PromptedCall("run_command", {}, '{"name": "run_command", "arguments": {"x": pytest.Thing()}}')]
    assert not bad[0].well_formed
    assert parse_block("not json at all")[0] == PromptedCall("", {}, "not json at all")
    assert parse_block("   ")[0].raw == "   "
    assert parse_block('{"name": "a", "arguments": [1]}')[0].raw is not None
    assert parse_block('"just a string"')[0].raw is not None


def test_an_unclosed_block_still_becomes_its_call_at_the_end() -> None:
    # a server may stop generating right at the closing tag
    shown, calls = run(["ok ", OPEN_TAG, '{"name": "a", "arguments": {"k": "v"}}'])
    assert shown == "ok " and calls == [PromptedCall("a", {"k": "v"})]


def test_a_partial_tag_at_the_end_is_shown() -> None:
    assert run(["1 <tool_c"]) == ("1 <tool_c", [])
    assert run(["a <", "b"]) == ("a <b", [])
    assert run(["x <tool_call", "s>"]) == ("x <tool_calls>", [])


def test_a_block_without_a_closing_tag_does_not_grow_without_bound() -> None:
    parser = PromptedParser()
    items = parser.feed(OPEN_TAG + "x" * 70_000)
    assert len(items) == 1 and isinstance(items[0], PromptedCall) and items[0].raw
    assert parser.feed("after") == [Shown("after")]


# --- property: any split gives the same result -----------------------------

_text = st.lists(st.sampled_from(list("abc <>/_{}\"\n") + ["<tool", "_call>", "</tool_call", "é"]),
                 max_size=12).map("".join)
_args = st.dictionaries(st.text(alphabet="xyz", min_size=1, max_size=3),
                        st.one_of(st.integers(-5, 5), st.text(alphabet="ab<>/ \"", max_size=6)), max_size=3)
_call = st.tuples(st.sampled_from(["read_file", "system_info", "run_command"]), _args)


@st.composite
def replies(draw):
    """A reply of plain text and blocks, with the text to show and the calls it holds."""
    parts, texts, calls, shown = [], [], [], ""
    strip = False  # whitespace right after a block is dropped, up to the next visible text
    for _ in range(draw(st.integers(0, 4))):
        text = draw(_text)
        parts.append(text)
        texts.append(text)
        if strip:
            text = text.lstrip()
            strip = not text
        shown += text
        if draw(st.booleans()):
            name, args = draw(_call)
            body = json.dumps({"name": name, "arguments": args}, ensure_ascii=draw(st.booleans()))
            parts.append(f"{OPEN_TAG}{draw(st.sampled_from(['', chr(10)]))}{body}\n{CLOSE_TAG}")
            calls.append(PromptedCall(name, args))
            strip = True
            texts.append("\0")  # a block stands between this text and the next
    # plain text never holds a whole opening tag, even across two pieces (that is a block of its own)
    assume(OPEN_TAG not in "".join(texts))
    return "".join(parts), shown, calls


@settings(max_examples=300, deadline=None)
@given(replies(), st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_any_split_gives_the_same_text_and_calls(reply, cuts) -> None:
    whole, shown, calls = reply
    points = sorted({c % (len(whole) + 1) for c in cuts})
    pieces = [whole[a:b] for a, b in zip([0, *points], [*points, len(whole)])]
    assert run(pieces) == (shown, calls)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.lists(st.integers(min_value=0, max_value=250), max_size=10))
def test_any_text_any_split_never_raises_and_never_depends_on_the_split(text, cuts) -> None:
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]
    assert run(pieces) == run([text])
    shown, calls = run([text])
    if OPEN_TAG not in text:
        assert shown == text and calls == []


# --- grammar ---------------------------------------------------------------


def test_the_grammar_allows_one_offered_tool_with_its_arguments() -> None:
    grammar = tool_grammar([READ_FILE, SYSTEM_INFO])
    rules = dict(line.split(" ::= ", 1) for line in grammar.strip().splitlines())
    assert rules["root"] == "call | text"
    assert rules["text"] == "[^<] [^\\x00]*"  # plain text may not start with "<": a block must be the whole reply
    assert rules["call"] == '"<tool_call>\\n{\\"name\\": " ( tool0 | tool1 ) "}\\n</tool_call>"'
    assert rules["tool0"] == ('"\\"read_file\\", \\"arguments\\": {" "\\"path\\": " str ( ", \\"limit\\": " int )? "}"')
    assert rules["tool1"] == '"\\"system_info\\", \\"arguments\\": {" "\\"topic\\": " ( "\\"memory\\"" | "\\"cpu\\"" ) "}"'
    assert tool_grammar([]) is None
    only_calls = tool_grammar([READ_FILE], allow_text=False)
    assert only_calls.startswith("root ::= call\n") and "text ::=" not in only_calls


def test_call_problems() -> None:
    assert call_problem(PromptedCall("read_file", {"path": "a"}), [READ_FILE]) is None
    assert call_problem(PromptedCall("read_file", {}), [READ_FILE]) == "read_file needs path"
    assert call_problem(PromptedCall("list_files", {}), [READ_FILE]) == "no tool named 'list_files' was offered"
    assert call_problem(PromptedCall("read_file", {}, "{bad"), [READ_FILE]) == "the block is not valid JSON"


def test_the_grammar_compiles_in_llama_cpp() -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    no_required = {"type": "function", "function": {"name": "opt", "parameters": {
        "type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "array"}, "c": {"type": "number"}}}}}
    for schemas in ([READ_FILE, SYSTEM_INFO, CUSTOM], [no_required]):
        assert llama_cpp.LlamaGrammar.from_string(tool_grammar(schemas), verbose=False) is not None
