"""The random bot: a uniformly random legal action.

``python -m sample_bots.random --port 8001 [--seed 7]``. With ``--seed`` each
game's choices are reproducible: the generator of a game is seeded from the
seed and the ``game_id``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from aiohttp import web

from protocol import APIVERSION, ActRequest, BotInfo, GameEnd

from .sdk import arg_parser, make_app, run_bot

INFO = BotInfo(apiversion=APIVERSION, name="random", author="sample_bots", version="1.0")


class RandomBot:
    """Uniform over ``legal``."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._games: dict[str, random.Random] = {}

    def _rng_for(self, game_id: str) -> random.Random:
        if self.seed is None:
            return self._rng
        rng = self._games.get(game_id)
        if rng is None:
            rng = self._games[game_id] = random.Random(f"{self.seed}/{game_id}")
        return rng

    def decide(self, request: ActRequest) -> int:
        return self._rng_for(request.game_id).randrange(len(request.legal))

    def on_end(self, end: GameEnd) -> None:
        self._games.pop(end.game_id, None)


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
