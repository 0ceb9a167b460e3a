"""A restore is untrusted input, a stored league is re-checked at every
start, and a bad database is one clear line (issue 32, items 3 and 12).

Each attack: a hostile backup folder (a link in it, a file outside it, a
database whose rows name folders outside the data folder or whose league
starts commands, with the manifest's hashes matching) is refused whole,
saying what and where, with the target left as it was and no
``*.restoring`` file; a database holding a league with a command house bot
plays none of it without ``--allow-house-commands`` (the command would
leave a file: none is there); a damaged, foreign, read-only or newer
database stops ``referee serve`` and ``referee restore`` with one line."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from referee.cli.backup import backup_command, restore_command
from referee.service.backup import MANIFEST
from referee.service.store import SCHEMA_VERSION, SERVICE_DB_NAME, ServiceDB
from referee.service.store.practice import Seat, add_game, get_game
from referee.web.app_state import ROOM
from tests.support.api import auth
from tests.support.web import league_text, new_admin_token, referee_cli

Service = Any


def cli(command: Any, *args: str) -> Any:
    return CliRunner().invoke(command, list(args))


def command_league(marker: Path) -> str:
    """A league whose house bot is a command that leaves `marker` when it runs."""
    script = f"open({str(marker)!r}, 'w').close()"
    return league_text() + (
        f'[[bots]]\nname = "evil"\ncommand = ["{sys.executable}", "-c", "{script}", "{{port}}"]\n'
    )


def a_service(root: Path) -> tuple[Path, int, int]:
    """A service database with a competition and a team, and a file in its data folder."""
    db_path = root / "service.sqlite"
    new_admin_token(db_path)
    db = ServiceDB(db_path)
    comp = db.add_competition("class", league_text())
    team, _ = db.add_team(comp.id, "ada")
    db.close()
    (root / "service-data" / "notes.txt").write_text("kept")
    return db_path, comp.id, team.id


def reseal(out: Path) -> None:
    """The manifest made to match the folder again, as an attacker who writes the backup folder can."""
    manifest = json.loads((out / MANIFEST).read_text())
    for f in manifest["files"]:
        data = (out / f["path"]).read_bytes()  # through any link, as the old restore read it
        f["size"], f["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (out / MANIFEST).write_text(json.dumps(manifest))


def edit_db(path: Path, *statements: tuple[str, tuple[object, ...]]) -> None:
    with sqlite3.connect(path) as db:
        for sql, args in statements:
            db.execute(sql, args)
    db.close()


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (links as their target's name), to compare before and after."""
    out: dict[str, bytes] = {}
    if not folder.exists():
        return out
    for root, _dirs, names in os.walk(folder):
        for name in names:
            p = Path(root) / name
            rel = p.relative_to(folder).as_posix()
            out[rel] = os.readlink(p).encode() if p.is_symlink() else p.read_bytes()
    return out


def restoring_left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.restoring*"))


def refused_cleanly(result: Any, target_root: Path, before: dict[str, bytes], *words: str) -> None:
    """The restore failed with one line (no traceback) that says `words`, and changed nothing."""
    out = result.output.strip()
    assert result.exit_code == 1, out
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    for w in words:
        assert w in out, (w, out)
    assert tree(target_root) == before, "the target changed"
    assert restoring_left(target_root) == []


# ------------------------------------------------------ hostile backup folders


def link_to_a_file(out: Path, outside: Path) -> str:
    secret = outside / "secret.txt"
    secret.write_text("TOP SECRET of the server")
    (out / "data" / "notes.txt").unlink()
    (out / "data" / "notes.txt").symlink_to(secret)
    return "data/notes.txt is a link"


def link_to_a_folder(out: Path, outside: Path) -> str:
    (outside / "etc").mkdir()
    (outside / "etc" / "shadow").write_text("root:$6$hash")
    (out / "data" / "competition-9").symlink_to(outside / "etc")
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["files"].append({"path": "data/competition-9/shadow", "size": 0, "sha256": ""})
    (out / MANIFEST).write_text(json.dumps(manifest))
    return "data/competition-9 is a link"


