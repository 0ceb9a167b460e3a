"""The random bot: a uniformly random legal action.

``python -m sample_bots.random --port 8001 [--seed 7]``. With ``--seed`` its
choices are reproducible: each seat of each game has a generator of its own,
seeded from the seed, the seat and the cards that seat was first shown (its
dealt hand), so the same deal played again at the same seat gets the same
choices, whatever the referee's (random) ``game_id`` and whatever the order
in which the requests of several seats of one game arrive (league entries
that share one service).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from aiohttp import web

from protocol import APIVERSION, ActRequest, BotInfo, GameEnd

from .sdk import SeatMemory, arg_parser, make_app, run_bot

INFO = BotInfo(apiversion=APIVERSION, name="random", author="sample_bots", version="1.0")


class RandomBot:
    """Uniform over ``legal``."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        #: Each seat's generator (with a seed).
        self._games: SeatMemory[random.Random] = SeatMemory()

    def _rng_for(self, request: ActRequest) -> random.Random:
        if self.seed is None:
            return self._rng
        rng = self._games.get(request.game_id, request.seat)
        if rng is None:
            you = request.state.you
            shown = ",".join(sorted(you.hand)) + "|" + ",".join(sorted(you.up)) + f"|{len(you.down)}"
            rng = self._games.put(
                request.game_id, request.seat, random.Random(f"{self.seed}/{request.seat}/{shown}")
            )
        return rng

    def decide(self, request: ActRequest) -> int:
        return self._rng_for(request).randrange(len(request.legal))

    def on_end(self, end: GameEnd) -> None:
        self._games.end(end.game_id, end.seat)


def create_app(secret: str | None = None, seed: int | None = None) -> web.Application:
    """The bot's aiohttp application (what ``main`` serves)."""
    bot = RandomBot(seed)
    return make_app(bot.decide, INFO, secret, on_end=bot.on_end)


def main(argv: Sequence[str] | None = None) -> None:
    parser = arg_parser("random: a uniformly random legal action")
    parser.add_argument("--seed", type=int, default=None, help="seed for reproducible games")
    args = parser.parse_args(argv)
    bot = RandomBot(args.seed)
    run_bot(bot.decide, INFO, on_end=bot.on_end, args=args)


if __name__ == "__main__":
    main()
