"""The schedule of a round-robin league with seat rotation and duplicate deals.

Every combination of ``table_size`` bots meets in every round. Each meeting is
played once per seat rotation, so every bot starts ([D3]: seat 0 starts)
equally often; with ``duplicate``, all rotations of a meeting use the same
deal, so every bot holds every seat's cards of it and luck cancels out.

The order is deterministic from the seed and spreads the games of one deal
apart: rotation k of a meeting is followed by the other meetings before
rotation k+1 comes (when there is a single meeting, rounds are interleaved
instead). Only a league of one meeting and one round has to play a deal's
games one after the other.
"""

from __future__ import annotations

import hashlib
import math
from itertools import combinations

import msgspec


class GameSpec(msgspec.Struct, frozen=True, kw_only=True):
    #: Position in the schedule; ratings are applied in this order.
    index: int
    round: int
    #: Which combination of bots (index into the league's combinations).
    meeting: int
    #: Seat rotation: seat s holds the meeting's bot (s + rotation) % size.
    rotation: int
    #: The deal: same seed, same cards by seat.
    deal_seed: int
    #: Bot names by seat.
    seats: tuple[str, ...]


def deal_seed(seed: int, round_: int, meeting: int, rotation: int) -> int:
    """A 63-bit seed derived from the league seed by hashing, so each game's
    deal does not depend on the order games are played in."""
    digest = hashlib.sha256(f"3up3down:{seed}:{round_}:{meeting}:{rotation}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def schedule_size(bots: int, table_size: int, rounds: int) -> int:
    """How many games :func:`make_schedule` lists: every meeting of
    `table_size` of the `bots`, in every seat rotation, every round."""
    return math.comb(bots, table_size) * table_size * rounds


def make_schedule(
    bots: list[str], table_size: int, rounds: int, duplicate: bool, seed: int
) -> list[GameSpec]:
    meetings = list(combinations(bots, table_size))
    keys: list[tuple[int, int, int]] = []
    for r in range(rounds):
        for k in range(table_size):
            for m in range(len(meetings)):
                keys.append((r, k, m))
    if len(meetings) == 1:
        keys.sort(key=lambda rkm: (rkm[1], rkm[0]))  # interleave the rounds
    games = []
    for index, (r, k, m) in enumerate(keys):
        members = meetings[m]
        seats = tuple(members[(s + k) % table_size] for s in range(table_size))
        games.append(
            GameSpec(
                index=index,
                round=r,
                meeting=m,
                rotation=k,
                deal_seed=deal_seed(seed, r, m, 0 if duplicate else k),
                seats=seats,
            )
        )
    return games
