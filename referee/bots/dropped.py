"""A bot dropped from a run: it stopped answering, so it is not asked again (issue 14).

A bot that cannot be reached when a run starts, or that loses whole games to
connection faults and timeouts one after another, would otherwise cost every
table it sits at its full timeouts, game after game. :class:`DroppedBot`
stands in for it for the rest of the run: every ``/act`` is answered at once
with a ``connection`` fault saying why (so its games are recorded as its
faults and the others play on), and nothing is sent to it.
"""

from __future__ import annotations

from pathlib import Path

from protocol.messages import ActRequest, BotInfo, Fault, GameEnd, GameStart

from .base import ActOutcome, BotUnreachable, Endpoint

__all__ = ["DroppedBot"]


class DroppedBot:
    """Stands in for the bot `name`, dropped for `reason`."""

    def __init__(self, name: str, reason: str, *, nowhere: Path) -> None:
        self._name = name
        self.reason = reason
        #: A socket path that does not exist: a worker in another process
        #: that is given this bot's endpoint fails to connect at once.
        self._nowhere = nowhere

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"DroppedBot({self._name!r})"

    def _fault(self, turn: int) -> ActOutcome:
        return ActOutcome(
            fault=Fault(kind="connection", turn=turn, detail=f"dropped from this run: {self.reason}"),
            latency_ms=0.0,
        )

    async def handshake(self, timeout_s: float = 0.0) -> BotInfo:
        raise BotUnreachable(f"{self._name!r} was dropped from this run: {self.reason}")

    async def start(self, message: GameStart, timeout_s: float) -> Fault | None:
        return None

    async def act(self, request: ActRequest, deadline_s: float) -> ActOutcome:
        return self._fault(request.turn)

    async def act_bytes(self, body: bytes, request_id: str, turn: int, deadline_s: float) -> ActOutcome:
        return self._fault(turn)

    async def end(self, message: GameEnd, timeout_s: float, turn: int) -> Fault | None:
        return None

    async def endpoint(self) -> Endpoint:
        return Endpoint(f"unix:{self._nowhere}", None)

    async def close(self) -> None:
        return None
