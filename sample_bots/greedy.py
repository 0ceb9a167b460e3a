"""The greedy bot: the lowest legal play.

One card of the lowest rank it may play; a Clear only when no number card may
be played (a plain Clear before a Clear+1 before a Clear+2); its 3 highest
cards as 3UP; it never takes the optional draw and passes on every swap.

``python -m sample_bots.greedy --port 8002``
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from protocol import APIVERSION, ActRequest, BotInfo

from .sdk import make_app, run_bot
from .strategy import lowest_play_index

INFO = BotInfo(apiversion=APIVERSION, name="greedy", author="sample_bots", version="1.0")


def decide(request: ActRequest) -> int:
    return lowest_play_index(request.legal)


def create_app(secret: str | None = None) -> web.Application:
    """The bot's aiohttp application (what ``main`` serves)."""
    return make_app(decide, INFO, secret)


def main(argv: Sequence[str] | None = None) -> None:
    run_bot(decide, INFO, argv)


if __name__ == "__main__":
    main()
