"""External text never reaches the terminal as an escape sequence: control characters are shown, not obeyed."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from cfkit.cli.console import ShowControls
from cfkit.visible import visible

HOSTILE = "name\x1b]0;PWNED\x07 \x1b[2J\x1b[31mred\x9b1m \u202egnp.exe\rover"


def test_controls_become_visible_symbols_and_text_stays_readable():
    shown = visible(HOSTILE)
    assert "\x1b" not in shown and "\x9b" not in shown and "\u202e" not in shown and "\r" not in shown
    assert shown.startswith("name␛]0;PWNED␇ ␛[2J␛[31mred<U+009B>1m <U+202E>gnp.exe␍over")
    assert visible("two\nlines\tand a tab") == "two\nlines\tand a tab"


@given(st.text())
def test_nothing_visible_returns_holds_a_control_character(text):
    assert not any(ord(c) < 0x20 and c not in "\n\t" or 0x7F <= ord(c) <= 0x9F for c in visible(text))


def test_a_console_with_the_hook_prints_data_visibly_but_keeps_its_own_colour():
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system="standard", width=100)
    console.push_render_hook(ShowControls())
    table = Table("model")
    table.add_row(HOSTILE)
    console.print(table)
    console.print("[bold red]error:[/] plain")
    output = buffer.getvalue()
    assert "PWNED\x07" not in output and "\x1b]0;" not in output and "\x1b[2J" not in output
    assert "␛]0;PWNED" in output
    assert "\x1b[1;31merror:" in output  # Rich's own styling still reaches the terminal


def test_zero_width_characters_are_shown_but_joiners_that_scripts_need_are_kept():
    assert visible("T001\u200b") == "T001<U+200B>"
    assert visible("\ufeffid\u2060x\u200fy") == "<U+FEFF>id<U+2060>x<U+200F>y"
    family = "\U0001F468\u200d\U0001F469\u200d\U0001F467"  # an emoji sequence held together by ZWJ
    assert visible(family) == family


def test_invisible_in_names_what_a_reader_cannot_see_once_each():
    from cfkit.visible import invisible_in

    assert invisible_in("T001\u200d\u200d\u00a0") == ["U+200D", "U+00A0"]
    assert invisible_in("CF01 and Ünïcode") == []
