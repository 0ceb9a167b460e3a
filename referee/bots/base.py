"""What every transport offers the match runner, and how its failures look.

A transport turns everything a bot does wrong into data: ``act`` returns an
:class:`ActOutcome` (a reply or a :class:`~protocol.Fault`), ``start`` and
``end`` return a Fault or None. Only :meth:`Bot.handshake` raises, with a
:class:`BotError` that says what to fix, because a bot that cannot even be
reached is not in the game at all.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

import msgspec

from protocol.codec import ENCODER
from protocol.messages import ActReply, ActRequest, BotInfo, Fault, GameEnd, GameStart

__all__ = ["ActOutcome", "ActsOnBytes", "Bot", "BotError", "BotUnreachable", "display_name"]


class BotError(Exception):
    """A bot cannot be used: the handshake failed, or its process did not start.

    ``str(err)`` says what went wrong and what to check, fit for a bot's author.
    """


class BotUnreachable(BotError):
    """No HTTP answer at all (refused, reset, timed out): the bot may still be starting."""


class ActOutcome(msgspec.Struct, kw_only=True):
    """What came of one ``/act`` request.

    Exactly one of `reply` (decoded and checked against the protocol and the
    request id, not yet against the rules) and `fault` is set. `latency_ms` is
    the measured round trip, from sending the request to the end of the reply
    (or to the moment the call was cancelled or failed).
    """

    reply: ActReply | None = None
    fault: Fault | None = None
    latency_ms: float


class Endpoint(NamedTuple):
    """A bot's address for another process: its URL, its secret, and the
    address its URL is pinned to (:mod:`referee.bots.netpolicy`), if any."""

    url: str
    secret: str | None
    address: str | None = None


@runtime_checkable
class Bot(Protocol):
    """A bot as the match runner sees it (HTTP, a local process, later a container)."""

    @property
    def name(self) -> str:
        """The bot's name: the one given, else its handshake name, else its address."""
        ...

    async def handshake(self, timeout_s: float = ...) -> BotInfo:
        """``GET /``: the bot's identity. Raises :class:`BotError` saying what is wrong."""
        ...

    async def start(self, message: GameStart, timeout_s: float) -> Fault | None:
        """``POST /start``; a Fault (turn 0) when the bot does not answer 2xx in time."""
        ...

    async def act(self, request: ActRequest, deadline_s: float) -> ActOutcome:
        """``POST /act``, cancelled after `deadline_s`. Never raises for what the bot does."""
        ...

    async def act_bytes(self, body: bytes, request_id: str, turn: int, deadline_s: float) -> ActOutcome:
        """As :meth:`act` for a request already encoded as `body` (with
        `request_id` and `turn`): the match runner's path, which builds each
        body straight from the engine without an ActRequest in between."""
        ...

    async def end(self, message: GameEnd, timeout_s: float, turn: int) -> Fault | None:
        """``POST /end``; a Fault (dated `turn`, the game's last) when the bot
        does not answer 2xx in time."""
        ...

    async def endpoint(self) -> Endpoint:
        """Where another process on this host (a Ray worker) reaches the bot:
        its URL (``unix:/path`` for a socket) and secret. A bot the referee
        starts is started again first if it has died. Raises
        :class:`BotError` when it cannot be started."""
        ...

    async def close(self) -> None:
        """Release what the transport owns (connections, a process)."""
        ...


class ActsOnBytes:
    """:meth:`Bot.act` for a transport that implements :meth:`Bot.act_bytes`."""

    async def act(self, request: ActRequest, deadline_s: float) -> ActOutcome:
        """``POST /act``: the decoded reply, or a Fault; cancelled after `deadline_s`."""
        return await self.act_bytes(ENCODER.encode(request), request.request_id, request.turn, deadline_s)

    async def act_bytes(self, body: bytes, request_id: str, turn: int, deadline_s: float) -> ActOutcome:
        raise NotImplementedError


def display_name(given: str | None, info: BotInfo | None, fallback: str) -> str:
    """A bot's name: the one `given`, else its handshake name, else
    `fallback` (its address, command or image)."""
    if given:
        return given
    if info is not None and info.name:
        return info.name
    return fallback
