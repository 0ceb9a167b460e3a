"""The searcher: determinized Monte-Carlo search on the rules engine.

For each request it short-lists candidate actions, then, until its time budget
is spent, samples a *world* — a full game state consistent with what its seat
sees, made by :func:`referee.game.from_view` from the request's view, the
game's rules (remembered from ``/start``) and the legal list — and plays every
candidate out in that same world with a fast rollout policy, scoring each by
the seat's final place. Playing all candidates in the same worlds (common
random numbers) makes their comparison far less noisy than independent
samples; candidates that fall clearly behind the leader are dropped so the
rest get more worlds. It answers the candidate with the best mean.

Worlds also respect what the public history proves: an opponent that was
forced to pick up could beat nothing, so its unknown cards are re-dealt below
the rank it picked up on (:class:`~sample_bots.strategy.Tracker`).

Time: about 60% of ``deadline_ms`` less a safety margin (:func:`time_budget_s`);
single choices, blind flips and errors are answered at once, with the
tactician's choice as the fallback.

``python -m sample_bots.searcher --port 8004 [--seed 7]``
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections import deque
from collections.abc import Sequence
from typing import Final

from aiohttp import web

from protocol import (
    APIVERSION,
    Action,
    ActRequest,
    BotInfo,
    ChooseUp,
    Draw,
    Flip,
    GameEnd,
    GameStart,
    Pass,
    Pickup,
    Play,
    Swap,
)
from referee.game import GameState, from_view
from referee.game import cards as C
from referee.game.state import GONE, OVER, SABOTAGE, SETUP

from .sdk import arg_parser, make_app, run_bot
from .strategy import Game, GameMemory, Tactics, equivalent_flips

INFO = BotInfo(apiversion=APIVERSION, name="searcher", author="sample_bots", version="1.0")

log = logging.getLogger("sample_bots.searcher")

#: Set-up: how many of the tactician's best 3UP splits are searched.
SETUP_CANDIDATES: Final = 6
#: Swaps (V6, V5b): how many of the tactician's best choices are searched, with ``pass``.
SWAP_CANDIDATES: Final = 5
#: A candidate is dropped when its paired mean difference to the leader is this
#: many standard errors below zero, after at least MIN_WORLDS worlds.
PRUNE_Z: Final = 3.0
MIN_WORLDS: Final = 24


def time_budget_s(deadline_ms: int) -> float:
    """Seconds of search for a request: 60% of the deadline less a margin of
    10% (at most 60 ms) for the round trip and the answer; 540 ms for 1,000 ms."""
    margin = min(60.0, 0.1 * deadline_ms)
    return max(0.0, min(0.6 * deadline_ms - margin, deadline_ms - 2 * margin)) / 1000.0


# ----------------------------------------------------------------- rollouts

_PASS: Final = Pass()
_PICKUP: Final = Pickup()
_DRAW: Final = Draw()
_FLIPS: Final = tuple(Flip(slot=i) for i in range(3))
_STR: Final = C.STR
_CLEAR: Final = C.CLEAR


def rollout_action(s: GameState, seat: int) -> Action:
    """The rollout policy, read straight off the engine's int cards: every copy
    of the lowest playable rank, a Clear only when needed (the plain one
    first), the free draw before an extra action, the 3 highest cards as 3UP,
    no swaps."""
    phase = s.phase
    if phase == SETUP:
        top3 = sorted(s.hands[seat], reverse=True)[:3]
        return ChooseUp(cards=[_STR[c] for c in top3])
    if phase == SABOTAGE or s.pending_swap:
        return _PASS
    hand = s.hands[seat]
    if hand:
        src = hand
    elif s.up[seat]:
        src = s.up[seat]
    else:
        down = s.down[seat]
        for slot in range(3):
            if down[slot] != GONE:
                return _FLIPS[slot]
        return _PICKUP  # holds nothing: cannot happen in a live game
    if s.extras and s.extras[-1] and not s.drew and s.draw and src is hand and len(hand) <= 3:
        return _DRAW
    top = s.pile[-1] >> 3 if s.pile else 0
    low = 99
    clear = 99
    for c in src:
        r = c >> 3
        if r >= _CLEAR:
            if r < clear:
                clear = r
        elif top <= r < low:
            low = r
    if low != 99:
        return Play(cards=[_STR[c] for c in src if c >> 3 == low])
    if clear != 99:
        for c in src:
            if c >> 3 == clear:
                return Play(cards=[_STR[c]])
    return _PICKUP


def rollout(s: GameState, seat: int) -> float:
    """Play ``s`` out with :func:`rollout_action`; ``seat``'s score: 1 for
    first place, 0 for last, linear in between."""
    while s.phase != OVER:
        mover = s.current if s.phase != SETUP else s.to_move()[0]
        s.apply(rollout_action(s, mover), mover)
    places = s.places
    assert places is not None
    n = s.n
    return (n - places[seat]) / (n - 1)


# ------------------------------------------------------------------ worlds


def respect_caps(world: GameState, game: Game, me: int, rng: random.Random) -> None:
    """Re-deal the unknown hand cards of opponents that were forced to pick up
    so that none beats the rank they picked up on (swapping with hidden cards
    from the draw pile and the 3DOWN slots)."""
    caps = game.tracker.cap
    if not caps:
        return
    for seat, cap in caps.items():
        if seat == me or not 0 <= seat < world.n:
            continue
        hand = world.hands[seat]
        known = list(world.known[seat])
        unknown_idx = []
        for i, c in enumerate(hand):
            if c in known:
                known.remove(c)
            else:
                unknown_idx.append(i)
        high = [i for i in unknown_idx if hand[i] >> 3 >= cap]
        if not high:
            continue
        # Hidden places holding a card below the cap; a place swapped with
        # holds a high card afterwards, so it leaves the list.
        spots: list[tuple[list[int], int]] = [
            (world.draw, j) for j, c in enumerate(world.draw) if c >> 3 < cap
        ]
        for d in world.down:
            spots += [(d, j) for j, c in enumerate(d) if c != GONE and c >> 3 < cap]
        for i in high:
            if not spots:
                break  # this seat keeps the rest; the next seat may still be fixed
            where, j = spots.pop(rng.randrange(len(spots)))
            hand[i], where[j] = where[j], hand[i]


# ---------------------------------------------------------------- the bot


class Searcher:
    """Determinized Monte-Carlo search; ``seed`` makes each game's worlds reproducible."""

    def __init__(self, seed: int | None = None, budget: float = 1.0) -> None:
        self.seed = seed
        self.budget = budget  # scales time_budget_s (for experiments)
        self.memory = GameMemory()
        self.tactics = Tactics()
        #: (worlds, candidates, candidates left) of the last searches, for experiments.
        self.stats: deque[tuple[int, int, int]] = deque(maxlen=1000)

    def on_start(self, start: GameStart) -> None:
        self.memory.start(start.game_id, start.seat, start.rules)

    def on_end(self, end: GameEnd) -> None:
        self.memory.end(end.game_id)

    def _rng(self, game_id: str, game: Game) -> random.Random:
        """The game's random stream (kept, and dropped, with the game's memory)."""
        if game.rng is None:
            game.rng = random.Random(None if self.seed is None else f"{self.seed}/{game_id}")
        return game.rng

    def decide(self, request: ActRequest) -> int:
        t0 = time.perf_counter()
        game = self.memory.get(request.game_id, request.seat)
        if not game.started:
            log.warning("game %s: no /start seen, searching with the default rules", request.game_id)
            game.started = True
        game.tracker.update(request.state)
        legal = request.legal
        if len(legal) == 1 or equivalent_flips(legal):
            return 0
        fallback = self.tactics.choose(request.state, legal, game.tracker)
        candidates = self.candidates(request, game, fallback)
        if len(candidates) == 1:
            return candidates[0]
        stop = t0 + time_budget_s(request.deadline_ms) * self.budget
        try:
            return self.search(request, game, candidates, fallback, stop)
        except Exception:  # a world that does not fit the view, a bug: never lose the move
            log.warning("game %s: search failed; playing the tactician's choice",
                        request.game_id, exc_info=True)
            return fallback

    def candidates(self, request: ActRequest, game: Game, fallback: int) -> list[int]:
        """Indices of the actions worth searching."""
        legal = request.legal
        state = request.state
        if isinstance(legal[0], ChooseUp):
            return self.tactics.rank_choose_up(state, legal)[:SETUP_CANDIDATES]
        if any(isinstance(a, Swap) for a in legal):
            scored = sorted(
                (i for i, a in enumerate(legal) if isinstance(a, Swap)),
                key=lambda i: _swap_key(legal[i]),
            )
            keep = scored[:SWAP_CANDIDATES]
            passes = [i for i, a in enumerate(legal) if isinstance(a, Pass)]
            out = sorted(set(keep + passes + [fallback]))
            return out
        return list(range(len(legal)))

    def search(
        self,
        request: ActRequest,
        game: Game,
        candidates: list[int],
        fallback: int,
        stop: float,
    ) -> int:
        legal = request.legal
        seat = request.seat
        view = request.state
        rng = self._rng(request.game_id, game)
        k = len(candidates)
        scores: list[list[float]] = [[] for _ in range(k)]
        alive = list(range(k))
        worlds = 0
        clock = time.perf_counter
        while clock() < stop:
            world = from_view(view, game.rules, rng, list(legal))
            respect_caps(world, game, seat, rng)
            done = True
            for j in alive:
                s = world.copy()
                s.apply(legal[candidates[j]], seat)
                scores[j].append(rollout(s, seat))
                if clock() >= stop:
                    done = False
                    break
            if not done:
                break
            worlds += 1
            if worlds >= MIN_WORLDS and worlds % 8 == 0:
                alive = _prune(alive, scores, worlds)
                if len(alive) == 1:
                    break  # every other candidate is clearly worse: more worlds change nothing
        best = _best(alive, scores, candidates.index(fallback) if fallback in candidates else -1)
        self.stats.append((worlds, k, len(alive)))
        log.debug("game %s turn %d: %d worlds, %d/%d candidates left, chose %r",
                  request.game_id, request.turn, worlds, len(alive), k, legal[candidates[best]])
        return candidates[best]


