"""A run folder's ``tournament.sqlite`` has one reader and writer, the store
(issue 33): its read functions give what the pages, the API and a bot's
diagnostics show, a folder with no database reads as empty (and none is
made), and a ladder folder made before entries had a team id opens as it did."""

from __future__ import annotations

import ast
import sqlite3
import threading
from pathlib import Path

import msgspec

from protocol.messages import Fault
from referee.bots.factory import BotSpec
from referee.diagnostics import diagnose
from referee.record import LatencyStats, MatchResult
from referee.tournament.ladder import ladder_entries, needed_entries, set_team_ids
from referee.tournament.results import (
    count_adjudicated,
    count_games,
    deal_progress,
    game_seats,
    games_list,
    replay_path,
)
from referee.tournament.schedule import GameSpec
from referee.tournament.store import SCHEMA_VERSION, TOURNAMENT_DB, Changes, Entry, Store, open_ladder_store

ROOT = Path(__file__).resolve().parents[2]


def _result(seats: list[str], faults: list[list[Fault]], *, adjudicated: bool = False) -> MatchResult:
    n = len(seats)
    return MatchResult(
        game_id=f"g-{'-'.join(seats)}",
        seed=7,
        names=seats,
        places=list(range(1, n + 1)),
        adjudicated=adjudicated,
        disqualified=[],
        points=[0] * n,
        turns=30,
        faults=faults,
        strikes=[len(f) for f in faults],
        latency=[LatencyStats() for _ in seats],
        latencies_ms=[[1.5, 2.5] for _ in seats],
    )


def _record(
    store: Store, index: int, deal: int, seats: list[str], faults: list[list[Fault]], **kw: bool
) -> None:
    result = _result(seats, faults, **kw)
    store.record_game(
        index=index,
        round_=0,
        meeting=0,
        rotation=index % 2,
        deal_seed=deal,
        seats=seats,
        game_id=result.game_id,
        places=result.places,
        adjudicated=result.adjudicated,
        disqualified=result.disqualified,
        turns=result.turns,
        result=result,
        faults=[
            (s, seats[s], f.kind, f.turn, f.detail, f.overrun_ms) for s, fs in enumerate(faults) for f in fs
        ],
        replay=None if index == 2 else f"replays/{index}.jsonl",
    )


def _played(out: Path) -> None:
    """Three games: a deal in its two rotations (a's timeout in the second), then b against c, adjudicated."""
    out.mkdir()
    with Store(out / TOURNAMENT_DB) as store:
        store.set_meta("league", '{"tournament": {"duplicate": true}}')
        _record(store, 0, 11, ["a", "b"], [[], []])
        late = Fault(kind="timeout", turn=4, detail="late", overrun_ms=12.0)
        _record(store, 1, 11, ["b", "a"], [[], [late]])
        _record(store, 2, 12, ["b", "c"], [[], []], adjudicated=True)


