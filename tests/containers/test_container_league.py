"""Leagues with container bots: results recorded like any bot's, hostile
containers cost only their own games, errors named before any game."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from referee.bots.process import CommandBot
from referee.bots.sandbox import docker_daemon
from referee.bots.sandbox.container import ContainerBot
from referee.bots.sandbox.container_limits import ContainerLimits
from referee.match import play_match
from referee.tournament.league import LeagueError, parse_league
from referee.tournament.runner import Tournament
from tests.support.containers import FIGURES, skip_under_runtime

pytestmark = (
    pytest.mark.runtime_sensitive
)  # its result can differ under gVisor: the runsc pass of .ci/run runs it again

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def league_text(bots: list[str], *, table_size: int = 2, extra: str = "", move_ms: int = 1000) -> str:
    lines = [
        "[tournament]",
        'name = "boxed"',
        "seed = 5",
        f"table_size = {table_size}",
        "rounds = 1",
        "concurrency = 3",
        "",
        "[timeouts]",
        f"move_ms = {move_ms}",
        "",
        extra,
        "",
    ]
    return "\n".join(lines) + "\n".join(bots)


def command_bot(name: str, module: str) -> str:
    cmd = [PY, "-m", f"sample_bots.{module}", "--port", "{port}"]
    return f'[[bots]]\nname = "{name}"\ncommand = {json.dumps(cmd)}\ncwd = "{ROOT}"\n'


def image_bot(name: str, image: str, extra: str = "") -> str:
    return f'[[bots]]\nname = "{name}"\nimage = "{image}"\n{extra}\n'


def run(text: str, out: Path) -> tuple[Tournament, list[Any]]:
    league = parse_league(text, str(out.parent / "league.toml"))
    t = Tournament(league, out, progress=False, log=lambda msg: None)
    standings = asyncio.run(t.run())
    return t, standings


@pytest.mark.slow
def test_league_with_a_container_bot(images: dict[str, str], out: Path) -> None:
    bots = [
        image_bot("boxed-greedy", images["greedy"]),
        command_bot("tactician", "tactician"),
        command_bot("random", "random"),
    ]
    if "node" in images:  # the Node sample bot in a container too
        bots.append(image_bot("boxed-node", images["node"], 'limits = { memory = "64m" }'))
    text = league_text(bots, extra='[containers]\nmemory = "96m"\npids = 48\n')
    t0 = time.perf_counter()
    t, standings = run(text, out)
    n = len(bots)
    games = n * (n - 1)  # every pair, both seatings
    FIGURES[f"2-seat league, {games} games, {n - 2} container bot(s)"] = f"{time.perf_counter() - t0:.1f} s"
    rows = {s.bot: s for s in standings}
    boxed = [b for b in rows if b.startswith("boxed-")]
    assert len(boxed) == n - 2
    for b in boxed:
        assert rows[b].games == 2 * (n - 1) and sum(rows[b].faults.values()) == 0
        assert rows[b].latency_p50_ms is not None
    db = sqlite3.connect(out / "tournament.sqlite")
    kinds = dict(db.execute("SELECT name, kind FROM bots").fetchall())
    assert kinds == {"tactician": "command", "random": "command", **{b: "image" for b in boxed}}
    assert db.execute("SELECT COUNT(*) FROM games").fetchone()[0] == games
    saved = json.loads((out / "standings.json").read_text())
    assert {r["bot"] for r in saved} == set(rows)
    log = (out / "logs" / "boxed-greedy.container.log").read_text()
    assert "listening on unix:/run/bot/bot.sock" in log and "POST /act" not in log
    assert docker_daemon.find_containers({"referee.out": str(out.resolve())}) == []


@pytest.mark.slow
def test_memory_hog_is_killed_and_faulted_while_the_league_goes_on(images: dict[str, str], out: Path) -> None:
    text = league_text(
        [
            image_bot("hog", images["hostile"], 'env = { HOSTILE = "memhog" }\nlimits = { memory = "48m" }'),
            command_bot("greedy", "greedy"),
            command_bot("random", "random"),
        ]
    )
    t, standings = run(text, out)
    rows = {s.bot: s for s in standings}
    assert rows["hog"].games == 4 and rows["hog"].faults.get("connection", 0) >= 4
    assert sum(rows["greedy"].faults.values()) == 0 and sum(rows["random"].faults.values()) == 0
    db = sqlite3.connect(out / "tournament.sqlite")
    assert db.execute("SELECT COUNT(*) FROM games").fetchone()[0] == 6
    details = [d for (d,) in db.execute("SELECT detail FROM faults WHERE bot = 'hog'")]
    assert any("killed for using more than its memory limit of 48m" in d for d in details), details
    assert rows["hog"].rank == 3
    assert docker_daemon.find_containers({"referee.out": str(out.resolve())}) == []


@pytest.mark.slow
async def test_fork_bomb_is_held_by_the_pid_limit(
    docker_client: Any, images: dict[str, str], out: Path, tmp_path: Path
) -> None:
    skip_under_runtime(
        {
            "runsc": "under gVisor the pids cgroup counts the sandbox's own threads, not "
            "the bot's processes (tasks of gVisor's kernel), so no fork fails "
            "with EAGAIN: the bomb ends at the memory limit instead "
            "(test_gvisor.py::test_a_fork_bomb_under_gvisor_ends_at_the_memory_limit)"
        }
    )
    bomb = ContainerBot(
        images["hostile"],
        out_dir=out,
        name="bomb",
        env={"HOSTILE": "forkbomb"},
        limits=ContainerLimits(pids=32, cpus=0.5),
    )
    greedy = CommandBot([PY, "-m", "sample_bots.greedy", "--port", "{port}"], log_dir=tmp_path, name="g")
    async with bomb, greedy:
        line = ""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "FORKBOMB" not in line:
            line = bomb.log_path.read_text()
            await asyncio.sleep(0.1)
        assert "FORKBOMB fork failed (EAGAIN)" in line
        stats = await asyncio.to_thread(docker_client.containers.get(bomb.container_name).stats, stream=False)
        assert 0 < stats["pids_stats"]["current"] <= 32
        # The referee, its other bots and the machine carry on: a game against it is played.
        result = await play_match([bomb, greedy], seed=3, names=["bomb", "greedy"])
        assert result.places is not None and len(result.places) == 2
        proc = await asyncio.create_subprocess_exec("true")
        assert await proc.wait() == 0
        t0 = time.perf_counter()
    assert time.perf_counter() - t0 < 5  # init + SIGKILL: every process of the bomb dies at once
    FIGURES["fork bomb contained at"] = f"{stats['pids_stats']['current']} pids (limit 32)"
    assert docker_daemon.find_containers({"referee.out": str(out.resolve())}) == []


@pytest.mark.slow
def test_fresh_process_gives_each_game_a_new_container(images: dict[str, str], out: Path) -> None:
    text = league_text(
        [
            image_bot("fresh", images["greedy"], "fresh_process = true"),
            command_bot("greedy", "greedy"),
        ]
    )
    t, standings = run(text, out)
    assert {s.bot: s.games for s in standings} == {"fresh": 2, "greedy": 2}
    log = (out / "logs" / "fresh.container.log").read_text()
    assert log.count("start of a container") == 3  # the handshake, then one per game


def test_unusable_image_bots_stop_the_league_before_any_game(docker_client: Any, out: Path) -> None:
    text = league_text([image_bot("ghost", "referee-no-such-image:missing"), command_bot("greedy", "greedy")])
    with pytest.raises(LeagueError) as err:
        run(text, out)
    assert "[[bots]] #1 'ghost': image 'referee-no-such-image:missing' is not on this machine" in str(
        err.value
    )
    assert not (out / "replays").exists()


def test_no_daemon_stops_the_league_naming_the_bot(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Runs without Docker too."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    text = league_text([image_bot("boxed", "x:1"), command_bot("greedy", "greedy")])
    with pytest.raises(LeagueError) as err:
        run(text, tmp_path / "out")
    assert "[[bots]] #1 'boxed': no Docker daemon answers" in str(err.value)


def test_strays_of_a_crashed_run_are_removed_at_start(
    docker_client: Any, images: dict[str, str], out: Path
) -> None:
    import socket

    stray = docker_client.containers.run(
        images["greedy"],
        ["python", "-c", "import time; time.sleep(600)"],
        detach=True,
        network_mode="none",
        name=f"referee-test-stray-{os.getpid()}",
        labels={
            "referee.managed": "1",
            "referee.out": str(out.resolve()),
            "referee.bot": "boxed",
            "referee.pid": "999999",
            "referee.host": socket.gethostname(),
        },
    )
    logs: list[str] = []
    league = parse_league(
        league_text([image_bot("boxed", images["greedy"]), command_bot("g", "greedy")]),
        str(out.parent / "league.toml"),
    )
    asyncio.run(Tournament(league, out, progress=False, log=logs.append).run())
    assert any(f"removed 1 container(s) left by a crashed run: {stray.name}" in m for m in logs), logs


# ------------------------------------------------------------ league files (no Docker)


def test_league_limits_merge_and_errors() -> None:
    text = league_text(
        [
            image_bot("a", "a:1", "[bots.limits]\ncpus = 0.5\n"),
            image_bot("b", "b:1", 'command = ["python", "-m", "sample_bots.greedy", "--unix", "{unix}"]'),
        ],
        extra='[containers]\nmemory = "64m"\npids = 32\n',
    )
    league = parse_league(text)
    a, b = league.bots
    assert league.limits_for(a) == ContainerLimits(memory="64m", pids=32, cpus=0.5)
    assert league.limits_for(b) == ContainerLimits(memory="64m", pids=32)
    assert b.command == ["python", "-m", "sample_bots.greedy", "--unix", "{unix}"]

    def error(bot_extra: str, extra: str = "") -> str:
        with pytest.raises(LeagueError) as err:
            parse_league(league_text([image_bot("a", "a:1", bot_extra), image_bot("b", "b:1")], extra=extra))
        return str(err.value)

    assert error('limits = { memory = "lots" }') == (
        "league.toml:15: [[bots]] #1 limits 'memory': must be a size from 6m to 64g "
        "(like \"128m\", swap included), got 'lots'"
    )
    assert "unknown key 'pidz'" in error("limits = { pidz = 3 }")
    assert "league.toml:12: [containers] 'pids': must be a whole number from 4 to 4096" in error(
        "", "[containers]\npids = 1\n"
    )
    assert 'only "none" is supported' in error('limits = { network = "internal" }')
    assert "use {unix}" not in error('command = ["x", "--port", "{port}"]')
    assert "listens on the unix socket {unix}" in error('command = ["x", "--port", "{port}"]')
    assert "'cwd': is for command bots" in error('cwd = "."')
    with pytest.raises(LeagueError, match="'limits': are for image bots"):
        parse_league(
            league_text([command_bot("c", "greedy") + "limits = { pids = 8 }\n", image_bot("b", "b:1")])
        )
