"""A final that ended unsettled (issue 34 item 4): how far each of its
unsettled neighbouring pairs is from separated, and extending it.

An adaptive final stops when its order is settled at the league's
``[stop] confidence`` or at its game budget. Stopped at the budget, it can
be **extended**: its budget raised by N games, the same run plays on in the
same folder, on the same seed; the schedule plans the games it played
exactly as it did (``[stop] extended_from``, :mod:`referee.tournament.schedule`),
then goes on until the order is settled or the new budget is spent.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msgspec

from ..tournament.league import League, LeagueError
from ..tournament.ratings import Standing
from ..tournament.results import count_games
from ..tournament.runner import load_standings
from .errors import Conflict, NotFound
from .rules import verify_extend
from .runs import check_house_commands, decode_league, encode_league, with_secrets
from .store import Run, ServiceDB


class PairEstimate(msgspec.Struct, kw_only=True):
    """Two neighbours of the standings not separated at the confidence."""

    upper: str
    lower: str
    #: Their places (the upper one's rank and the next).
    rank: int
    #: P(the upper one is truly above the lower one).
    p: float
    #: About how many more games each needs to be separated; None: they look
    #: equal (p near 1/2), more games may never separate them.
    more: int | None


def unsettled_pairs(
    standings: Sequence[Standing], confidence: float, top: int | None = None
) -> list[PairEstimate]:
    """Each neighbouring pair of `standings` (in play; the first `top` ranks
    with `top`) not separated, with the CLI's estimate of the games it needs
    (:meth:`~referee.tournament.ratings.Standing.games_to_separate`)."""
    ranked = [s for s in standings if not s.retired]
    out = []
    for i, (a, b) in enumerate(zip(ranked, ranked[1:])):
        if top is not None and i >= top:
            break
        if a.separated_below:
            continue
        out.append(
            PairEstimate(
                upper=a.bot,
                lower=b.bot,
                rank=a.rank,
                p=a.p_above_next if a.p_above_next is not None else 0.5,
                more=a.games_to_separate(b, confidence),
            )
        )
    return out


def suggested_games(pairs: Sequence[PairEstimate], table_size: int) -> int | None:
    """About how many more games would settle the separable pairs (a table
    seats both bots of a pair, so each pair's games add up), in whole
    tables; None when every unsettled pair looks equal."""
    separable = [p.more for p in pairs if p.more is not None]
    if not separable:
        return None
    total = max(table_size, sum(separable))
    return -(-total // table_size) * table_size


def final_pairs(run: Run) -> list[PairEstimate]:
    """The unsettled pairs of a final (or any run) from its folder's standings (none yet: [])."""
    if not run.out_dir:
        return []
    try:
        rows = load_standings(Path(run.out_dir))
    except (LeagueError, OSError, msgspec.DecodeError):
        return []
    stop = decode_league(run.league_json).stop
    return unsettled_pairs(rows, stop.confidence, stop.top)


def budget_of(league: League) -> int:
    """The game budget in force of an adaptive league."""
    return league.stop.game_limit(len(league.bots), league.tournament.table_size)


def prepare_extension(
    db: ServiceDB, cid: int, games: int, *, allow_commands: bool = False
) -> tuple[Run, League]:
    """The competition's finished final running again with its budget raised
    by `games` (:func:`~.rules.verify_extend` first): the run, and the league
    it plays from now on (its secrets read again)."""
    comp = db.competition(cid)
    if comp is None:
        raise NotFound(f"no competition {cid}")
    final = db.latest_run_of(cid, "final")
    league = decode_league(final.league_json) if final is not None else None
    played = count_games(final.out_dir) if final is not None and final.out_dir else 0
    pairs = final_pairs(final) if final is not None else []
    budget = budget_of(league) if league is not None else 0
    verify_extend(comp, final, league, games, budget=budget, played=played, pairs=pairs)
    assert final is not None and league is not None
    check_house_commands(league, allow_commands=allow_commands)
    league.stop = msgspec.structs.replace(
        league.stop, extended_from=[*league.stop.extended_from, budget], max_games=budget + games
    )
    run = db.begin_run(
        cid,
        out_dir=final.out_dir,
        league_json=final.league_json,
        total_games=final.total_games,
        resume_run=final.id,
    )
    if isinstance(run, str):
        raise Conflict(f"cannot extend the final: {run}")
    db.set_run_league(run.id, encode_league(league), total_games=budget + games)
    run.league_json, run.total_games = encode_league(league), budget + games
    return run, with_secrets(db, league, final.secrets_from)
