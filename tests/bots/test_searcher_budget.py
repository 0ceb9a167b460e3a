"""The searcher's time budget (sample_bots.searcher.Pacer).

The rule on its own (the prior, the measured lag, searches in flight,
lateness, the bank), and the real thing: a searcher process answering four
games at once over HTTP on loopback with a short deadline replies within it
every time, and still searches (its DEBUG log gives each search's playouts).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import pytest

from protocol import (
    APIVERSION,
    ActRequest,
    Fault,
    GameEnd,
    GameStart,
    Rules,
    Timeouts,
    decode_act_request,
    decode_reply,
    encode,
)
from referee.bots import free_port
from referee.game import new_game, view
from sample_bots.sdk import deadline_guard_s
from sample_bots.searcher import (
    LATE_MAX,
    LATE_STEP,
    MAX_FRACTION,
    MIN_SAMPLES,
    PRIOR_LAG_S,
    Pacer,
    Searcher,
    Timing,
    horizon_ms,
    safety_s,
    time_budget_s,
)
from tests.support.bots import ROOT, body, by_name
from tests.support.clocks import FakeClock
from tests.support.processes import serving

# ------------------------------------------------------------- the rule


def _feed(pacer: Pacer, lag_s: float, peak: int, count: int = MIN_SAMPLES, deadline_ms: int = 400) -> None:
    """``count`` answers over HTTP, each with ``lag_s`` of lag at ``peak`` in flight."""
    for _ in range(count):
        t = time.perf_counter()
        timing = Timing(started=t, ended=t + 0.01, stop=t + 0.01, clocked=True, peak=peak, playouts=1)
        pacer.observe(t, timing, t + 0.01 + lag_s, deadline_ms, None)


def test_before_any_measure_the_old_rule_and_a_prior_lag() -> None:
    plan = Pacer().plan(0.0, 400, None, measured=True)
    assert plan.budget(1) == pytest.approx(time_budget_s(400))  # 200 ms: the cap binds
    # 150 ms with four searches in flight: the SDK's guard (110 ms) binds first.
    plan = Pacer().plan(0.0, 150, None, measured=True)
    assert plan.budget(4) == pytest.approx(deadline_guard_s(150) - 0.005 - 4 * PRIOR_LAG_S)
    assert plan.budget(4) < plan.budget(1) <= time_budget_s(150)


def test_in_process_the_old_rule_whatever_was_measured() -> None:
    pacer = Pacer()
    _feed(pacer, 0.001, 1)
    plan = pacer.plan(5.0, 1000, None, measured=False)
    assert plan.stop(4) == pytest.approx(5.0 + time_budget_s(1000))


def test_a_small_measured_lag_lets_it_think_longer() -> None:
    pacer = Pacer()
    _feed(pacer, 0.001, 1)
    plan = pacer.plan(0.0, 400, None, measured=True)
    assert plan.budget(1) == pytest.approx(MAX_FRACTION * 0.4)  # 300 ms
    assert plan.budget(1) > time_budget_s(400)


def test_the_budget_shrinks_with_the_searches_in_flight_and_the_lag() -> None:
    pacer = Pacer()
    _feed(pacer, 0.040, 4)  # 10 ms per search in flight
    plan = pacer.plan(0.0, 400, None, measured=True)
    b1, b4, b8 = plan.budget(1), plan.budget(4), plan.budget(8)
    assert b1 > b4 > b8 > 0
    assert b8 == pytest.approx(
        min(
            MAX_FRACTION * 0.4,
            0.4 - safety_s(400) - max(8 * 0.010, 1.5 * 0.040),
            deadline_guard_s(400) - 0.005 - 8 * 0.010,
        ),
        abs=1e-6,
    )
    slow = Pacer()
    _feed(slow, 0.120, 4)  # stalls: the worst lag is planned for, with room
    assert slow.plan(0.0, 400, None, measured=True).budget(4) < b4 - 0.07


def test_lateness_widens_the_margin_and_it_decays() -> None:
    clock = FakeClock()
    pacer = Pacer(clock=clock)
    _feed(pacer, 0.001, 1, deadline_ms=150)
    assert pacer.late_count == 0
    before = pacer.plan(0.0, 150, None, measured=True).budget(1)
    pacer.late(0.0, "a test")
    after = pacer.plan(0.0, 150, None, measured=True).budget(1)
    assert after == pytest.approx(before - LATE_STEP * 0.150, abs=1e-4)
    clock.now += 600.0  # ten minutes later: next to nothing is left
    assert pacer.late_s < 0.001


def test_an_answer_it_measured_as_nearly_late_counts_as_late() -> None:
    pacer = Pacer()
    _feed(pacer, 0.001, 1)
    _feed(pacer, 0.385, 1, count=1)  # answered 395 ms after receipt: within 10 ms of 400
    assert pacer.late_count == 1
    assert pacer.late_s == pytest.approx(LATE_STEP * 0.4 + 0.005, abs=1e-3)


def test_one_stall_counts_once_and_the_margin_is_capped() -> None:
    clock = FakeClock()
    pacer = Pacer(clock=clock)
    pacer.plan(0.0, 400, None, measured=True)
    for overrun in (0.010, 0.030, 0.020):  # three searches in flight, late at once
        pacer.late(overrun, "a test")
    assert pacer.late_count == 3
    assert pacer.late_s == pytest.approx(LATE_STEP * 0.4 + 0.030, abs=1e-3)
    margin = pacer.late_s
    clock.now += 1.0  # a second later: another stall adds to it
    pacer.late(0.0, "a test")
    assert pacer.late_s == pytest.approx(margin + LATE_STEP * 0.4, abs=2e-3)
    for _ in range(50):
        clock.now += 1.0
        pacer.late(0.1, "a test")
    assert pacer.late_s == pytest.approx(LATE_MAX * 0.4, abs=1e-3)


def test_a_timeout_fault_in_end_widens_the_margin() -> None:
    bot = Searcher(seed=1)
    end = GameEnd(
        game_id="g",
        seat=0,
        places=[2, 1],
        adjudicated=False,
        disqualified=[],
        faults=[
            Fault(kind="timeout", turn=7, detail="no reply within 400 ms", overrun_ms=3.0),
            Fault(kind="illegal", turn=9, detail="not legal"),
        ],
    )
    bot.on_end(end)
    assert bot.pacer.late_count == 1
    assert bot.pacer.late_s == pytest.approx(LATE_STEP * 0.4 + 0.003, abs=1e-3)


def test_a_fault_it_already_saw_as_late_counts_once() -> None:
    clock = FakeClock()
    bot = Searcher(seed=1, pacer=Pacer(clock=clock))
    bot.pacer.late(0.010, "the SDK's guard answered", ("g", 7))
    margin = bot.pacer.late_s
    clock.now += 5.0  # /end comes seconds later
    end = GameEnd(
        game_id="g",
        seat=0,
        places=[2, 1],
        adjudicated=False,
        disqualified=[],
        faults=[Fault(kind="timeout", turn=7, detail="no reply within 400 ms", overrun_ms=1.0)],
    )
    bot.on_end(end)
    assert bot.pacer.late_count == 1
    assert bot.pacer.late_s < margin


def test_a_bank_adds_a_little() -> None:
    assert horizon_ms(400, None) == horizon_ms(400, 0) == 400
    assert horizon_ms(400, 1000) == 440
    assert horizon_ms(400, 100_000) == 500  # at most a quarter of the deadline
    pacer = Pacer()
    _feed(pacer, 0.001, 1)
    plain = pacer.plan(0.0, 1000, None, measured=True).budget(1)
    banked = pacer.plan(0.0, 1000, 2500, measured=True).budget(1)
    assert banked > plain


async def test_concurrent_decisions_are_counted_and_each_searches() -> None:
    sc = by_name("ordinary play")
    bot = Searcher(seed=2)
    for g in range(4):
        bot.on_start(sc.start(f"c{g}"))
    reqs = [
        decode_act_request(encode(sc.request(request_id=f"c{g}.1", game_id=f"c{g}", deadline_ms=400)))
        for g in range(4)
    ]
    # (No timing here: this process keeps the interpreter's 5 ms switch interval.)
    choices = await asyncio.gather(*(bot.act(r) for r in reqs))
    for r, c in zip(reqs, choices):
        sc.assert_legal(r.legal[c])
    timings = dict(bot.timings)
    assert all(timings[r.request_id].playouts > 0 for r in reqs)
    assert max(t.peak for t in timings.values()) >= 2
    assert bot.pacer.answered == 4 and bot.pacer.in_flight == 0


# ------------------------------------------------- a real process, over HTTP

DEADLINE_MS = 150
GAMES = 4  # at once
MOVES = 12  # per game
ATTEMPTS = 3  # a saturated machine can stall any process past 150 ms: two retries
SEARCHED = re.compile(r"request (\S+): (\d+) worlds, (\d+) playouts")


@contextmanager
def _searcher_process(logfile: Path) -> Iterator[str]:
    """``python -m sample_bots.searcher`` at DEBUG, its output copied to
    ``logfile``: its URL, once it says it listens. The file is whole once the
    block has ended (the searcher stopped and its output read to the end)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("BOT_SECRET", None)
    argv = [
        sys.executable,
        "-m",
        "sample_bots.searcher",
        "--port",
        str(port),
        "--seed",
        "3",
        "--log-level",
        "DEBUG",
    ]
    with serving(argv, copy=logfile, cwd=ROOT, env=env, what="the searcher"):
        yield f"http://127.0.0.1:{port}"


