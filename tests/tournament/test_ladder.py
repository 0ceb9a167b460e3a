"""The ladder (issue 15): the plan alone, then a ladder playing real bots on
loopback while entries come and go, stopped and started again."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from protocol.messages import Timeouts
from referee.bots.factory import BotSpec
from referee.tournament.ladder import Ladder, LadderScheduler, Wanted, entry_name, ladder_entries
from referee.tournament.league import (
    LadderTable,
    League,
    LeagueError,
    TournamentTable,
    parse_league,
)
from referee.tournament.ratings import Table
from referee.tournament.results import games_list
from referee.tournament.store import TOURNAMENT_DB, Store
from tests.support.programs.zoo import good_app, serve, zoo_app

# ------------------------------------------------------------------ the plan


def planner(n: int, k: int = 4, catch_up: int = 100) -> LadderScheduler:
    s = LadderScheduler(k, True, 7, catch_up=catch_up)
    for i in range(n):
        s.add(f"b{i:02d}")
    return s


def test_every_table_plays_one_deal_in_all_its_rotations() -> None:
    s = planner(10, k=4)
    block = s.block({}, tables=2)
    assert len(block) == 2 * 4
    by_table: dict[tuple[int, int], list[tuple[str, ...]]] = {}
    for g in block:
        by_table.setdefault((g.round, g.meeting), []).append(g.seats)
    for (r, m), seatings in by_table.items():
        assert len({g.deal_seed for g in block if (g.round, g.meeting) == (r, m)}) == 1
        members = set(seatings[0])
        assert all(set(x) == members for x in seatings)
        # every bot holds every seat once: the rotations of a duplicate deal
        for seat in range(4):
            assert {x[seat] for x in seatings} == members
    assert [g.index for g in block] == list(range(8))
    assert len({g.deal_seed for g in block}) == 2


def test_a_block_seats_each_entry_once_and_the_fewest_games_first() -> None:
    s = planner(9, k=3)
    for _ in range(30):
        block = s.block({}, tables=10)
        assert block
        seated = Counter(b for g in block if g.rotation == 0 for b in g.seats)
        assert set(seated.values()) == {1}  # nobody twice in a block
    assert max(s.games.values()) - min(s.games.values()) <= 2 * 3


def test_opponents_are_near_in_rating() -> None:
    s = planner(24, k=4)
    mu = {f"b{i:02d}": 40.0 - i for i in range(24)}  # b00 best ... b23 worst
    for _ in range(20):
        for g in s.block(mu, tables=6):
            ranks = sorted(int(b[1:]) for b in g.seats)
            # an anchor and three of the entries within 2x3 places of it
            assert ranks[-1] - ranks[0] <= 2 * 2 * 3, g.seats
    assert max(s.games.values()) - min(s.games.values()) <= 2 * 4  # and yet all play alike


def test_a_new_entry_plays_first_until_it_catches_up_bounded_by_catch_up() -> None:
    s = planner(12, k=2, catch_up=6)
    for _ in range(20):
        s.block({}, tables=2)
    low = min(s.games.values())
    start = s.add("new")
    assert start == low - 6  # at most catch_up games behind the least played
    seated_in = 0
    for _ in range(3):
        block = s.block({}, tables=2)
        seated_in += any("new" in g.seats for g in block)
    assert seated_in == 3  # seated first in each block while it is behind
    assert s.games["new"] == start + 3 * 2


def test_a_retired_entry_is_never_seated_again() -> None:
    s = planner(6, k=2)
    s.retire("b03")
    for _ in range(10):
        assert all("b03" not in g.seats for g in s.block({}, tables=3))


def test_too_few_entries_plan_nothing() -> None:
    s = planner(3, k=4)
    assert s.block({}, tables=4) == []


def test_the_plan_is_deterministic_and_restores_from_its_games() -> None:
    a, b = planner(14, k=3), planner(14, k=3)
    mu = {f"b{i:02d}": float(i % 5) for i in range(14)}
    games = []
    for _ in range(5):
        x, y = a.block(mu, tables=3), b.block(mu, tables=3)
        assert x == y
        games += x
    c = planner(0, k=3)
    for i in range(14):
        c.add(f"b{i:02d}", 0)
    c.restore(games)
    assert c.games == a.games and c.met == a.met and c.next_index == a.next_index and c.round == a.round
    assert c.block(mu, tables=3) == a.block(mu, tables=3)


def test_ladder_keys_are_validated_with_their_line() -> None:
    text = '[tournament]\ntable_size = 2\n\n[ladder]\nratings = "sometimes"\n'
    with pytest.raises(LeagueError, match=r"league.toml:5: \[ladder\] 'ratings'"):
        parse_league(text, "league.toml", bots_to_come=True)
    with pytest.raises(LeagueError, match=r":5: \[ladder\] 'concurrency'"):
        parse_league(
            "[tournament]\ntable_size = 2\n\n[ladder]\nconcurrency = 0\n", "league.toml", bots_to_come=True
        )
    with pytest.raises(LeagueError, match="catch_ups"):
        parse_league("[ladder]\ncatch_ups = 3\n", "league.toml", bots_to_come=True)
    with pytest.raises(
        LeagueError, match=r":5: \[ladder\] 'fill'.*'random', 'greedy', 'tactician', 'searcher', 'none'"
    ):
        parse_league(
            '[tournament]\ntable_size = 4\n\n[ladder]\nfill = "best"\n', "league.toml", bots_to_come=True
        )
    # any built-in house bot fills (one table of them: referee/bots/house.py)
    assert (
        parse_league('[ladder]\nfill = "random"\n', "league.toml", bots_to_come=True).ladder.fill == "random"
    )
    assert parse_league("[ladder]\n", "league.toml", bots_to_come=True).ladder.fill == "greedy"


# ------------------------------------------------------------------ playing


def league(ratings: str = "fresh") -> League:
    return League(
        tournament=TournamentTable(name="ladder", seed=11, table_size=2, concurrency=3),
        timeouts=Timeouts(move_ms=500),
        ladder=LadderTable(ratings=ratings, catch_up=4),
    )


def team(name: str, version: int, url: str) -> Wanted:
    return Wanted(
        name=entry_name(name, version), team=name, submission=version, spec=BotSpec(name=name, url=url)
    )


def applied(lad: Ladder) -> int:
    """How many games the ladder's live table has been fed (in index order)."""
    return lad.table.applied + 1


