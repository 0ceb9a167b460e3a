"""Bots started as real processes: the Node.js bot, and ``python -m sample_bots.<name>``."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import aiohttp
import pytest

from protocol import HEADER, decode_bot_info, decode_reply, sign
from referee.bots import free_port
from tests.support.bots import ROOT, SCRIPTED_NAMES, body, by_name, game_end
from tests.support.processes import serving

NODE = shutil.which("node")
SECRET = "node-secret"


@contextmanager
def bot_process(cmd: list[str]) -> Iterator[None]:
    """The bot `cmd` run as a process, once it says it listens (the SDK's and
    the Node.js bot's start line); stopped after the block."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("BOT_SECRET", None)
    with serving(cmd, cwd=ROOT, env=env):
        yield


# ------------------------------------------------------------------ Node.js


@pytest.fixture(scope="module")
def node_bots() -> Iterator[tuple[str, str]]:
    """Two Node bots: (url without a secret, url with SECRET)."""
    if NODE is None:
        pytest.skip("node is not installed: the Node.js sample bot cannot be tested")
    urls = []
    with ExitStack() as stack:
        for extra in ([], ["--secret", SECRET]):
            port = free_port()
            stack.enter_context(bot_process([NODE, "sample_bots/node/bot.js", "--port", str(port), *extra]))
            urls.append(f"http://127.0.0.1:{port}")
        yield urls[0], urls[1]


async def test_node_handshake(node_bots: tuple[str, str]) -> None:
    async with aiohttp.ClientSession() as session:
        for url in node_bots:
            async with session.get(url + "/") as resp:
                assert resp.status == 200
                info = decode_bot_info(await resp.read())
                assert (info.apiversion, info.name) == ("1", "node-greedy")


@pytest.mark.parametrize("scenario", SCRIPTED_NAMES)
async def test_node_start_act_end(node_bots: tuple[str, str], scenario: str) -> None:
    sc = by_name(scenario)
    url = node_bots[0]
    request = sc.request(request_id="n-1", game_id="ng")
    async with aiohttp.ClientSession() as session:
        async with session.post(url + "/start", data=body(sc.start("ng"))) as resp:
            assert resp.status == 200
        async with session.post(url + "/act", data=body(request)) as resp:
            assert resp.status == 200
            reply = decode_reply(await resp.read(), "n-1")
        sc.assert_legal(reply.chosen(request.legal))
        async with session.post(url + "/end", data=body(game_end("ng"))) as resp:
            assert resp.status == 200


async def test_node_plays_the_lowest_card(node_bots: tuple[str, str]) -> None:
    sc = by_name("ordinary play")  # pile 4Y; hand 3R 5G 5B 9B C
    request = sc.request(request_id="low")
    async with aiohttp.ClientSession() as session:
        async with session.post(node_bots[0] + "/act", data=body(request)) as resp:
            reply = decode_reply(await resp.read(), "low")
    assert reply.chosen(request.legal).cards == ("5G",)  # type: ignore[union-attr]


async def test_node_signature_accepted_and_refused(node_bots: tuple[str, str]) -> None:
    url = node_bots[1]
    act = body(by_name("ordinary play").request(request_id="s-1"))
    async with aiohttp.ClientSession() as session:
        async with session.post(url + "/act", data=act, headers={HEADER: sign(SECRET, act)}) as resp:
            assert resp.status == 200
            decode_reply(await resp.read(), "s-1")
        for headers in ({}, {HEADER: sign("wrong", act)}):
            async with session.post(url + "/act", data=act, headers=headers) as resp:
                assert resp.status == 401
                assert "X-Referee-Signature" in (await resp.json())["error"]


@pytest.mark.parametrize(
    ("path", "data", "words"),
    [
        ("/act", b"not json", "not valid JSON"),
        ("/act", b'{"game_id": "g"}', "missing required field 'request_id'"),
        ("/act", b"[1]", "JSON object"),
        ("/start", b'{"game_id": "g", "seat": "0", "players": [], "rules": {}}', "'seat' must be number"),
        ("/end", b"", "not valid JSON"),
    ],
)
async def test_node_malformed_bodies_get_400(
    node_bots: tuple[str, str], path: str, data: bytes, words: str
) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(node_bots[0] + path, data=data) as resp:
            assert resp.status == 400
            assert words in (await resp.json())["error"]


# ------------------------------------------------------- python -m sample_bots


def test_python_m_random_answers_get() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with bot_process([sys.executable, "-m", "sample_bots.random", "--port", str(port), "--seed", "3"]):
        with urllib.request.urlopen(url + "/", timeout=5) as resp:
            assert resp.status == 200
            assert decode_bot_info(resp.read()).name == "random"


def test_python_m_greedy_on_a_unix_socket() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "greedy.sock")
        with bot_process([sys.executable, "-m", "sample_bots.greedy", "--unix", path]):
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(path)
                s.sendall(b"GET / HTTP/1.1\r\nHost: bot\r\nConnection: close\r\n\r\n")
                data = b""
                while chunk := s.recv(4096):
                    data += chunk
            head, _, payload = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200")
            assert decode_bot_info(payload).name == "greedy"