async def _canary(stalls: list[tuple[float, float]]) -> None:
    """Record when this test's own event loop stalled (slept 10 ms past a 2 ms
    sleep): a reply measured late across such a stall is the test's lateness,
    not the bot's."""
    while True:
        t0 = time.perf_counter()
        await asyncio.sleep(0.002)
        t1 = time.perf_counter()
        if t1 - t0 > 0.012:
            stalls.append((t0, t1))


Reply = tuple[str, float, float, float]  # request_id, ms, sent, received


async def _game(session: aiohttp.ClientSession, url: str, g: int, out: list[Reply]) -> None:
    """Seat 0 is the searcher, seats 1-3 play at random here; MOVES of its requests."""
    rules = Rules()
    game_id = f"budget{g}"
    state = new_game(rules, ["searcher", "r1", "r2", "r3"], random.Random(100 + g))
    start = GameStart(
        apiversion=APIVERSION,
        game_id=game_id,
        seat=0,
        players=list(state.names),
        rules=rules,
        timeouts=Timeouts(move_ms=DEADLINE_MS),
    )
    async with session.post(f"{url}/start", data=body(start)) as resp:
        assert resp.status == 200
    rng = random.Random(g)
    since = 0
    k = 0
    while not state.over and k < MOVES:
        for seat in state.to_move():
            legal = state.legal_actions(seat)
            if seat != 0:
                state.apply(rng.choice(legal), seat)
                continue
            k += 1
            request = ActRequest(
                apiversion=APIVERSION,
                game_id=game_id,
                request_id=f"{game_id}.{k}",
                seat=0,
                turn=state.turn,
                deadline_ms=DEADLINE_MS,
                bank_ms=None,
                state=view(state, 0, since),
                legal=legal,
            )
            since = len(state.events)
            data = body(request)
            t0 = time.perf_counter()
            async with session.post(f"{url}/act", data=data) as resp:
                raw = await resp.read()
            t1 = time.perf_counter()
            out.append((request.request_id, (t1 - t0) * 1000, t0, t1))
            assert resp.status == 200
            state.apply(decode_reply(raw, request.request_id).chosen(legal), 0)


