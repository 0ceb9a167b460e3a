"""What the bots the referee runs itself have in common.

A :class:`ManagedBot` is started by the referee (a local process, a
container), answers over HTTP once ``GET /`` does, is started again before a
game if it has died, and stops with the referee. Subclasses say how to
start, stop and check it; the calls of the :class:`~referee.bots.base.Bot`
protocol are the same for all and live here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final, Self

from protocol.messages import BotInfo, Fault, GameEnd, GameStart

from .base import ActOutcome, ActsOnBytes, BotError, BotUnreachable, Endpoint, display_name
from .clock import HANDSHAKE_S
from .http import HttpBot

#: The line that starts each game's part of a bot's log (then the game id).
GAME_MARK: Final = "--- game "

#: The line that starts the part of a bot's log printed while it answered one
#: ``/act`` (then the request id, ``<game id>.<n>``, and the turn): issue 26,
#: the bot's output next to its move in the replay.
ACT_MARK: Final = "--- act "


class ManagedBot(ActsOnBytes):
    def __init__(self, name: str | None) -> None:
        self._name = name
        #: The handshake reply of the running bot.
        self.info: BotInfo | None = None
        self._http: HttpBot | None = None
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return display_name(self._name, self.info, self._fallback_name())

    # -- what a subclass provides

    def _fallback_name(self) -> str:
        """The name when none was given and there has been no handshake."""
        raise NotImplementedError

    async def _launch(self) -> BotInfo:
        """Start the bot (stopping a previous one) and wait for ``GET /``."""
        raise NotImplementedError

    async def _stop(self) -> None:
        raise NotImplementedError

    def _attached(self) -> bool:
        """Cheap: whether there is a started bot to talk to."""
        raise NotImplementedError

    async def _alive(self) -> bool:
        """Whether the started bot still runs (may ask the system)."""
        return self._attached()

    def _not_running(self) -> str:
        """Why there is nobody to talk to, for a fault's detail."""
        return "the bot is not running"

    async def _why(self, what: str) -> str:
        """`what` happened to the bot, with the end of its log, for a BotError."""
        raise NotImplementedError

    async def _died(self) -> str | None:
        """Why a bot being started is gone (None while it runs)."""
        raise NotImplementedError

    def _may_answer(self) -> bool:
        """Whether a handshake is worth trying yet (a socket may not exist yet)."""
        return True

    async def _poll_ready(
        self, timeout_s: float, missing: Callable[[str], str], check_every_s: float = 0.0
    ) -> BotInfo:
        """Handshake with the bot being started until it answers, dies, answers
        wrongly or `timeout_s` runs out (`missing(last error)` says what to
        check then). Liveness is checked every `check_every_s` seconds."""
        assert self._http is not None
        deadline = time.monotonic() + timeout_s
        last = "no answer yet"
        next_check = 0.0
        while True:
            now = time.monotonic()
            if now >= next_check:
                next_check = now + check_every_s
                died = await self._died()
                if died is not None:
                    raise BotError(await self._why(died))
            left = deadline - time.monotonic()
            if left <= 0:
                raise BotError(
                    await self._why(f"did not answer GET / within {timeout_s:.1f} s {missing(last)}")
                )
            if self._may_answer():
                try:
                    return await self._http.handshake(min(left, HANDSHAKE_S))
                except BotUnreachable as e:
                    last = str(e)
                except BotError as e:
                    raise BotError(await self._why(f"answered, but wrongly: {e}")) from None
            await asyncio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    async def _explain(self, fault: Fault | None) -> Fault | None:
        """A connection fault with what the subclass knows of why."""
        return fault

    # -- life cycle

    async def __aenter__(self) -> Self:
        await self.launch()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def launch(self) -> BotInfo:
        """Start the bot (stopping a previous one) and wait for ``GET /``.

        Raises :class:`~referee.bots.base.BotError` saying what is wrong.
        """
        async with self._lock:
            return await self._launch()

    async def ensure_running(self) -> BotInfo:
        """Start the bot again if it has died; its handshake reply."""
        async with self._lock:
            if self.info is not None and self._attached() and await self._alive():
                return self.info
            return await self._launch()

    async def stop(self) -> None:
        async with self._lock:
            await self._stop()

    async def close(self) -> None:
        await self.stop()

    # -- the calls

    async def handshake(self, timeout_s: float = HANDSHAKE_S) -> BotInfo:
        if self._http is None or not self._attached():
            return await self.ensure_running()
        self.info = await self._http.handshake(timeout_s)
        return self.info

    async def start(self, message: GameStart, timeout_s: float) -> Fault | None:
        """``POST /start``, after starting the bot again if it has died."""
        try:
            await self.ensure_running()
        except BotError as e:
            return Fault(kind="connection", turn=0, detail=f"POST /start: {e}")
        assert self._http is not None
        return await self._explain(await self._http.start(message, timeout_s))

    async def act_bytes(self, body: bytes, request_id: str, turn: int, deadline_s: float) -> ActOutcome:
        http = self._http
        if http is None or not self._attached():
            return ActOutcome(
                fault=Fault(kind="connection", turn=turn, detail=self._not_running()),
                latency_ms=0.0,
            )
        outcome = await http.act_bytes(body, request_id, turn, deadline_s)
        if outcome.fault is not None and outcome.fault.kind == "connection":
            outcome.fault = await self._explain(outcome.fault)
        return outcome

    async def end(self, message: GameEnd, timeout_s: float, turn: int) -> Fault | None:
        http = self._http
        if http is None or not self._attached():
            return Fault(kind="connection", turn=turn, detail=f"POST /end: {self._not_running()}")
        return await self._explain(await http.end(message, timeout_s, turn))

    async def endpoint(self) -> Endpoint:
        await self.ensure_running()
        assert self._http is not None
        return await self._http.endpoint()
