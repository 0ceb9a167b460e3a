"""Issue 26, item 5, exact: a container bot's lines next to the move it
printed them for, over a whole game, checked per request id against what it
printed (tests/support/programs/sdk_talker.py names the request in every line).

* A bot on the SDK marks its requests (``BOT_OUTPUT_MARKS``,
  referee/bots/sandbox/marks.py): every line on its own request, 100 %, its lines
  that look like marks (the referee's, or its own naming an earlier
  request) shown as output and moving nothing.
* The same bot on an SDK copy from before the marks, and a bot not on the
  SDK, are placed by the daemon's timestamps: never onto an earlier move,
  most on their own (the share is measured, printed with the figures).
* The Node sample bot marks its requests too.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from protocol.messages import Timeouts
from referee.bots.images.baseimage import build_image
from referee.bots.process import CommandBot
from referee.bots.sandbox.container import ContainerBot
from referee.bots.sandbox.marks import OUTPUT_MARKS_ENV
from referee.diagnostics import output_by_request
from referee.match import play_match
from referee.record import steps
from referee.replay import frames
from referee.replay import read as read_replay
from tests.support import PROGRAMS
from tests.support.containers import FIGURES
from tests.support.programs.sdk_talker import expected

pytestmark = (
    pytest.mark.runtime_sensitive
)  # its result can differ under gVisor: the runsc pass of .ci/run runs it again

HERE = Path(__file__).resolve().parent
TALKERS_IMAGE = "referee-talkers:local"
TALKERS_DOCKERFILE = """\
ARG BASE
FROM ${BASE}
COPY sdk_talker.py /app/sdk_talker.py
COPY talker.py /app/talker.py
CMD ["python", "/app/sdk_talker.py"]
"""
PLAIN_TALKER = ["python", "/app/talker.py"]
TIMEOUTS = Timeouts(move_ms=3000)


@pytest.fixture(scope="module")
def talkers(docker_client: Any, images: dict[str, str]) -> str:
    greedy_id = str(docker_client.images.get(images["greedy"]).id)
    build_image(
        docker_client,
        TALKERS_IMAGE,
        TALKERS_DOCKERFILE,
        {"sdk_talker.py": PROGRAMS / "sdk_talker.py", "talker.py": PROGRAMS / "talker.py"},
        buildargs={"BASE": images["greedy"]},
        base_id=greedy_id,
    )
    return TALKERS_IMAGE


def requests_of(replay: Path, seat: int) -> list[tuple[str, int]]:
    """(request id, turn) of every ``/act`` the seat answered, in order."""
    return [
        (s.line.request_id, s.line.turn)
        for s in steps(read_replay(replay))
        if s.line.seat == seat and s.line.by != "skipped"
    ]


def marks_token(docker_client: Any, bot: ContainerBot) -> str:
    """The token the running container of `bot` was given for its marks
    (its ``BOT_OUTPUT_MARKS``), as the daemon shows its environment."""
    env = docker_client.containers.get(bot.container_name).attrs["Config"]["Env"]
    return next(e.split("=", 1)[1] for e in env if e.startswith(f"{OUTPUT_MARKS_ENV}="))


def number(request_id: str) -> int:
    return int(request_id.rsplit(".", 1)[1])


def placed(
    outputs: dict[str, str], asked: list[tuple[str, int]], game_id: str, token: str, in_order: bool = False
) -> int:
    """How many requests have exactly the lines the bot printed for them
    (`in_order`: in the order printed; else stdout's and stderr's lines may
    interleave differently); asserts that no line is on an earlier request
    than its own."""
    exact = 0
    last: tuple[str, int] | None = None
    for request_id, turn in asked:
        text = outputs.get(request_id, "")
        want = expected(request_id, turn, game_id, last, token)
        exact += text == want if in_order else sorted(text.split("\n")) == sorted(want.split("\n"))
        for named in re.findall(r"^(?:turn \d+ of|stderr|thread) (\S+)$", text, re.M):
            assert number(named) <= number(request_id), (request_id, text)
        last = (request_id, turn)
    return exact


async def test_a_bot_on_the_sdk_has_every_line_on_its_own_move(
    talkers: str, out: Path, docker_client: Any
) -> None:
    sdk = ContainerBot(talkers, out_dir=out, name="sdk")
    old = ContainerBot(talkers, out_dir=out, name="old-sdk", env={"TALKER_NO_MARKS": "1"})
    plain = ContainerBot(talkers, out_dir=out, name="plain", command=PLAIN_TALKER)
    replay = out / "game.jsonl.gz"
    async with sdk, old, plain:
        result = await play_match(
            [sdk, old, plain],
            seed=11,
            names=["sdk", "old-sdk", "plain"],
            timeouts=TIMEOUTS,
            game_id="g1",
            replay=replay,
        )
        tokens = [marks_token(docker_client, b) for b in (sdk, old, plain)]
        assert [b.marks_own_output for b in (sdk, old, plain)] == [True, False, False]
    assert not any(result.faults), result.faults
    shares = []
    for seat, bot in enumerate((sdk, old, plain)):
        outputs = output_by_request([bot.log_path], "g1")
        asked = requests_of(replay, seat)
        token = tokens[seat] if seat == 0 else ""
        if (
            seat == 2
        ):  # not on the SDK (tests/support/programs/talker.py): it prints "turn <turn> of <game id>"
            exact = sum(outputs.get(r, "") == f"turn {t} of g1" for r, t in asked)
            turns = dict(asked)
            for r, text in outputs.items():
                assert all(int(t) <= turns[r] for t in re.findall(r"^turn (\d+) of g1$", text, re.M)), (
                    r,
                    text,
                )
        else:
            exact = placed(outputs, asked, "g1", token, in_order=seat == 0)
        shares.append(f"{exact}/{len(asked)} = {100 * exact / len(asked):.0f} %")
        if seat == 0:
            assert exact == len(asked) >= 10, (exact, len(asked))
            assert set(outputs) == {r for r, _ in asked}  # nothing on a request it was not asked
            assert f"--- {token} done" not in bot.log_path.read_text()  # its marks are the referee's
        else:
            assert exact >= len(asked) / 5, (seat, exact, len(asked))  # the timestamps' share: the load's
            assert not bot.marks_own_output
    FIGURES["lines exactly on their move (SDK marks; old SDK; not on the SDK)"] = "; ".join(shares)
    # the replay from the SDK bot's seat: each of its moves with its lines, the others' with none
    data = frames(
        read_replay(replay), public=True, output_seat=0, outputs=output_by_request([sdk.log_path], "g1")
    )
    own = [f for f in data["frames"][1:] if f["seat"] == 0]
    assert own and all(f["output"].startswith(f"turn {f['turn']} of g1.") for f in own)
    assert all("output" not in f for f in data["frames"][1:] if f["seat"] != 0)


async def test_the_node_sample_bot_marks_its_requests(
    images: dict[str, str], out: Path, docker_client: Any
) -> None:
    if "node" not in images:
        pytest.skip("node is not installed: no Node sample bot image")
    node = ContainerBot(images["node"], out_dir=out, name="node")
    other = CommandBot(
        [sys.executable, "-m", "sample_bots.greedy", "--port", "{port}"], name="greedy", log_dir=out / "logs"
    )
    async with node, other:
        await play_match([node, other], seed=3, names=["node", "greedy"], timeouts=TIMEOUTS, game_id="n1")
        assert node.marks_own_output
        token = marks_token(docker_client, node)
    text = node.log_path.read_text()
    assert token not in text
    assert text.count("--- act n1.") == text.count("--- done n1.") > 5, text
    assert output_by_request([node.log_path], "n1") == {}  # it prints nothing while it decides
