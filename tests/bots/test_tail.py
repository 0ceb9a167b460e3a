"""Issue 35, item 6: a bot's output as the diagnostics quote it starts at a
whole line, never with a fragment of one (a cut marker line escaped being
recognised and was shown as the bot's output)."""

from __future__ import annotations

from pathlib import Path

from referee.bots.process import last_lines, tail_of
from referee.bots.sandbox.marks import ACT_MARK, without_marks


def test_a_tail_starts_at_a_whole_line_and_a_cut_marker_line_is_left_out(tmp_path: Path) -> None:
    log = tmp_path / "bot.log"
    lines = [f"{ACT_MARK} game-a 0.{i} turn {i}" if i % 2 else f"thinking about move {i}" for i in range(200)]
    log.write_text("\n".join(lines) + "\n")
    whole = log.read_text()
    for size in range(20, 400, 7):  # every window cuts somewhere else in a line
        tail = tail_of(log, size)
        assert tail == "" or whole.endswith(tail + "\n")
        assert tail == "" or (whole[: len(whole) - len(tail) - 1].endswith("\n"))  # it starts a line
        assert all(line in lines for line in tail.splitlines())
        quoted = without_marks(tail)
        assert ACT_MARK[1:] not in quoted  # no fragment of a marker reaches the bot's output


def test_a_window_at_a_line_start_keeps_that_line(tmp_path: Path) -> None:
    log = tmp_path / "bot.log"
    log.write_text("one\ntwo\nthree\n")
    assert tail_of(log, len("three\n")) == "three"
    assert tail_of(log, len("two\nthree\n")) == "two\nthree"
    assert tail_of(log, 1000) == "one\ntwo\nthree"


def test_last_lines_cuts_at_a_line_start() -> None:
    text = "alpha\nbeta\ngamma"
    assert last_lines(text, 100) == text
    assert last_lines(text, 8) == "gamma"
    assert last_lines(text, 11) == "beta\ngamma"
    assert last_lines("x" * 50, 10) == "x" * 10  # one line longer than the cap: its end
