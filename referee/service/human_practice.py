"""A practice game with a team member seated (issue 36): played in the
service's own process, the person's answers coming from a front end (the
browser's page over a WebSocket) through a :class:`~referee.bots.human.HumanSeat`.

It is a practice game like the others (:mod:`.practice`): the same picks
(the league's house bots, the team's versions, its current one included,
and other teams' current versions where ``[ladder] practice_against_teams``
allows it), the same limits (one in flight per team, ``practice_per_hour``),
recorded in the team's practice folder with its replay, unrated, private.
What differs:

- One deal, the person at a seat drawn at random (a person plays one game,
  not one per seat rotation).
- It cannot be a child process (the seat's front end is served by this
  process): it plays on the service's loop, never queued; the ladder plays
  on a host of its own (:mod:`.hosts`) and is not slowed by it, and the
  opponents are started by the same bot factory as the ladder's (command
  and image bots are processes and containers of their own).
- The person's clock: the league's time bank, with a person's time per move
  (:func:`~referee.bots.human.human_timeouts`: 60 s, or the league's move
  time when longer). Every seat of a game has the same clock.
- A person who walks away (the page closed) has left the seat
  (:meth:`~referee.bots.human.HumanSeat.leave`): the safe default plays for
  it under the usual fault policy until it disqualifies the seat, and the
  game goes on to its end. A page that never connects times out move by move.
- A game the server stops (or restarts) in the middle fails, saying it is
  the service's doing (it cannot be played again without its person).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Sequence
from pathlib import Path

import msgspec

from ..bots.human import HumanSeat, human_timeouts
from ..tournament.executors import LocalExecutor
from ..tournament.league import League, LeagueError
from ..tournament.runner import Interrupted, Tournament
from ..tournament.schedule import GameSpec
from .errors import Conflict, ServiceError
from .practice import SERVICE_FAULT, gone_images, new_game, practice_league, results_of
from .room import Room
from .runs import pin_house_text
from .store import ServiceDB, Team
from .store.practice import HUMAN_STOPPED, PracticeGame, set_ended

log = logging.getLogger("referee.service")


def seat_name(team: Team) -> str:
    """The name of a team member's seat in the game (what the other seats see)."""
    return f"{team.name} (person)"


class OneGame:
    """A schedule of one game: `names` seated as given, dealt from `seed`
    (a :class:`~referee.tournament.schedule.Scheduler`)."""

    def __init__(self, names: Sequence[str], seed: int) -> None:
        self.names = tuple(names)
        self.seed = seed
        self._stopped: str | None = None

    @property
    def total(self) -> int | None:
        return 1

    @property
    def limit(self) -> int | None:
        return 1

    @property
    def stopped(self) -> str | None:
        return self._stopped

    def block(self, k: int, standings: object = None) -> list[GameSpec]:
        if k > 0:
            self._stopped = "done"
            return []
        return [GameSpec(index=0, round=0, meeting=0, rotation=0, deal_seed=self.seed, seats=self.names)]

    def add_bot(self, name: str) -> None:
        return None

    def retire_bot(self, name: str) -> None:
        return None


class HumanGame:
    """A practice game with a person seated, in flight: its row, the seat a
    front end drives, and whether a front end holds it (one at a time)."""

    def __init__(self, game: PracticeGame, seat: HumanSeat) -> None:
        self.game = game
        self.seat = seat
        self.task: asyncio.Task[None] | None = None
        self.held = False
        #: Set once the game is recorded (or failed).
        self.over = asyncio.Event()

    @property
    def team_id(self) -> int:
        return self.game.team_id

    def hold(self) -> bool:
        """Take the seat for a front end; False when another holds it, or it was left."""
        if self.held or self.seat.left:
            return False
        self.held = True
        return True


def human_league(league: League, seat: str) -> tuple[League, OneGame]:
    """The one-game league of a practice game with the person at `seat`: a
    person's clock, the seats in a random order (the person anywhere)."""
    names = [b.name for b in league.bots]
    rng = random.SystemRandom()
    rng.shuffle(names)
    timed = msgspec.structs.replace(league, timeouts=human_timeouts(league.timeouts))
    assert seat in names
    return timed, OneGame(names, league.tournament.seed)


async def start(room: Room, games: dict[int, HumanGame], team: Team, picks: list[str]) -> HumanGame:
    """Seat a member of `team` at a practice game against `picks`, playing
    from now on (in `games`, the service's games with a person seated, while it plays) (:class:`Conflict` when practice is off or a seat cannot
    play, :class:`~.errors.RateLimited` past the team's limits)."""
    settings = room.settings
    per_hour = settings.practice_per_hour
    if per_hour <= 0:
        raise Conflict("practice games are off on this server (referee serve --practice-per-hour 0)")
    comp = await room.db.call(ServiceDB.competition, team.competition_id)
    assert comp is not None
    gone = await gone_images(room, team)
    name = seat_name(team)
    house = await pin_house_text(
        comp.league_toml,
        settings.bot_policy,
        anywhere=settings.house_urls_anywhere,
        allow_commands=settings.allow_house_commands,
    )
    game = await room.db.call(new_game, team, picks, per_hour, gone, room.clock.time(), name)
    try:
        league = await room.db.call(practice_league, game, settings.bot_policy, house)
    except ServiceError as e:
        await room.db.call(set_ended, game.id, "failed", e.message)
        room.changed(game.competition_id)
        raise
    seat = HumanSeat(name, max_body=settings.max_body)
    hg = HumanGame(game, seat)
    games[game.id] = hg
    hg.task = asyncio.create_task(_play(room, games, hg, league), name=f"practice-{game.id}-human")
    room.changed(game.competition_id)
    return hg


async def _play(room: Room, games: dict[int, HumanGame], hg: HumanGame, league: League) -> None:
    game = hg.game
    lines: list[str] = []
    try:
        timed, schedule = human_league(league, hg.seat.name)
        t = Tournament(
            timed,
            Path(game.out_dir),
            progress=False,
            log=lines.append,
            drop_unreachable=True,
            executor=LocalExecutor(),
            seated={hg.seat.name: hg.seat},
            scheduler=schedule,
            signals=False,
        )
        await t.run()
        results = await asyncio.to_thread(results_of, game)
        if results:
            await room.db.call(set_ended, game.id, "finished", None, results)
        else:
            error = "the game could not be played: " + ("; ".join(lines[-3:]) or "no game was recorded")
            await room.db.call(set_ended, game.id, "failed", error)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await asyncio.shield(room.db.call(set_ended, game.id, "failed", HUMAN_STOPPED))
        raise
    except (LeagueError, Interrupted) as e:
        await room.db.call(set_ended, game.id, "failed", f"the game could not be played: {e}")
    except Exception:  # the service plays on
        log.exception("practice game %s (a person seated)", game.id)
        await room.db.call(set_ended, game.id, "failed", f"the service failed to play it: {SERVICE_FAULT}")
    finally:
        games.pop(game.id, None)
        hg.seat.leave()
        hg.over.set()
        room.changed(game.competition_id)


async def stop_all(playing: dict[int, HumanGame]) -> None:
    """The service stops: every game with a person seated is abandoned (failed, saying so)."""
    games = list(playing.values())
    for hg in games:
        hg.seat.leave()
        if hg.task is not None:
            hg.task.cancel()
    for hg in games:
        if hg.task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await hg.task