async def until(lad: Ladder, cond: Callable[[], bool], timeout: float = 180) -> None:
    """Until `cond()` holds, asked again at each of the ladder's changes (a
    game applied, an entry's status, why it waits): no timer; `timeout`
    bounds a broken test only."""
    async with asyncio.timeout(timeout):
        while True:
            lad.changed.clear()  # before asking: a change while it asks wakes the wait
            if cond():
                return
            await lad.changed.wait()


def recorded(out: Path) -> list[tuple[int, list[str]]]:
    return [(g.index, g.seats) for g in games_list(out)]


def from_scratch(out: Path, lad: Ladder) -> dict[str, tuple[float, float]]:
    """The recorded games applied again to a fresh table in plan order, up
    to the first one still to be played (abandoned games are played on restart)."""
    table = Table([], lad.league.ratings)
    for e in ladder_entries(out):
        if e.status != "unreachable":
            table.add_bot(e.name, mu=e.mu0, sigma=e.sigma0)
    with Store(out / TOURNAMENT_DB) as store:
        for i, o in enumerate(store.outcomes()):
            if o.index != i:
                break
            table.add(o)
    return {b: (round(r.mu, 6), round(r.sigma, 6)) for b, r in table.ratings.items()}


async def test_a_new_version_enters_at_once_and_the_old_one_retires_keeping_its_history(
    tmp_path: Path,
) -> None:
    out = tmp_path / "ladder"
    async with (
        serve(good_app("a")) as a,
        serve(good_app("b")) as b,
        serve(good_app("c")) as c,
        serve(good_app("a2")) as a2,
    ):
        lad = Ladder(
            league("inherit"),
            out,
            wanted=[team("a", 1, a), team("b", 1, b), team("c", 1, c)],
            log=lambda m: None,
        )
        task = asyncio.create_task(lad.run())
        await until(lad, lambda: applied(lad) >= 12)
        old = lad.table.ratings["a v1"]
        planned_before = lad.plan.next_index
        results = await lad.reconcile([team("a", 2, a2), team("b", 1, b), team("c", 1, c)])
        # the ladder goes on planning while reconcile is awaited: where it entered is read below
        planned_after = lad.plan.next_index
        assert [r.outcome for r in results] == ["entered", "kept", "kept"]
        assert results[0].replaced == "a v1"
        # inherit: the old version's mu, sigma raised back to half the fresh sigma at least
        assert lad.table.mu0["a v2"] == pytest.approx(old.mu)
        assert lad.table.sigma0["a v2"] == pytest.approx(max(old.sigma, 25 / 6))
        await until(lad, lambda: applied(lad) >= planned_after + 24)
        lad.stop()  # after the games in flight: every game launched is recorded
        with pytest.raises(Exception, match="stopped"):
            await task
    games = recorded(out)
    assert [i for i, _ in games] == list(range(len(games)))  # nothing lost, nothing twice
    entries = {e.name: e for e in ladder_entries(out)}
    entered_at = entries["a v2"].first_index
    assert planned_before <= entered_at <= planned_after  # at once: the next game planned
    after = [seats for i, seats in games if i >= entered_at]
    assert all("a v1" not in s for s in after)  # the old version finished its deals before entered_at
    # fewest games first: it plays at once, in every game until it is catch_up (4) games behind no more
    assert all("a v2" in s for s in after[:4])
    assert entries["a v1"].status == "retired" and entries["a v1"].reason == "replaced by a v2"
    assert entries["a v2"].status == "active"
    standings = lad.table.standings(retired=False)
    assert {s.bot for s in standings} == {"a v2", "b v1", "c v1"}
    assert any(s.bot == "a v1" and s.retired and s.games > 0 for s in lad.table.standings())