async def _four_games(url: str) -> tuple[list[Reply], list[tuple[str, float]]]:
    """Play GAMES games at once against the bot at ``url``: every reply, and
    the late ones (past DEADLINE_MS, not explained by a stall of this test)."""
    times: list[Reply] = []
    stalls: list[tuple[float, float]] = []
    canary = asyncio.create_task(_canary(stalls))
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as resp:  # the handshake, and a warm connection
                assert resp.status == 200
            await asyncio.gather(*(_game(session, url, g, times) for g in range(GAMES)))
    finally:
        canary.cancel()
    late = [
        (rid, round(ms, 1))
        for rid, ms, t0, t1 in times
        if ms > DEADLINE_MS
        and not any(t0 < b and a < t1 and (b - a) * 1000 > ms - DEADLINE_MS for a, b in stalls)
    ]
    return times, late


async def test_four_games_at_once_with_a_short_deadline_answer_in_time_and_search(
    tmp_path: Path,
) -> None:
    for attempt in range(1, ATTEMPTS + 1):
        logfile = tmp_path / f"searcher-{attempt}.log"
        with _searcher_process(logfile) as url:
            times, late = await _four_games(url)
        log = logfile.read_text()  # whole: the searcher has exited and its output was read to the end
        if not late:
            break
        said = [line for line in log.splitlines() if any(f"{rid}:" in line for rid, _ in late)]
        assert attempt < ATTEMPTS, f"replies past {DEADLINE_MS} ms: {late}; the bot logged: {said}"
    assert len(times) >= GAMES * MOVES // 2

    searched = {m.group(1): int(m.group(3)) for m in SEARCHED.finditer(log)}
    asked = {rid for rid, *_ in times}
    mine = [searched[rid] for rid in searched.keys() & asked]
    assert len(mine) >= len(asked) // 2, log[-2000:]
    # It still searches, though on a saturated machine its measured lag can
    # leave some searches no time at all (then it plays the tactician's choice).
    assert sum(p > 0 for p in mine) >= len(mine) // 4, searched
    assert max(mine) >= 10, searched
