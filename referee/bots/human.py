"""A seat played by a person: a transport whose answers come from a front end.

The match runner treats a :class:`HumanSeat` like any bot: it hands the seat
the same encoded ``/act`` body an HTTP bot at that seat would be POSTed (built
by the same code, :meth:`referee.match.Match._request`), enforces the same
deadline, decodes the answer with the same protocol decoder
(:func:`protocol.codec.decode_reply`) and checks it against the rules in the
runner, as for a bot. So a person sees nothing a bot would not (the view, the
legal actions, the deadline and the time bank left), an illegal answer is a
fault like any bot's, and a person who walks away times out under the usual
fault policy.

A front end (the terminal's ``referee play --human``, later a browser page over
a WebSocket) drives the seat through one queue:

- :attr:`HumanSeat.prompts` yields a :class:`Prompt` for every message a bot
  would get: ``start`` (the :class:`~protocol.GameStart` body), ``act`` (the
  :class:`~protocol.ActRequest` body: show it, wait for a choice) and ``end``
  (the :class:`~protocol.GameEnd` body). Only ``act`` prompts wait for an
  answer.
- :meth:`Prompt.choose` answers an ``act`` prompt with the index of a legal
  action, :meth:`Prompt.answer` with the raw bytes of an ``/act`` reply (as a
  bot's HTTP body). Either returns False when the prompt is no longer open:
  its time ran out (a ``timeout`` fault was recorded and the safe default
  played) or the game ended.
- :meth:`Prompt.settled` waits until the prompt is answered or expired (a
  front end shows "time is up" with it).
- :meth:`HumanSeat.leave` says the person is gone (stdin closed, the browser
  disconnected for good): the open prompt and every later one get a
  ``connection`` fault at once instead of a wait to the deadline each.
"""

from __future__ import annotations

import asyncio
import time
from typing import Final, Literal

from protocol.codec import ENCODER, ProtocolError, decode_reply
from protocol.messages import APIVERSION, ActReply, BotInfo, Fault, GameEnd, GameStart, Timeouts

from .base import ActOutcome, ActsOnBytes, BotError, Endpoint
from .clock import HANDSHAKE_S
from .deadline import deadline
from .http import DEFAULT_MAX_BODY

__all__ = ["HUMAN_MOVE_MS", "HumanSeat", "Prompt", "PromptKind", "human_timeouts"]

#: A person's time for one move when the league or the command line names none, in ms.
HUMAN_MOVE_MS: Final = 60_000

#: Which message a prompt carries: the bot protocol's POST path.
PromptKind = Literal["start", "act", "end"]

#: The detail of the fault of a seat whose person has left.
LEFT: Final = "the person at this seat left the game"


def human_timeouts(timeouts: Timeouts | None = None, move_ms: int | None = None) -> Timeouts:
    """The timeouts of a game with a person seated: `timeouts` (the league's:
    its time bank, ``/start`` and ``/end`` limits) with a person's time per
    move, `move_ms`, else :data:`HUMAN_MOVE_MS` (or the league's own when it
    is longer)."""
    base = timeouts if timeouts is not None else Timeouts()
    move = move_ms if move_ms is not None else max(HUMAN_MOVE_MS, base.move_ms)
    return Timeouts(move_ms=move, bank_ms=base.bank_ms, start_ms=base.start_ms, end_ms=base.end_ms)


class Prompt:
    """One message for the person at a seat, as a bot there would receive it.

    `body` is byte for byte the body of the ``POST /{kind}`` a bot at this
    seat would get (for ``act``: with the view, the legal actions,
    ``deadline_ms`` and ``bank_ms``). `request_id` and `turn` are the
    request's (None and the turn for ``start``/``end``); `limit_s` is the
    hard limit of an ``act`` prompt (the move time plus the bank left) and
    `expires_at` the event loop time at which it runs out.
    """

    __slots__ = ("kind", "body", "request_id", "turn", "limit_s", "expires_at", "_answer", "_settled")

    def __init__(
        self,
        kind: PromptKind,
        body: bytes,
        *,
        request_id: str | None = None,
        turn: int = 0,
        limit_s: float = 0.0,
    ) -> None:
        loop = asyncio.get_running_loop()
        self.kind: PromptKind = kind
        self.body = body
        self.request_id = request_id
        self.turn = turn
        self.limit_s = limit_s
        self.expires_at = loop.time() + limit_s
        self._answer: asyncio.Future[bytes] = loop.create_future()
        self._settled = asyncio.Event()
        if kind != "act":
            self._settled.set()

    def __repr__(self) -> str:
        return f"Prompt({self.kind!r}, request_id={self.request_id!r}, turn={self.turn}, open={self.open})"

    @property
    def open(self) -> bool:
        """Whether an answer is still awaited (an ``act`` prompt in its time)."""
        return self.kind == "act" and not self._answer.done()

    @property
    def answered(self) -> bool:
        """Whether the front end's answer was taken (not expired, not left)."""
        f = self._answer
        return f.done() and not f.cancelled() and f.exception() is None

    def answer(self, reply: bytes) -> bool:
        """Answer with `reply`, the bytes of an ``/act`` reply as a bot would
        send them (``{"request_id": ..., "index": N}``); they are checked as a
        bot's are. False when the prompt is no longer open."""
        if not self.open:
            return False
        self._answer.set_result(reply)
        self._settled.set()
        return True

    def choose(self, index: int) -> bool:
        """Answer with the `index` of an action in the request's ``legal``
        list. False when the prompt is no longer open."""
        if self.request_id is None:
            raise ValueError(f"a {self.kind} prompt takes no answer")
        return self.answer(ENCODER.encode(ActReply(request_id=self.request_id, index=index)))

    async def settled(self) -> None:
        """Wait until the prompt is answered, expired, or its seat left."""
        await self._settled.wait()

    def _close(self, error: BaseException | None = None) -> None:
        if not self._answer.done():
            if error is None:
                self._answer.cancel()
            else:
                self._answer.set_exception(error)
        self._settled.set()


