"""A person's seat (referee/bots/human.py): the bytes a bot at the seat gets, and a bot's faults."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp

from protocol import ActReply, Timeouts, decode_act_request, encode
from referee.bots import HttpBot
from referee.bots.human import HUMAN_MOVE_MS, HumanSeat, Prompt, human_timeouts
from referee.match import Match
from referee.record import FaultPolicy
from sample_bots import greedy
from tests.support.match import Recorder
from tests.support.programs.zoo import BODIES, PROBLEMS, recording, serve

#: A time bank too, so that the clock's fields are compared as well.
TIMEOUTS = Timeouts(move_ms=20_000, bank_ms=1_500, start_ms=5_000, end_ms=5_000)
NAMES = ["seat-0", "r1", "r2"]


async def drive(seat: HumanSeat, answer: Callable[[Prompt], Awaitable[bool]]) -> list[tuple[str, bytes]]:
    """A scripted front end: every prompt as (path, body) until the game's
    end; `answer` answers each ``act`` prompt (False: leave the seat)."""
    seen: list[tuple[str, bytes]] = []
    while True:
        prompt = await seat.prompts.get()
        seen.append((f"/{prompt.kind}", prompt.body))
        if prompt.kind == "end":
            return seen
        if prompt.kind == "act" and not await answer(prompt):
            seat.leave()


async def test_the_person_gets_byte_for_byte_what_a_bot_at_the_seat_gets(
    session: aiohttp.ClientSession,
) -> None:
    """The same seeded game twice: the greedy sample bot at seat 0 over HTTP
    on loopback (its requests recorded as it received them), then a person's
    seat driven by a scripted front end that chooses what greedy chooses.
    Every /start, /act and /end body the front end gets is the bot's, byte
    for byte, in the same order."""
    app = recording(greedy.create_app())
    async with serve(app) as url:
        bot = HttpBot(url, session=session)
        await bot.handshake()
        http_game = Match(
            [bot, Recorder("r1", 1), Recorder("r2", 2)], 11, timeouts=TIMEOUTS, names=NAMES, game_id="g1"
        )
        http_result = await http_game.play()
    assert app[PROBLEMS] == []
    by_bot: list[tuple[str, bytes]] = app[BODIES]

    seat = HumanSeat("seat-0")

    async def like_greedy(prompt: Prompt) -> bool:
        assert prompt.choose(greedy.decide(decode_act_request(prompt.body)))
        return True

    front = asyncio.create_task(drive(seat, like_greedy))
    human_game = Match(
        [seat, Recorder("r1", 1), Recorder("r2", 2)], 11, timeouts=TIMEOUTS, names=NAMES, game_id="g1"
    )
    human_result = await human_game.play()
    by_person = await front

    acts = [body for path, body in by_bot if path == "/act"]
    assert len(acts) > 20 and b'"bank_ms":1500' in acts[0]
    assert [path for path, _ in by_person] == [path for path, _ in by_bot]
    assert by_person == by_bot
    assert human_result.faults == http_result.faults == [[], [], []]
    assert human_result.places == http_result.places


async def test_a_late_person_times_out_under_the_fault_policy() -> None:
    """No answer within the move time is a timeout fault like a bot's: the
    safe default is played, the prompt closes (a late answer is refused),
    and the policy disqualifies at the N-th strike."""
    seat = HumanSeat("slow")
    late: list[bool] = []

    async def never(prompt: Prompt) -> bool:
        await prompt.settled()
        late.append(prompt.choose(0))
        return True

    front = asyncio.create_task(drive(seat, never))
    match = Match(
        [seat, Recorder("r1", 1)],
        3,
        timeouts=Timeouts(move_ms=30, start_ms=1000, end_ms=1000),
        policy=FaultPolicy(strikes=2),
    )
    result = await match.play()
    await front
    assert [f.kind for f in result.faults[0]] == ["timeout", "timeout"]
    assert "no answer from the person within 0.03 s" in result.faults[0][0].detail
    assert result.disqualified == [0]
    assert late == [False, False]


async def test_wrong_answers_are_faults_and_leaving_is_a_connection_fault() -> None:
    """The person's answers are checked as a bot's are: an index outside the
    legal actions is illegal, bytes that are no reply are bad_json, a reply
    to another request is wrong_request_id; once the person leaves, every
    request is a connection fault at once (no wait for the deadline)."""
    seat = HumanSeat("p")
    answers = [
        lambda p: p.choose(99),
        lambda p: p.answer(b"{not json"),
        lambda p: p.answer(encode(ActReply(request_id="another", index=0))),
        lambda p: p.answer(b" " * 70_000),
    ]

    async def scripted(prompt: Prompt) -> bool:
        if not answers:
            return False
        assert answers.pop(0)(prompt)
        return True

    front = asyncio.create_task(drive(seat, scripted))
    match = Match(
        [seat, Recorder("r1", 1)],
        5,
        timeouts=Timeouts(move_ms=600_000, start_ms=1000, end_ms=1000),
        policy=FaultPolicy(strikes=6),
    )
    result = await match.play()
    await front
    kinds = [f.kind for f in result.faults[0]]
    assert kinds == ["illegal", "bad_json", "wrong_request_id", "too_large", "connection", "connection"]
    assert result.disqualified == [0]
    assert seat.left


async def test_a_person_has_a_minute_a_move_and_the_league_s_bank() -> None:
    league = Timeouts(move_ms=200, bank_ms=30_000, start_ms=4000, end_ms=3000)
    assert human_timeouts(league) == Timeouts(
        move_ms=HUMAN_MOVE_MS, bank_ms=30_000, start_ms=4000, end_ms=3000
    )
    assert human_timeouts(league, 90_000).move_ms == 90_000
    assert human_timeouts(Timeouts(move_ms=120_000)).move_ms == 120_000
    assert HUMAN_MOVE_MS == 60_000
