"""summarise through the real tools and the real memory tool, on a real store and audit log.

What the model meets: an output that read_file or run_command produced (read_file's numbers and
``[end of file]``, run_command's ``[exit status N]``), stored as the agent stores a tool result,
then ``summarise entry N`` and ``recall entry N from line K`` asked of the memory tool.

- For any JSON document, pretty or compact, through either tool, ``summarise entry N overview``
  (and the notable lines) give its shape (wisp-memory-tool.txt, "for JSON, its shape").
- For every output of both corpora, each line its notable lines or its overview cite (``L154``,
  wherever it stands) is the stored output's: ``recall entry N from line 154`` shows that line
  first, and the first point's line is the manifest's root cause.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wisp.core.config import Config
from wisp.core.outputs import split_stored_lines
from wisp.core.outputs.doc import Doc
from wisp.core.tools.approval import Approval
from wisp.core.tools.base import ToolContext
from wisp.core.tools.read_file import ReadFile
from wisp.core.tools.run_command import RunCommand
from tests.support.home import DATA
from tests.support.memory_harness import make_harness

CORPORA = [DATA / "outputs", DATA / "outputs_second"]
ALL = [(d, n, e) for d in CORPORA for n, e in json.loads((d / "manifest.json").read_text()).items()]


async def _allow(request) -> Approval:
    return Approval(True, "once", "person")


async def _produce(tool: str, workdir: Path, name: str) -> tuple[dict, str, dict]:
    """Run the real tool on ``workdir/name``: (its arguments, its result's content, its meta)."""
    if tool == "read_file":
        args = {"path": name}
        result = await ReadFile().run(args, ToolContext(workdir=workdir, config=None))
    else:
        args = {"command": f"cat {name}"}
        cfg = Config(workdir / "config.json", {})
        result = await RunCommand().run(args, ToolContext(workdir=workdir, config=cfg, conversation_id=1, turn=1,
                                                          approve=_allow))
    assert result.ok, result.content
    return args, result.content, dict(result.meta)


_SCALAR = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False,
                                                                              width=32) | st.text(max_size=12)
_KEY = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF, blacklist_characters='"\\'), min_size=1,
               max_size=10)
_JSON = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEY, inner, max_size=4),
                     max_leaves=12)
_DOC = st.dictionaries(_KEY, _JSON, min_size=1, max_size=6) | st.lists(_JSON, min_size=1, max_size=5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(_DOC, st.sampled_from([None, 2, 4]), st.sampled_from(["read_file", "run_command"]))
def test_any_json_document_through_either_tool_gets_its_shape(tmp_path: Path, value, indent, tool) -> None:
    async def go() -> None:
        work = Path(tempfile.mkdtemp(dir=tmp_path))
        (work / "doc.json").write_text(json.dumps(value, indent=indent, ensure_ascii=False) + "\n")
        args, content, meta = await _produce(tool, work, "doc.json")
        h = await make_harness(work)
        await h.begin()
        out = await h.tool_output(tool, args, content, meta=meta)
        await h.end()
        await h.begin()
        kind = "object" if isinstance(value, dict) else "array"
        for request in (f"summarise entry {out.number} overview", f"summarise entry {out.number}"):
            text = await h.ask(request)
            assert "its shape:" in text, text
            assert re.search(rf"^L1 JSON: (?:empty )?{kind}", text, re.MULTILINE), text
            if isinstance(value, dict) and len(value) <= 6:
                assert f'"{next(iter(value))}"' in text, text
        event = h.memory_events()[-1]
        assert event["mode"] == "json" and event["first_cited"] == 1
        await h.close()

    asyncio.run(go())


@pytest.mark.parametrize("tool", ["run_command", "read_file"])
async def test_every_cited_line_is_where_a_recall_from_it_lands(tmp_path: Path, tool: str) -> None:
    h = await make_harness(tmp_path)
    await h.begin()
    stored: list[tuple[object, dict, list[str]]] = []
    for folder, name, expected in ALL:
        # the corpus files are stored outputs; the output as produced is what the tool is given
        produced = [ln for ln in split_stored_lines((folder / name).read_text())]
        if produced and re.fullmatch(r"\[exit status -?\d+\]", produced[-1]):
            produced = produced[:-1]
        if produced and produced[-1] == "[end of file]":
            produced = [re.sub(r"^\d+\t", "", ln) for ln in produced[:-1]]
        (tmp_path / name).write_text("\n".join(produced) + "\n")
        args, content, meta = await _produce(tool, tmp_path, name)
        out = await h.tool_output(tool, args, content, meta=meta)
        stored.append((out, expected, split_stored_lines(content)))
    await h.end()
    await h.begin()
    for out, expected, lines in stored:
        summary = await h.ask(f"summarise entry {out.number}")
        overview = await h.ask(f"summarise entry {out.number} overview")
        # every citation, wherever it stands: a point's L154, a context line's L155:, "(L8)",
        # "what followed from them: L18 …", "last L14", the overview's headings and first lines
        cited = [int(m) for m in re.findall(r"(?<![\w/.-])L(\d+)(?=[:; ),]|$)", summary + "\n" + overview,
                                            re.MULTILINE)]
        assert cited, summary
        first = int(re.search(r"^L(\d+) ", summary, re.MULTILINE).group(1))
        shown: dict[int, str] = {}
        for page_text in (summary, overview):
            # a line quoted after its number (a context line, the last line) is that stored line, as a
        # summary shows every line: without terminal colours, a line rewritten with \r as it ended
            for m in re.finditer(r"(?:^\s*|last line |it ended with )L(\d+): (.*)$", page_text, re.MULTILINE):
                shown[int(m.group(1))] = m.group(2)
        for k in sorted(set(cited)):
            page = (await h.ask(f"recall entry {out.number} from line {k}")).splitlines()
            assert page[2] == f"{k}\t{lines[k - 1]}" or page[2] == lines[k - 1], (k, page[2])
            if k in shown:
                quoted = shown[k].strip()
                stored = Doc(re.sub(r"^\d+\t", "", page[2], count=1)).stored_lines[0].expandtabs(4).strip()
                assert stored.startswith(quoted[:-1].rstrip()) if quoted.endswith("…") else quoted == stored, \
                    (k, quoted, stored)
            if k == first:
                assert expected["root_text"] in page[2], (expected, summary)
    await h.close()