class _Left(Exception):
    pass


class HumanSeat(ActsOnBytes):
    """A seat whose answers come from a person through a front end (see the
    module's docstring). `name` is the seat's name in the game (as a bot's
    handshake name would be); `max_body` caps an answer's size as a bot's
    reply is capped."""

    def __init__(self, name: str = "human", *, max_body: int = DEFAULT_MAX_BODY) -> None:
        self._name = name
        self.max_body = max_body
        #: The messages for the front end, in the order a bot would get them.
        self.prompts: asyncio.Queue[Prompt] = asyncio.Queue()
        self._open: Prompt | None = None
        self._left = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def left(self) -> bool:
        """Whether the person has left (:meth:`leave`)."""
        return self._left

    def __repr__(self) -> str:
        return f"HumanSeat({self._name!r})"

    def leave(self) -> None:
        """The person is gone: the open prompt, and every later ``/act``,
        is a ``connection`` fault at once (the fault policy plays on)."""
        self._left = True
        if self._open is not None:
            self._open._close(_Left())

    async def handshake(self, timeout_s: float = HANDSHAKE_S) -> BotInfo:
        if self._left:
            raise BotError(f"{self._name}: {LEFT}")
        return BotInfo(apiversion=APIVERSION, name=self._name, author="a person")

    async def start(self, message: GameStart, timeout_s: float) -> Fault | None:
        self.prompts.put_nowait(Prompt("start", ENCODER.encode(message), turn=0))
        return None

    async def end(self, message: GameEnd, timeout_s: float, turn: int) -> Fault | None:
        self.prompts.put_nowait(Prompt("end", ENCODER.encode(message), turn=turn))
        return None

    async def act_bytes(self, body: bytes, request_id: str, turn: int, deadline_s: float) -> ActOutcome:
        """Hand the request `body` to the front end and wait for the person's
        answer until `deadline_s`: the decoded reply, or a fault (``timeout``,
        ``connection`` once the person left, ``too_large``, or the protocol
        decoder's ``bad_json``/``wrong_request_id``)."""
        start = time.perf_counter()
        if self._left:
            return ActOutcome(fault=Fault(kind="connection", turn=turn, detail=LEFT), latency_ms=0.0)
        prompt = Prompt("act", body, request_id=request_id, turn=turn, limit_s=deadline_s)
        self._open = prompt
        self.prompts.put_nowait(prompt)
        try:
            async with deadline(deadline_s):
                data = await prompt._answer
        except TimeoutError:
            elapsed = (time.perf_counter() - start) * 1000
            limit = deadline_s * 1000
            return ActOutcome(
                fault=Fault(
                    kind="timeout",
                    turn=turn,
                    detail=f"no answer from the person within {limit / 1000:g} s",
                    overrun_ms=round(max(0.0, elapsed - limit), 3),
                ),
                latency_ms=elapsed,
            )
        except _Left:
            return ActOutcome(
                fault=Fault(kind="connection", turn=turn, detail=LEFT),
                latency_ms=(time.perf_counter() - start) * 1000,
            )
        finally:
            prompt._close()
            self._open = None
        latency = (time.perf_counter() - start) * 1000
        if len(data) > self.max_body:
            return ActOutcome(
                fault=Fault(
                    kind="too_large",
                    turn=turn,
                    detail=f"reply is larger than the size cap of {self.max_body} bytes ({len(data)} bytes)",
                ),
                latency_ms=latency,
            )
        try:
            reply = decode_reply(data, request_id)
        except ProtocolError as e:
            return ActOutcome(fault=Fault(kind=e.kind, turn=turn, detail=e.message), latency_ms=latency)
        return ActOutcome(reply=reply, latency_ms=latency)

    async def endpoint(self) -> Endpoint:
        raise BotError(
            f"{self._name} is a person's seat: it is played in this process, by its front end, "
            "and has no address another process could reach"
        )

    async def close(self) -> None:
        """The game is over or abandoned: no prompt stays open."""
        if self._open is not None:
            self._open._close()
