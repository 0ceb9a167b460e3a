"""Schema versions (issue 25, item 9): a database made by the previous
release (commit 90465a8, fixtures/prev-90465a8, made by
fixtures/make_prev.py) opens, is upgraded in numbered steps to this code's
``user_version`` and serves its pages; a database from a newer referee is
refused with the reason."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from referee.cli.serve import serve
from referee.cli.start import start
from referee.service.store import SCHEMA_VERSION, STEPS, SchemaError, ServiceDB
from referee.service.store.maintenance import replace_in_text

FIXTURE = Path(__file__).parent / "fixtures" / "prev-90465a8"
#: Where fixtures/make_prev.py made it (the runs' folders are recorded there).
MADE_AT = "/tmp/referee-prev-fixture"
#: Team ada's token in it (printed by make_prev.py; only its hash is stored).
ADA_TOKEN = "dEvRw4JzPpm1IrWFrbY5NW1c84RaRaT97FfU_-GpyXc"


def previous_release(tmp_path: Path) -> Path:
    """The previous release's database and data folder, as if moved to `tmp_path`."""
    shutil.copy(FIXTURE / "service.sqlite", tmp_path / "service.sqlite")
    shutil.copytree(FIXTURE / "service-data", tmp_path / "service-data")
    replace_in_text(tmp_path / "service.sqlite", MADE_AT, str(tmp_path))  # as a restore moves it
    return tmp_path / "service.sqlite"


def columns(path: Path, table: str) -> set[str]:
    with sqlite3.connect(path) as db:
        return {str(r[1]) for r in db.execute(f"PRAGMA table_info({table})")}


async def test_the_previous_releases_database_is_upgraded_and_serves(
    tmp_path: Path, aiohttp_client: Any
) -> None:
    from referee.web import Settings, make_app

    path = previous_release(tmp_path)
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 0  # versions began after it
    raw.close()
    assert "deadlines" not in columns(path, "competitions")
    db = ServiceDB(path)
    try:
        assert db.version() == SCHEMA_VERSION == len(STEPS)
        comp = db.competition_named("prev class")
        assert comp is not None and [t.name for t in db.teams(comp.id)] == ["ada"]
        token = db.ensure_admin_token(reset=True)
    finally:
        db.close()
    assert "deadlines" in columns(path, "competitions")
    assert {"status", "image_id", "upload"} <= columns(path, "submissions")  # the base's columns, as before

    client = await aiohttp_client(make_app(path, Settings()))
    r = await client.get(f"/api/competitions/{comp.id}")
    assert r.status == 200, await r.text()
    body = await r.json()
    assert any("ada" in str(row) for row in body["standings"]), body
    page = await client.get(f"/c/{comp.id}")
    assert page.status == 200 and "ada" in await page.text()
    r = await client.get(f"/api/competitions/{comp.id}/runs")
    assert [x["status"] for x in await r.json()] == ["finished"]
    admin = {"Authorization": f"Bearer {token}"}
    assert (await client.get("/api/competitions", headers=admin)).status == 200
    # the team's token of the previous release still signs it in; its submission is there
    r = await client.get(
        f"/api/competitions/{comp.id}/teams/1/submissions", headers={"Authorization": f"Bearer {ADA_TOKEN}"}
    )
    assert r.status == 200, await r.text()
    assert [s["status"] for s in (await r.json())] == ["accepted"]
    # what step 2 added works on it: deadlines set by the admin
    r = await client.put(
        f"/api/competitions/{comp.id}/deadlines",
        json={"freeze_at": "2030-06-01T17:00:00+02:00"},
        headers=admin,
    )
    assert r.status == 200 and (await r.json())["freeze_at"] == "2030-06-01T15:00:00Z"
    # opened again: nothing left to do, the version stays
    again = ServiceDB(path)
    assert again.version() == SCHEMA_VERSION
    again.close()


def test_each_step_runs_once_in_order_from_any_version(tmp_path: Path) -> None:
    path = previous_release(tmp_path)
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version = 1")  # a database of step 1: the deadlines column is still to come
    raw.close()
    ServiceDB(path).close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    raw.close()
    assert "deadlines" in columns(path, "competitions")


def test_a_database_from_a_newer_referee_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "service.sqlite"
    ServiceDB(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        tables = raw.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    raw.close()
    with pytest.raises(SchemaError) as e:
        ServiceDB(path)
    assert f"schema version {SCHEMA_VERSION + 1}" in str(e.value) and "newer referee" in str(e.value)
    assert f"up to {SCHEMA_VERSION}" in str(e.value)
    for command, args in ((serve, ["--db", str(path), "--port", "0"]), (start, ["--db", str(path), "x"])):
        r = CliRunner().invoke(command, args)
        assert r.exit_code == 1, r.output
        assert "written by a newer referee" in r.output and "Traceback" not in r.output
    with sqlite3.connect(path) as raw:  # left as it was
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
        assert raw.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == tables
    raw.close()
