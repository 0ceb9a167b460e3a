"""Playing strength of the sample bots, measured in process (no HTTP).

Each bot's ``decide`` (and its ``on_start`` / ``on_end`` hooks) is called with
exactly the messages it would get over HTTP: a ``GameStart``, then for each of
its moves an ``ActRequest`` holding its view with the events since its
previous request, the legal actions and ``deadline_ms``, then a ``GameEnd``.
The requests go through the JSON codec and back, as on the wire.

Two-player games with duplicate deals: every deal (a seed) is played twice,
with the seats swapped, so both bots get the same cards and the same turn
order once. For each pair the harness prints the games played, bot A's win
rate (a shared place counts half), its 95% Wilson interval and whether the
interval excludes 50%.

    python benchmarks/strength.py                       # the three default pairs, 400 games each
    python benchmarks/strength.py --pairs tactician:greedy --games 1000 --jobs 2
    python benchmarks/strength.py --deadline-ms 300 --json

Bots: random, greedy, tactician, searcher (its time per move comes from
``--deadline-ms``; the others ignore it). Moves slower than the deadline and
illegal answers are counted and reported: an illegal answer is replaced by the
first legal action, as the referee's fault policy would.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from protocol import (
    APIVERSION,
    ActRequest,
    GameEnd,
    GameStart,
    Rules,
    Timeouts,
    decode_act_request,
    encode,
)
from referee.game import ActionError, new_game, view
from sample_bots.sdk import checked_decision

__all__ = [
    "BOTS",
    "GameRecord",
    "PairResult",
    "Player",
    "make_bot",
    "main",
    "play_deal",
    "play_game",
    "play_pair",
    "wilson",
]


class Player(Protocol):
    """What the harness drives: a bot's ``decide`` (``on_start`` / ``on_end`` are optional)."""

    def decide(self, request: ActRequest, /) -> Any: ...


def _random(seed: int) -> Player:
    from sample_bots.random import RandomBot

    return RandomBot(seed)


def _greedy(seed: int) -> Player:
    from sample_bots import greedy

    class Greedy:
        decide = staticmethod(greedy.decide)

    return Greedy()


def _tactician(seed: int) -> Player:
    from sample_bots.tactician import Tactician

    return Tactician()


def _searcher(seed: int) -> Player:
    from sample_bots.searcher import Searcher

    return Searcher(seed=seed)


#: Bot name -> factory taking a seed.
BOTS: dict[str, Callable[[int], Player]] = {
    "random": _random,
    "greedy": _greedy,
    "tactician": _tactician,
    "searcher": _searcher,
}


def make_bot(name: str, seed: int) -> Player:
    try:
        return BOTS[name](seed)
    except KeyError:
        raise SystemExit(f"unknown bot {name!r}; bots: {', '.join(BOTS)}") from None


@dataclass
class GameRecord:
    """One game: places by seat, and per seat the bot's illegal answers, late
    moves (slower than the deadline) and slowest move."""

    places: list[int]
    adjudicated: bool
    turns: int
    illegal: list[int]
    late: list[int]
    max_ms: list[float]
    moves: list[int]


def _call(fn: Callable[[Any], Any], arg: Any) -> Any:
    result = fn(arg)
    if inspect.isawaitable(result):
        return asyncio.run(_await(result))
    return result


async def _await(x: Any) -> Any:
    return await x


