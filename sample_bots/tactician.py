"""The tactician: rules of thumb on top of the public history.

- follows the game from the events (:class:`~sample_bots.strategy.Tracker`):
  the cards still unseen, the cards each opponent is known to hold, and what
  an opponent that was forced to pick up cannot hold;
- plays every copy of its lowest playable rank (multiples), and plays higher
  when the next player is likely to have to pick up a pile worth the card;
- keeps its Clears for when nothing else may be played, the plain Clear
  first, Clear+1/+2 last — or when a Clear+1/+2 lets it go out;
- takes the draw before an extra action when the card is free;
- lays out its 3UP by a score of the split (high cards and pairs up);
- V6: swaps a hand card into 3UP when it improves the split; V5b: gives its
  weakest hand card for an opponent's best 3UP card.

``python -m sample_bots.tactician --port 8003``
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from protocol import APIVERSION, ActRequest, BotInfo, GameEnd, GameStart

from .sdk import make_app, run_bot
from .strategy import GameMemory, Params, Tactics

INFO = BotInfo(apiversion=APIVERSION, name="tactician", author="sample_bots", version="1.0")


class Tactician:
    def __init__(self, params: Params | None = None) -> None:
        self.tactics = Tactics(params)
        self.memory = GameMemory()

    def on_start(self, start: GameStart) -> None:
        self.memory.start(start.game_id, start.seat, start.rules)

    def decide(self, request: ActRequest) -> int:
        game = self.memory.get(request.game_id, request.seat)
        game.tracker.update(request.state)
        return self.tactics.choose(request.state, request.legal, game.tracker)

    def on_end(self, end: GameEnd) -> None:
        self.memory.end(end.game_id, end.seat)


def create_app(secret: str | None = None) -> web.Application:
    """The bot's aiohttp application (what ``main`` serves)."""
    bot = Tactician()
    return make_app(bot.decide, INFO, secret, on_start=bot.on_start, on_end=bot.on_end)


def main(argv: Sequence[str] | None = None) -> None:
    bot = Tactician()
    run_bot(bot.decide, INFO, argv, on_start=bot.on_start, on_end=bot.on_end)


if __name__ == "__main__":
    main()
