"""The Ray executor: the same standings as the local one; a killed worker's
games are played again elsewhere, every game recorded once."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from referee.tournament.league import load_league
from referee.tournament.runner import Tournament
from tests.support.tournament import (
    DETERMINISTIC,
    ROOT,
    fault_free,
    games_recorded,
    league_text,
    needs_node,
    play_whole,
    write_league,
)

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")

pytestmark = [pytest.mark.slow, needs_node]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.run(
        [sys.executable, "-m", "referee.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )


def local_and_ray(league: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The league played here and on Ray workers, each in a run where no bot
    faulted (:func:`fault_free`): the two output folders."""
    local = fault_free(tmp_path / "local", lambda out: play_whole(league, out, cli=run_cli))
    return local, fault_free(
        tmp_path / "ray", lambda out: play_whole(league, out, "--executor", "ray", cli=run_cli)
    )


def test_ray_standings_equal_local(tmp_path: Path) -> None:
    league = write_league(tmp_path, league_text(DETERMINISTIC))
    local, remote = local_and_ray(league, tmp_path)
    assert (local / "standings.json").read_text() == (remote / "standings.json").read_text()
    assert len(list((remote / "replays").glob("*.jsonl.gz"))) == 12


async def test_killed_ray_worker_games_are_played_again(tmp_path: Path) -> None:
    from referee.tournament.executors import RayExecutor

    league = load_league(write_league(tmp_path, league_text(DETERMINISTIC, rounds=3, concurrency=6)))
    executor = RayExecutor(workers=2, per_worker=4)
    out = tmp_path / "out"
    t = Tournament(league, out, progress=False, executor=executor)
    db = out / "tournament.sqlite"

    async def killer() -> None:
        while True:
            await asyncio.sleep(0.05)
            if games_recorded(db) >= 3:
                break
        pid = await executor.workers[0].pid.remote()
        os.kill(pid, signal.SIGKILL)

    kill = asyncio.create_task(killer())
    try:
        await t.run()
    finally:
        await executor.close()
    await kill
    idx = [r[0] for r in sqlite3.connect(db).execute("SELECT idx FROM games ORDER BY idx")]
    assert idx == list(range(18))
    assert executor.retried >= 1
    rows = json.loads((out / "standings.json").read_text())
    assert sum(r["games"] for r in rows) == 36


def test_ray_adaptive_standings_equal_local(tmp_path: Path) -> None:
    """An adaptive league chooses the same games on Ray workers as here."""
    from tests.support.tournament import adaptive_text

    league = write_league(tmp_path, adaptive_text(40, concurrency=4))
    local, remote = local_and_ray(league, tmp_path)
    assert (local / "standings.json").read_text() == (remote / "standings.json").read_text()
    games = [
        sqlite3.connect(o / "tournament.sqlite")
        .execute("SELECT idx, seats, deal_seed FROM games ORDER BY idx")
        .fetchall()
        for o in (local, remote)
    ]
    assert games[0] == games[1]