def _swap_key(action: Action) -> float:
    """Swaps, most consequential first: for V5b sabotage by how much higher the
    card taken is than the card given; for the V6 swap with one's own 3UP by
    the rank difference either way (a high card up, or a high card back)."""
    assert isinstance(action, Swap)
    diff = (C.INT[action.take] >> 3) - (C.INT[action.give] >> 3)
    return -diff if action.target is not None else -abs(diff)


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("-inf")


def _prune(alive: list[int], scores: list[list[float]], worlds: int) -> list[int]:
    """Drop candidates whose paired difference to the leader is clearly negative."""
    leader = max(alive, key=lambda j: _mean(scores[j][:worlds]))
    lead = scores[leader]
    keep = []
    for j in alive:
        if j == leader:
            keep.append(j)
            continue
        diffs = [a - b for a, b in zip(scores[j][:worlds], lead[:worlds])]
        n = len(diffs)
        mean = sum(diffs) / n
        var = sum((d - mean) ** 2 for d in diffs) / max(1, n - 1)
        se = math.sqrt(var / n) if var > 0 else 0.0
        if se == 0.0:
            if mean < 0 and n >= 2 * MIN_WORLDS:
                continue
            keep.append(j)
        elif mean + PRUNE_Z * se < 0:
            continue
        else:
            keep.append(j)
    return keep