def manifest_names_a_file_outside(out: Path, outside: Path) -> str:
    (outside / "planted.txt").write_text("planted")
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["files"].append({"path": "data/../../outside/planted.txt", "size": 0, "sha256": ""})
    (out / MANIFEST).write_text(json.dumps(manifest))
    return "outside the backup"


@pytest.mark.parametrize("attack", [link_to_a_file, link_to_a_folder, manifest_names_a_file_outside])
def test_a_restore_refuses_links_and_files_outside_the_backup(
    tmp_path: Path, attack: Callable[[Path, Path], str]
) -> None:
    db_path, _, _ = a_service(tmp_path / "live")
    out = tmp_path / "backup"
    assert cli(backup_command, "--db", str(db_path), str(out)).exit_code == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    words = attack(out, outside)
    reseal(out)
    target_root = tmp_path / "target"
    target_root.mkdir()
    target = target_root / "service.sqlite"
    r = cli(restore_command, str(out), "--db", str(target))
    refused_cleanly(r, target_root, {}, words, str(out.resolve()))
    assert "nothing was changed" in r.output


def test_a_restore_refuses_a_database_whose_rows_name_folders_outside_the_data_folder(tmp_path: Path) -> None:
    db_path, cid, tid = a_service(tmp_path / "live")
    out = tmp_path / "backup"
    assert cli(backup_command, "--db", str(db_path), str(out)).exit_code == 0
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("the admin's")
    seats = msgspec.json.encode([Seat(kind="house", name="x", pick="house:x", house="x")]).decode()
    edit_db(
        out / SERVICE_DB_NAME,
        (
            "INSERT INTO practice_games (competition_id, team_id, seats, status, out_dir, created_at)"
            " VALUES (?, ?, ?, 'queued', ?, 0)",
            (cid, tid, seats, str(victim)),
        ),
    )
    reseal(out)  # the hashes match: only the database's content tells
    target_root = tmp_path / "target"
    target_root.mkdir()
    (target_root / "service.sqlite").write_bytes(b"")  # something there: --force replaces it
    (target_root / "service-data").mkdir()
    (target_root / "service-data" / "old.txt").write_text("the service that was there")
    before = tree(target_root)
    r = cli(restore_command, str(out), "--db", str(target_root / "service.sqlite"), "--force")
    refused_cleanly(r, target_root, before, "table practice_games, row 1: out_dir", str(victim), "outside")
    assert (victim / "precious.txt").read_text() == "the admin's"

    # the same row edited into a live database: the service does not start, and touches nothing
    edit_db(
        db_path,
        (
            "INSERT INTO practice_games (competition_id, team_id, seats, status, out_dir, created_at)"
            " VALUES (?, ?, ?, 'queued', ?, 0)",
            (cid, tid, seats, str(victim)),
        ),
    )
    line = serve_refuses(db_path)
    assert "table practice_games, row 1: out_dir" in line and str(victim) in line
    assert (victim / "precious.txt").exists()


def test_a_restore_refuses_a_league_with_a_house_command_unless_allowed(tmp_path: Path) -> None:
    db_path, cid, _ = a_service(tmp_path / "live")
    marker = tmp_path / "ran"
    edit_db(db_path, ("UPDATE competitions SET league_toml = ? WHERE id = ?", (command_league(marker), cid)))
    out = tmp_path / "backup"
    assert cli(backup_command, "--db", str(db_path), str(out)).exit_code == 0
    target_root = tmp_path / "target"
    target_root.mkdir()
    r = cli(restore_command, str(out), "--db", str(target_root / "service.sqlite"))
    refused_cleanly(
        r, target_root, {}, f"competition {cid} ('class')", "'evil' is a command", "--allow-house-commands"
    )
    ok = cli(restore_command, str(out), "--db", str(target_root / "service.sqlite"), "--allow-house-commands")
    assert ok.exit_code == 0, ok.output
    assert not marker.exists()


# ------------------------------------------------- a stored league at start