@pytest.mark.slow
async def test_stopped_and_started_again_it_loses_nothing_and_plays_nothing_twice(tmp_path: Path) -> None:
    out = tmp_path / "ladder"
    async with serve(good_app("a")) as a, serve(good_app("b")) as b, serve(good_app("c")) as c:
        wanted = [team("a", 1, a), team("b", 1, b), team("c", 1, c)]
        for stop_after, abandon in ((9, True), (21, True), (40, False)):
            lad = Ladder(league(), out, wanted=wanted, log=lambda m: None)
            task = asyncio.create_task(lad.run())
            # awaited in this very iteration: the loop's current lad and stop_after
            await until(lad, lambda: applied(lad) >= stop_after)  # noqa: B023
            lad.stop(abandon=abandon)  # abandoned games in flight: planned, not recorded, played next time
            with pytest.raises(Exception, match="stopped"):
                await task
            with Store(out / TOURNAMENT_DB) as store:
                planned = len(store.plan())
            assert planned >= len(recorded(out))
            # the table it kept is every recorded game in plan order, from scratch
            live = {b: (round(r.mu, 6), round(r.sigma, 6)) for b, r in lad.table.ratings.items()}
            assert live == from_scratch(out, lad)
    games = recorded(out)
    assert [i for i, _ in games] == list(range(len(games))) and len(games) >= 40
    # every table's deal was played in all its rotations, across the restarts
    with Store(out / TOURNAMENT_DB) as store:
        per_deal = Counter(o.deal for o in store.outcomes())
        plan = {g.index: list(g.seats) for g in store.plan()}
    assert all(n <= 2 for n in per_deal.values())
    assert all(plan[i] == seats for i, seats in games)  # played as planned


