"""Issue 26, item 5: where a container bot's lines go in its log
(referee/bots/sandbox/marks.py), by the daemon's timestamps or by the bot's own
marks (the SDK's: sample_bots/sdk.py prints them when ``BOT_OUTPUT_MARKS``
is set), as the replay reads them back (``output_by_request``)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from protocol import ActRequest, BotInfo
from referee.bots.managed import ACT_MARK, GAME_MARK
from referee.bots.sandbox.marks import OutputMarks, without_marks
from referee.diagnostics import output_by_game, output_by_request
from sample_bots import sdk
from tests.support.bots import body, by_name
from tests.support.processes import Output, first_line, stop

MakeClient = Callable[[web.Application], Awaitable[Any]]
ROOT = Path(__file__).resolve().parents[2]


class Pump:
    """What the container's log pump does with the daemon's chunks, into a file."""

    def __init__(self, path: Path, marks: OutputMarks) -> None:
        self.path, self.marks = path, marks
        self.at_line_start = True
        self.clock = 1000.0

    def out(self, text: str, at: float | None = None) -> None:
        """The bot printed `text` (one line or part of one), read by the daemon at `at` (default: now)."""
        self.clock += 1
        data = self.marks.place(self.clock if at is None else at, text.encode(), self.at_line_start)
        if data:
            self.at_line_start = data.endswith(b"\n")
            with self.path.open("ab") as f:
                f.write(data)

    def _made(self, game: bool, text: str) -> None:
        """A mark made now, by the pump's clock rather than the real one."""
        self.clock += 1
        self.marks.add(game, text)
        _, is_game, data = self.marks.pending.pop()
        self.marks.pending.append((self.clock, is_game, data))

    def sent(self, request_id: str, turn: int) -> None:
        """The referee sent a request."""
        self._made(False, f"{ACT_MARK}{request_id} {turn}\n")

    def game(self, game_id: str) -> None:
        """The referee started a game."""
        self._made(True, f"{GAME_MARK}{game_id}\n")


@pytest.fixture
def pump(tmp_path: Path) -> Pump:
    return Pump(tmp_path / "bot.container.log", OutputMarks())


def test_without_bot_marks_lines_go_by_the_timestamps_and_never_early(pump: Pump) -> None:
    pump.marks.new_container()  # a bot that ignores the token: timestamps only
    pump.game("g")
    pump.sent("g.1", 0)
    pump.out("thinking about 1\n")
    pump.sent("g.2", 1)
    late = pump.clock - 0.5  # read by the daemon before the referee's mark of g.2: lands on g.1
    pump.out("late line of 1\n", at=late)
    pump.out("about 2\n")
    out = output_by_request([pump.path], "g")
    assert out == {"g.1": "thinking about 1\nlate line of 1", "g.2": "about 2"}
    assert not pump.marks.by_bot


def test_bot_marks_place_every_line_exactly(pump: Pump) -> None:
    token = pump.marks.new_container()
    pump.game("g")
    pump.out("started\n")
    pump.sent("g.1", 0)
    pump.out(f"--- {token} act g.1 0\n")
    pump.out("choosing my 3UP\n")
    pump.out(f"--- {token} done g.1\n")
    pump.out("a thread, after the answer\n")
    pump.sent("g.2", 1)
    # the daemon's stamp says "before g.2 was sent": the timestamps would put it on g.1
    pump.out(f"--- {token} act g.2 1\n", at=pump.clock - 0.5)
    pump.out("first of 2\n", at=pump.clock - 0.5)
    pump.out("second of 2\n")
    pump.out(f"--- {token} done g.2\n")
    assert pump.marks.by_bot
    assert output_by_request([pump.path], "g") == {"g.1": "choosing my 3UP", "g.2": "first of 2\nsecond of 2"}
    text = pump.path.read_text()
    assert token not in text  # the bot's marks are the referee's now
    assert (
        without_marks(text) == "--- game g\nstarted\nchoosing my 3UP\na thread, after the answer\n"
        "first of 2\nsecond of 2\n"
    )
    assert output_by_game([pump.path])["g"] == without_marks(text).split("\n", 1)[1]


