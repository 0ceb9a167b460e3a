"""Container bots under gVisor (issue 24, item 9): ``[containers] runtime``
in a league file, ``--runtime`` on the command line and for the service,
checked against the daemon's runtimes before any game; the sample bot, a
fork bomb, the admission check and a ladder game under ``runsc``.

Needs a daemon with ``runsc`` registered (docs/containers.md says how); without one these
tests skip, saying so (with ``CI=true`` they fail: ``.ci/run`` registers it).
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from referee.bots.base import BotError
from referee.bots.process import CommandBot
from referee.bots.sandbox import container_limits, docker_daemon
from referee.bots.sandbox.container import ContainerBot
from referee.bots.sandbox.container_limits import ContainerLimits
from referee.cli import main
from referee.match import play_match
from referee.tournament.league import LeagueError, parse_league
from referee.tournament.runner import Tournament
from tests.support.containers import FIGURES, ladder_competition, upload_settled

PY = sys.executable
#: A sample bot that first prints the kernel it runs on (gVisor's says so).
KERNEL_FIRST = [
    "python",
    "-c",
    "import runpy; print('KERNEL', open('/proc/version').read().strip(), "
    "flush=True); runpy.run_module('sample_bots.greedy', run_name='__main__')",
]


def _league(out: Path, bots: str, containers: str = "") -> str:
    return (
        f'[tournament]\nname = "gv"\nseed = 3\noutput = "{out}"\n[timeouts]\nmove_ms = 3000\n'
        f"{containers}\n{bots}"
    )


def _bots(image: str) -> str:
    return (
        f'[[bots]]\nname = "boxed"\nimage = "{image}"\n'
        f'[[bots]]\nname = "random"\ncommand = ["{PY}", "-m", "sample_bots.random", "--port", "{{port}}"]\n'
    )


async def test_a_league_files_runtime_runs_the_bot_on_gvisors_kernel(
    runsc: str, docker_client: Any, images: dict[str, str], out: Path, tmp_path: Path, no_override: None
) -> None:
    """``[containers] runtime = "runsc"`` reaches the container: its kernel is
    gVisor's, every limit holds, a game is played without a fault."""
    league = parse_league(
        _league(out, _bots(images["greedy"]), '[containers]\nruntime = "runsc"\n'),
        str(tmp_path / "league.toml"),
    )
    limits = league.limits_for(league.bots[0])
    assert limits.runtime == "runsc"
    bot = ContainerBot(images["greedy"], out_dir=out, name="gv", limits=limits, command=KERNEL_FIRST)
    other = CommandBot([PY, "-m", "sample_bots.random", "--port", "{port}"], log_dir=tmp_path, name="r")
    async with bot, other:
        hc = docker_client.containers.get(bot.container_name).attrs["HostConfig"]
        assert hc["Runtime"] == "runsc" and bot.runtime == "runsc"
        assert hc["PidsLimit"] == limits.pids + container_limits.GVISOR_THREADS
        memory = container_limits.parse_size(limits.memory)
        assert hc["Memory"] == hc["MemorySwap"] == memory + container_limits.GVISOR_MEMORY
        assert hc["NetworkMode"] == "none" and hc["ReadonlyRootfs"] and hc["CapDrop"] == ["ALL"]
        assert bot.ready_seconds is not None
        FIGURES["runsc container start to ready"] = f"{bot.ready_seconds:.2f} s"
        result = await play_match([bot, other], seed=4, names=["gv", "r"])
        assert result.places is not None and result.faults == [[], []]
    log = bot.log_path.read_text()
    kernel = next(line for line in log.splitlines() if line.startswith("KERNEL"))
    host = Path("/proc/version").read_text().strip()
    assert kernel != f"KERNEL {host}", "the bot saw the host's kernel: not under gVisor"


async def test_the_operators_runtime_wins_over_the_league_files(
    runsc: str, docker_client: Any, images: dict[str, str], out: Path, no_override: None
) -> None:
    """``--runtime runsc`` (:func:`set_runtime`) over a league's ``runtime = "runc"``:
    an admin's league file cannot take a team out of gVisor."""
    docker_daemon.set_runtime("runsc")
    bot = ContainerBot(images["greedy"], out_dir=out, name="op", limits=ContainerLimits(runtime="runc"))
    async with bot:
        assert docker_client.containers.get(bot.container_name).attrs["HostConfig"]["Runtime"] == "runsc"
    assert docker_daemon.effective_runtime(ContainerLimits(runtime="runc")) == ("runsc", "--runtime")
    docker_daemon.set_runtime(None)
    assert docker_daemon.effective_runtime(ContainerLimits(runtime="runc")) == (
        "runc",
        "[containers] runtime",
    )
    assert docker_daemon.effective_runtime(ContainerLimits()) == (None, "")


