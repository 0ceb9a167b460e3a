"""One factory for every bot description: CLI SPECs, league entries, submissions (issue 12)."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import aiohttp
import pytest

from referee.bots import BotError, CommandBot, HttpBot
from referee.bots.factory import BotFactory, BotSpec, parse_spec
from referee.bots.sandbox.container import ContainerBot
from referee.bots.sandbox.container_limits import ContainerLimits
from tests.support.programs.zoo import SCRIPT as ZOO

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "kind", "target"),
    [
        ("http://127.0.0.1:8001", "url", "http://127.0.0.1:8001"),
        ("https://bots.example:443/alice", "url", "https://bots.example:443/alice"),
        ("unix:/tmp/bot.sock", "url", "unix:/tmp/bot.sock"),
        (
            "cmd:python -m sample_bots.random --port {port}",
            "command",
            ["python", "-m", "sample_bots.random", "--port", "{port}"],
        ),
        ("cmd:'my bot' --port={port}", "command", ["my bot", "--port={port}"]),
    ],
)
def test_parse_spec(text: str, kind: str, target: object) -> None:
    spec = parse_spec(text, secret="s")
    assert (spec.kind, spec.target, spec.secret) == (kind, target, "s")
    assert spec.started_here == (kind != "url")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("cmd:", "no command after 'cmd:'"),
        ("cmd:python bot.py", "must say where the port goes, as {port}"),
        ("127.0.0.1:8001", "a bot is a URL (http://127.0.0.1:8001), unix:/path/to.sock, or cmd:"),
        ("ftp://x", "a bot is a URL"),
        ("http://", "a bot URL looks like http://127.0.0.1:8001"),
    ],
)
def test_parse_spec_says_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_spec(text)
    assert words in str(err.value)


async def test_each_kind_gets_its_transport(tmp_path: Path) -> None:
    asked: list[str] = []  # the requests that went through the shared session

    async def on_request_start(
        session: object, context: object, params: aiohttp.TraceRequestStartParams
    ) -> None:
        asked.append(str(params.url))

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_request_start)
    async with aiohttp.ClientSession(trace_configs=[trace]) as session:
        factory = BotFactory(
            log_dir=tmp_path / "logs",
            base_dir=tmp_path,
            session=session,
            out_dir=tmp_path,
            limits=ContainerLimits(memory="64m"),
            labels={"referee.tournament": "t"},
        )
        tcp = factory.make(BotSpec(name="a", url="http://127.0.0.1:9", secret="k"))
        assert isinstance(tcp, HttpBot) and tcp.name == "a"
        unix = factory.make(BotSpec(name="", url="unix:/tmp/x.sock"))
        assert isinstance(unix, HttpBot) and unix.name == "unix:/tmp/x.sock"
        # The TCP bot talks through the shared session, the unix-socket bot
        # through a session of its own (nobody answers either: no matter).
        with contextlib.suppress(BotError):
            await tcp.handshake(1.0)
        assert asked and all(url.startswith("http://127.0.0.1:9/") for url in asked), asked
        shared = len(asked)
        with contextlib.suppress(BotError):
            await unix.handshake(1.0)
        await unix.close()
        assert len(asked) == shared, asked
        assert await unix.endpoint() == ("unix:/tmp/x.sock", None, None)
        assert await tcp.endpoint() == ("http://127.0.0.1:9", "k", None)
        cmd = factory.make(BotSpec(name="c", command=["./bot", "--port", "{port}"], cwd="sub"))
        assert isinstance(cmd, CommandBot) and cmd.cwd == tmp_path / "sub"
        box = factory.make(BotSpec(name="b", image="bot:1"))
        assert isinstance(box, ContainerBot)
        assert box.limits.memory == "64m" and box.extra_labels == {"referee.tournament": "t"}
        own = factory.make(BotSpec(name="b", image="bot:1", limits=ContainerLimits(memory="32m")))
        assert isinstance(own, ContainerBot) and own.limits.memory == "32m"
        assert await factory.prepare(BotSpec(name="a", url="http://127.0.0.1:9")) == []


async def test_python_is_the_referees_interpreter_wherever_the_command_comes_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python`` in a CLI SPEC, a league file or a CommandBot is this
    interpreter, with this project installed, not whichever is on PATH: with
    a PATH that has no Python with aiohttp, the bot still starts."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}{os.pathsep}/usr/bin{os.pathsep}/bin")
    spec = parse_spec(f"cmd:python {ZOO} good --port {{port}} --name pathless")
    bot = BotFactory(log_dir=tmp_path / "logs").make(spec)
    assert isinstance(bot, CommandBot) and bot.command[0] == sys.executable
    try:
        info = await bot.handshake()
        assert info.name == "pathless"
        url, secret, _ = await bot.endpoint()
        assert url.startswith("http://127.0.0.1:") and secret is None
    finally:
        await bot.close()
    assert CommandBot(["python3", "x"], log_dir=tmp_path).command[0] == sys.executable
    assert CommandBot(["node", "x"], log_dir=tmp_path).command[0] == "node"
