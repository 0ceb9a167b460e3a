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

Time (:class:`Pacer`): the search stops on the wall clock, checked after
every playout, at a stop counted from the moment the request arrived. Over
HTTP (:meth:`Searcher.act`) the bot measures what the round trip costs it
besides the search — the wait for a worker thread, the overshoot past the
stop, the wait for the event loop to take the answer — per search in flight
(the searches of concurrent games share one interpreter lock, so the waits
grow with their number) and in the tail (stalls of the machine), and plans
``deadline_ms`` (plus a little of ``bank_ms``) less that measured lag, less a
safety margin, less an extra margin that grows whenever it saw itself late
and decays after; never more than 75% of the deadline, and always before the
SDK's deadline guard. Until it has measured enough, and in process
(:meth:`Searcher.decide`, which sees no round trip), it thinks about 60% of
the deadline (:func:`time_budget_s`). ``main`` also shortens the interpreter's
switch interval, which makes that lag several times smaller.
Single choices, blind flips and errors are answered at once, with the
tactician's choice as the fallback.

``python -m sample_bots.searcher --port 8004 [--seed 7]``
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple

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

from .sdk import arg_parser, deadline_guard_s, make_app, run_bot
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


# ------------------------------------------------------------------ timing

#: The most of the time to the deadline a measured search plans to use.
MAX_FRACTION: Final = 0.75
#: Lag samples kept (one per request answered over HTTP), and how many are
#: needed before they replace the prior guess.
LAG_WINDOW: Final = 512
MIN_SAMPLES: Final = 16
#: The quantile of the per-search lag that is planned for.
LAG_QUANTILE: Final = 0.98
#: Lag per search in flight assumed until enough has been measured (seconds).
PRIOR_LAG_S: Final = 0.010
#: The tail: the worst recent lag (the TAIL_RANK-th worst once there are
#: TAIL_RANK * 128 samples), a stall of the machine whatever its cause, is
#: planned for TAIL_FACTOR times over, since what the bot cannot measure (the
#: referee's side, the wait before the request is read) stalls with it; but
#: for at most TAIL_MAX of the time to the deadline (a longer stall cannot be
#: planned for).
TAIL_RANK: Final = 3
TAIL_FACTOR: Final = 1.5
TAIL_MAX: Final = 0.4
#: Margin kept between the planned answer and the SDK's deadline guard (seconds).
GUARD_MARGIN_S: Final = 0.005
#: The lateness margin: each time the bot saw itself late (nearly at the
#: deadline by its own measure, the SDK's guard answering for it, a timeout
#: fault in ``/end``) it grows by LATE_STEP (a fraction of the time to the
#: deadline) plus the overrun; lateness within one deadline of the previous
#: (one stall makes every search in flight late) counts once. It halves every
#: LATE_HALF_LIFE_S and is at most LATE_MAX of the time to the deadline.
LATE_STEP: Final = 0.05
LATE_MAX: Final = 0.5
LATE_HALF_LIFE_S: Final = 20.0
#: The interpreter's thread switch interval in the bot process (default 5 ms):
#: a short one lets the event loop take the lock from the search threads
#: sooner, which cuts the round trip's lag several times for ~5% fewer playouts.
SWITCH_INTERVAL_S: Final = 0.001
#: A line on the measured timing is logged (INFO) every this many answers.
SUMMARY_EVERY: Final = 500


def safety_s(horizon_ms: float) -> float:
    """The margin kept on top of the measured lag: 5% of the time, at least 5 ms."""
    return max(5.0, 0.05 * horizon_ms) / 1000.0


def horizon_ms(deadline_ms: int, bank_ms: int | None) -> float:
    """The time planned against: the deadline plus a 25th of the bank (at most
    a quarter of the deadline), so that a bank lasts the game."""
    if not bank_ms or bank_ms <= 0:
        return float(deadline_ms)
    return deadline_ms + min(bank_ms / 25.0, deadline_ms / 4.0)


