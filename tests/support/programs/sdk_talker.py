"""A bot on the SDK for the output tests (issue 26, item 5): on every
``/act`` it prints, from ``decide``, ``turn <turn> of <request id>`` (stdout),
``stderr <request id>`` (stderr), ``thread <request id>`` (from another
thread), a line like the referee's own mark and, once it has had a request
of the game, its own mark (with the real token) naming that earlier request:
lines that must all stay on this request. It plays the first legal action.

With ``$TALKER_NO_MARKS`` set, or a file ``no-marks`` next to it, it drops
``$BOT_OUTPUT_MARKS`` first: an SDK copy from before the marks (the referee
then places its lines by the daemon's timestamps).
"""

from __future__ import annotations

import os
import sys
import threading

from protocol import APIVERSION, ActRequest, BotInfo
from sample_bots.sdk import run_bot

if os.environ.get("TALKER_NO_MARKS") or os.path.exists(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "no-marks")
):
    os.environ.pop("BOT_OUTPUT_MARKS", None)
TOKEN = os.environ.get("BOT_OUTPUT_MARKS", "")

#: game id -> (request id, turn) of its last request.
LAST: dict[str, tuple[str, int]] = {}


def expected(request_id: str, turn: int, game_id: str, last: tuple[str, int] | None, token: str) -> str:
    """What the replay shows next to a request's move (the lines that look
    like marks escaped by one space)."""
    lines = [
        f"turn {turn} of {request_id}",
        f"stderr {request_id}",
        f"thread {request_id}",
        f" --- act {game_id}.1 0",
    ]
    if last is not None and token:
        lines.append(f" --- {token} act {last[0]} {last[1]}")
    return "\n".join(lines)


def decide(request: ActRequest) -> int:
    rid = request.request_id
    print(f"turn {request.turn} of {rid}")
    print(f"stderr {rid}", file=sys.stderr)
    t = threading.Thread(target=print, args=(f"thread {rid}",))
    t.start()
    t.join()
    print(f"--- act {request.game_id}.1 0")
    last = LAST.get(request.game_id)
    if last is not None and TOKEN:
        print(f"--- {TOKEN} act {last[0]} {last[1]}")
    LAST[request.game_id] = (rid, request.turn)
    return 0


if __name__ == "__main__":
    run_bot(decide, BotInfo(apiversion=APIVERSION, name="sdk-talker", author="tests", version="1"))
