"""What the referee prints: a game's result, standings, head-to-head, progress.

One home for every table the command line and the service show, drawn with
`rich <https://rich.readthedocs.io>`_: aligned columns, and no colour or
cursor movement when the output is not a terminal (CI logs, pipes, files).

A bot's name and its faults' details are the bot's (or its team's) text:
each is shown with its control characters escaped
(:func:`referee.textsafe.for_terminal`), and given to rich as
:class:`~rich.text.Text`, never as markup (a bot named ``[bold red]x`` is
shown so).
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Sequence
from types import TracebackType
from typing import IO, TYPE_CHECKING

import msgspec
from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress
from rich.table import Table
from rich.text import Text

from protocol.messages import Action

from .record import MatchResult
from .textsafe import for_terminal

if TYPE_CHECKING:  # types only: the report sits beside every layer, below none
    from .tournament.ratings import HeadToHead, Standing

__all__ = ["Progress", "describe", "format_h2h", "format_result", "format_settled", "format_table"]

#: Wide enough that no table is ever wrapped or cut when rendered to text.
_WIDTH = 240


def _render(table: Table) -> str:
    """`table` as plain text, trailing spaces stripped."""
    out = io.StringIO()
    console = Console(
        file=out, width=_WIDTH, color_system=None, force_terminal=False, highlight=False, emoji=False
    )
    console.print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def _line(text: str) -> str:
    """Untrusted text (a name, a fault's detail) for one line of output."""
    return for_terminal(text, multiline=False)


def _cell(text: str) -> Text:
    """Untrusted text for a table cell or header: escaped, and not rich markup."""
    return Text(_line(text))


def _table(*columns: tuple[str | Text, str]) -> Table:
    """A borderless table; each column is (header, 'left' | 'right')."""
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1, 0, 0),
        header_style="",
        safe_box=True,
        collapse_padding=False,
    )
    for header, justify in columns:
        table.add_column(
            header, justify="right" if justify == "right" else "left", no_wrap=True, overflow="ellipsis"
        )
    return table


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _ms1(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


# ------------------------------------------------------------------ a game


def format_result(result: MatchResult) -> str:
    """One game: the header line, a row per seat (place, points, faults,
    latencies), then every fault with its turn and detail."""
    lines = [
        f"game {result.game_id}  seed {result.seed}  turns {result.turns}"
        + ("  (adjudicated at the turn limit)" if result.adjudicated else "")
    ]
    table = _table(
        ("seat", "left"),
        ("name", "left"),
        ("place", "right"),
        ("points", "right"),
        ("faults", "right"),
        ("", "left"),
        ("acts", "right"),
        ("p50 ms", "right"),
        ("p95 ms", "right"),
        ("max ms", "right"),
    )
    for seat, name in enumerate(result.names):
        stats = result.latency[seat]
        table.add_row(
            str(seat),
            _cell(name),
            str(result.places[seat]),
            str(result.points[seat]),
            str(len(result.faults[seat])),
            "disqualified" if seat in result.disqualified else "",
            str(stats.count),
            _ms(stats.p50_ms),
            _ms(stats.p95_ms),
            _ms(stats.max_ms),
        )
    lines.append(_render(table))
    faults = [(seat, f) for seat, fs in enumerate(result.faults) for f in fs]
    if faults:
        lines.append("faults:")
        for seat, f in faults:
            over = f" (+{f.overrun_ms:.1f} ms)" if f.overrun_ms is not None else ""
            lines.append(
                f"  seat {seat} {_line(result.names[seat])}, turn {f.turn}: {_line(f.kind)}{over}: "
                + _line(f.detail)
            )
    else:
        lines.append("no faults")
    return "\n".join(lines)


def describe(action: Action | None) -> str:
    """An action in a few words, as the replay viewer labels a step."""
    if action is None:
        return "nothing"
    d = msgspec.to_builtins(action)
    kind = str(d.pop("type", "?"))
    if kind in ("choose_up", "play"):
        return f"{kind.replace('_', ' ')} {' '.join(d.get('cards', []))}"
    if kind == "flip":
        return f"flip slot {d.get('slot')}"
    if kind == "swap":
        target = f" with seat {d['target']}" if d.get("target") is not None else ""
        return f"swap {d.get('give')} for {d.get('take')}{target}"
    return kind


# ------------------------------------------------------------- standings


def format_table(standings: Sequence[Standing]) -> str:
    """The standings: rank, rating (μ, σ, μ−3σ), games, wins, average place,
    faults, how sure the rank is (the probability of ranking above the next
    bot, the 95% interval of the rank, and ``|`` where the bot is separated
    from the next one), latencies, and V4's penalty points when a series is
    scored."""
    series = any(s.points is not None for s in standings)  # V4 [D14]: ranked by points
    columns = [
        ("#", "right"),
        ("bot", "left"),
        ("mu", "right"),
        ("sigma", "right"),
        ("mu-3s", "right"),
        ("games", "right"),
        ("wins", "right"),
        ("avg pl", "right"),
        ("faults", "right"),
        ("p>next", "right"),
        ("rank 95%", "right"),
        ("", "left"),
        ("p50 ms", "right"),
        ("p95 ms", "right"),
    ]
    if series:
        columns.append(("points", "right"))
    table = _table(*columns)
    for s in standings:
        interval = (
            (f"{s.rank_low}-{s.rank_high}" if s.rank_low != s.rank_high else str(s.rank_low))
            if s.rank_low
            else "-"
        )
        row: list[str | Text] = [
            str(s.rank),
            _cell(s.bot + (" (retired)" if s.retired else "")),
            f"{s.mu:.2f}",
            f"{s.sigma:.2f}",
            f"{s.score:.2f}",
            str(s.games),
            str(s.wins),
            f"{s.avg_place:.2f}",
            str(sum(s.faults.values())),
            "-" if s.p_above_next is None else f"{s.p_above_next:.2f}",
            interval,
            "|" if s.separated_below and s.p_above_next is not None else "",
            _ms1(s.latency_p50_ms),
            _ms1(s.latency_p95_ms),
        ]
        if series:
            row.append(str(s.points))
        table.add_row(*row)
    return _render(table)


def format_settled(standings: Sequence[Standing], confidence: float) -> str:
    """Which ranks are settled at `confidence`, and an estimate of how many
    more games would settle the rest.

    The estimate is :meth:`Standing.games_to_separate
    <referee.tournament.ratings.Standing.games_to_separate>` of each open
    pair (the statistics live in :mod:`referee.tournament.settle`): a pair
    at probability p needs about (z(conf)/z(p))² times the games it has.
    Pairs that look equal (p near 1/2) may never separate.
    """
    ranked = [s for s in standings if not s.retired]
    if len(ranked) < 2:
        return "settled: a single bot"
    open_pairs = [(a, b) for a, b in zip(ranked, ranked[1:]) if not a.separated_below]
    if not open_pairs:
        return (
            f"settled: every bot is separated from the next one at {confidence:.0%} (the 'rank' interval "
            "counts every rival at once, so it may still overlap a neighbour's)"
        )
    groups: list[list[Standing]] = []
    for a, b in zip(ranked, ranked[1:]):
        if a.separated_below:
            continue
        if groups and groups[-1][-1] is a:
            groups[-1].append(b)
        else:
            groups.append([a, b])
    shown = ", ".join(f"{g[0].rank}-{g[-1].rank} ({', '.join(_line(x.bot) for x in g)})" for g in groups)
    lines = [f"not settled at {confidence:.0%}: ranks {shown}"]
    estimates = []
    for a, b in open_pairs:
        more = a.games_to_separate(b, confidence)
        if more is None:
            p = a.p_above_next if a.p_above_next is not None else 0.5
            lines.append(
                f"  {_line(a.bot)} and {_line(b.bot)} look equal (p = {p:.2f}): more games may not separate them"
            )
            continue
        estimates.append(more)
    if estimates:
        lines.append(f"  about {max(estimates)} more games per bot would settle the separable pairs")
    return "\n".join(lines)


def format_h2h(bots: Sequence[str], h2h: Sequence[HeadToHead]) -> str:
    """Win rate of the row bot against the column bot, with the 95% interval."""
    cells = {(h.bot, h.opponent): h for h in h2h}
    table = _table(("", "left"), *((_cell(b), "right") for b in bots))
    for a in bots:
        row: list[str | Text] = [_cell(a)]
        for b in bots:
            h = cells.get((a, b))
            row.append("-" if h is None else f"{h.rate:.2f} [{h.low:.2f},{h.high:.2f}]")
        table.add_row(*row)
    return "head to head (row vs column: win rate [95% interval])\n" + _render(table)


# -------------------------------------------------------------- progress


class _Rate(ProgressColumn):
    """Games per second since the bar started."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("?" if speed is None else f"{speed:.1f} games/s")


class Progress:
    """Games done, rate and ETA on stderr.

    On a terminal: a rich progress bar. Otherwise (CI logs, a pipe, a file):
    a plain line every 10 s and at the end, never cursor movement.
    `enabled=False` prints nothing (``--no-progress``). Use as a context
    manager, or call :meth:`close` at the end.
    """

    def __init__(self, total: int, done: int, stream: IO[str] | None = None, enabled: bool = True) -> None:
        self.total = total
        self.start_done = done
        self.done = done
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = enabled and bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()
        self.last = 0.0
        self._bar: RichProgress | None = None
        if self.tty:
            self._bar = RichProgress(
                TextColumn("games"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                _Rate(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=False,
            )
            self._task = self._bar.add_task("games", total=total, completed=done)
            self._bar.start()

    def update(self, done: int, force: bool = False) -> None:
        """`done` games are recorded now."""
        self.done = done
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=done)
            return
        now = time.monotonic()
        if not force and now - self.last < 10 and done < self.total:
            return
        self.last = now
        rate = (done - self.start_done) / max(now - self.t0, 1e-9)
        left = self.total - done
        eta = f"{int(left / rate) // 60}:{int(left / rate) % 60:02d}" if rate > 0 else "?"
        self.stream.write(f"{done}/{self.total} games  {rate:.1f} games/s  ETA {eta}\n")
        self.stream.flush()

    def close(self) -> None:
        """Stop the bar (it stays on screen with its last figures)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