def play_game(
    players: Sequence[Player],
    seed: int,
    rules: Rules | None = None,
    deadline_ms: int = 1000,
    game_id: str | None = None,
    wire: bool = True,
) -> GameRecord:
    """Play one game between ``players`` (by seat) on the deal of ``seed``."""
    rules = rules or Rules()
    n = len(players)
    names = [type(p).__name__.lower() for p in players]
    gid = game_id or f"g{seed}"
    state = new_game(rules, names, random.Random(seed))
    timeouts = Timeouts(move_ms=deadline_ms)
    for seat, p in enumerate(players):
        hook = getattr(p, "on_start", None)
        if hook is not None:
            _call(
                hook,
                GameStart(
                    apiversion=APIVERSION,
                    game_id=gid,
                    seat=seat,
                    players=names,
                    rules=rules,
                    timeouts=timeouts,
                ),
            )
    since = [0] * n
    illegal = [0] * n
    late = [0] * n
    moves = [0] * n
    max_ms = [0.0] * n
    k = 0
    while not state.over:
        for seat in state.to_move():
            if state.over:
                break
            legal = list(state.legal_actions(seat))
            request = ActRequest(
                apiversion=APIVERSION,
                game_id=gid,
                request_id=f"{gid}-{k}",
                seat=seat,
                turn=state.turn,
                deadline_ms=deadline_ms,
                bank_ms=None,
                state=view(state, seat, since[seat]),
                legal=legal,
            )
            since[seat] = len(state.events)
            k += 1
            if wire:
                request = decode_act_request(encode(request))
            t0 = time.perf_counter()
            decision = checked_decision(_call(players[seat].decide, request), request)
            ms = (time.perf_counter() - t0) * 1000
            moves[seat] += 1
            max_ms[seat] = max(max_ms[seat], ms)
            if ms > deadline_ms:
                late[seat] += 1
            action = legal[decision] if isinstance(decision, int) else decision
            if action is None:
                illegal[seat] += 1
                action = legal[0]
            try:
                state.apply(action, seat)
            except ActionError:
                illegal[seat] += 1
                state.apply(legal[0], seat)
    result = state.result()
    for seat, p in enumerate(players):
        hook = getattr(p, "on_end", None)
        if hook is not None:
            _call(
                hook,
                GameEnd(
                    game_id=gid,
                    seat=seat,
                    places=result.places,
                    adjudicated=result.adjudicated,
                    disqualified=result.disqualified,
                    faults=[],
                    points=result.points,
                ),
            )
    return GameRecord(
        result.places, result.adjudicated, result.turns, illegal, late, [round(x, 1) for x in max_ms], moves
    )


def wilson(successes: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% by default)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass
class PairResult:
    a: str
    b: str
    games: int = 0
    wins: float = 0.0  # a shared place counts half
    deadline_ms: int = 1000
    illegal: dict[str, int] = field(default_factory=dict)
    late: dict[str, int] = field(default_factory=dict)
    max_ms: dict[str, float] = field(default_factory=dict)
    adjudicated: int = 0
    mean_turns: float = 0.0
    seconds: float = 0.0

    @property
    def win_rate(self) -> float:
        return self.wins / self.games if self.games else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.wins, self.games)

    @property
    def excludes_half(self) -> bool:
        lo, hi = self.interval
        return lo > 0.5 or hi < 0.5

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        lo, hi = self.interval
        d.update(
            win_rate=round(self.win_rate, 4),
            ci_low=round(lo, 4),
            ci_high=round(hi, 4),
            excludes_50=self.excludes_half,
        )
        return d

    def line(self) -> str:
        lo, hi = self.interval
        verdict = "yes" if self.excludes_half else "NO"
        side = "" if not self.excludes_half else (" (A stronger)" if lo > 0.5 else " (B stronger)")
        return (
            f"{self.a} vs {self.b}: {self.games} games, {self.a} wins {self.win_rate:.1%} "
            f"[95% CI {lo:.1%}, {hi:.1%}], excludes 50%: {verdict}{side}; "
            f"deadline {self.deadline_ms} ms, slowest move {self.max_ms}, late {self.late}, "
            f"illegal {self.illegal}, adjudicated {self.adjudicated}, "
            f"mean turns {self.mean_turns:.0f}, {self.seconds:.0f} s"
        )