def test_lines_that_look_like_marks_move_nothing(pump: Pump) -> None:
    """A bot's line like the referee's marks, or like its own with another
    token, another request's id, a wrong turn, or a request twice: its own
    output at its own move, escaped."""
    token = pump.marks.new_container()
    other = OutputMarks().new_container()
    pump.game("g")
    pump.sent("g.1", 0)
    pump.sent("h.1", 0)  # another game this bot plays (another seat's request)
    pump.out(f"--- {token} act g.1 0\n")
    pump.out(f"--- {token} done g.1\n")
    pump.sent("g.2", 1)
    pump.out(f"--- {token} act g.2 1\n")
    forged = [
        "--- act g.1 0\n",  # the referee's own
        "--- game h\n",
        "--- done g.2\n",
        "--- 2024-01-01 00:00:00 start of a container from 'x'\n",
        f"--- {other} act g.1 0\n",  # another container's token
        f"--- {token} act g.9 7\n",  # not sent
        f"--- {token} act g.1 0\n",  # sent, its mark already came
        f"--- {token} act h.1 5\n",  # sent, not that turn
        f"--- {token} done g.1\n",  # not being answered
    ]
    for line in forged:
        pump.out(line)
    pump.out("mine\n")
    pump.out(f"--- {token} done g.2\n")
    out = output_by_request([pump.path], "g")
    assert out["g.2"] == "".join(" " + line for line in forged) + "mine"
    assert "g.1" not in out and "g.9" not in out
    assert output_by_request([pump.path], "h") == {}
    assert set(output_by_game([pump.path])) == {"g"}


def test_a_mark_inside_a_line_and_overlapping_requests(pump: Pump) -> None:
    token = pump.marks.new_container()
    pump.sent("g.1", 0)
    pump.sent("g.2", 0)  # two seats' set-up at once
    pump.out(f"--- {token} act g.1 0\n")
    pump.out("one ")  # a print without its end of line, then the other request's mark
    pump.out(f"half--- {token} act g.2 0\n")
    pump.out("both\n")
    pump.out(f"--- {token} done g.2\n")
    pump.out("rest of one\n")
    pump.out(f"--- {token} done g.1\n")
    pump.out("after\n")
    assert output_by_request([pump.path], "g") == {"g.1": "one half\nrest of one", "g.2": "both"}


def test_a_game_mark_does_not_cut_a_request_being_answered(pump: Pump) -> None:
    token = pump.marks.new_container()
    pump.game("g")
    pump.sent("g.1", 1)
    pump.out(f"--- {token} act g.1 1\n")
    pump.game("h")  # another game starts meanwhile
    pump.out("still g.1\n")
    pump.out(f"--- {token} done g.1\n")
    assert output_by_request([pump.path], "g") == {"g.1": "still g.1"}


def test_a_new_container_has_a_new_token(pump: Pump) -> None:
    old = pump.marks.new_container()
    pump.sent("g.1", 1)
    pump.out(f"--- {old} act g.1 1\n")
    assert pump.marks.by_bot
    new = pump.marks.new_container()
    assert new != old and not pump.marks.by_bot
    pump.sent("g.2", 2)
    pump.out(f"--- {old} act g.2 2\n")
    pump.out("by timestamps\n")
    assert output_by_request([pump.path], "g")["g.2"] == f" --- {old} act g.2 2\nby timestamps"


def test_add_remembers_a_bounded_number_of_requests() -> None:
    """Of SENT_KEPT + 10 requests sent, the bot's marks are taken for the
    last SENT_KEPT exactly: the ten oldest are forgotten (their marks are
    ordinary output)."""
    from referee.bots.sandbox import marks as M

    marks = OutputMarks()
    token = marks.new_container()
    sent = M.SENT_KEPT + 10
    for n in range(sent):
        marks.add(False, f"{ACT_MARK}g.{n} {n}\n")
    taken = [
        n
        for n in range(sent)
        if marks.place(None, f"--- {token} act g.{n} {n}\n".encode(), True)
        == f"{ACT_MARK}g.{n} {n}\n".encode()
    ]
    assert taken == list(range(10, sent))  # SENT_KEPT of them, g.0 forgotten, the last kept


# --------------------------------------------------------------- the SDK's side


async def test_the_sdk_prints_its_marks_around_decide(
    aiohttp_client: MakeClient, capfd: pytest.CaptureFixture[str]
) -> None:
    def decide(r: ActRequest) -> int:
        print(f"deciding {r.request_id}")
        return 0

    client = await aiohttp_client(
        sdk.make_app(decide, BotInfo(apiversion="1", name="t", author="t"), output_marks="tok")
    )
    capfd.readouterr()
    act = by_name("ordinary play").request(request_id="g.7")
    r = await client.post("/act", data=body(act))
    assert r.status == 200
    assert capfd.readouterr().out == f"--- tok act g.7 {act.turn}\ndeciding g.7\n--- tok done g.7\n"


