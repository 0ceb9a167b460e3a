"""referee.report: tables and progress, plain when the output is not a terminal."""

from __future__ import annotations

import io

from referee.report import Progress, format_h2h, format_settled, format_table
from referee.tournament.ratings import HeadToHead, Standing


def _standing(rank: int, bot: str, **kw: object) -> Standing:
    values: dict[str, object] = dict(
        mu=25.0,
        sigma=1.0,
        score=22.0,
        games=10,
        wins=3,
        avg_place=2.0,
        faults={},
        latency_p50_ms=1.0,
        latency_p95_ms=250.25,
    )
    values.update(kw)
    return Standing(rank=rank, bot=bot, **values)  # type: ignore[arg-type]


def test_tables_are_aligned_plain_text() -> None:
    rows = [_standing(1, "tactician"), _standing(2, "a-much-longer-name", faults={"timeout": 2})]
    text = format_table(rows)
    lines = text.splitlines()
    assert lines[0].split() == [
        "#",
        "bot",
        "mu",
        "sigma",
        "mu-3s",
        "games",
        "wins",
        "avg",
        "pl",
        "faults",
        "p>next",
        "rank",
        "95%",
        "p50",
        "ms",
        "p95",
        "ms",
    ]
    assert "\x1b" not in text  # no colour codes
    # Right-aligned numbers end in the same column on every row.
    assert len({len(line) for line in (lines[2], lines[3])}) == 1
    assert lines[3].split()[1] == "a-much-longer-name" and lines[3].split()[8] == "2"
    assert lines[2].split()[-1] == "250.2"
    h2h = format_h2h(
        ["tactician", "greedy"],
        [
            HeadToHead(
                bot="tactician",
                opponent="greedy",
                games=4,
                wins=3,
                losses=1,
                draws=0,
                rate=0.75,
                low=0.3,
                high=0.95,
            )
        ],
    )
    assert h2h.splitlines()[0].startswith("head to head")
    assert "0.75 [0.30,0.95]" in h2h


def test_progress_on_a_pipe_is_a_plain_line_now_and_then() -> None:
    stream = io.StringIO()
    with Progress(10, 2, stream=stream) as progress:
        progress.update(2, force=True)
        progress.update(3)  # within 10 s of the last line: nothing
        progress.update(10)  # the end: always a line
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("2/10 games") and lines[1].startswith("10/10 games")
    assert "games/s" in lines[1] and "ETA" in lines[1] and "\r" not in stream.getvalue()


def test_no_progress_prints_nothing() -> None:
    stream = io.StringIO()
    with Progress(10, 0, stream=stream, enabled=False) as progress:
        progress.update(5, force=True)
        progress.update(10)
    assert stream.getvalue() == ""


def test_settledness_in_the_table_and_the_summary() -> None:
    rows = [
        _standing(
            1, "top", p_above_next=0.99, rank_low=1, rank_high=1, separated_above=True, separated_below=True
        ),
        _standing(2, "twin-a", p_above_next=0.52, rank_low=2, rank_high=3, separated_above=True),
        _standing(3, "twin-b", p_above_next=0.80, rank_low=2, rank_high=4, games=40),
        _standing(4, "last", rank_low=3, rank_high=4, separated_below=True),
    ]
    lines = format_table(rows).splitlines()
    assert lines[2].split()[9:12] == ["0.99", "1", "|"]
    assert lines[3].split()[9:11] == ["0.52", "2-3"]
    assert "|" not in lines[3] and lines[5].split()[9:11] == ["-", "3-4"]
    summary = format_settled(rows, 0.95)
    assert summary.splitlines()[0] == "not settled at 95%: ranks 2-4 (twin-a, twin-b, last)"
    assert "twin-a and twin-b look equal (p = 0.52)" in summary
    # twin-b over last at p = 0.80 (z = 0.84) after 10 games: (1.64/0.84)^2 - 1 = 2.8 times more.
    assert "about 29 more games per bot" in summary
    settled = [rows[0], _standing(2, "b", separated_above=True, separated_below=True)]
    assert format_settled(settled, 0.9) == (
        "settled: every bot is separated from the next one at 90% (the 'rank' "
        "interval counts every rival at once, so it may still overlap a "
        "neighbour's)"
    )