def play_deal(
    a: str, b: str, seed: int, deadline_ms: int = 1000, rules: dict[str, Any] | None = None
) -> tuple[GameRecord, GameRecord]:
    """Both games of the duplicate deal of ``seed`` between bots ``a`` and
    ``b``: ``a`` in seat 0, then, on the same cards, ``a`` in seat 1 (each
    bot seeded alike in both games). `rules`: :class:`Rules` fields."""
    r = Rules(**(rules or {}))
    first = play_game([make_bot(a, seed), make_bot(b, seed + 1)], seed, r, deadline_ms, f"d{seed}a")
    second = play_game([make_bot(b, seed + 1), make_bot(a, seed)], seed, r, deadline_ms, f"d{seed}b")
    return first, second


def play_pair(
    a: str,
    b: str,
    games: int = 400,
    deadline_ms: int = 1000,
    seed: int = 1,
    jobs: int = 1,
    rules: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> PairResult:
    """Play ``games`` games (``games // 2`` duplicate deals) of ``a`` against ``b``."""
    deals = max(1, games // 2)
    tasks = [(a, b, seed + 1000 * d, deadline_ms, rules or {}) for d in range(deals)]
    out = PairResult(a, b, deadline_ms=deadline_ms)
    for name in {a, b}:
        out.illegal[name] = out.late[name] = 0
        out.max_ms[name] = 0.0
    turns = 0
    t0 = time.perf_counter()

    def add(records: tuple[GameRecord, GameRecord]) -> None:
        nonlocal turns
        for rec, a_seat in zip(records, (0, 1)):
            b_seat = 1 - a_seat
            pa, pb = rec.places[a_seat], rec.places[b_seat]
            out.games += 1
            out.wins += 1.0 if pa < pb else 0.5 if pa == pb else 0.0
            out.adjudicated += rec.adjudicated
            turns += rec.turns
            for name, seat in ((a, a_seat), (b, b_seat)):
                out.illegal[name] += rec.illegal[seat]
                out.late[name] += rec.late[seat]
                out.max_ms[name] = max(out.max_ms[name], rec.max_ms[seat])
        if progress is not None and out.games % 20 == 0:
            lo, hi = out.interval
            progress(
                f"{a} vs {b}: {out.games}/{2 * deals} games, {a} {out.win_rate:.1%} "
                f"[{lo:.1%}, {hi:.1%}], {time.perf_counter() - t0:.0f} s"
            )

    if jobs <= 1:
        for task in tasks:
            add(play_deal(*task))
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for records in pool.map(play_deal, *zip(*tasks)):
                add(records)
    out.mean_turns = turns / out.games if out.games else 0.0
    out.seconds = round(time.perf_counter() - t0, 1)
    return out


DEFAULT_PAIRS = "searcher:tactician,tactician:greedy,greedy:random"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--pairs", default=DEFAULT_PAIRS, help=f"comma-separated A:B pairs (default {DEFAULT_PAIRS})"
    )
    parser.add_argument(
        "--games",
        type=int,
        default=400,
        help="games per pair, an even number: games/2 deals x 2 seatings (default 400)",
    )
    parser.add_argument(
        "--deadline-ms",
        type=int,
        default=1000,
        help="deadline_ms of every request; the searcher thinks ~60%% of it (default 1000)",
    )
    parser.add_argument("--seed", type=int, default=1, help="first deal's seed (default 1)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object with every pair on the last line"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    results = []
    for pair in args.pairs.split(","):
        a, _, b = pair.strip().partition(":")
        if not b:
            parser.error(f"a pair is A:B, got {pair!r}")
        make_bot(a, 0), make_bot(b, 0)  # fail early on an unknown name

        def note(msg: str) -> None:
            print(msg, file=sys.stderr, flush=True)

        res = play_pair(
            a, b, args.games, args.deadline_ms, args.seed, args.jobs, progress=None if args.quiet else note
        )
        print(res.line(), flush=True)
        results.append(res)
    if args.json:
        print(json.dumps({"pairs": [r.as_dict() for r in results]}))
    return 0 if all(r.excludes_half and r.interval[0] > 0.5 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
