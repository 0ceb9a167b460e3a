"""ContainerBot against a real Docker daemon: limits, sandbox, readiness, cleanup."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from referee.bots.base import BotError
from referee.bots.process import CommandBot
from referee.bots.sandbox import container_limits, docker_daemon
from referee.bots.sandbox.container import ContainerBot
from referee.bots.sandbox.container_limits import ContainerLimits
from referee.cli.cleanup import containers_cleanup
from tests.support.containers import FIGURES, GVISOR, TEST_RUNTIME, UNREACHABLE, wait_for_line

pytestmark = (
    pytest.mark.runtime_sensitive
)  # its result can differ under gVisor: the runsc pass of .ci/run runs it again

PY_GREEDY = ["-m", "sample_bots.greedy", "--port", "{port}"]


async def test_sample_bot_in_a_container_with_every_limit(
    docker_client: Any, images: dict[str, str], out: Path
) -> None:
    limits = ContainerLimits(memory="96m", cpus=0.5, pids=48, tmpfs="8m")
    bot = ContainerBot(images["greedy"], out_dir=out, name="greedy", limits=limits)
    t0 = time.perf_counter()
    info = await bot.launch()
    FIGURES["container start to ready"] = f"{time.perf_counter() - t0:.2f} s"
    try:
        assert info.name == "greedy"
        assert bot.url == f"unix:{out / 'sockets' / 'greedy' / 'bot.sock'}"
        c = docker_client.containers.get(bot.container_name)
        hc = c.attrs["HostConfig"]
        assert (
            hc["Memory"]
            == hc["MemorySwap"]
            == 96 * 1024**2 + (container_limits.GVISOR_MEMORY if GVISOR else 0)
        )
        assert hc["NanoCpus"] == 500_000_000
        # under gVisor the host's pids limit also holds the sandbox's own threads
        assert hc["PidsLimit"] == 48 + (container_limits.GVISOR_THREADS if GVISOR else 0)
        assert hc["Runtime"] == (TEST_RUNTIME or "runc")
        assert hc["ReadonlyRootfs"] is True
        assert hc["CapDrop"] == ["ALL"]
        assert hc["SecurityOpt"] == ["no-new-privileges"]
        assert hc["Init"] is True
        assert hc["NetworkMode"] == "none"
        assert "size=8388608" in hc["Tmpfs"]["/tmp"]
        assert c.labels["referee.managed"] == "1"
        assert c.labels["referee.bot"] == "greedy"
        assert c.labels["referee.out"] == str(out.resolve())
        assert c.labels["referee.pid"] == str(os.getpid())
        assert "BOT_UNIX=/run/bot/bot.sock" in c.attrs["Config"]["Env"]
        line = await wait_for_line(bot.log_path, "")
        assert "start of a container" in line
        await wait_for_line(bot.log_path, "20")  # the SDK's first log line
        assert "listening on unix:/run/bot/bot.sock" in bot.log_path.read_text()
    finally:
        t1 = time.perf_counter()
        await bot.stop()
        FIGURES["container stop and removal"] = f"{time.perf_counter() - t1:.2f} s"
    assert docker_daemon.find_containers({"referee.out": str(out.resolve())}) == []
    assert not (out / "sockets" / "greedy" / "bot.sock").exists()


async def test_no_way_out_of_the_sandbox(images: dict[str, str], out: Path, tmp_path: Path) -> None:
    """Internet, the host's bridge, another bot's TCP port and unix socket, the
    root filesystem, capabilities: each attempt fails, at once."""
    other = CommandBot(["python", *PY_GREEDY], log_dir=tmp_path / "logs", name="other")
    async with other, ContainerBot(images["greedy"], out_dir=out, name="neighbour") as neighbour:
        assert other.port is not None and neighbour.socket_path is not None
        prober = ContainerBot(
            images["hostile"],
            out_dir=out,
            name="prober",
            env={
                "HOSTILE": "probe",
                "PROBE_PORT": str(other.port),
                "PROBE_SOCKET": str(neighbour.socket_path),
            },
        )
        async with prober:
            line = await wait_for_line(prober.log_path, "PROBE ")
    probe = json.loads(line[len("PROBE ") :])
    assert probe["interfaces"] == ["lo"]
    assert probe["internet"]["ok"] is False and probe["internet"]["errno"] in UNREACHABLE
    assert probe["bridge"]["ok"] is False and probe["bridge"]["errno"] in UNREACHABLE
    assert probe["other_bot_port"]["ok"] is False and probe["other_bot_port"]["errno"] == "ECONNREFUSED"
    assert probe["other_bot_socket"]["ok"] is False and probe["other_bot_socket"]["errno"] == "ENOENT"
    for key in ("internet", "bridge", "other_bot_port", "other_bot_socket"):
        assert probe[key]["ms"] < 100, probe[key]  # refused at once, no waiting on a timeout
    # gVisor checks the permission (root's /, the bot is not root) before the read-only mount
    assert probe["write_root"]["errno"] in (("EROFS", "EACCES") if GVISOR else ("EROFS",))
    assert probe["write_tmp"]["ok"] is True
    assert probe["cap_eff"] == "0000000000000000"
    assert probe["no_new_privs"] == "1"
    assert probe["uid"] == (
        os.getuid() or container_limits.NOBODY
    )  # the referee's uid, never 0: nobody under root


async def test_never_ready_is_a_clear_error(images: dict[str, str], out: Path) -> None:
    bot = ContainerBot(
        images["hostile"],
        out_dir=out,
        name="sleepy",
        env={"HOSTILE": "never_ready"},
        limits=ContainerLimits(ready_timeout_s=1.5),
    )
    t0 = time.perf_counter()
    with pytest.raises(BotError) as err:
        await bot.launch()
    assert time.perf_counter() - t0 < 6
    text = str(err.value)
    assert "'sleepy'" in text and "did not answer GET / within 1.5 s" in text
    assert "$BOT_UNIX (/run/bot/bot.sock)" in text
    assert "hostile bot: never listening" in text  # the end of its output
    assert docker_daemon.find_containers({"referee.out": str(out.resolve())}) == []


async def test_crash_at_start_names_the_exit_code_and_output(images: dict[str, str], out: Path) -> None:
    bot = ContainerBot(images["hostile"], out_dir=out, name="crasher", env={"HOSTILE": "crash"})
    with pytest.raises(BotError) as err:
        await bot.launch()
    text = str(err.value)
    assert "exited with code 3" in text and "crashing on purpose" in text


async def test_missing_image_says_how_to_get_it(docker_client: Any, out: Path) -> None:
    bot = ContainerBot("referee-no-such-image:missing", out_dir=out, name="ghost")
    with pytest.raises(BotError) as err:
        await bot.launch()
    text = str(err.value)
    assert "'referee-no-such-image:missing' is not on this machine" in text
    assert "docker build -t referee-no-such-image:missing" in text and "docker load" in text


async def test_long_output_folder_falls_back_to_a_short_socket_path(
    images: dict[str, str], out: Path
) -> None:
    deep = out / ("d" * 60) / ("e" * 60)
    bot = ContainerBot(images["greedy"], out_dir=deep, name="greedy")
    async with bot:
        assert bot.socket_path is not None and len(str(bot.socket_path)) < 100
        folder = bot.socket_path.parent
        assert (await bot.handshake()).name == "greedy"
    assert not folder.exists()
    docker_daemon.cleanup_containers({"referee.out": str(deep.resolve())})


def _stray(client: Any, image: str, out: Path, pid: int, name: str) -> Any:
    return client.containers.run(
        image,
        ["python", "-c", "import time; time.sleep(600)"],
        detach=True,
        network_mode="none",
        init=True,
        name=f"referee-test-{name}-{os.getpid()}",
        labels={
            "referee.managed": "1",
            "referee.out": str(out.resolve()),
            "referee.bot": name,
            "referee.pid": str(pid),
            "referee.host": socket.gethostname(),
        },
    )


def _dead_pid() -> int:
    pid = 999_999
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid -= 1


def test_cleanup_command_removes_strays_by_label(
    docker_client: Any, images: dict[str, str], out: Path
) -> None:
    orphan = _stray(docker_client, images["greedy"], out, _dead_pid(), "orphan")
    alive = _stray(docker_client, images["greedy"], out, os.getpid(), "alive")
    runner = CliRunner()
    listed = runner.invoke(containers_cleanup, ["--out", str(out), "--dry-run"])
    assert listed.exit_code == 0 and f"would remove {orphan.name}" in listed.output
    assert alive.name not in listed.output
    result = runner.invoke(containers_cleanup, ["--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"removed {orphan.name}" in result.output and alive.name not in result.output
    assert [c.name for c in docker_daemon.find_containers({"referee.out": str(out.resolve())})] == [
        alive.name
    ]
    result = runner.invoke(containers_cleanup, ["--out", str(out), "--all"])
    assert f"removed {alive.name}" in result.output
    assert docker_daemon.find_containers({"referee.out": str(out.resolve())}) == []
    again = runner.invoke(containers_cleanup, ["--out", str(out)])
    assert again.exit_code == 0 and "no stray containers" in again.output


def test_cleanup_containers_function(docker_client: Any, images: dict[str, str], out: Path) -> None:
    a = _stray(docker_client, images["greedy"], out, _dead_pid(), "a")
    names = docker_daemon.cleanup_containers({"referee.out": str(out.resolve()), "referee.bot": "a"})
    assert names == [a.name]


def test_no_daemon_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Runs without Docker too: a daemon that is not there."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    bot = ContainerBot("anything:1", out_dir=tmp_path, name="x")
    with pytest.raises(docker_daemon.DockerUnavailable) as err:
        asyncio.run(bot.launch())
    assert "no Docker daemon answers at unix://" in str(err.value)
    assert "start it" in str(err.value)
    result = CliRunner().invoke(containers_cleanup, [])
    assert result.exit_code == 1 and "no Docker daemon" in result.output


async def test_runs_as_another_user_with_a_secret(images: dict[str, str], out: Path) -> None:
    """``user`` set: the bot runs unprivileged; the socket folder is opened to it.
    The league's secret reaches the SDK as BOT_SECRET: signed requests pass."""
    from referee.match import play_match

    bot = ContainerBot(
        images["greedy"],
        out_dir=out,
        name="nobody",
        secret="s3cret",
        limits=ContainerLimits(user="65534:65534"),
    )
    async with bot:
        assert bot.socket_path is not None and bot.socket_path.stat().st_uid == 65534
        other = ContainerBot(images["greedy"], out_dir=out, name="root-bot")
        async with other:
            result = await play_match([bot, other], seed=1, names=["nobody", "root-bot"])
    assert result.places is not None and not any(result.faults)
