"""Leagues played by the CLI (``referee run``) as the tournament tests run
them: league texts, a whole run, a run killed and resumed, its games."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import PROGRAMS, ROOT

ZOO = PROGRAMS / "zoo.py"


PY = sys.executable


needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def sample(module: str) -> list[str]:
    return [PY, "-m", f"sample_bots.{module}", "--port", "{port}"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "referee.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def league_text(
    bots: list[tuple[str, list[str]]],
    *,
    table_size: int = 2,
    rounds: int = 2,
    concurrency: int = 4,
    move_ms: int = 1000,
    extra: str = "",
) -> str:
    lines = [
        "[tournament]",
        'name = "t"',
        "seed = 11",
        f"table_size = {table_size}",
        f"rounds = {rounds}",
        f"concurrency = {concurrency}",
        "",
        "[timeouts]",
        f"move_ms = {move_ms}",
        "",
        extra,
    ]
    for name, cmd in bots:
        lines += ["[[bots]]", f'name = "{name}"', f"command = {json.dumps(cmd)}", f'cwd = "{ROOT}"', ""]
    return "\n".join(lines)


DETERMINISTIC = [
    ("greedy", sample("greedy")),
    ("tactician", sample("tactician")),
    ("node", ["node", "sample_bots/node/bot.js", "--port", "{port}"]),
]


def write_league(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "league.toml"
    path.write_text(text)
    return path


def games_recorded(db_path: Path) -> int:
    """Games in a running tournament's store so far (0 before it exists)."""
    if not db_path.exists():
        return 0
    db = sqlite3.connect(db_path)
    try:
        return int(db.execute("SELECT COUNT(*) FROM games").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0
    finally:
        db.close()


def fault_free(out: Path, play: Callable[[Path], str]) -> Path:
    """The folder of a run of `play` (which plays into the folder it is given
    and returns the referee's stderr) in which no bot faulted: `out`, or
    `out`-again when a bot faulted in the first, with a warning showing what it did.

    For tests that compare two runs' standings byte for byte: that holds for
    bots that behave the same in both, and these never fault on their own. CI
    saw one unreachable for 4 requests of one game, once in many runs (cause not
    seen), and a machine slowed by others can make any bot late. A second run
    with faults fails, saying what the bots did."""
    stderr = play(out)
    if faults(out):
        warnings.warn(
            f"{out.name}: bots faulted, played again:\n{faults_and_logs(out, stderr)}", stacklevel=2
        )
        out = out.with_name(f"{out.name}-again")
        stderr = play(out)
    assert not faults(out), faults_and_logs(out, stderr)
    return out


def play_whole(
    league: Path,
    out: Path,
    *extra: str,
    cli: Callable[..., subprocess.CompletedProcess[str]] = run_cli,
    prints: tuple[str, ...] = (),
) -> str:
    """``referee tournament LEAGUE --out OUT EXTRA...`` to the end (through
    `cli`), its standings printing each of `prints`; its stderr."""
    r = cli("tournament", str(league), "--out", str(out), "--no-progress", *extra)
    assert r.returncode == 0, r.stderr
    for text in prints:
        assert text in r.stdout, r.stdout
    return r.stderr


def kill_then_resume(league: Path, out: Path, after: int) -> str:
    """Start the league, SIGKILL the referee once `after` games are recorded,
    check that no bot outlived it and that the folder is refused without
    ``--resume``, and resume it to the end; the resumed run's stderr."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with (out.parent / f"{out.name}.killed.stderr").open("w") as stderr:  # a file: a pipe unread could fill
        proc = subprocess.Popen(
            [PY, "-m", "referee.cli", "tournament", str(league), "--out", str(out), "--no-progress"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        db_path = out / "tournament.sqlite"
        wait_for_games(db_path, after, timeout_s=120)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    time.sleep(0.5)
    # No bot outlives the referee (they die with their parent).
    assert not _listening_bot_ports(out), "bot processes survived the referee"
    before = games_recorded(db_path)
    # Without --resume the folder is refused, and nothing is touched.
    r = run_cli("tournament", str(league), "--out", str(out), "--no-progress")
    assert r.returncode == 2 and "--resume" in r.stderr
    assert games_recorded(db_path) == before
    r = run_cli("tournament", str(league), "--out", str(out), "--no-progress", "--resume")
    assert r.returncode == 0, r.stderr
    assert f"resuming: {before} games recorded" in r.stderr
    assert games_recorded(db_path) > before, "the kill came after the last game"
    return r.stderr


ADAPTIVE = """[stop]
confidence = 0.95
max_games = {max_games}
"""


def adaptive_text(max_games: int, concurrency: int = 4) -> str:
    text = league_text(
        DETERMINISTIC,
        table_size=2,
        rounds=1,
        concurrency=concurrency,
        extra=ADAPTIVE.format(max_games=max_games),
    )
    return text.replace("table_size = 2", 'table_size = 2\nschedule = "adaptive"')


def _listening_bot_ports(out: Path) -> list[int]:
    """Ports of the bots started for ``out`` (from their logs) that still answer."""
    import re
    import socket

    ports = set()
    for log in (out / "logs").glob("*.stdout.log"):
        ports |= {int(p) for p in re.findall(r"start on port (\d+)", log.read_text())}
    assert ports, "the bots' logs name their ports"
    alive = []
    for port in ports:
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                alive.append(port)
    return alive


def wait_for_games(db_path: Path, count: int, timeout_s: float) -> None:
    """Wait until a running tournament has recorded `count` games."""
    deadline = time.monotonic() + timeout_s
    while games_recorded(db_path) < count:
        assert time.monotonic() < deadline, "the tournament did not get going"
        time.sleep(0.05)


def faults(out: Path) -> list[tuple[Any, ...]]:
    """Every fault the run in `out` recorded: (game, seat, bot, kind, turn, detail)."""
    db = sqlite3.connect(out / "tournament.sqlite")
    try:
        return db.execute(
            "SELECT game_idx, seat, bot, kind, turn, detail FROM faults ORDER BY game_idx"
        ).fetchall()
    finally:
        db.close()


def faults_and_logs(out: Path, stderr: str) -> str:
    """What to read when a run surprises: every fault recorded, the referee's
    stderr and the end of each bot's stderr."""
    text = "faults:\n" + "".join(f"  {row}\n" for row in faults(out))
    text += f"--- the referee's stderr:\n{stderr[-3000:]}\n"
    for log in sorted((out / "logs").glob("*.stderr.log")):
        text += f"--- {log.name}:\n{log.read_text(errors='replace')[-1500:]}\n"
    return text