def test_the_store_reads_what_the_pages_and_the_diagnostics_show(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _played(out)
    assert count_games(out) == 3 and count_adjudicated(out) == 1
    rows = games_list(out)
    assert [(g.index, g.seats, g.faults, g.has_replay) for g in rows] == [
        (0, ["a", "b"], 0, True),
        (1, ["b", "a"], 1, True),
        (2, ["b", "c"], 0, False),
    ]
    assert [g.index for g in games_list(out, last=2)] == [1, 2]
    assert [g.faults for g in games_list(out, last=2)] == [1, 0]  # the faults of the latest games only
    assert [g.index for g in games_list(out, bot="a")] == [0, 1]
    assert game_seats(out, 1) == ["b", "a"] and game_seats(out, 9) is None
    assert replay_path(out, 1) == out / "replays/1.jsonl"
    assert replay_path(out, 2) is None and replay_path(out, 9) is None  # not kept; not played
    assert (
        deal_progress(out, 0) == (2, 2) and deal_progress(out, 2) == (1, 2) and deal_progress(out, 9) is None
    )
    with Store(out / TOURNAMENT_DB) as store:
        assert [(f.game, f.seat, f.kind, f.turn, f.detail) for f in store.faults_of("a")] == [
            (1, 1, "timeout", 4, "late")
        ]
        assert store.faults_of("b") == []
        mine = store.games_of("a")
    assert [(g.index, g.seats.index("a"), g.replay) for g in mine] == [
        (0, 0, "replays/0.jsonl"),
        (1, 1, "replays/1.jsonl"),
    ]
    assert mine[1].result.faults[1][0].kind == "timeout"
    diag = diagnose(out, "a")
    assert [(g.game, g.seat, g.faults) for g in diag.games] == [(0, 0, 0), (1, 1, 1)]
    assert diag.fault_count == 1 and [(f.game, f.turn, f.kind) for f in diag.faults] == [(1, 4, "timeout")]
    assert diag.latency.count == 4


def test_a_folder_without_a_database_reads_as_empty_and_none_is_made(tmp_path: Path) -> None:
    out = tmp_path / "not-started"
    out.mkdir()
    assert count_games(out) == 0 and count_adjudicated(out) == 0 and games_list(out) == []
    assert game_seats(out, 0) is None and replay_path(out, 0) is None and deal_progress(out, 0) is None
    assert ladder_entries(out) == [] and needed_entries(out) == [] and set_team_ids(out, lambda s: 1) == 0
    assert diagnose(out, "a").games == []
    assert not (out / TOURNAMENT_DB).exists()


def _entry(name: str, status: str = "active", team_id: int | None = None) -> Entry:
    return Entry(
        name=name,
        team=name.split()[0],
        submission=int(name[-1]),
        spec=BotSpec(name=name, url="http://127.0.0.1:1", secret="s3cret"),
        mu0=25.0,
        sigma0=8.3,
        games0=0,
        joined_at=float(name[-1]),
        first_index=0,
        status=status,  # type: ignore[arg-type]
        team_id=team_id,
    )


def test_a_ladder_plan_and_its_entries_come_back_without_their_secrets(tmp_path: Path) -> None:
    out = tmp_path / "ladder"
    out.mkdir()
    block = [
        GameSpec(index=0, round=0, meeting=0, rotation=0, deal_seed=5, seats=("a v1", "b v2")),
        GameSpec(index=1, round=0, meeting=0, rotation=1, deal_seed=5, seats=("b v2", "a v1")),
    ]
    with open_ladder_store(out / TOURNAMENT_DB) as store:
        store.put_entry(_entry("a v1", team_id=3))
        store.put_entry(_entry("b v2", "retired"))
        store.put_plan(block)
        assert store.plan() == block
        _record(store, 0, 5, ["a v1", "b v2"], [[], []])
    entries = ladder_entries(out)
    assert [(e.name, e.status, e.team_id, e.spec.secret) for e in entries] == [
        ("a v1", "active", 3, None),
        ("b v2", "retired", None, None),
    ]
    # b v2 retired, but owes game 1 (planned, not recorded): it is still needed
    assert [e.name for e in needed_entries(out)] == ["a v1", "b v2"]


#: ``ladder_entries`` as the ladder made it before entries had a team id (issue 32).
OLD_ENTRIES = """
CREATE TABLE ladder_entries (
    name TEXT PRIMARY KEY, team TEXT, submission INTEGER, spec TEXT NOT NULL, mu0 REAL NOT NULL,
    sigma0 REAL NOT NULL, games0 INTEGER NOT NULL, joined_at REAL NOT NULL, first_index INTEGER NOT NULL,
    status TEXT NOT NULL, reason TEXT, ended_at REAL
);
CREATE TABLE ladder_plan (
    idx INTEGER PRIMARY KEY, round INTEGER NOT NULL, meeting INTEGER NOT NULL, rotation INTEGER NOT NULL,
    deal_seed INTEGER NOT NULL, seats TEXT NOT NULL
);
"""


def _old_ladder(out: Path) -> Path:
    """A ladder folder of the previous code: its games' tables, and entries with no team id."""
    out.mkdir()
    path = out / TOURNAMENT_DB
    Store(path).close()  # the games' tables have not changed
    spec = msgspec.json.encode(BotSpec(name="a v1", url="http://127.0.0.1:1")).decode()
    with sqlite3.connect(path) as db:
        db.executescript(OLD_ENTRIES)
        db.executemany(
            "INSERT INTO ladder_entries VALUES (?, ?, ?, ?, 25.0, 8.3, 0, ?, 0, 'active', NULL, NULL)",
            [("a v1", "a", 1, spec, 1.0), ("house-x", None, None, spec.replace("a v1", "house-x"), 2.0)],
        )
        db.execute('INSERT INTO ladder_plan VALUES (0, 0, 0, 0, 9, \'["a v1", "house-x"]\')')
    db.close()
    return path


def _columns(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        columns = [str(r[1]) for r in db.execute("PRAGMA table_info(ladder_entries)")]
    db.close()
    return columns


def test_a_ladder_folder_of_the_previous_code_opens_and_gets_its_team_ids(tmp_path: Path) -> None:
    out = tmp_path / "ladder"
    path = _old_ladder(out)
    # read-only, as the storage check reads a ladder playing meanwhile: the file is left as it was
    assert [(e.name, e.team_id) for e in needed_entries(out)] == [("a v1", None), ("house-x", None)]
    assert "team_id" not in _columns(path)
    # the service gives each team entry its submission's team (a house bot has none)
    asked: list[int] = []

    def team_of(submission: int) -> int:
        asked.append(submission)
        return 40 + submission

    assert set_team_ids(out, team_of) == 1
    assert asked == [1] and _columns(path)[-1] == "team_id"
    assert [(e.name, e.team, e.team_id) for e in ladder_entries(out)] == [
        ("a v1", "a", 41),
        ("house-x", None, None),
    ]
    assert set_team_ids(out, lambda sid: 99) == 0  # once only
    with open_ladder_store(path) as store:  # the ladder started again over it
        assert [g.seats for g in store.plan()] == [("a v1", "house-x")]


def _modules() -> dict[str, ast.Module]:
    return {
        str(p.relative_to(ROOT)): ast.parse(p.read_text()) for p in sorted((ROOT / "referee").rglob("*.py"))
    }


def test_only_the_store_names_the_file_or_runs_sql_on_it() -> None:
    """One name for the file (``TOURNAMENT_DB``); no other module of the
    competitions imports sqlite3 (the old code: the ladder, and the file's
    name spelled in six modules, a web handler included)."""
    named = []
    for path, tree in _modules().items():
        docstrings = {
            id(n.value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
        }
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and n.value == "tournament.sqlite" and id(n) not in docstrings:
                named.append(path)
    assert named == ["referee/tournament/store.py"]
    importers = sorted(
        path
        for path, tree in _modules().items()
        if path.startswith(("referee/tournament/", "referee/diagnostics.py"))
        for n in ast.walk(tree)
        if (isinstance(n, ast.Import) and any(a.name == "sqlite3" for a in n.names))
        or (isinstance(n, ast.ImportFrom) and n.module == "sqlite3")
    )
    assert importers == ["referee/tournament/store.py"]


def test_many_connections_opening_a_new_store_at_once_all_open(tmp_path: Path) -> None:
    """Connections that open the same new tournament.sqlite at the same moment
    (the ladder's thread, a page, the diagnostics) all open: SQLite answers
    "database is locked" at once, without its busy timeout, to one asking for
    WAL while another is making the file WAL (seen on a loaded CI machine)."""
    from referee.tournament.store import Store

    failed: list[BaseException] = []

    def open_it(path: Path, start: threading.Barrier) -> None:
        start.wait()
        try:
            Store(path).close()
        except BaseException as e:
            failed.append(e)

    for round_ in range(60):
        path = tmp_path / f"round-{round_}.sqlite"
        start = threading.Barrier(8)
        threads = [threading.Thread(target=open_it, args=(path, start)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failed == []


def _plan(store: Store, sql: str, *args: object) -> str:
    return " ".join(str(r[-1]) for r in store.db.execute(f"EXPLAIN QUERY PLAN {sql}", args))


def test_a_bots_games_and_the_adjudicated_count_are_read_through_indexes(tmp_path: Path) -> None:
    """Issue 37: at a million games a bot page, a team's diagnostics and every
    leaderboard's count of adjudicated games scanned the games; they read
    indexes, and a store written before the bots' index (no ``game_seats``)
    has it filled from its games when opened, once."""
    out = tmp_path / "run"
    _played(out)
    db = sqlite3.connect(out / TOURNAMENT_DB)  # the store as the previous code left it
    db.execute("DROP TABLE game_seats")
    db.execute("DROP INDEX games_adjudicated")
    db.execute("PRAGMA user_version = 0")  # the previous code set none
    db.commit()
    db.close()
    assert [g.index for g in games_list(out, bot="a")] == [0, 1]  # filled when opened
    assert [g.index for g in games_list(out, bot="c")] == [2]
    assert [g.faults for g in games_list(out, bot="a")] == [0, 1]
    with Store(out / TOURNAMENT_DB) as store:
        _record(store, 3, 13, ["c", "a"], [[], []])  # a game recorded after: its own rows
        assert [g.index for g in store.games_of("c")] == [2, 3]
        mine = "SELECT game_idx FROM game_seats WHERE bot = ?"
        assert "SCAN games" not in _plan(store, f"SELECT idx FROM games WHERE idx IN ({mine})", "a")
        assert "games_adjudicated" in _plan(store, "SELECT COUNT(*) FROM games WHERE adjudicated != 0")
    assert count_adjudicated(out) == 1


def test_a_store_at_its_schema_version_runs_no_schema_script_an_older_one_is_brought_up(
    tmp_path: Path,
) -> None:
    """Issue 37: every page view opens a store; its schema script ran at each
    open. It runs when the file's ``user_version`` is older than the code's
    (a new file: 0) and sets it; at the version, nothing is made again."""
    out = tmp_path / "run"
    _played(out)
    path = out / TOURNAMENT_DB
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.execute("DROP INDEX faults_bot")  # a change the script would undo, were it run
    db.commit()
    Store(path).close()
    indexes = "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'faults_bot'"
    assert db.execute(indexes).fetchone() is None
    db.execute("PRAGMA user_version = 1")  # the file of an older referee
    db.commit()
    with Store(path) as store:
        assert [g.index for g in store.game_rows(page=(1, 5))] == [1, 2]
    assert db.execute(indexes).fetchone() is not None
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()


def test_a_runs_change_counter_moves_with_each_commit_of_another_connection_only(tmp_path: Path) -> None:
    """Issue 37: the live poller counted the games four times a second; it
    reads the database's ``data_version`` on one connection kept open."""
    out = tmp_path / "run"
    changes = Changes(out)
    assert changes.version() is None  # no database yet
    out.mkdir()
    with Store(out / TOURNAMENT_DB) as store:
        v0 = changes.version()
        assert v0 is not None and changes.version() == v0  # nothing committed: the same
        _record(store, 0, 1, ["a", "b"], [[], []])
        v1 = changes.version()
        assert v1 != v0 and changes.version() == v1
        store.set_meta("k", "v")  # any commit (an entry, a checkpoint)
        assert changes.version() != v1
    changes.close()
