"""referee.textsafe (issue 32 items 7 and 13): CSV cells and terminal text."""

from __future__ import annotations

import csv
import io
import json

from protocol.messages import Fault
from referee.record import LatencyStats, MatchResult
from referee.report import format_h2h, format_result
from referee.textsafe import Verbatim, csv_cell, csv_writer, for_terminal, json_for_terminal


def test_numbers_the_referee_computed_stay_numbers() -> None:
    """Neutralised by type: a rating of -1.5 is a number a spreadsheet adds
    up; a bot named "-2" is text; a token the program made is as it is."""
    assert csv_cell(-1.5) == -1.5 and csv_cell(-3) == -3 and csv_cell(None) == ""
    assert csv_cell("-2") == "'-2" and csv_cell("ok") == "ok" and csv_cell(Verbatim("-tok")) == "-tok"
    for start in ("=", "+", "-", "@", "\t", "\r", "\0"):
        assert csv_cell(start + "1") == "'" + start + "1"
    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(["=1", -1.5, "\r=1"])
    w.writerows([["@x", 2]])
    assert list(csv.reader(io.StringIO(buf.getvalue(), newline=""))) == [
        ["'=1", "-1.5", "'\r=1"],
        ["'@x", "2"],
    ]


def test_no_control_character_is_left_and_the_text_is_still_there() -> None:
    controls = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))]
    bidi = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)]
    every = "".join(controls + bidi + ["\u2028", "\u2029", "\udc9b"])
    one_line = for_terminal(every, multiline=False)
    assert one_line.isprintable() and one_line.isascii()
    assert for_terminal(every) == one_line.replace("\\t", "\t").replace("\\n", "\n")  # kept: lines, tabs
    assert for_terminal("\x1b]0;pwned\x07 \u202egnp") == "\\x1b]0;pwned\\x07 \\u202egnp"
    assert for_terminal(one_line) == one_line  # twice changes nothing more
    assert for_terminal("naïve 3♥ 日本") == "naïve 3♥ 日本"  # printable text is untouched
    text = json.dumps({"name": every}, ensure_ascii=False)
    assert json.loads(json_for_terminal(text)) == {"name": every}
    assert json_for_terminal(text).isprintable()


def test_a_name_that_is_rich_markup_is_shown_as_written() -> None:
    names = ["[bold red]x", "a\x1b[2Jb"]
    result = MatchResult(
        game_id="g",
        seed=1,
        names=names,
        places=[1, 2],
        adjudicated=False,
        disqualified=[],
        points=[0, 0],
        turns=1,
        faults=[[Fault(kind="timeout", turn=0, detail="late\x9b31m\nseat 0 wins")], []],
        strikes=[1, 0],
        latency=[LatencyStats(), LatencyStats()],
    )
    shown = format_result(result)
    assert "[bold red]x" in shown and "a\\x1b[2Jb" in shown and "\x1b" not in shown
    assert "late\\x9b31m\\nseat 0 wins" in shown  # a fault's detail cannot start a line of its own
    h2h = format_h2h(names, [])
    assert h2h.count("[bold red]x") == 2 and "\x1b" not in h2h