async def test_a_stored_league_with_a_house_command_plays_nothing_without_the_flag(
    service: Service, admin_token: str, db_path: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "the-command-ran"
    db = ServiceDB(db_path)
    evil = db.add_competition("evil", league_text())  # made under the flag, or edited by hand
    ladder = db.add_competition("ladder", league_text())
    team, _ = db.add_team(evil.id, "ada")
    # The hostile rows of these tests are written raw on purpose: a league no
    # check of the service would store (as a database edited by hand, or
    # restored from a backup someone else made), which the store's functions
    # never write.
    db.db.execute(
        "UPDATE competitions SET league_toml = ? WHERE id IN (?, ?)",
        (command_league(marker), evil.id, ladder.id),
    )
    db.set_phase(ladder.id, "open")  # its ladder would play again at the start
    seats = [Seat(kind="house", name="evil", pick="house:evil", house="evil")]
    add_game(db, team, seats, 0.0)
    db.close()

    client = await service()
    app = client.server.app

    assert app[ROOM].ladders == {}, "the ladder started again"
    # the practice game is refused by the same rule, not played
    game = None

    async def practice_over() -> bool:
        nonlocal game
        game = await app[ROOM].db.call(get_game, 1)
        assert game is not None
        return game.status in ("finished", "failed")

    async with asyncio.timeout(120):  # a bound for a broken test
        await app[ROOM].until(practice_over)
    assert game is not None
    assert game.status == "failed" and game.error is not None and "--allow-house-commands" in game.error
    # a run by hand, and the resume of a run whose stored league has the command
    r = await client.post(f"/api/competitions/{evil.id}/runs", headers=auth(admin_token))
    assert r.status == 409 and "--allow-house-commands" in (await r.json())["error"]
    db = ServiceDB(db_path)
    league_json = json.dumps(
        {
            "tournament": {"name": "x"},
            "bots": [{"name": "evil", "command": ["sh", "-c", f"touch {marker}", "{port}"]}],
        }
    )
    db.db.execute("UPDATE competitions SET league_toml = ? WHERE id = ?", (league_text(), evil.id))
    db.db.execute(
        "INSERT INTO runs (competition_id, out_dir, league_json, total_games, status, started_at)"
        " VALUES (?, ?, ?, 1, 'interrupted', 0)",
        (evil.id, str(db.data_dir / "run-x"), league_json),
    )
    db.close()
    r = await client.post(
        f"/api/competitions/{evil.id}/runs", json={"resume": True}, headers=auth(admin_token)
    )
    assert r.status == 409 and "--allow-house-commands" in (await r.json())["error"], await r.text()
    await client.close()
    assert not marker.exists(), "a house command ran"
    # what referee serve says at its start, one line for each
    db = ServiceDB(db_path)
    from referee.cli.serve import refuse_house_commands

    lines = refuse_house_commands(db, allowed=False)
    assert len(lines) == 2, lines
    assert f"competition {evil.id} ('evil')" in lines[0] and "'evil' is a command" in lines[0]
    assert "--allow-house-commands" in lines[0] and f"competition {ladder.id} ('ladder')" in lines[1]

    db.close()


async def test_an_open_ladder_whose_stored_league_has_a_house_command_does_not_start_again(
    service: Service, db_path: Path, tmp_path: Path
) -> None:
    """The competition's league file is clean, but the ladder it opened with
    (stored in its run row, replayed at every start) has a command house bot:
    the league edited after it opened under the flag, or a database edited
    by hand. Without --allow-house-commands the ladder does not play again."""
    marker = tmp_path / "the-command-ran"
    db = ServiceDB(db_path)
    comp = db.add_competition("ladder", league_text())
    league_json = json.dumps(
        {
            "tournament": {"name": "x"},
            "bots": [{"name": "evil", "command": ["sh", "-c", f"touch {marker}", "{port}"]}],
        }
    )
    db.db.execute(
        "INSERT INTO runs (competition_id, out_dir, league_json, total_games, status, started_at, kind)"
        " VALUES (?, ?, ?, 0, 'interrupted', 0, 'ladder')",
        (comp.id, str(db.data_dir / f"competition-{comp.id}" / "ladder-1"), league_json),
    )
    db.set_phase(comp.id, "open")
    db.close()

    client = await service()

    assert client.server.app[ROOM].ladders == {}, "the stored ladder started again"
    await client.close()
    assert not marker.exists(), "a house command ran"


# ------------------------------------------------------- bad databases (item 12)


def serve_refuses(db_path: Path, wrap: list[str] | None = None) -> str:
    """``referee serve`` on `db_path` stops at once: its one line (no traceback, exit code non-zero)."""
    cmd = [*(wrap or []), *referee_cli("serve", "--db", str(db_path), "--port", "0")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=False)
    err = p.stderr.strip()
    assert p.returncode != 0, (p.returncode, err)
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and len(err.splitlines()) == 1, err
    return lines[0]


def corrupt_pages(path: Path) -> None:
    data = bytearray(path.read_bytes())
    page = 4096
    for at in range(page, len(data), page):  # every page but the header's: their b-tree headers overwritten
        data[at : at + 64] = b"\xa5" * 64
    path.write_bytes(bytes(data))


def not_sqlite(path: Path) -> None:
    path.write_text("name,score\nada,3\n")


def newer_schema(path: Path) -> None:
    edit_db(path, (f"PRAGMA user_version = {SCHEMA_VERSION + 1}", ()))


BAD = {
    "corrupt pages": (corrupt_pages, "damaged", "restore the latest good backup"),
    "not SQLite": (not_sqlite, "not a SQLite database", "name the service's database file"),
    "a newer schema": (newer_schema, f"schema version {SCHEMA_VERSION + 1}", "run the newer referee"),
}


def filled_db(root: Path) -> Path:
    db_path, cid, tid = a_service(root)
    db = ServiceDB(db_path)
    for i in range(200):  # a few pages of rows
        db.add_teams(cid, [f"team-{i}"])
    db.close()
    return db_path


@pytest.mark.parametrize("kind", list(BAD))
def test_a_bad_database_stops_serve_and_restore_with_one_line(tmp_path: Path, kind: str) -> None:
    spoil, what, todo = BAD[kind]
    db_path = filled_db(tmp_path / "live")
    out = tmp_path / "backup"
    assert cli(backup_command, "--db", str(db_path), str(out)).exit_code == 0
    spoil(db_path)
    line = serve_refuses(db_path)
    assert what in line and str(db_path) in line and todo in line, line

    spoil(out / SERVICE_DB_NAME)
    reseal(out)
    target_root = tmp_path / "target"
    target_root.mkdir()
    r = cli(restore_command, str(out), "--db", str(target_root / "service.sqlite"))
    refused_cleanly(r, target_root, {}, what, str((out / SERVICE_DB_NAME).resolve()))


def read_only_mount(folder: Path) -> list[str]:
    """A command line prefix that runs its command with `folder` mounted read-only (a mount
    namespace of its own: nothing is left mounted); skip where mounts are not allowed."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("a read-only mount needs unshare and root")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"unshare -m is not allowed here: {probe.stderr.decode().strip()}")
    f = str(folder)
    return [
        "unshare",
        "-m",
        "sh",
        "-c",
        f'mount --bind "{f}" "{f}" && mount -o remount,ro,bind "{f}" && exec "$@"',
        "sh",
    ]


def test_a_read_only_database_stops_serve_and_restore_with_one_line(tmp_path: Path) -> None:
    db_path = filled_db(tmp_path / "live")
    out = tmp_path / "backup"
    assert cli(backup_command, "--db", str(db_path), str(out)).exit_code == 0
    line = serve_refuses(db_path, read_only_mount(db_path.parent))
    assert "read-only" in line and str(db_path) in line and "mount it read-write" in line, line

    target_root = tmp_path / "target"
    target_root.mkdir()
    cmd = [
        *read_only_mount(target_root),
        *referee_cli("restore", str(out), "--db", str(target_root / "s.sqlite")),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=False)
    err = p.stderr.strip()
    assert p.returncode == 1 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "nothing was changed" in err and "read-write" in err, err
    assert tree(target_root) == {} and restoring_left(target_root) == []