def _best(alive: list[int], scores: list[list[float]], prefer: int) -> int:
    """The candidate with the best mean over the worlds all of them were played
    in; ties go to ``prefer`` (the tactician's choice), then to the first."""
    n = min(len(scores[j]) for j in alive)
    if n == 0:
        return prefer if prefer in alive else alive[0]
    means = {j: sum(scores[j][:n]) / n for j in alive}
    top = max(means.values())
    if prefer in means and means[prefer] >= top - 1e-9:
        return prefer
    return next(j for j in alive if means[j] >= top - 1e-9)


def create_app(secret: str | None = None, seed: int | None = None) -> web.Application:
    """The bot's aiohttp application (what ``main`` serves)."""
    bot = Searcher(seed=seed)
    return make_app(bot.decide, INFO, secret, on_start=bot.on_start, on_end=bot.on_end)


def main(argv: Sequence[str] | None = None) -> None:
    parser = arg_parser("searcher: determinized Monte-Carlo search on the rules engine")
    parser.add_argument("--seed", type=int, default=None, help="seed for reproducible games")
    args = parser.parse_args(argv)
    bot = Searcher(seed=args.seed)
    run_bot(bot.decide, INFO, on_start=bot.on_start, on_end=bot.on_end, args=args)


if __name__ == "__main__":
    main()