class Timing(NamedTuple):
    """How one decision went, on ``time.perf_counter``'s clock."""

    started: float  # decide began (in its worker thread)
    ended: float  # decide returned
    stop: float  # the last stop the search planned
    clocked: bool  # the search ran until the stop (else it ended early, or never began)
    peak: int  # the most searches in flight seen meanwhile (this one included)
    playouts: int


class Plan:
    """One request's time: :meth:`stop` is when its search must stop, given
    how many searches are in flight now (see :class:`Pacer`)."""

    __slots__ = ("received", "cap", "horizon", "guard", "per_search", "tail", "extra")

    def __init__(
        self,
        received: float,
        cap: float,
        horizon: float,
        guard: float | None,
        per_search: float,
        tail: float,
        extra: float,
    ) -> None:
        self.received = received
        self.cap = cap  # seconds after receipt the search never goes past
        self.horizon = horizon  # seconds after receipt to the deadline, less the safety margin
        self.guard = guard  # seconds after receipt to the SDK's guard, less a margin; None: no SDK
        self.per_search = per_search  # lag per search in flight, seconds
        self.tail = tail  # the tail margin (TAIL_FACTOR times a bad recent lag, capped), seconds
        self.extra = extra  # the lateness margin, seconds

    def budget(self, in_flight: int) -> float:
        """Seconds of search from receipt with ``in_flight`` searches running."""
        typical = max(1, in_flight) * self.per_search
        b = min(self.cap, self.horizon - max(typical, self.tail) - self.extra)
        if self.guard is not None:
            b = min(b, self.guard - typical - self.extra)
        return max(0.0, b)

    def stop(self, in_flight: int) -> float:
        return self.received + self.budget(in_flight)


