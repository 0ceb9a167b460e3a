"""The geometry of the pages' SVG charts; the templates draw them
(``macros.html``). Numbers only: nothing here is text from a user."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..tournament.ratings import Standing
from .schemas import RatingPoint


class SigmaBar(NamedTuple):
    """μ ± 3σ as a bar from ``lo_x`` to ``hi_x``, μ as a tick at ``mu_x``,
    μ − 3σ (the score) as a dot at ``lo_x``."""

    width: int
    lo_x: float
    mu_x: float
    #: The bar's width, formatted.
    bar: str
    mu: float
    sigma: float


def sigma_bars(standings: Sequence[Standing], width: int = 180) -> list[tuple[Standing, SigmaBar]]:
    """Each standing with its bar, all on the same scale."""
    if not standings:
        return []
    lo = min(s.mu - 3 * s.sigma for s in standings)
    hi = max(s.mu + 3 * s.sigma for s in standings)
    span = max(hi - lo, 1e-9)

    def x(v: float) -> float:
        return round(4 + (width - 8) * (v - lo) / span, 1)

    out = []
    for s in standings:
        a, b, m = x(s.mu - 3 * s.sigma), x(s.mu + 3 * s.sigma), x(s.mu)
        out.append(
            (s, SigmaBar(width=width, lo_x=a, mu_x=m, bar=f"{max(b - a, 1):.1f}", mu=s.mu, sigma=s.sigma))
        )
    return out


class Tick(NamedTuple):
    x: float
    y: float
    label: str


class RatingChart(NamedTuple):
    """μ over a bot's games (a polyline), the μ ± 3σ band (a polygon) and
    the μ − 3σ line, with the value ticks on the left and game numbers below."""

    width: int
    height: int
    #: The bot's games (the points drawn may be fewer: its history is bounded).
    n: int
    left: int
    right: int
    top: int
    band: str
    mu_line: str
    score_line: str
    #: Horizontal grid lines: x is where the label ends, y the line's height.
    ticks: list[Tick]
    #: Game numbers along the bottom.
    games: list[Tick]


def rating_chart(history: Sequence[RatingPoint], width: int = 760, height: int = 260) -> RatingChart | None:
    """The chart of a bot's rating after its games (those of its history:
    evenly spread, the bottom's numbers are its games); None before any."""
    if not history:
        return None
    pad_l, pad_r, pad_t, pad_b = 44, 12, 12, 28
    n = len(history)
    los = [p.mu - 3 * p.sigma for p in history]
    his = [p.mu + 3 * p.sigma for p in history]
    lo, hi = min(los), max(his)
    if hi - lo < 1e-6:
        hi, lo = hi + 1, lo - 1

    def x(k: int) -> float:
        return round(pad_l + (width - pad_l - pad_r) * (k / max(n - 1, 1)), 1)

    def y(v: float) -> float:
        return round(pad_t + (height - pad_t - pad_b) * (1 - (v - lo) / (hi - lo)), 1)

    band = (
        " ".join(f"{x(k)},{y(v)}" for k, v in enumerate(his))
        + " "
        + " ".join(f"{x(k)},{y(v)}" for k, v in reversed(list(enumerate(los))))
    )
    ticks = []
    for t in range(5):
        v = lo + (hi - lo) * t / 4
        ticks.append(Tick(x=pad_l - 6, y=y(v), label=f"{v:.1f}"))
    games = [
        Tick(x=x(k), y=height - 8, label=str(history[k].played or k + 1))
        for k in sorted({0, (n - 1) // 2, n - 1})
    ]
    return RatingChart(
        width=width,
        height=height,
        n=history[-1].played or n,
        left=pad_l,
        right=width - pad_r,
        top=pad_t,
        band=band,
        mu_line=" ".join(f"{x(k)},{y(p.mu)}" for k, p in enumerate(history)),
        score_line=" ".join(f"{x(k)},{y(v)}" for k, v in enumerate(los)),
        ticks=ticks,
        games=games,
    )
