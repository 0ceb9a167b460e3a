"""The service database's one list of schema steps (issue 33, item 2): a
database of release 0.2.0 (data/service-0.2.0.sql, made by data/make_020.py
with that release's code) opens with today's store, every table then as a
fresh database's and every row still there; a database stopped after any
step, or holding any part of the steps as the old two mechanisms left it,
ends the same."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from referee.service.store import SCHEMA_VERSION, STEPS, ServiceDB
from referee.service.store.practice import get_game
from referee.service.store.schema import LEGACY_LAST, Column, apply_step

DATA = Path(__file__).parent / "data"
TOKENS = json.loads((DATA / "service-0.2.0.json").read_text())


def layout(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table and index of the database, with its columns as ``PRAGMA table_info`` gives them."""
    with sqlite3.connect(path) as db:
        names = [
            str(r[0])
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'index') ORDER BY name"
            )
        ]
        out = {n: [tuple(c) for c in db.execute(f'PRAGMA table_info("{n}")')] for n in names}
    db.close()
    return out


def unordered(found: dict[str, list[tuple[object, ...]]]) -> dict[str, set[tuple[object, ...]]]:
    """`found` without the columns' order."""
    return {name: {c[1:] for c in cols} for name, cols in found.items()}


def user_version(path: Path) -> int:
    with sqlite3.connect(path) as db:
        found = int(db.execute("PRAGMA user_version").fetchone()[0])
    db.close()
    return found


@pytest.fixture
def fresh(tmp_path: Path) -> dict[str, list[tuple[object, ...]]]:
    ServiceDB(tmp_path / "fresh" / "service.sqlite").close()
    return layout(tmp_path / "fresh" / "service.sqlite")


def release_020(tmp_path: Path) -> Path:
    """The 0.2.0 database, its folders moved to `tmp_path`."""
    path = tmp_path / "service.sqlite"
    dump = (DATA / "service-0.2.0.sql").read_text().replace(TOKENS["made_at"], str(tmp_path))
    with sqlite3.connect(path) as db:
        db.executescript(dump)
    db.close()
    return path


def test_a_020_database_opens_as_a_fresh_one_with_its_rows(
    tmp_path: Path, fresh: dict[str, list[tuple[object, ...]]]
) -> None:
    path = release_020(tmp_path)
    assert user_version(path) == LEGACY_LAST  # what 0.2.0 wrote
    db = ServiceDB(path)
    try:
        assert db.version() == SCHEMA_VERSION
        comp = db.competition_named("class of 0.2.0")
        assert comp is not None and comp.phase == "open" and comp.ladder_concurrency == 2
        assert db.deadlines(comp.id) == (1900000000.0, None)
        assert [(v.version, v.who) for v in db.league_versions(comp.id)] == [
            (2, "admin (API)"),
            (1, "at creation"),
        ]
        ada, bob = db.teams(comp.id)
        assert (
            (ada.name, bob.name) == ("ada", "bob")
            and bob.withdrawn_at is not None
            and ada.withdrawn_at is None
        )
        assert db.team_by_token(TOKENS["ada"]) == ada
        assert db.is_admin(TOKENS["admin"])
        session = db.session(TOKENS["ada_session"])
        assert session is not None and session.team_id == ada.id
        playing = db.playing_submission(ada.id)
        assert playing is not None and (playing.note, playing.secret, playing.report) == (
            "v1",
            "s3",
            '{"ok": true}',
        )
        assert [s.status for s in db.submissions(bob.id)] == ["queued"]
        (run,) = db.runs(comp.id)
        assert (run.status, run.kind, run.total_games, run.league_version) == ("finished", "run", 3, 2)
        assert run.out_dir.startswith(str(tmp_path))
        game = get_game(db, 1)
        assert game is not None and game.status == "finished" and [r.places for r in game.results] == [[1]]
        assert [s.name for s in game.seats] == ["ada"]
    finally:
        db.close()
    assert layout(path) == fresh
    ServiceDB(path).close()  # opened again: nothing to do
    assert user_version(path) == SCHEMA_VERSION and layout(path) == fresh


def steps_only(path: Path, count: int, version: int) -> None:
    """A database made by the first `count` steps alone, at ``user_version`` `version`."""

    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path, isolation_level=None) as db:
        for step in STEPS[:count]:
            apply_step(db, step)
        db.execute(f"PRAGMA user_version = {version}")
    db.close()


@pytest.mark.parametrize("count", range(len(STEPS) + 1))
def test_a_database_stopped_after_any_step_goes_on_to_the_last(
    tmp_path: Path, fresh: dict[str, list[tuple[object, ...]]], count: int
) -> None:
    """Numbered by this list (a crash between two steps), or unnumbered as the
    old base left it (user_version 0): the same schema in the end."""
    for version in {count, 0}:
        path = tmp_path / f"v{version}" / "service.sqlite"
        steps_only(path, count, version)
        ServiceDB(path).close()
        assert user_version(path) == SCHEMA_VERSION
        assert layout(path) == fresh, (count, version)


def test_an_old_database_missing_a_middle_step_gets_it(
    tmp_path: Path, fresh: dict[str, list[tuple[object, ...]]]
) -> None:
    """The old base made tables and columns as they came, unnumbered: a
    database may hold a later step's table and lack an earlier one's column."""
    path = tmp_path / "service.sqlite"
    steps_only(path, len(STEPS), LEGACY_LAST)
    column = next(
        c for step in STEPS for c in step.changes if isinstance(c, Column) and c.table == "runs"
    )  # step 2
    with sqlite3.connect(path) as db:
        db.execute(f"ALTER TABLE {column.table} DROP COLUMN {column.name}")
    db.close()
    assert unordered(layout(path)) != unordered(fresh)
    ServiceDB(path).close()
    # the column comes back last in its table (SQLite adds columns at the end)
    assert unordered(layout(path)) == unordered(fresh) and user_version(path) == SCHEMA_VERSION


def test_the_steps_are_named_in_order_and_each_adds_something() -> None:
    assert [int(s.name.split(":")[0]) for s in STEPS] == list(range(1, SCHEMA_VERSION + 1))
    assert all(s.changes for s in STEPS)
    made = [(type(c).__name__, getattr(c, "table", ""), c.name) for s in STEPS for c in s.changes]
    assert len(made) == len(set(made))  # nothing made twice