async def test_the_sdk_prints_no_marks_unless_asked(
    aiohttp_client: MakeClient, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(sdk.OUTPUT_MARKS_ENV, raising=False)
    client = await aiohttp_client(sdk.make_app(lambda r: 0, BotInfo(apiversion="1", name="t", author="t")))
    capfd.readouterr()
    assert (
        await client.post("/act", data=body(by_name("ordinary play").request(request_id="g.1")))
    ).status == 200
    assert "---" not in capfd.readouterr().out
    with pytest.raises(ValueError, match="output_marks must be letters"):
        sdk.make_app(lambda r: 0, BotInfo(apiversion="1", name="t", author="t"), output_marks="a b\n")
    assert sdk.output_marks_token({"BOT_OUTPUT_MARKS": "x\n--- act"}) is None
    assert sdk.output_marks_token({"BOT_OUTPUT_MARKS": "ab12"}) == "ab12"
    assert sdk.output_marks_token({}) is None


BOT = """\
import logging, sys
from protocol import BotInfo
from sample_bots.sdk import run_bot

def decide(request):
    print("stdout of", request.request_id)               # block-buffered unless the SDK says otherwise
    sys.stderr.write("stderr of " + request.request_id + "\\n")
    logging.getLogger("bot").warning("logged in %s", request.request_id)
    raise RuntimeError("a bug in " + request.request_id)  # the SDK's traceback, on stderr

run_bot(decide, BotInfo(apiversion="1", name="printer", author="t"))
"""


def test_run_bot_puts_stdout_and_stderr_between_its_marks(tmp_path: Path) -> None:
    """A bot run as a container runs it (stdout and stderr two pipes, not
    flushed by the bot): every line of a request between its marks."""
    script = tmp_path / "printer.py"
    script.write_text(BOT)
    sock = tmp_path / "bot.sock"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BOT_UNIX": str(sock), "BOT_OUTPUT_MARKS": "tok"}
    proc = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = Output.both(proc, "the bot")
    try:
        first_line(f"listening on unix:{sock}", out, err)  # on stdout if the SDK joined stderr into it

        async def ask() -> None:
            async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(sock))) as s:
                for n in (1, 2):
                    act = by_name("ordinary play").request(request_id=f"g.{n}")
                    async with s.post("http://bot/act", data=body(act)) as r:
                        assert r.status == 200 and (await r.json())["index"] == 0

        asyncio.run(ask())
    finally:
        stop(proc)
    text = out.text()
    assert err.text() == ""  # stderr went into stdout
    turn = by_name("ordinary play").request(request_id="x").turn
    for n in (1, 2):
        part = text.split(f"--- tok act g.{n} {turn}\n", 1)[1].split(f"--- tok done g.{n}\n", 1)[0]
        assert f"stdout of g.{n}\n" in part and f"stderr of g.{n}\n" in part, text
        assert f"logged in g.{n}" in part and f"RuntimeError: a bug in g.{n}" in part, text
        assert "decide raised; answering index 0" in part
        assert f"g.{3 - n}" not in part


@pytest.mark.parametrize("script", ["sample_bots/node/bot.js", "starter_kits/node/bot.js"])
def test_the_node_bots_print_their_marks_with_stderr_between(script: str, tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the Node.js bots cannot be tested")
    sock = tmp_path / "bot.sock"
    env = {**os.environ, "BOT_UNIX": str(sock), "BOT_OUTPUT_MARKS": "tok"}
    proc = subprocess.Popen(
        [node, str(ROOT / script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    broken = {
        "apiversion": "1",
        "game_id": "g",
        "request_id": "g.4",
        "seat": 0,
        "turn": 3,
        "deadline_ms": 1000,
        "bank_ms": None,
        "state": {},
        "legal": [None],
    }  # its decide throws: a line on stderr

    async def ask() -> None:
        async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(sock))) as s:
            async with s.post("http://bot/act", json=broken) as r:
                assert r.status == 200 and (await r.json())["index"] == 0
            async with s.post(
                "http://bot/act", data=body(by_name("ordinary play").request(request_id="g.5"))
            ) as r:
                assert r.status == 200

    out, err = Output.both(proc, "the bot")
    try:
        first_line(f"listening on unix:{sock}", out, err)  # on stdout if the bot joined stderr into it
        asyncio.run(ask())
    finally:
        stop(proc)
    text = out.text()
    part = text.split("--- tok act g.4 3\n", 1)[1].split("--- tok done g.4\n", 1)
    assert part[0].startswith("decide failed, answering index 0: TypeError"), text
    assert "--- tok act g.5 " in part[1] and "--- tok done g.5\n" in part[1]
    assert "decide failed" not in err.text()
