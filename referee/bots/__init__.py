"""Transports: how the referee talks to bots, with every bot failure turned into data.

- :class:`HttpBot`: a bot at an HTTP base URL (or a unix socket).
- :class:`CommandBot`: a bot the referee starts as a local process.
- :class:`Clock`: every time limit, computed in one place.

All of them satisfy :class:`Bot`, the interface the match runner uses.
"""

from .base import ActOutcome, Bot, BotError, BotUnreachable, Endpoint
from .clock import HANDSHAKE_S, Clock, MoveBudget
from .http import DEFAULT_CONNECTIONS, DEFAULT_MAX_BODY, HttpBot, describe, make_session
from .process import CommandBot, free_port

__all__ = [
    "DEFAULT_CONNECTIONS",
    "DEFAULT_MAX_BODY",
    "HANDSHAKE_S",
    "ActOutcome",
    "Bot",
    "BotError",
    "BotUnreachable",
    "Clock",
    "Endpoint",
    "CommandBot",
    "HttpBot",
    "MoveBudget",
    "describe",
    "free_port",
    "make_session",
]