def test_a_runtime_the_daemon_lacks_stops_the_league_before_any_game(
    docker_client: Any, images: dict[str, str], out: Path, tmp_path: Path, no_override: None
) -> None:
    text = _league(out, _bots(images["greedy"]), '[containers]\nruntime = "runsx"\n')
    league = parse_league(text, str(tmp_path / "league.toml"))
    t = Tournament(league, out, progress=False, log=lambda msg: None)
    with pytest.raises(LeagueError) as err:
        asyncio.run(t.run())
    message = str(err.value)
    assert "[[bots]] #1 'boxed'" in message and "[containers] runtime" in message
    assert "no runtime 'runsx'" in message and "runc" in message
    known, _ = docker_daemon.daemon_runtimes(docker_client)
    assert all(name in message for name in known)  # the ones it has, to choose from
    assert "daemon.json" in message
    with sqlite3.connect(out / "tournament.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM games").fetchone()[0] == 0
    assert docker_daemon.find_containers({"referee.out": str(out.resolve())}) == []


def test_a_runtimes_name_is_checked_with_the_league(tmp_path: Path) -> None:
    with pytest.raises(LeagueError) as err:
        parse_league(_league(tmp_path, _bots("x:1"), '[containers]\nruntime = "run sc; rm"\n'))
    assert "[containers] 'runtime': expected the name of a runtime" in str(err.value)
    assert ":8:" in str(err.value)  # the line of the key


def test_runtime_options_are_checked_against_the_daemon(
    docker_client: Any, images: dict[str, str], out: Path, tmp_path: Path, no_override: None
) -> None:
    """``referee serve --runtime`` and ``referee start --runtime`` stop at once
    when the daemon lacks it; ``referee tournament --runtime`` before any game.
    The process's runtime is as before afterwards."""
    runner = CliRunner()
    r = runner.invoke(main, ["serve", "--db", str(tmp_path / "s.sqlite"), "--runtime", "runsx"])
    assert r.exit_code == 2, r.output
    assert "--runtime" in r.output and "no runtime 'runsx'" in r.output and "runc" in r.output
    assert not (tmp_path / "s.sqlite").exists()  # nothing was started
    (tmp_path / "s.sqlite").touch()
    r = runner.invoke(main, ["start", "--db", str(tmp_path / "s.sqlite"), "x", "--runtime", "runsx"])
    assert r.exit_code == 2 and "no runtime 'runsx'" in r.output, r.output
    league = tmp_path / "league.toml"
    league.write_text(_league(out, _bots(images["greedy"])))
    r = runner.invoke(main, ["tournament", str(league), "--no-progress", "--runtime", "runsx"])
    assert r.exit_code == 2, r.output
    assert "--runtime: the Docker daemon has no runtime 'runsx'" in r.output
    assert docker_daemon.effective_runtime(ContainerLimits()) == (None, "")


@pytest.mark.slow
def test_cli_tournament_under_runsc(
    runsc: str, images: dict[str, str], out: Path, tmp_path: Path, no_override: None
) -> None:
    league = tmp_path / "league.toml"
    league.write_text(_league(out, _bots(images["greedy"])))
    r = CliRunner().invoke(main, ["tournament", str(league), "--no-progress", "--runtime", "runsc"])
    assert r.exit_code == 0, r.output
    with sqlite3.connect(out / "tournament.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM games").fetchone()[0] == 2
        assert db.execute("SELECT COUNT(*) FROM faults").fetchone()[0] == 0
    assert docker_daemon.effective_runtime(ContainerLimits()) == (None, "")


@pytest.mark.slow
async def test_a_fork_bomb_under_gvisor_ends_at_the_memory_limit(
    runsc: str, images: dict[str, str], out: Path, tmp_path: Path, no_override: None
) -> None:
    """Under gVisor the bot's processes are tasks of the sandbox's kernel: the
    bomb is held by the memory limit (the container is OOM-killed, the fault
    says so), the referee and the machine carry on."""
    bomb = ContainerBot(
        images["hostile"],
        out_dir=out,
        name="bomb",
        env={"HOSTILE": "forkbomb"},
        limits=ContainerLimits(pids=32, cpus=0.5, runtime="runsc", ready_timeout_s=20),
    )
    greedy = CommandBot([PY, "-m", "sample_bots.greedy", "--port", "{port}"], log_dir=tmp_path, name="g")
    t0 = time.perf_counter()
    async with greedy:
        try:
            await bomb.launch()
            result = await play_match([bomb, greedy], seed=3, names=["bomb", "greedy"])
            assert result.places is not None and result.faults[1] == []
            assert any(f.kind == "connection" for f in result.faults[0])
            why = " ".join(f.detail for f in result.faults[0])
        except BotError as e:  # killed before it answered GET /
            why = str(e)
        finally:
            await bomb.stop()
        assert "memory limit of 128m" in why or "exit code 137" in why or "code 137" in why, why
        proc = await asyncio.create_subprocess_exec("true")
        assert await proc.wait() == 0
        assert (await greedy.handshake()).name  # the other bot still answers
    FIGURES["runsc fork bomb: contained after"] = f"{time.perf_counter() - t0:.1f} s"
    assert docker_daemon.find_containers({"referee.out": str(out.resolve())}) == []


