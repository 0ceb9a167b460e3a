"""A 3UP 3DOWN bot: the starter kit's (Python, with the SDK).

Run it:   python bot.py --port 8001
Check it: referee check http://127.0.0.1:8001

The SDK (``sample_bots.sdk``: ``pip install referee-sdk --find-links
http://SERVER/sdk/``; present in the service's build image) serves the protocol: you write ``decide``, which gets
the request (your view of the game and the list of legal actions) and returns
an index into ``request.legal``. It plays the lowest card it may; change it.
"""

from __future__ import annotations

from protocol import APIVERSION, ActRequest, BotInfo, ChooseUp, Play
from sample_bots.sdk import run_bot

#: Your bot's name and yours (GET / answers with them).
INFO = BotInfo(apiversion=APIVERSION, name="my-bot", author="my team", version="1")

#: Card ranks: 1 < ... < 10 < Clear < Clear+1 < Clear+2.
CLEARS = {"C": 11, "C+1": 12, "C+2": 13}


def rank(card: str) -> int:
    """``"7R"`` -> 7, ``"C+1"`` -> 12."""
    return CLEARS.get(card) or int(card[:-1])


def decide(request: ActRequest) -> int:
    """The index of the action to take, in ``request.legal`` (never empty)."""
    best, best_key = 0, (99, 99)
    for i, action in enumerate(request.legal):
        if isinstance(action, ChooseUp):  # set-up: the three highest cards as 3UP
            key = (-sum(rank(c) for c in action.cards), 0)
        elif isinstance(action, Play):  # the lowest card, as few as possible
            key = (rank(action.cards[0]), len(action.cards))
        else:  # a flip, a pick-up, a draw, a pass: only when there is no play
            continue
        if key < best_key:
            best, best_key = i, key
    return best


if __name__ == "__main__":
    run_bot(decide, INFO)
