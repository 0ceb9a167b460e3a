"""A run's ratings checkpoint (issue 37): a service started again replays
only the games after the run's last checkpoint, to the same standings, bit
for bit, as a replay of every game; the rating history it keeps is bounded.

The run is recorded through the store as the runner and the ladder write
it: four-seat games in duplicate deals (four rotations), places with ties,
faults, latencies and penalty points, and a ladder's entries coming in,
retiring, dropped and back in play between the checkpoints."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest

from protocol.messages import Rules
from referee.bots.factory import BotSpec
from referee.tournament.league import League
from referee.tournament.results import TRAIL_POINTS, RunRatings, Snapshot, Trail
from referee.tournament.store import TOURNAMENT_DB, Entry, Store, open_ladder_store

BOTS = [f"bot{i}" for i in range(9)]


def _record(store: Store, index: int, rng: random.Random, seats: list[str]) -> None:
    places = [rng.randint(1, 4) for _ in seats]  # ties happen (draws)
    faults = [["timeout"] if rng.random() < 0.1 else [] for _ in seats]
    result = {
        "places": places,
        "latencies_ms": [[round(rng.lognormvariate(1, 1), 3) for _ in range(5)] for _ in seats],
        "faults": [[{"kind": k} for k in f] for f in faults],
        "points": [rng.randint(0, 30) for _ in seats],
    }
    deal = index // 4
    store.record_game(
        index=index,
        round_=deal // 10,
        meeting=deal,
        rotation=index % 4,
        deal_seed=1000 + deal,
        seats=seats[index % 4 :] + seats[: index % 4],
        game_id=f"g{index}",
        places=places,
        adjudicated=False,
        disqualified=[],
        turns=30,
        result=result,
        faults=[],
        replay=None,
    )


def _entry(name: str, status: str = "active") -> Entry:
    return Entry(
        name=name,
        team=name,
        submission=None,
        spec=BotSpec(name=name, url="http://127.0.0.1:1"),
        mu0=25.0 if name != "bot8" else 20.0,
        sigma0=8.333,
        games0=0,
        joined_at=float(BOTS.index(name)),
        first_index=0,
        status=status,  # type: ignore[arg-type]
    )


def _same(a: Snapshot, b: Snapshot) -> None:
    assert a.games == b.games
    assert msgspec.json.encode(a.standings) == msgspec.json.encode(b.standings)
    assert msgspec.json.encode(a.retired) == msgspec.json.encode(b.retired)
    assert a.history == b.history


@pytest.mark.parametrize("ladder", [False, True], ids=["tournament", "ladder"])
def test_started_from_its_checkpoint_a_run_has_the_standings_of_a_full_replay(
    tmp_path: Path, ladder: bool
) -> None:
    league = League(
        rules=Rules(play_for_places=True, scoring=not ladder),
        bots=[] if ladder else [BotSpec(name=b, url="http://127.0.0.1:1") for b in BOTS],
    )
    rng = random.Random(7)
    store = open_ladder_store(tmp_path / TOURNAMENT_DB) if ladder else Store(tmp_path / TOURNAMENT_DB)
    live = RunRatings(league, ladder=ladder, checkpoint_games=10)  # the service that watched it all
    index = 0
    with store:
        for stage in range(8):
            if ladder:  # bots come in, retire, are dropped, come back, between checkpoints
                for name in BOTS[: 5 + stage // 2]:
                    status = "active"
                    if name == "bot1" and stage >= 3:
                        status = "retired"
                    if name == "bot2" and stage in (4, 5):
                        status = "dropped"
                    store.put_entry(_entry(name, status))
            in_play = BOTS[: 5 + stage // 2] if ladder else BOTS
            for _ in range(6):  # a deal in 4 rotations; stages end in the middle of a deal
                seats = rng.sample([b for b in in_play if not (ladder and b == "bot1" and stage >= 3)], 4)
                for _ in range(4 if stage % 2 else 3):
                    _record(store, index, rng, seats)
                    index += 1
            full = RunRatings(league, ladder=ladder, checkpoint_games=0).update(tmp_path)
            _same(live.update(tmp_path), full)
            restarted = RunRatings(league, ladder=ladder, checkpoint_games=10)
            _same(restarted.update(tmp_path), full)
            # it replayed only the games after the checkpoint (taken every 10 games at least)
            assert index - 10 < restarted.started_from <= index
    assert live.started_from == 0 and index > 100


def test_a_checkpoint_of_other_ratings_is_not_used(tmp_path: Path) -> None:
    league = League(bots=[BotSpec(name=b, url="http://127.0.0.1:1") for b in BOTS[:4]])
    rng = random.Random(3)
    with Store(tmp_path / TOURNAMENT_DB) as store:
        for i in range(12):
            _record(store, i, rng, BOTS[:4])
    RunRatings(league, checkpoint_games=5).update(tmp_path)
    other = msgspec.structs.replace(league, ratings=msgspec.structs.replace(league.ratings, beta=3.0))
    again = RunRatings(other, checkpoint_games=5)
    snap = again.update(tmp_path)
    assert again.started_from == 0
    _same(snap, RunRatings(other, checkpoint_games=0).update(tmp_path))


def test_a_bots_history_stays_bounded_evenly_spread_with_its_latest_game() -> None:
    trail = Trail()
    for g in range(1, 10_001):
        trail.add(g * 3, 25.0 + g, 8.0)
        assert len(trail.points) <= 2 * TRAIL_POINTS
        assert trail.points[-1][:2] == (g * 3, g)  # the latest game is always there
    played = [n for _, n, _, _ in trail.points]
    assert len(played) >= TRAIL_POINTS
    steps = {b - a for a, b in zip(played, played[1:-1])}
    assert steps == {trail.stride}  # evenly spread


def test_a_sealed_run_starts_from_its_last_game_with_the_standings_of_a_full_replay(tmp_path: Path) -> None:
    """A finished run's table is checkpointed at its last game (``seal``), off the
    checkpoints' stride: a start replays no game, to the same standings."""
    league = League(bots=[BotSpec(name=b, url="http://127.0.0.1:1") for b in BOTS[:4]])
    rng = random.Random(5)
    with Store(tmp_path / TOURNAMENT_DB) as store:
        for i in range(27):  # 2 checkpoints of 10, and 7 games after the last
            _record(store, i, rng, BOTS[:4])
    unsealed = RunRatings(league, checkpoint_games=10)
    unsealed.update(tmp_path)
    again = RunRatings(league, checkpoint_games=10)
    again.update(tmp_path)
    assert again.started_from == 20  # the stride's last checkpoint: 7 games replayed
    RunRatings(league, checkpoint_games=10).update(tmp_path, seal=True)
    sealed = RunRatings(league, checkpoint_games=10)
    _same(sealed.update(tmp_path), RunRatings(league, checkpoint_games=0).update(tmp_path))
    assert sealed.started_from == 27