class Pacer:
    """The searcher's clock, shared by the searches of every game in the process.

    Per request answered over HTTP it measures the *lag*: the time from the
    request's arrival to the start of ``decide`` in its worker thread, plus
    the overshoot past the planned stop, plus the time from ``decide``'s
    return to the event loop taking the answer. The searches of concurrent
    games share one interpreter lock, so the lag grows with the number in
    flight: ``per`` is the 98th percentile of lag / (most searches in flight
    meanwhile) over the last LAG_WINDOW answers, ``tail`` the worst lag among
    them (the TAIL_RANK-th worst once there are enough: a stall of the
    machine, whatever the cause). With ``n`` searches in flight *now*
    (re-read after every world) a search stops at::

        receipt + min(MAX_FRACTION * H,
                      H - safety - max(n * per, min(TAIL_FACTOR * tail, TAIL_MAX * H)) - late,
                      guard - GUARD_MARGIN_S - n * per - late)

    ``H`` is :func:`horizon_ms` (the deadline, plus a little of the bank),
    ``safety`` :func:`safety_s`, ``guard`` the SDK's :func:`deadline_guard_s`
    (past it the SDK answers index 0 for the bot: no fault, but a poor move)
    and ``late`` the lateness margin: LATE_STEP of ``H`` plus the overrun each
    time the bot came within half the safety margin of the deadline, the SDK's
    guard answered for it or ``/end`` reported a timeout fault (once per
    stall, and once per request), halving every LATE_HALF_LIFE_S, at most
    LATE_MAX of ``H``. With
    fewer than MIN_SAMPLES lags, ``per`` is PRIOR_LAG_S, there is no tail
    and the cap is the old rule, :func:`time_budget_s`.

    `clock` dates the lateness margin's decay (``time.perf_counter``, the
    clock of the searches' times; a test may give a fake one).
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self.in_flight = 0
        self.lags: deque[tuple[float, int]] = deque(maxlen=LAG_WINDOW)  # (lag s, peak)
        self._late = (0.0, 0.0)  # (margin s, when it was set)
        self._late_base = 0.0  # the margin before the current stall's lateness
        self.horizon_s = 0.4  # the last request's time to the deadline
        self.late_count = 0
        #: (game_id, turn) of the requests it saw itself late on: a timeout
        #: fault ``/end`` reports for one of them is not counted again.
        self.seen_late: deque[tuple[str, int]] = deque(maxlen=64)
        self.answered = 0
        self._cache: tuple[int, tuple[float, float] | None] = (-1, None)

    def enter(self) -> int:
        """A search begins; the searches now in flight."""
        with self._lock:
            self.in_flight += 1
            return self.in_flight

    def leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def lag_s(self) -> tuple[float, float] | None:
        """(lag per search in flight, tail lag) planned for, or None before MIN_SAMPLES."""
        with self._lock:
            if self._cache[0] == self.answered:
                return self._cache[1]
            n = len(self.lags)
            out: tuple[float, float] | None = None
            if n >= MIN_SAMPLES:
                per = sorted(lag / max(1, peak) for lag, peak in self.lags)
                raw = sorted((lag for lag, _ in self.lags), reverse=True)
                rank = max(1, min(TAIL_RANK, n // 128))
                out = (per[min(n - 1, int(LAG_QUANTILE * n))], raw[rank - 1])
            self._cache = (self.answered, out)
            return out

    def plan(
        self, received: float, deadline_ms: int, bank_ms: int | None, measured: bool, scale: float = 1.0
    ) -> Plan:
        """The time of a request that arrived at ``received``. ``measured``: it
        came over HTTP (the round trip is measured and the SDK guard applies);
        else it is called in process, with no round trip: the old rule."""
        h = horizon_ms(deadline_ms, bank_ms)
        self.horizon_s = h / 1000.0
        if not measured:
            return Plan(received, time_budget_s(int(h)) * scale, h / 1000.0, None, 0.0, 0.0, self.late_s)
        lags = self.lag_s()
        if lags is None:
            cap, per, tail = time_budget_s(int(h)), PRIOR_LAG_S, 0.0
        else:
            cap, (per, tail) = MAX_FRACTION * h / 1000.0, lags
        return Plan(
            received,
            cap * scale,
            h / 1000.0 - safety_s(h),
            deadline_guard_s(deadline_ms) - GUARD_MARGIN_S,
            per,
            min(TAIL_FACTOR * tail, TAIL_MAX * h / 1000.0),
            self.late_s,
        )

    @property
    def late_s(self) -> float:
        """The lateness margin now, in seconds."""
        margin, when = self._late
        if margin == 0.0:
            return 0.0
        return margin * math.pow(0.5, (self.clock() - when) / LATE_HALF_LIFE_S)

    def observe(
        self,
        received: float,
        timing: Timing,
        answered: float,
        deadline_ms: int,
        bank_ms: int | None,
        where: tuple[str, int] = ("", -1),
    ) -> None:
        """Learn from one request answered over HTTP (``where``: its game_id and
        turn): its lag, and whether it was late."""
        over = max(0.0, timing.ended - timing.stop) if timing.clocked else 0.0
        lag = max(0.0, timing.started - received) + over + max(0.0, answered - timing.ended)
        h = horizon_ms(deadline_ms, bank_ms)
        elapsed = answered - received
        with self._lock:
            self.answered += 1
            self.lags.append((lag, max(1, timing.peak)))
        near = h / 1000.0 - safety_s(h) / 2
        if elapsed > near:
            self.late(
                elapsed - near,
                f"answered {elapsed * 1000:.0f} ms after receipt, deadline {deadline_ms} ms",
                where,
            )

    def late(self, overrun_s: float, why: str, where: tuple[str, int] | None = None) -> None:
        """The bot was (nearly) late by ``overrun_s`` on the request of
        ``where`` (game_id, turn): widen the margin. A request it already saw
        itself late on counts once (``/end`` reports its fault later)."""
        with self._lock:
            if where is not None:
                if where in self.seen_late:
                    return
                self.seen_late.append(where)
            now = self.clock()
            h = self.horizon_s
            if now - self._late[1] > h:  # a new stall
                self._late_base = self.late_s
            step = LATE_STEP * h + max(0.0, overrun_s)
            late = min(LATE_MAX * h, max(self.late_s, self._late_base + step))
            self._late = (late, now)
            self.late_count += 1
        log.info("late: %s; lateness margin now %.0f ms", why, late * 1000)

    def summary(self) -> str:
        """One line on what has been measured (logged now and then)."""
        lags = self.lag_s()
        if lags is None:
            return f"{self.answered} answered, too few lags measured"
        with self._lock:
            raw = sorted(lag for lag, _ in self.lags)
        return (
            f"{self.answered} answered; lag per search in flight (p98) {lags[0] * 1000:.1f} ms,"
            f" lag p50 {raw[len(raw) // 2] * 1000:.1f} ms, tail {lags[1] * 1000:.1f} ms,"
            f" worst {raw[-1] * 1000:.1f} ms"
            f" (last {len(raw)}); lateness margin {self.late_s * 1000:.0f} ms"
            f" after {self.late_count} late"
        )


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
    """Determinized Monte-Carlo search; ``seed`` makes each game's worlds
    reproducible. `pacer`: the clock of its searches (a fresh :class:`Pacer`
    by default)."""

    def __init__(self, seed: int | None = None, budget: float = 1.0, pacer: Pacer | None = None) -> None:
        self.seed = seed
        self.budget = budget  # scales the time budget (for experiments)
        self.memory = GameMemory()
        self.tactics = Tactics()
        self.pacer = pacer if pacer is not None else Pacer()
        #: (worlds, candidates, candidates left) of the last searches, for experiments.
        self.stats: deque[tuple[int, int, int]] = deque(maxlen=1000)
        #: How the last decisions went (request_id, Timing), for experiments and tests.
        self.timings: deque[tuple[str, Timing]] = deque(maxlen=1000)

    def on_start(self, start: GameStart) -> None:
        self.memory.start(start.game_id, start.seat, start.rules)

    def on_end(self, end: GameEnd) -> None:
        self.memory.end(end.game_id, end.seat)
        for fault in end.faults:
            if fault.kind == "timeout":
                self.pacer.late(
                    (fault.overrun_ms or 0.0) / 1000.0,
                    f"game {end.game_id}: timeout fault at turn {fault.turn}",
                    (end.game_id, fault.turn),
                )

    def _rng(self, game_id: str, game: Game) -> random.Random:
        """The game's random stream (kept, and dropped, with the game's memory)."""
        if game.rng is None:
            game.rng = random.Random(None if self.seed is None else f"{self.seed}/{game_id}")
        return game.rng

    def decide(self, request: ActRequest) -> int:
        """The decision in process: the time counts from this call, with no
        round trip to allow for (:func:`time_budget_s` of the deadline)."""
        choice, _ = self._decide(request, time.perf_counter(), measured=False)
        return choice

    async def act(self, request: ActRequest) -> int:
        """The decision over HTTP (what :func:`create_app` serves): the time
        counts from the request's arrival in the event loop, the search runs
        in a worker thread, and the lag the round trip adds is measured."""
        received = time.perf_counter()
        loop = asyncio.get_running_loop()
        try:
            choice, timing = await loop.run_in_executor(None, self._decide, request, received, True)
        except asyncio.CancelledError:  # the SDK's guard answered for us: far too late
            self.pacer.late(
                time.perf_counter() - received - deadline_guard_s(request.deadline_ms),
                f"request {request.request_id}: the SDK's deadline guard answered",
                (request.game_id, request.turn),
            )
            raise
        answered = time.perf_counter()
        self.pacer.observe(
            received, timing, answered, request.deadline_ms, request.bank_ms, (request.game_id, request.turn)
        )
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "request %s: answered %.1f ms after receipt (planned %.1f, %d in flight)",
                request.request_id,
                (answered - received) * 1000,
                (timing.stop - received) * 1000,
                timing.peak,
            )
        if self.pacer.answered % SUMMARY_EVERY == 0:
            log.info("timing: %s", self.pacer.summary())
        return choice

    def _decide(self, request: ActRequest, received: float, measured: bool) -> tuple[int, Timing]:
        started = time.perf_counter()
        peak = self.pacer.enter()
        plan = self.pacer.plan(received, request.deadline_ms, request.bank_ms, measured, self.budget)
        result: tuple[int, float, bool, int, int] = (0, plan.stop(peak), False, peak, 0)
        try:
            result = self._choose(request, plan, peak)
        finally:
            self.pacer.leave()
            choice, stop, clocked, peak, playouts = result
            timing = Timing(started, time.perf_counter(), stop, clocked, peak, playouts)
            self.timings.append((request.request_id, timing))
        return choice, timing

    def _choose(self, request: ActRequest, plan: Plan, peak: int) -> tuple[int, float, bool, int, int]:
        """(choice, last stop, stopped by the clock, peak in flight, playouts)."""
        game = self.memory.get(request.game_id, request.seat)
        if not game.started:
            log.warning("game %s: no /start seen, searching with the default rules", request.game_id)
            game.started = True
        game.tracker.update(request.state)
        legal = request.legal
        if len(legal) == 1 or equivalent_flips(legal):
            return 0, plan.stop(peak), False, peak, 0
        fallback = self.tactics.choose(request.state, legal, game.tracker)
        candidates = self.candidates(request, game, fallback)
        if len(candidates) == 1:
            return candidates[0], plan.stop(peak), False, peak, 0
        try:
            return self.search(request, game, candidates, fallback, plan, peak)
        except Exception:  # a world that does not fit the view, a bug: never lose the move
            log.warning(
                "game %s: search failed; playing the tactician's choice", request.game_id, exc_info=True
            )
            return fallback, plan.stop(peak), False, peak, 0

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
        plan: Plan,
        peak: int = 1,
    ) -> tuple[int, float, bool, int, int]:
        """Search ``candidates`` until ``plan``'s stop (re-read after every
        world, as searches of other games start and end); (choice, last stop,
        stopped by the clock, peak searches in flight, playouts)."""
        legal = request.legal
        seat = request.seat
        view = request.state
        rng = self._rng(request.game_id, game)
        k = len(candidates)
        scores: list[list[float]] = [[] for _ in range(k)]
        alive = list(range(k))
        worlds = 0
        playouts = 0
        clocked = False
        clock = time.perf_counter
        pacer = self.pacer
        stop = plan.stop(peak)
        while True:
            n = pacer.in_flight
            if n > peak:
                peak = n
            stop = plan.stop(n)
            if clock() >= stop:
                clocked = True
                break
            world = from_view(view, game.rules, rng, list(legal))
            respect_caps(world, game, seat, rng)
            done = True
            for j in alive:
                s = world.copy()
                s.apply(legal[candidates[j]], seat)
                scores[j].append(rollout(s, seat))
                playouts += 1
                if clock() >= stop:
                    done = False
                    break
            if not done:
                clocked = True
                break
            worlds += 1
            if worlds >= MIN_WORLDS and worlds % 8 == 0:
                alive = _prune(alive, scores, worlds)
                if len(alive) == 1:
                    break  # every other candidate is clearly worse: more worlds change nothing
        best = _best(alive, scores, candidates.index(fallback) if fallback in candidates else -1)
        self.stats.append((worlds, k, len(alive)))
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "game %s turn %d request %s: %d worlds, %d playouts in %.0f ms"
                " (%d in flight),"
                " %d/%d candidates left, chose %r",
                request.game_id,
                request.turn,
                request.request_id,
                worlds,
                playouts,
                (clock() - plan.received) * 1000,
                peak,
                len(alive),
                k,
                legal[candidates[best]],
            )
        return candidates[best], stop, clocked, peak, playouts


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
    """The bot's aiohttp application (what ``main`` serves, with :meth:`Searcher.act`).
    ``main`` also shortens the interpreter's switch interval (SWITCH_INTERVAL_S)."""
    bot = Searcher(seed=seed)
    return make_app(bot.act, INFO, secret, on_start=bot.on_start, on_end=bot.on_end)


def main(argv: Sequence[str] | None = None) -> None:
    parser = arg_parser("searcher: determinized Monte-Carlo search on the rules engine")
    parser.add_argument("--seed", type=int, default=None, help="seed for reproducible games")
    args = parser.parse_args(argv)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    bot = Searcher(seed=args.seed)
    run_bot(bot.act, INFO, on_start=bot.on_start, on_end=bot.on_end, args=args)


if __name__ == "__main__":
    main()
