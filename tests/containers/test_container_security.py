"""The socket folder, attacked (issue #14): shared names, swapped sockets, a
full disk, root. The Docker tests use real containers (the hostile image);
the guard and the names are also tested without a daemon."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.messages import GameStart, Rules, Timeouts
from referee.bots.base import BotError
from referee.bots.http import HttpBot
from referee.bots.sandbox import container, container_limits, socket_guard
from referee.bots.sandbox.container import ContainerBot
from referee.bots.sandbox.container_limits import ContainerLimits, file_key
from referee.bots.sandbox.socket_guard import SocketGuard, SocketRefused
from tests.support.containers import FIGURES, skip_under_runtime, wait_for_line

pytestmark = (
    pytest.mark.runtime_sensitive
)  # its result can differ under gVisor: the runsc pass of .ci/run runs it again

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="the referee runs as root in CI; this needs root")


class Decoy:
    """A unix socket server on the host that records whoever connects to it
    (stands for /var/run/docker.sock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.connections = 0
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen()
        self.server.settimeout(0.1)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.server.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.done.set()
        self.thread.join(2)
        self.server.close()


@pytest.fixture
def decoy(tmp_path: Path) -> Iterator[Decoy]:
    d = Decoy(tmp_path / "decoy.sock")
    yield d
    d.close()


def _start(players: list[str]) -> GameStart:
    return GameStart(
        apiversion="1", game_id="g", seat=0, players=players, rules=Rules(), timeouts=Timeouts(move_ms=500)
    )


# ------------------------------------------------------------ names (no daemon)


def test_file_keys_never_shared() -> None:
    names = [
        "team a",
        "team_a",
        "team/a",
        "team\\a",
        "Team_a",
        "team_a ",
        " team_a",
        "tëam_a",
        "team_a+0000000000000000",
        "..",
        ".",
        "",
        "a" * 61,
        "a" * 60 + "b",
    ]
    keys = [file_key(n) for n in names]
    assert len(set(keys)) == len(keys), keys
    assert file_key("greedy") == "greedy" and file_key("boxed-greedy") == "boxed-greedy"
    for key in keys:
        assert "/" not in key and key not in (".", "..") and not key.startswith(".") and len(key) <= 60
    assert (
        container_limits.log_file_of("/o", "team a")
        == Path("/o/logs") / f"{file_key('team a')}.container.log"
    )


def test_a_bots_logs_here_and_on_each_node_are_found_by_its_name(tmp_path: Path) -> None:
    """One machine's log first, then each cluster node's (OUT/nodes/<node>/),
    the bot keyed by its name everywhere; nothing of a bot named alike."""
    assert container_limits.log_files_of(tmp_path, "team a") == []
    here = ContainerBot("x:1", out_dir=tmp_path, name="team a").log_path
    nodes = [
        ContainerBot("x:1", out_dir=tmp_path / container_limits.NODES_DIR / node, name="team a").log_path
        for node in ("n2", "n1")
    ]
    other = ContainerBot("x:1", out_dir=tmp_path / container_limits.NODES_DIR / "n1", name="team_a").log_path
    for path in (here, *nodes, other):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("a line\n")
    assert container_limits.log_files_of(tmp_path, "team a") == [here, *sorted(nodes)]
    here.unlink()
    assert container_limits.log_files_of(tmp_path, "team a") == sorted(nodes)


def test_two_bots_named_alike_get_two_folders(tmp_path: Path) -> None:
    a = ContainerBot("x:1", out_dir=tmp_path, name="team a")
    b = ContainerBot("x:1", out_dir=tmp_path, name="team_a")
    assert a.log_path != b.log_path
    assert a.socket_folder != b.socket_folder
    keyed = ContainerBot("x:1", out_dir=tmp_path, name="team a", key="team-17")
    assert keyed.log_path == tmp_path / "logs" / "team-17.container.log"


# ------------------------------------------------------------- root (no daemon)


@pytest.mark.parametrize("user", ["0", "0:0", "1000:0", "0:1000"])
def test_uid_or_gid_0_is_refused(user: str) -> None:
    problems = container_limits.check_limits(ContainerLimits(user=user))
    assert [k for k, _ in problems] == ["user"] and "never runs as root" in problems[0][1]
    with pytest.raises(ValueError, match="never runs as root"):
        ContainerBot("x:1", out_dir="/tmp", limits=ContainerLimits(user=user))


def test_default_user_is_never_root() -> None:
    uid, gid = container_limits.bot_user(ContainerLimits())
    assert uid != 0 and gid != 0
    if ROOT:
        assert (uid, gid) == (container_limits.NOBODY, container_limits.NOBODY)
    else:
        assert uid == os.getuid()
    assert container_limits.bot_user(ContainerLimits(user="1234")) == (1234, 1234)


# ----------------------------------------------------------- the guard (no daemon)


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[tuple[Path, socket.socket]]:
    path = tmp_path / "bot.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    yield path, server
    server.close()


def _connect(guard: SocketGuard) -> None:
    fd = guard.open()
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(guard.address(fd))
    finally:
        guard.release(fd)


def test_guard_lets_a_socket_through(listening: tuple[Path, socket.socket]) -> None:
    path, server = listening
    _connect(SocketGuard(path, os.getuid()))
    server.settimeout(1)
    server.accept()[0].close()


@pytest.mark.parametrize("what", ["symlink", "fifo", "file", "folder"])
def test_guard_refuses_what_is_not_a_socket(tmp_path: Path, decoy: Decoy, what: str) -> None:
    path = tmp_path / "bot.sock"
    if what == "symlink":
        path.symlink_to(decoy.path)
    elif what == "fifo":
        os.mkfifo(path)
    elif what == "file":
        path.write_text("x")
    else:
        path.mkdir()
    guard = SocketGuard(path, os.getuid())
    with pytest.raises(SocketRefused) as err:
        _connect(guard)
    expected = {
        "symlink": "a symbolic link",
        "fifo": "a FIFO",
        "file": "a regular file",
        "folder": "a folder",
    }[what]
    assert f"the bot's socket was replaced by {expected}" in str(err.value)
    assert str(err.value).endswith(": refused")
    assert guard.check() == str(err.value)
    assert decoy.connections == 0


def test_guard_refuses_a_socket_of_another_uid(listening: tuple[Path, socket.socket]) -> None:
    path, _ = listening
    with pytest.raises(SocketRefused, match=f"belongs to uid {os.getuid()}, not to the bot's uid 4242"):
        _connect(SocketGuard(path, 4242))


def test_guard_reports_a_missing_socket_as_missing(tmp_path: Path) -> None:
    guard = SocketGuard(tmp_path / "bot.sock", os.getuid())
    assert guard.check() is None
    with pytest.raises(FileNotFoundError):
        guard.open()


@pytest.mark.skipif(not socket_guard._BY_FD, reason="needs O_PATH and /proc/self/fd (Linux)")
def test_guard_closes_the_window_between_check_and_connect(
    listening: tuple[Path, socket.socket], decoy: Decoy
) -> None:
    """The bot swaps its socket for a link right after the check: the
    connection still goes to the inode that was checked, not to the link's target."""
    path, server = listening
    guard = SocketGuard(path, os.getuid())
    fd = guard.open()
    os.rename(path, path.with_name("old.sock"))
    path.symlink_to(decoy.path)
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(guard.address(fd))
    finally:
        guard.release(fd)
    server.settimeout(1)
    server.accept()[0].close()
    time.sleep(0.2)
    assert decoy.connections == 0


def test_guard_overhead(listening: tuple[Path, socket.socket]) -> None:
    path, _ = listening
    guard = SocketGuard(path, os.getuid())
    n = 20_000
    t0 = time.perf_counter()
    for _ in range(n):
        guard.release(guard.open())
    per_open = (time.perf_counter() - t0) / n * 1e6
    t0 = time.perf_counter()
    for _ in range(n):
        os.lstat(path)
    per_lstat = (time.perf_counter() - t0) / n * 1e6
    FIGURES["socket guard per new connection"] = f"{per_open:.1f} µs (a bare lstat: {per_lstat:.1f} µs)"
    assert per_open < 200


async def test_guarded_session_refuses_before_connecting(tmp_path: Path, decoy: Decoy) -> None:
    """The HTTP client the container bot uses: a link at the socket path is a
    connection fault, and nothing reaches the link's target."""
    path = tmp_path / "bot.sock"
    path.symlink_to(decoy.path)
    http = socket_guard.GuardedHttpBot(SocketGuard(path, os.getuid()), name="x")
    try:
        outcome = await http.act_bytes(b"{}", "r", 1, 1.0)
    finally:
        await http.close()
    assert outcome.fault is not None and outcome.fault.kind == "connection"
    assert "the bot's socket was replaced by a symbolic link: refused" in outcome.fault.detail
    time.sleep(0.2)
    assert decoy.connections == 0


# ---------------------------------------------------------------- with Docker


async def test_team_a_and_team_underscore_a_play_at_once(images: dict[str, str], out: Path) -> None:
    a = ContainerBot(images["greedy"], out_dir=out, name="team a")
    b = ContainerBot(images["greedy"], out_dir=out, name="team_a")
    try:
        await asyncio.gather(a.launch(), b.launch())
        assert a.socket_path is not None and b.socket_path is not None
        assert a.socket_path.parent != b.socket_path.parent
        assert a.log_path != b.log_path and a.log_path.parent == b.log_path.parent == out / "logs"
        infos = await asyncio.gather(a.handshake(), b.handshake(), a.handshake(), b.handshake())
        assert [i.name for i in infos] == ["greedy"] * 4
        assert a.socket_path.exists() and b.socket_path.exists()
    finally:
        await asyncio.gather(a.stop(), b.stop())
    assert "start of a container" in a.log_path.read_text()
    assert "start of a container" in b.log_path.read_text()


@pytest.mark.parametrize("swap_to", ["symlink", "fifo", "file"])
async def test_a_swapped_socket_is_never_followed(
    images: dict[str, str], out: Path, decoy: Decoy, swap_to: str
) -> None:
    """After the handshake and /start, the bot replaces its socket by a link
    to a socket of the host (the decoy stands for /var/run/docker.sock), a
    FIFO or a file: each later call is a connection fault saying so, and the
    referee never connects to the decoy."""
    skip_under_runtime(
        {
            "runsc": "gVisor refuses the swap itself: inside the sandbox the host socket "
            "the bot created cannot be unlinked or renamed over (EPERM), so "
            "the attack cannot be made there; the guard is what holds under runc"
        }
    )
    bot = ContainerBot(
        images["hostile"],
        out_dir=out,
        name="swapper",
        env={"HOSTILE": "swap", "SWAP_TO": swap_to, "SWAP_TARGET": str(decoy.path)},
    )
    async with bot:
        assert bot.socket_path is not None
        assert await bot.start(_start(["swapper", "other"]), 2.0) is None
        await wait_for_line(bot.log_path, f"SWAPPED {swap_to}", timeout=10.0)
        for turn in (1, 2):
            outcome = await bot.act_bytes(b"{}", f"r{turn}", turn, 1.0)
            assert outcome.fault is not None and outcome.fault.kind == "connection", outcome
            what = {"symlink": "a symbolic link", "fifo": "a FIFO (named pipe)", "file": "a regular file"}[
                swap_to
            ]
            assert f"the bot's socket was replaced by {what}: refused" in outcome.fault.detail
            assert outcome.latency_ms < 100
        assert decoy.connections == 0
        if swap_to == "symlink":
            # Control: a client that follows the path reaches the decoy, so
            # the attack was real.
            async with HttpBot(f"unix:{bot.socket_path}") as naive:
                await naive.act_bytes(b"{}", "r", 3, 1.0)
            deadline = time.monotonic() + 2
            while decoy.connections == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert decoy.connections == 1
    assert "REQUEST /act" not in bot.log_path.read_text()


async def test_a_link_before_the_first_handshake_fails_the_start(
    images: dict[str, str], out: Path, decoy: Decoy
) -> None:
    script = (
        f"import os, time; os.symlink({str(decoy.path)!r}, '/run/bot/bot.sock'); "
        "print('linked', flush=True); time.sleep(60)"
    )
    bot = ContainerBot(
        images["hostile"],
        out_dir=out,
        name="linker",
        command=["python", "-c", script],
        limits=ContainerLimits(ready_timeout_s=10),
    )
    t0 = time.perf_counter()
    with pytest.raises(BotError) as err:
        await bot.launch()
    assert time.perf_counter() - t0 < 5  # at once, not after the ready timeout
    assert "the bot's socket was replaced by a symbolic link: refused" in str(err.value)
    assert decoy.connections == 0
    assert not os.path.ismount(out / "sockets" / "linker")  # no tmpfs left by a failed start
    await bot.stop()


def _held(folder: Path) -> int:
    """Bytes the folder's files hold; a file removed while it is walked (the
    watchdog's clean-up runs at the same time) holds nothing."""
    held = 0
    for d, _, files in os.walk(folder):
        for f in files:
            try:
                held += os.lstat(os.path.join(d, f)).st_blocks * 512
            except FileNotFoundError:
                pass
    return held


@needs_root
async def test_a_bot_cannot_fill_the_disk_through_its_socket_folder(
    images: dict[str, str], out: Path
) -> None:
    """As root: the folder is a tmpfs of the cap; 100 MB of writes stop at
    the cap (ENOSPC) and the bot still plays."""
    bot = ContainerBot(
        images["hostile"],
        out_dir=out,
        name="filler",
        env={"HOSTILE": "fill"},
        limits=ContainerLimits(socket_folder="1m"),
    )
    async with bot:
        assert bot.folder_bound == "tmpfs" and bot.socket_path is not None
        folder = bot.socket_path.parent
        line = await wait_for_line(bot.log_path, "FILL ", timeout=10.0)
        fill = json.loads(line[len("FILL ") :])
        assert fill["error"] == "ENOSPC" and fill["bytes"] <= 1024**2
        assert _held(folder) <= 1024**2
        assert os.statvfs(folder).f_blocks * os.statvfs(folder).f_frsize <= 1024**2
        assert (await bot.handshake()).name == "hostile-fill"
    assert not os.path.ismount(folder)
    assert list(folder.iterdir()) == []


async def test_without_a_tmpfs_the_watchdog_stops_a_filler(
    images: dict[str, str], out: Path, monkeypatch: pytest.MonkeyPatch, docker_client: Any
) -> None:
    """Without root (simulated: the mount fails): the folder is measured twice
    a second and a container over the cap is stopped, its files removed."""

    def no_mount(*args: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(container, "mount_tmpfs", no_mount)  # where the bot looks it up
    bot = ContainerBot(
        images["hostile"],
        out_dir=out,
        name="filler2",
        env={"HOSTILE": "fill"},
        limits=ContainerLimits(socket_folder="1m"),
    )
    try:
        async with bot:
            assert bot.socket_path is not None
            folder = bot.socket_path.parent
            name = bot.container_name
            assert name is not None

            def running() -> bool:  # as the daemon sees the container
                return bool(docker_client.containers.get(name).attrs["State"]["Running"])

            t0 = time.perf_counter()
            while await asyncio.to_thread(running) and time.perf_counter() - t0 < 10:
                await asyncio.sleep(0.1)
            FIGURES["socket folder watchdog: writer stopped after"] = f"{time.perf_counter() - t0:.2f} s"
            assert not await asyncio.to_thread(running)
            t1 = time.perf_counter()  # the watchdog removes its files after stopping it
            while _held(folder) and time.perf_counter() - t1 < 5:
                await asyncio.sleep(0.05)
            assert _held(folder) == 0
            outcome = await bot.act_bytes(b"{}", "r", 1, 1.0)
            assert outcome.fault is not None and outcome.fault.kind == "connection"
            assert "writing more than 1m into its socket folder" in outcome.fault.detail
    except BotError as e:
        # The writer starts once the socket is there, so it may beat the
        # readiness check (seen under gVisor): then the start itself fails,
        # with the same reason.
        assert "stopped before answering GET /" in str(e)
        assert "writing more than 1m into its socket folder" in str(e)
        assert bot.socket_path is not None
        assert _held(bot.socket_path.parent) == 0
        await bot.stop()
    assert bot.folder_bound == "watchdog"
    assert bot.folder_mount_error is not None and "Operation not permitted" in bot.folder_mount_error


@needs_root
async def test_a_root_referee_runs_its_bots_as_nobody(images: dict[str, str], out: Path) -> None:
    bot = ContainerBot(images["hostile"], out_dir=out, name="whoami", env={"HOSTILE": "probe"})
    async with bot:
        line = await wait_for_line(bot.log_path, "PROBE ", timeout=10.0)
        assert bot.socket_path is not None
        folder = os.stat(bot.socket_path.parent)
        sock = os.lstat(bot.socket_path)
    probe = json.loads(line[len("PROBE ") :])
    assert probe["uid"] == container_limits.NOBODY != 0
    assert stat.S_IMODE(folder.st_mode) == 0o700 and folder.st_uid == container_limits.NOBODY
    assert sock.st_uid == container_limits.NOBODY


_KILLED_REFEREE = """
import asyncio, sys
from pathlib import Path
from referee.bots.sandbox.container import ContainerBot

async def main() -> None:
    async with ContainerBot(sys.argv[1], out_dir=Path(sys.argv[2]), name="orphan") as bot:
        assert bot.socket_path is not None
        print("READY", bot.folder_bound, bot.socket_path.parent, flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


@needs_root
def test_a_killed_referee_leaves_no_mount_once_cleaned_up(images: dict[str, str], out: Path) -> None:
    """A referee killed with its bots up (a cluster node lost mid-run) leaves
    their containers and, as root, their socket folders' tmpfs mounted under
    the run's folder, which no rm can remove. `referee cleanup` removes both."""
    import signal
    import subprocess
    import sys

    from click.testing import CliRunner

    from referee.bots.sandbox.instance import current
    from referee.cli import main

    # the killed referee and the cleanup as one install (the id this process's containers use),
    # whatever REFEREE_INSTANCE the worker was given
    inst = current().id
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_REFEREE, images["greedy"], str(out)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "REFEREE_INSTANCE": inst},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line[:2] == ["READY", "tmpfs"], line
        folder = Path(line[2])
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert os.path.ismount(folder)  # what the killed referee left
    result = CliRunner().invoke(main, ["--instance", inst, "cleanup", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "removed 1 container(s)" in result.output
    assert not os.path.ismount(folder)
