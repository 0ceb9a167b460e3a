"""Command bots: started on a free port, logged, restarted, stopped."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from protocol import GameStart, Rules, Timeouts
from referee.bots import BotError, CommandBot
from referee.match import play_match
from tests.support.programs.zoo import SCRIPT as ZOO

ROOT = Path(__file__).resolve().parents[2]
FAST = Timeouts(move_ms=300, start_ms=2000, end_ms=1000)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purposes
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _sample_command(name: str) -> list[str]:
    if (ROOT / "sample_bots" / f"{name}.py").exists():
        return [sys.executable, "-m", f"sample_bots.{name}", "--port", "{port}"]
    return [sys.executable, ZOO, "good", "--port", "{port}", "--name", name]  # pragma: no cover


async def test_command_bots_play_a_game(tmp_path: Path, session: aiohttp.ClientSession) -> None:
    async with (
        CommandBot(_sample_command("random"), log_dir=tmp_path, session=session, cwd=ROOT) as a,
        CommandBot(_sample_command("greedy"), log_dir=tmp_path, session=session, cwd=ROOT) as b,
    ):
        assert a.running and a.port is not None and a.info is not None
        assert a.name == "random" and b.name == "greedy"
        # a generous move limit: the subject is the process bots playing, not their speed (at
        # 300 ms a good bot timed out beside two CPU hogs)
        result = await play_match([a, b], 12, timeouts=Timeouts(move_ms=5000, start_ms=5000, end_ms=5000))
        pids = [a.pid, b.pid]
    assert result.faults == [[], []]
    assert sorted(result.places)[0] == 1
    for pid in pids:
        assert pid is not None and not _alive(pid)
    assert (tmp_path / "sample_bots.random.stderr.log").read_text().count("--- ") == 1
    assert (tmp_path / "sample_bots.greedy.stdout.log").exists()


async def test_process_that_exits_at_once(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-c",
        "import sys; sys.stderr.write('boom: no model file\\n'); sys.exit(3)",
        "{port}",
    ]
    bot = CommandBot(command, log_dir=tmp_path, name="crashy")
    with pytest.raises(BotError) as err:
        await bot.launch()
    text = str(err.value)
    assert "exited with code 3" in text
    assert "boom: no model file" in text
    assert str(tmp_path / "crashy.stderr.log") in text
    assert not bot.running


async def test_process_that_never_listens(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-c",
        "import sys, time; print('thinking', file=sys.stderr, flush=True); time.sleep(60)",
        "{port}",
    ]
    bot = CommandBot(command, log_dir=tmp_path, ready_timeout_s=0.5)
    with pytest.raises(BotError) as err:
        await bot.launch()
    assert "did not answer GET / within 0.5 s" in str(err.value)
    assert "thinking" in str(err.value)
    assert not bot.running


async def test_process_with_a_wrong_handshake(tmp_path: Path) -> None:
    script = tmp_path / "v2.py"
    script.write_text(
        "import sys\nfrom aiohttp import web\n"
        "async def info(r): return web.json_response({'apiversion': '2', 'name': 'v2'})\n"
        "app = web.Application(); app.router.add_get('/', info)\n"
        "web.run_app(app, host='127.0.0.1', port=int(sys.argv[1]), print=None)\n"
    )
    bot = CommandBot([sys.executable, str(script), "{port}"], log_dir=tmp_path)
    with pytest.raises(BotError, match="answered, but wrongly.*protocol version '2'"):
        await bot.launch()
    assert not bot.running


async def test_restart_after_death_and_sigkill_after_grace(tmp_path: Path) -> None:
    command = [sys.executable, ZOO, "good", "--port", "{port}", "--ignore-sigterm"]
    bot = CommandBot(command, log_dir=tmp_path, stop_grace_s=0.3)
    await bot.launch()
    first = bot.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    async with asyncio.timeout(60):  # only a broken test waits that long
        assert await bot.exited() == -signal.SIGKILL
    assert not bot.running
    start = GameStart(apiversion="1", game_id="g", seat=0, players=["a", "b"], rules=Rules(), timeouts=FAST)
    assert await bot.start(start, 1.0) is None  # started again first
    assert bot.launches == 2 and bot.pid != first and bot.running
    second = bot.pid
    assert second is not None
    loop = asyncio.get_running_loop()
    begun = loop.time()
    await bot.stop()  # SIGTERM is ignored: SIGKILL after 0.3 s
    assert loop.time() - begun >= 0.3
    assert not _alive(second)
    assert (tmp_path / "zoo.stderr.log").read_text().count("--- ") == 2


async def test_bot_process_dies_mid_game(tmp_path: Path, session: aiohttp.ClientSession) -> None:
    async with (
        CommandBot(_sample_command("random"), log_dir=tmp_path, session=session, cwd=ROOT) as good,
        CommandBot(
            [sys.executable, ZOO, "dies", "--after", "3", "--port", "{port}"],
            log_dir=tmp_path,
            session=session,
        ) as dying,
    ):
        result = await play_match([good, dying], 3, timeouts=FAST)
        async with asyncio.timeout(60):  # it has exited (os._exit(3)); only a broken test waits that long
            assert await dying.exited() == 3
        assert not dying.running
    assert result.disqualified == [1]
    assert result.places == [1, 2]
    assert {f.kind for f in result.faults[1]} == {"connection"}


async def test_environment_is_extended(tmp_path: Path) -> None:
    code = "import os, sys; sys.stderr.write(os.environ['EXTRA'] + ' ' + os.environ['PORT'] + ' ' + str('PATH' in os.environ)); sys.exit(1)"
    bot = CommandBot([sys.executable, "-c", code, "{port}"], log_dir=tmp_path, env={"EXTRA": "hello"})
    with pytest.raises(BotError) as err:
        await bot.launch()
    assert f"hello {bot.port} True" in str(err.value)
