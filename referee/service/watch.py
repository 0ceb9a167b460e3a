"""Games watched while they play (issue 36): a competition's ladder and its
runs (a final) list their games in flight (:class:`~referee.tournament.executors.InFlight`,
filled by the local executor), and a watcher follows one through a
:class:`Feed`.

What a watcher gets is built from the game's **record** only, never from the
match's live state: a move reaches the record once the next request has gone
out (:meth:`referee.match.Match._flush_soon`), so a watcher never learns a
move before the seat that plays next; a set-up batch is shown once whole
(:class:`~referee.record.Follower`), so the order in which seats answered
stays unknown; and what is sent is :func:`~referee.game.public_view` (pile,
counts, 3UP, plays, the public log): no hand, no 3DOWN card, not the draw
pile's order, no latency. The feed advances on the watchers' ticks, so the
time a move appears says when it was recorded, to a tick, and nothing more.
The full deal is the replay's, shown under the rule of
:func:`referee.web.data.replay` (a duplicate deal's cards stay hidden until
its last seat rotation is recorded).

The runs play on hosts of their own (threads): a feed reads the record's
``lines`` list, which the host only appends to, up to a length it takes
once (:meth:`~referee.record.Follower.advance`); the list of games in
flight is read under :class:`InFlight`'s lock.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ..match import Match
from ..record import Follower
from ..tournament.executors import InFlight
from .errors import NotFound, RateLimited
from .room import Room

Kind = Literal["ladder", "run"]


class LiveGame(msgspec.Struct, kw_only=True):
    """A game in flight that can be watched."""

    run: int
    game: int
    #: "ladder", or "run" (a hand-started run, a final).
    kind: Kind
    names: list[str]


def _flights(room: Room, cid: int) -> list[tuple[int, Kind, InFlight]]:
    """The competition's runs in play here with their games in flight: its ladder first."""
    out: list[tuple[int, Kind, InFlight]] = []
    ladder = room.ladders.get(cid)
    if ladder is not None:
        out.append((ladder.run.id, "ladder", ladder.in_flight))
    for rid, work in sorted(room.runs.items()):
        if work.run.competition_id == cid:
            out.append((rid, "run", work.in_flight))
    return out


def games_in_flight(room: Room, cid: int) -> list[LiveGame]:
    """The games of competition `cid` playing now, the oldest of each run first."""
    return [
        LiveGame(run=rid, game=idx, kind=kind, names=list(match.names))
        for rid, kind, flight in _flights(room, cid)
        for idx, match in sorted(flight.snapshot().items())
    ]


def find_game(room: Room, cid: int, rid: int, idx: int) -> Match:
    """Game `idx` of run `rid` of competition `cid`, while it plays (:class:`NotFound` after)."""
    for run, _kind, flight in _flights(room, cid):
        if run == rid:
            match = flight.snapshot().get(idx)
            if match is not None:
                return match
    raise NotFound(
        f"game {idx} of run {rid} is not being played here now: it is over (see its replay), not yet "
        "started, or its run plays on a Ray cluster (live watching needs the local executor)"
    )


class Frame(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a watcher is sent: the game as the public sees it now, with the
    public log from `since` (its events numbered from there)."""

    run: int
    game: int
    names: list[str]
    since: int
    state: dict[str, object]
    #: Once the game is over: its places by seat (as its result says).
    places: list[int] | None = None


class Feed:
    """One game followed for all its watchers: the record read once per
    tick, whatever the number of watchers; each frame encoded once."""

    def __init__(self, cid: int, rid: int, idx: int, match: Match) -> None:
        self.cid, self.rid, self.idx = cid, rid, idx
        self.match = match
        self.follower = Follower(match.record.header)
        self.watchers = 0
        self._frames: dict[int, bytes] = {}
        self.over = False

    def advance(self) -> bool:
        """Read what the record gained; whether there is something new to send."""
        if self.over:
            return False
        result = self.match.record.result  # read before the lines: the result is set after the last
        moved = self.follower.advance(self.match.record.lines)
        if result is not None and self.follower.state.over:
            self.over = True
            moved = True
        if moved:
            self._frames.clear()
        return moved

    @property
    def events(self) -> int:
        """How many events of the public log there are now."""
        return len(self.follower.state.events)

    def frame(self, since: int) -> bytes:
        """The frame with the public log from `since`, encoded (shared between watchers)."""
        body = self._frames.get(since)
        if body is None:
            result = self.match.record.result
            frame = Frame(
                run=self.rid,
                game=self.idx,
                names=list(self.match.names),
                since=since,
                state=self.follower.public(since),
                places=list(result.places) if self.over and result is not None else None,
            )
            body = msgspec.json.encode(frame)
            if len(self._frames) > 8:
                self._frames.clear()
            self._frames[since] = body
        return body


class Watching:
    """The feeds of the games watched now, each with its watchers counted
    (at most `per_game` on one game: :class:`RateLimited` beyond)."""

    def __init__(self) -> None:
        self.feeds: dict[tuple[int, int], Feed] = {}

    def join(self, room: Room, cid: int, rid: int, idx: int, per_game: int) -> Feed:
        feed = self.feeds.get((rid, idx))
        if feed is None or feed.cid != cid:
            feed = Feed(cid, rid, idx, find_game(room, cid, rid, idx))
        if feed.watchers >= per_game:
            raise RateLimited(
                f"game {idx} of run {rid} has {feed.watchers} watchers, the most one game may have: "
                "watch it on the TV page with the others, or try again later"
            )
        feed.watchers += 1
        self.feeds[(rid, idx)] = feed
        feed.advance()
        return feed

    def leave(self, feed: Feed) -> None:
        feed.watchers -= 1
        if feed.watchers <= 0 and self.feeds.get((feed.rid, feed.idx)) is feed:
            del self.feeds[(feed.rid, feed.idx)]