# ------------------------------------------------------------- the service


@pytest.fixture
async def service(service_client: Callable[..., Awaitable[Any]], runsc: str, no_override: None) -> Any:
    """The service as ``referee serve --runtime runsc`` runs it."""
    docker_daemon.set_runtime(runsc)  # what serve --runtime does (referee.cli.options.use_runtime)
    return await service_client(house_urls_anywhere=True)  # its house bot is on loopback


@pytest.mark.slow
async def test_admission_and_ladder_games_under_runsc(
    service: Any, docker_client: Any, tmp_path: Path
) -> None:
    """A team's source upload is built, checked in its sandbox under gVisor
    and accepted; the ladder then plays it, under gVisor, without a fault."""
    from tests.support.api import auth, new_team
    from tests.support.builds import make_zip, python_bot_files
    from tests.support.web import sample_bot_app, serve

    runner, house = await serve(sample_bot_app("greedy"))
    try:
        cid = await ladder_competition(service, house)
        tid, token = await new_team(service, service.admin, cid, "team gv")
        archive = make_zip(tmp_path / "bot.zip", python_bot_files())
        t0 = time.perf_counter()
        done = await upload_settled(service, cid, tid, token, archive.read_bytes())
        FIGURES["runsc admission (build + check + 2 games)"] = f"{time.perf_counter() - t0:.1f} s"
        assert done["submission"]["status"] == "accepted", done
        assert any("validation games" in x["what"] and x["ok"] for x in done["report"]["lines"])
        r = await service.post(
            f"/api/competitions/{cid}/open", json={"concurrency": 1}, headers=auth(service.admin)
        )
        assert r.status == 202, await r.text()
        seen: set[str] = set()
        deadline = time.monotonic() + 120
        while True:
            try:
                listed = docker_client.containers.list(
                    filters={"label": [f"{docker_daemon.MANAGED_LABEL}=1"]}
                )
            except (
                docker_daemon.docker_module().errors.NotFound
            ):  # one went between the listing and its inspection
                listed = []
            for c in listed:
                if c.labels.get("referee.out", "").startswith(str(tmp_path)):
                    seen.add(str(c.attrs["HostConfig"]["Runtime"]))
            data = await (await service.get(f"/api/competitions/{cid}")).json()
            team = [s for s in data["standings"] if s["bot"].startswith("team gv")]
            if team and team[0]["games"] >= 2 and seen:
                break
            assert time.monotonic() < deadline, data
            await asyncio.sleep(0.1)
        assert seen == {"runsc"}, seen
        assert sum(team[0]["faults"].values()) == 0, team
        r = await service.post(f"/api/competitions/{cid}/freeze", headers=auth(service.admin))
        assert r.status == 200, await r.text()
    finally:
        await runner.cleanup()


@pytest.mark.slow
def test_the_runtimes_benchmark_runs(runsc: str, images: dict[str, str], no_override: None) -> None:
    """``benchmarks/runtimes.py`` (cost per move under runsc against runc, in
    the same run) in its shortest form: it gives a ratio and both start times."""
    import json
    import subprocess

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [
            PY,
            str(root / "benchmarks" / "runtimes.py"),
            "--pairs",
            "3",
            "--games",
            "1",
            "--starts",
            "1",
            "--players",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["median_ratio"] > 0 and len(figures["rows"]) == 3
    assert set(figures["start_s_median"]) == {"runc", "runsc"}
    FIGURES["runtimes benchmark (short): runsc/runc per move"] = f"{figures['median_ratio']:.2f}"


async def test_a_league_sent_to_the_service_with_a_runtime_the_daemon_lacks_is_refused(
    aiohttp_client: Callable[..., Awaitable[Any]], tmp_path: Path, docker_client: Any, no_override: None
) -> None:
    """422 naming the field when the competition is made, rather than every
    team's admission check failing later for the operator's mistake."""
    from referee.bots.netpolicy import AddressPolicy
    from referee.web import Settings, make_app
    from tests.support.api import auth
    from tests.support.web import new_admin_token

    db_path = tmp_path / "service.sqlite"
    token = new_admin_token(db_path)
    client = await aiohttp_client(make_app(db_path, Settings(bot_policy=AddressPolicy())))
    league = '[tournament]\nname = "x"\n[containers]\nruntime = "runsx"\n'
    r = await client.post("/api/competitions", json={"name": "bad", "league": league}, headers=auth(token))
    assert r.status == 422, await r.text()
    body = await r.json()
    assert "[containers] runtime: the Docker daemon has no runtime 'runsx'" in body["error"], body
    known, _ = docker_daemon.daemon_runtimes(docker_client)
    assert all(name in body["error"] for name in known)
    r = await client.post(
        "/api/competitions",
        json={"name": "good", "league": league.replace("runsx", "runc")},
        headers=auth(token),
    )
    assert r.status == 201, await r.text()