async def test_an_unreachable_new_version_leaves_the_previous_one_in_play(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{s.getsockname()[1]}"
    out = tmp_path / "ladder"
    async with serve(good_app("a")) as a, serve(good_app("b")) as b:
        lad = Ladder(league(), out, wanted=[team("a", 1, a), team("b", 1, b)], log=lambda m: None)
        task = asyncio.create_task(lad.run())
        await lad.started.wait()
        await until(lad, lambda: applied(lad) >= 4)
        results = await lad.reconcile([team("a", 2, nowhere), team("b", 1, b)])
        assert results[0].outcome == "unreachable" and results[0].reason
        mark = lad.plan.next_index
        await until(lad, lambda: applied(lad) >= mark + 6)
        lad.stop(abandon=True)
        with pytest.raises(Exception, match="stopped"):
            await task
    assert any("a v1" in seats for i, seats in recorded(out) if i >= mark)
    entries = {e.name: e for e in ladder_entries(out)}
    assert entries["a v1"].status == "active" and entries["a v2"].status == "unreachable"


async def test_a_team_no_longer_wanted_is_withdrawn_and_plays_no_new_table(tmp_path: Path) -> None:
    out = tmp_path / "ladder"
    async with serve(good_app("a")) as a, serve(good_app("b")) as b, serve(good_app("c")) as c:
        lad = Ladder(
            league(), out, wanted=[team("a", 1, a), team("b", 1, b), team("c", 1, c)], log=lambda m: None
        )
        task = asyncio.create_task(lad.run())
        await until(lad, lambda: applied(lad) >= 6)
        await lad.reconcile([team("a", 1, a), team("b", 1, b)])  # c's address is no longer allowed, say
        mark = lad.plan.next_index
        await until(lad, lambda: applied(lad) >= mark + 6)
        lad.stop(abandon=True)
        with pytest.raises(Exception, match="stopped"):
            await task
    assert all("c v1" not in seats for i, seats in recorded(out) if i >= mark)
    entry = {e.name: e for e in ladder_entries(out)}["c v1"]
    assert entry.status == "retired" and "withdrew" in (entry.reason or "")


async def test_a_bot_that_stops_answering_is_dropped_and_the_ladder_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "ladder"
    async with (
        serve(good_app("a")) as a,
        serve(good_app("b")) as b,
        serve(zoo_app("dies", after=2, name="dies")) as dies,
    ):
        lad = Ladder(
            league(),
            out,
            wanted=[team("a", 1, a), team("b", 1, b), team("dies", 1, dies)],
            log=lambda m: None,
        )
        task = asyncio.create_task(lad.run())
        await until(
            lad, lambda: lad.entries.get("dies v1") is not None and lad.entries["dies v1"].status == "dropped"
        )
        mark = lad.plan.next_index
        await until(lad, lambda: applied(lad) >= mark + 6)
        lad.stop(abandon=True)
        with pytest.raises(Exception, match="stopped"):
            await task
    assert all("dies v1" not in seats for i, seats in recorded(out) if i >= mark)
    assert "stopped answering" in (ladder_entries(out)[2].reason or "")


async def test_a_ladder_refuses_a_folder_of_another_league(tmp_path: Path) -> None:
    out = tmp_path / "ladder"
    async with serve(good_app("a")) as a, serve(good_app("b")) as b:
        lad = Ladder(league(), out, wanted=[team("a", 1, a), team("b", 1, b)], log=lambda m: None)
        task = asyncio.create_task(lad.run())
        await until(lad, lambda: applied(lad) >= 2)
        lad.stop(abandon=True)
        with pytest.raises(Exception, match="stopped"):
            await task
        other = league()  # its timeouts and seats may follow a league edit (issue 34), not its ratings
        other.ratings = msgspec.structs.replace(other.ratings, mu=30.0)
        with pytest.raises(LeagueError, match="another league"):
            await Ladder(other, out, wanted=[], log=lambda m: None).run()


# ------------------------------------------------- it never stalls silently (issue 25)


def wide(fill: str = "greedy") -> League:
    return League(
        tournament=TournamentTable(name="ladder", seed=11, table_size=4, concurrency=4),
        timeouts=Timeouts(move_ms=2000),
        ladder=LadderTable(catch_up=4, fill=fill),
    )


async def test_a_dropped_new_version_puts_the_previous_one_back_in_play_and_the_ladder_goes_on(
    tmp_path: Path,
) -> None:
    """Two teams at tables of 2: a's new version stops answering and is
    dropped. On the old code a's previous version stayed retired and b sat
    alone: the ladder played nothing for ever."""
    out = tmp_path / "ladder"
    async with (
        serve(good_app("a")) as a,
        serve(good_app("b")) as b,
        serve(zoo_app("dies", after=2, name="dies")) as dies,
    ):
        lad = Ladder(league(), out, wanted=[team("a", 1, a), team("b", 1, b)], log=lambda m: None)
        task = asyncio.create_task(lad.run())
        await until(lad, lambda: applied(lad) >= 4)
        results = await lad.reconcile([team("a", 2, dies), team("b", 1, b)])
        assert results[0].outcome == "entered" and results[0].replaced == "a v1"
        await until(lad, lambda: lad.entries["a v2"].status == "dropped")
        await until(lad, lambda: lad.entries["a v1"].status == "active")
        mark = lad.plan.next_index
        await until(lad, lambda: applied(lad) >= mark + 6)  # it plays on
        # the service reconciles again with the team's newest (dropped) version: a v1 stays in play
        await lad.reconcile([team("a", 2, dies), team("b", 1, b)])
        assert lad.entries["a v1"].status == "active" and lad.waiting is None
        lad.stop(abandon=True)
        with pytest.raises(Exception, match="stopped"):
            await task
    entries = {e.name: e for e in ladder_entries(out)}
    assert entries["a v2"].status == "dropped" and "stopped answering" in (entries["a v2"].reason or "")
    assert entries["a v1"].status == "active"
    assert entries["a v1"].reason is not None and entries["a v1"].reason.startswith(
        "back in play: a v2 was dropped"
    )
    later = [seats for i, seats in recorded(out) if i >= mark]
    assert later and all(set(s) == {"a v1", "b v1"} for s in later)
    # started again over its folder, a v1 plays on. Every earlier entry's
    # bot is known by its new address, as the service's restart gives them
    # (known_of): b's old server is gone, and with only its stored address b
    # v1 was dropped at the start, so that what followed hung on which games
    # the stop had left unplayed (a loaded machine's timing).
    async with serve(good_app("a")) as a, serve(good_app("b")) as b:
        lad = Ladder(
            league(),
            out,
            wanted=[team("a", 2, "http://127.0.0.1:9"), team("b", 1, b)],
            known={"a v1": BotSpec(name="a v1", url=a), "b v1": BotSpec(name="b v1", url=b)},
            log=lambda m: None,
        )
        task = asyncio.create_task(lad.run())
        before = len(recorded(out))
        await until(lad, lambda: applied(lad) >= before + 4)
        assert lad.entries["a v1"].status == "active" and lad.entries["b v1"].status == "active"
        lad.stop(abandon=True)
        with pytest.raises(Exception, match="stopped"):
            await task
    again = [seats for i, seats in recorded(out)][before:]
    assert len(again) >= 4 and all(set(s) == {"a v1", "b v1"} for s in again)


async def test_too_few_players_says_why_and_what_to_do(tmp_path: Path) -> None:
    """3 teams, tables of 4, no house bot and no filling: the ladder says why
    it plays nothing; a fourth player makes it play."""
    out = tmp_path / "ladder"
    async with (
        serve(good_app("a")) as a,
        serve(good_app("b")) as b,
        serve(good_app("c")) as c,
        serve(good_app("d")) as d,
    ):
        three = [team("a", 1, a), team("b", 1, b), team("c", 1, c)]
        lad = Ladder(wide(fill="none"), out, wanted=three, log=lambda m: None)
        task = asyncio.create_task(lad.run())
        await until(lad, lambda: lad.waiting is not None)
        assert lad.waiting is not None
        assert "needs at least 4 players to play (tables of 4) and has 3 (a v1, b v1, c v1)" in lad.waiting
        assert "Add a house bot to the league file" in lad.waiting and 'fill = "greedy"' in lad.waiting
        assert not recorded(out)
        await lad.reconcile([*three, Wanted(name="house", spec=BotSpec(name="house", url=d))])
        await until(lad, lambda: len(recorded(out)) >= 4)
        assert lad.waiting is None
        lad.stop(abandon=True)
        with pytest.raises(Exception, match="stopped"):
            await task


async def test_empty_seats_are_filled_with_the_built_in_greedy_house_bot(tmp_path: Path) -> None:
    """3 teams, tables of 4, the default fill: a built-in greedy house bot
    takes the fourth seat; it retires once a fourth team comes; one team
    alone cannot play, and the ladder says so."""
    out = tmp_path / "ladder"
    async with (
        serve(good_app("a")) as a,
        serve(good_app("b")) as b,
        serve(good_app("c")) as c,
        serve(good_app("d")) as d,
    ):
        three = [team("a", 1, a), team("b", 1, b), team("c", 1, c)]
        lad = Ladder(wide(), out, wanted=three, log=lambda m: None)
        task = asyncio.create_task(lad.run())
        await until(lad, lambda: len(recorded(out)) >= 8)
        assert all(set(s) == {"a v1", "b v1", "c v1", "house-greedy-1"} for _, s in recorded(out))
        filler = lad.entries["house-greedy-1"]
        assert filler.team is None and filler.status == "active"
        await lad.reconcile([*three, team("d", 1, d)])
        await until(lad, lambda: lad.entries["house-greedy-1"].status == "retired")
        mark = lad.plan.next_index
        await until(lad, lambda: applied(lad) >= mark + 4)
        assert all("house-greedy-1" not in s for i, s in recorded(out) if i >= mark)
        # every team but one gone: one player cannot play, even with fillers
        await lad.reconcile([team("a", 1, a)])
        await until(lad, lambda: lad.waiting is not None)
        assert (
            lad.waiting is not None
            and "needs at least 2 players" in lad.waiting
            and "has 1 (a v1)" in lad.waiting
        )
        lad.stop(abandon=True)
        with pytest.raises(Exception, match="stopped"):
            await task
    assert {e.name: e.status for e in ladder_entries(out)}["house-greedy-1"] == "retired"
