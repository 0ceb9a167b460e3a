"""``referee backup`` and ``referee restore`` (issue 25, item 9): a copy of
the service database and its data folder made while a run plays, every
database in it whole (SQLite's integrity check), restored to a working
service; a restore refuses to overwrite a database that is there (in use)
without --force, and a backup that differs from its manifest."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from referee.cli.backup import backup_command, restore_command
from referee.cli.start import start
from referee.service.backup import MANIFEST
from referee.service.store import SCHEMA_VERSION
from referee.web import Settings, make_app
from tests.support.api import auth, new_competition, new_team, submit
from tests.support.web import new_admin_token

Service = Any


def cli(command: Any, *args: str) -> Any:
    return CliRunner().invoke(command, list(args))


async def board(client: Any, cid: int) -> dict[str, Any]:
    r = await client.get(f"/api/competitions/{cid}")
    assert r.status == 200, await r.text()
    return dict(await r.json())


def ranks(data: dict[str, Any]) -> list[tuple[str, int, float]]:
    return [(s["bot"], s["games"], round(s["score"], 6)) for s in data["standings"]]


def games_in(folder: Path) -> int:
    """The games recorded in the run's folder up to the first one still in flight then (what the board counts)."""
    with sqlite3.connect(folder / "tournament.sqlite") as db:
        done = {int(r[0]) for r in db.execute("SELECT idx FROM games")}
    db.close()
    n = 0
    while n in done:
        n += 1
    return n


def integrity(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        out = [str(r[0]) for r in db.execute("PRAGMA integrity_check")]
    db.close()
    return out


@pytest.mark.slow
async def test_a_backup_made_while_a_run_plays_restores_to_a_working_service(
    service: Service,
    admin_token: str,
    bot_urls: dict[str, str],
    db_path: Path,
    tmp_path: Path,
    aiohttp_client: Any,
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token, rounds=12, house={"house": bot_urls["greedy"]})
    tid, token = await new_team(client, admin_token, cid, "ada")
    assert (await submit(client, cid, tid, token, {"url": bot_urls["random"]}))["submission"][
        "status"
    ] == "accepted"
    r = await client.post(f"/api/competitions/{cid}/runs", headers=auth(admin_token))
    assert r.status == 202, await r.text()
    run = await r.json()
    total = run["total_games"]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while (await board(client, cid))["games"] < 2:
        assert loop.time() < deadline
        await asyncio.sleep(0.02)

    during = tmp_path / "during"
    made = await asyncio.to_thread(cli, backup_command, "--db", str(db_path), str(during))
    assert made.exit_code == 0, made.output
    assert f"schema version {SCHEMA_VERSION}" in made.output
    data_then = await board(client, cid)
    assert data_then["run"]["status"] == "running", "the backup was made while the run played"

    assert during.stat().st_mode & 0o777 == 0o700  # secrets are in it
    manifest = json.loads((during / MANIFEST).read_text())
    names = {f["path"] for f in manifest["files"]}
    assert "service.sqlite" in names and f"data/competition-{cid}/run-{run['id']}/tournament.sqlite" in names
    assert not any(n.endswith(("-wal", "-shm")) for n in names)
    for f in manifest["files"]:
        assert (during / f["path"]).stat().st_size == f["size"]
        if f["path"].endswith(".sqlite"):
            assert integrity(during / f["path"]) == ["ok"], f["path"]
    copied = games_in(during / "data" / f"competition-{cid}" / f"run-{run['id']}")
    assert 2 <= copied < total

    # the original plays on to its end; a backup of it then
    deadline = loop.time() + 120
    while (final := await board(client, cid))["run"]["status"] == "running":
        assert loop.time() < deadline
        await asyncio.sleep(0.1)
    assert final["run"]["status"] == "finished" and final["games"] == total
    after = tmp_path / "after"
    assert cli(backup_command, "--db", str(db_path), str(after)).exit_code == 0

    # onto the live database: refused, and it is left as it was
    refused = cli(restore_command, str(after), "--db", str(db_path))
    assert refused.exit_code == 1 and "a database is there already" in refused.output
    assert "seems in use" in refused.output and "--force" in refused.output
    assert (await board(client, cid))["games"] == total

    # restored elsewhere: the same standings, the same pages
    moved = tmp_path / "elsewhere" / "class.sqlite"
    ok = cli(restore_command, str(after), "--db", str(moved))
    assert ok.exit_code == 0, ok.output
    twin = await aiohttp_client(make_app(moved, Settings()))
    assert ranks(await board(twin, cid)) == ranks(final)
    page = await twin.get(f"/c/{cid}")
    assert page.status == 200 and "ada" in await page.text()
    replay = await twin.get(f"/api/competitions/{cid}/runs/{run['id']}/games/0")
    assert replay.status == 200
    assert (
        await twin.post(
            "/api/competitions",
            json={"name": "x", "league": "[tournament]\nname = 'x'\n"},
            headers=auth(admin_token),
        )
    ).status == 201  # the admin token came along
    await twin.close()

    # the copy made mid-run: a working service whose run was interrupted and resumes to its end
    mid = tmp_path / "mid" / "service.sqlite"
    assert cli(restore_command, str(during), "--db", str(mid)).exit_code == 0
    again = await aiohttp_client(make_app(mid, Settings()))
    data = await board(again, cid)
    assert data["run"]["status"] == "interrupted" and data["games"] == copied
    await again.close()
    resumed = await asyncio.to_thread(cli, start, "--db", str(mid), str(cid), "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert f"run {run['id']}: finished" in resumed.output


def test_restore_checks_the_manifest_and_needs_force_to_replace(tmp_path: Path) -> None:
    from referee.service.store import ServiceDB

    db_path = tmp_path / "a" / "service.sqlite"
    new_admin_token(db_path)
    db = ServiceDB(db_path)
    comp = db.add_competition("one", "[tournament]\nname = 'one'\n")
    db.close()
    (db_path.parent / "service-data" / "notes.txt").write_text("kept")
    out = tmp_path / "b"
    assert cli(backup_command, "--db", str(db_path), str(out)).exit_code == 0
    not_empty = cli(backup_command, "--db", str(db_path), str(out))
    assert not_empty.exit_code == 1 and "not an empty folder" in not_empty.output

    target = tmp_path / "c" / "service.sqlite"
    target.parent.mkdir()
    target.write_bytes(b"")  # something there, no service on it
    r = cli(restore_command, str(out), "--db", str(target))
    assert r.exit_code == 1 and "a database is there already" in r.output and "seems in use" not in r.output
    r = cli(restore_command, str(out), "--db", str(target), "--force")
    assert r.exit_code == 0, r.output
    db = ServiceDB(target)
    assert db.competition(comp.id) is not None
    db.close()
    assert (target.parent / "service-data" / "notes.txt").read_text() == "kept"

    (out / "data" / "notes.txt").write_text("changed")
    r = cli(restore_command, str(out), "--db", str(tmp_path / "d" / "service.sqlite"))
    assert r.exit_code == 1 and "data/notes.txt differs from the manifest" in r.output
    assert not (tmp_path / "d" / "service.sqlite").exists()
    (out / MANIFEST).unlink()
    r = cli(restore_command, str(out), "--db", str(tmp_path / "d" / "service.sqlite"))
    assert r.exit_code == 1 and "not a backup made by referee backup" in r.output
