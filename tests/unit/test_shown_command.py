"""The approval's view of a command (wisp.core.text.shown_command): everything that runs can be
seen. A property test over any text: no raw control, bidi or invisible character is left, every
line with words appears in order (escaped), and only runs of empty lines are shortened."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from wisp.core.text import LINE_END, shown_command

RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")
PIECES = st.sampled_from(["echo hello", "touch x", " ", "\n", "\n\n\n", "\t", "\r", "\x1b[2J", "\u202e", "\u200b",
                          "\u2066", "\x9b", "rm -rf ~", "ü", "\ufeff"])


def test_forty_line_breaks_do_not_hide_the_touch() -> None:
    assert shown_command("echo hello" + "\n" * 41 + "touch x") == "echo hello⏎\n⏎ … 40 empty lines …\ntouch x"
    assert shown_command("a\nb") == "a⏎\nb"
    assert shown_command("a\n\nb") == "a⏎\n⏎\nb"  # one empty line is itself
    assert shown_command("rm \u202etxt.exe\rok") == "rm \\u202etxt.exe\\rok"


@settings(max_examples=300)
@given(st.lists(st.one_of(PIECES, st.text(max_size=6)), max_size=30).map("".join))
def test_any_command_shows_every_line_with_words_and_no_raw_control(command: str) -> None:
    shown = shown_command(command)
    assert not RAW.search(shown)
    kept = [line.removesuffix(LINE_END) for line in shown.split("\n") if not line.startswith(f"{LINE_END} … ")]
    with_words = [line for line in kept if line.strip()]
    expected = [line for line in (shown_command(x) for x in command.split("\n")) if line.strip()]
    assert with_words == expected
    assert shown.count("\n") <= command.count("\n")
