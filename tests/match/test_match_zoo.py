"""The zoo: against every kind of misbehaving bot, a game with two sample bots
completes, the fault kind is right, the offender is disqualified after N strikes
(after 1 with forfeit_on_first), and the others finish above it.

On virtual time (tests.support.clocks.VirtualTimeLoop, chosen for this
module in tests/match/conftest.py): the runner, its
deadlines and the bots share one loop whose clock jumps to the next deadline
only when every party waits. A deadline thus passes when a bot hangs, and
never because a loaded machine stalled the process between a good bot's
reply and its reading (on the wall clock that gave good bots timeouts, and
offenders a timeout instead of their own fault); the figures below (the
overrun, the time bank, one deadline for three hanging bots) are exact."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import aiohttp
import pytest
from aiohttp import web

from protocol import Rules, Timeouts, decode_act_request, decode_game_end
from referee.bots import HttpBot
from referee.match import Match
from referee.record import DisqualifiedLine, FaultPolicy, RequestLine
from tests.support.match import FAST, check_views, run_game
from tests.support.programs.zoo import BODIES, HEADERS, serve, zoo_app

# kind -> (fault kind, /act requests the offender gets before its first fault)
OFFENDERS = {
    "hang": ("timeout", 0),
    "late": ("timeout", 0),
    "garbage": ("bad_json", 0),
    "huge": ("too_large", 0),
    "huge_declared": ("too_large", 0),
    "wrong_id": ("wrong_request_id", 0),
    "http500": ("http_status", 0),
    "reset": ("connection", 0),
    "midreply": ("connection", 0),
    "hangup": ("connection", 0),
    "illegal": ("illegal", 0),
    "illegal_index": ("illegal", 0),
    "dies": ("connection", 4),
    "flaky": ("timeout", 1),
}


def _apps(kind: str, seat: int, make_sample: Callable[..., web.Application]) -> list[web.Application]:
    apps = [make_sample("random"), make_sample("greedy")]
    apps.insert(seat, zoo_app(kind, after=4, late_s=0.4))
    return apps


@pytest.mark.parametrize("kind", sorted(OFFENDERS))
async def test_offender_is_disqualified_after_three_strikes(
    kind: str, session: aiohttp.ClientSession, make_sample: Callable[..., web.Application]
) -> None:
    fault_kind, good_first = OFFENDERS[kind]
    seat = sorted(OFFENDERS).index(kind) % 3  # the offender sits everywhere in turn
    apps = _apps(kind, seat, make_sample)
    result, match = await run_game(apps, session)

    others = [s for s in range(3) if s != seat]
    assert result.disqualified == [seat]
    assert result.strikes[seat] == 3
    act_faults = [f for f in result.faults[seat] if not f.detail.startswith(("POST /start", "POST /end"))]
    assert [f.kind for f in act_faults] == [fault_kind] * 3
    assert all(f.detail for f in act_faults)
    if fault_kind == "timeout":
        # cancelled at the deadline, to the tick (on virtual time nothing stalls the loop)
        assert [f.overrun_ms for f in act_faults] == [0.0] * 3
    # flaky answers every other request: good, bad, good, bad, good, bad
    expected = good_first + 3 if kind != "flaky" else 6
    assert result.latency[seat].count == expected
    # The others: no fault, ranked above the offender, the game ended normally.
    assert all(result.faults[s] == [] and result.strikes[s] == 0 for s in others)
    assert result.places[seat] == 3
    assert sorted(result.places[s] for s in others)[0] == 1
    assert all(result.places[s] < 3 for s in others)
    assert result.turns >= 1
    # The record shows the defaults played and the disqualification.
    lines = [l for l in match.record.lines if isinstance(l, RequestLine) and l.seat == seat]
    assert [l.by for l in lines if l.fault is not None] == ["default", "default", "none"]
    dq = [l for l in match.record.lines if isinstance(l, DisqualifiedLine)]
    assert [(d.seat, d.reason) for d in dq] == [(seat, f"3 faults (last: {fault_kind})")]
    # /end went to everyone, the offender included (unless it is dead), with its own faults.
    for s, app in enumerate(apps):
        ends = [decode_game_end(b) for p, b in app[BODIES] if p == "/end"]
        if s == seat and kind == "dies":
            assert ends == []
            continue
        assert [(e.seat, e.places, e.disqualified) for e in ends] == [(s, result.places, [seat])]
        assert ends[0].faults == result.faults[s]
    # What every bot received decodes and is exactly its own view.
    good = sum(result.latency[s].count for s in others)
    assert check_views(match, apps) >= good


@pytest.mark.parametrize("kind", sorted(OFFENDERS))
async def test_forfeit_on_first_fault(
    kind: str, session: aiohttp.ClientSession, make_sample: Callable[..., web.Application]
) -> None:
    fault_kind, good_first = OFFENDERS[kind]
    apps = _apps(kind, 2, make_sample)
    result, match = await run_game(apps, session, policy=FaultPolicy(forfeit_on_first=True))
    assert result.disqualified == [2]
    assert result.strikes[2] == 1
    assert [f.kind for f in result.faults[2] if not f.detail.startswith(("POST /start", "POST /end"))] == [
        fault_kind
    ]
    assert result.latency[2].count == good_first + 1
    assert result.places[2] == 3 and min(result.places[:2]) == 1
    dq = [l for l in match.record.lines if isinstance(l, DisqualifiedLine)]
    assert dq[0].reason == f"forfeit on the first fault ({fault_kind})"


async def test_no_disqualification_with_zero_strikes(
    session: aiohttp.ClientSession, make_sample: Callable[..., web.Application]
) -> None:
    """strikes = 0: the offender plays the default action every time, to the end."""
    apps = [make_sample("random"), zoo_app("garbage")]
    result, match = await run_game(apps, session, policy=FaultPolicy(strikes=0))
    assert result.disqualified == []
    assert result.strikes[1] == result.latency[1].count > 3
    requests = [l for l in match.record.lines if isinstance(l, RequestLine) and l.seat == 1]
    assert all(l.by == "default" and l.fault is not None for l in requests)
    check_views(match, apps)


async def test_two_player_game_ends_at_the_disqualification(
    session: aiohttp.ClientSession, make_sample: Callable[..., web.Application]
) -> None:
    apps = [zoo_app("http500"), make_sample("greedy")]
    result, match = await run_game(apps, session, policy=FaultPolicy(strikes=1))
    assert result.places == [2, 1]
    assert result.disqualified == [0]
    # Both were asked at set-up; the game was over before seat 1's choice was used.
    lines = [l for l in match.record.lines if isinstance(l, RequestLine)]
    assert [(l.seat, l.by) for l in lines] == [(0, "none"), (1, "skipped")]
    check_views(match, apps)


async def test_set_up_requests_go_out_together(
    session: aiohttp.ClientSession, make_sample: Callable[..., web.Application]
) -> None:
    """Three hanging bots cost one deadline at set-up, not three."""
    apps = [zoo_app("hang"), zoo_app("hang"), zoo_app("hang")]
    loop = asyncio.get_running_loop()
    begun = loop.time()
    result, _ = await run_game(apps, session, policy=FaultPolicy(strikes=1))
    elapsed = loop.time() - begun
    assert result.disqualified == [0, 1]  # the last one left is not disqualified
    assert result.places == [3, 2, 1]
    assert elapsed < 2 * FAST.move_ms / 1000 + 0.2


async def test_time_bank(session: aiohttp.ClientSession, make_sample: Callable[..., web.Application]) -> None:
    """Kaggle-style overage: time over the move deadline comes out of the bank."""
    late = zoo_app("late", late_s=0.25)
    apps = [make_sample("random"), late]
    # 200 ms over each time against a 600 ms bank: 400 left, then 200, then the
    # third reply is due at the deadline itself (50 + 200 ms) and is late
    timeouts = Timeouts(move_ms=50, bank_ms=600, start_ms=1000, end_ms=1000)
    result, _ = await run_game(apps, session, timeouts=timeouts, policy=FaultPolicy(strikes=1))
    banks = [decode_act_request(b).bank_ms or 0 for p, b in late[BODIES] if p == "/act"]
    deadlines = {decode_act_request(b).deadline_ms for p, b in late[BODIES] if p == "/act"}
    assert deadlines == {50}
    assert banks[0] == 600
    assert banks == [600, 400, 200]  # spent, never refilled
    assert [f.kind for f in result.faults[1]] == ["timeout"]
    assert result.disqualified == [1]


async def test_stale_connection_is_retried(
    session: aiohttp.ClientSession, make_sample: Callable[..., web.Application]
) -> None:
    """A bot that closes a kept-alive connection as a request arrives is asked
    again on a new one: no fault. (One that always hangs up is in the zoo.)"""
    apps = [make_sample("random"), zoo_app("stale")]
    result, match = await run_game(apps, session)
    assert result.faults == [[], []]
    assert result.disqualified == []
    acts = [b for p, b in apps[1][BODIES] if p == "/act"]
    assert len(acts) == 2 * result.latency[1].count  # each request sent twice
    check_views(match, apps)


async def test_signed_requests(
    session: aiohttp.ClientSession, make_sample: Callable[..., web.Application]
) -> None:
    """Bots with a secret accept the referee's signed requests and refuse others."""
    apps = [make_sample("random", secret="s3"), make_sample("greedy", secret="t4")]
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(serve(app)) for app in apps]
        bots = [
            HttpBot(urls[0], session=session, secret="s3"),
            HttpBot(urls[1], session=session, secret="wrong"),
        ]
        match = Match(bots, 9, timeouts=FAST)
        result = await match.play()
    assert result.faults[0] == []
    assert [f.kind for f in result.faults[1]][:3] == ["http_status"] * 3
    assert "401" in result.faults[1][1].detail
    assert result.disqualified == [1]
    assert all(h.get("X-Referee-Signature", "").startswith("sha256=") for h in apps[0][HEADERS])


async def test_variants_game(
    session: aiohttp.ClientSession, make_sample: Callable[..., web.Application]
) -> None:
    """Play for places, V6 swaps, V2 draws: the runner is rule-agnostic."""
    rules = Rules(play_for_places=True, colour_run=True, draw_instead_of_playing=True, reverses=True)
    apps = [make_sample("random"), make_sample("greedy"), make_sample("random"), zoo_app("illegal_index")]
    result, match = await run_game(apps, session, rules=rules, seed=11)
    assert sorted(result.places) == [1, 2, 3, 4]
    assert result.places[3] == 4
    check_views(match, apps)
