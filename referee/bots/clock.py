"""Time limits, computed in one place.

Every limit the referee enforces comes from here: the per-move deadline, the
optional time bank (Kaggle's "overage": time a bot spends over the per-move
deadline is taken from a per-game bank; once the bank is empty a late reply is
a fault), and the separate limits for the handshake, ``/start`` and ``/end``.
The transports enforce a limit by cancelling the call when it runs out; they
never wait for a late reply.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from protocol.messages import Timeouts

__all__ = ["HANDSHAKE_S", "Clock", "MoveBudget"]

#: Time allowed for a ``GET /`` handshake, in seconds.
HANDSHAKE_S: Final = 5.0


class MoveBudget(NamedTuple):
    """The time for one ``/act`` request.

    `deadline_ms` and `bank_ms` go into the ActRequest as they are (`bank_ms`
    is None when the game has no time bank); `limit_s` is the hard limit the
    transport enforces: the per-move time plus what is left of the bank.
    """

    deadline_ms: int
    bank_ms: int | None
    limit_s: float


class Clock:
    """One seat's clock for one game.

    >>> clock = Clock(Timeouts(move_ms=100, bank_ms=50))
    >>> clock.move()
    MoveBudget(deadline_ms=100, bank_ms=50, limit_s=0.15)
    >>> clock.charge(130.0)  # 30 ms over the move time: taken from the bank
    >>> clock.move().bank_ms
    20
    """

    __slots__ = ("timeouts", "bank_ms")

    def __init__(self, timeouts: Timeouts) -> None:
        self.timeouts = timeouts
        #: Time bank left, in ms (0 when the game has none).
        self.bank_ms: float = float(max(0, timeouts.bank_ms))

    @property
    def start_s(self) -> float:
        """Time for the ``/start`` reply."""
        return self.timeouts.start_ms / 1000

    @property
    def end_s(self) -> float:
        """Time for the ``/end`` reply."""
        return self.timeouts.end_ms / 1000

    def move(self) -> MoveBudget:
        """The budget of the next ``/act`` request."""
        move_ms = self.timeouts.move_ms
        if self.timeouts.bank_ms <= 0:
            return MoveBudget(move_ms, None, move_ms / 1000)
        bank = int(self.bank_ms)
        return MoveBudget(move_ms, bank, (move_ms + bank) / 1000)

    def charge(self, elapsed_ms: float) -> None:
        """Take the time a reply spent over the per-move deadline from the bank."""
        over = elapsed_ms - self.timeouts.move_ms
        if over > 0:
            self.bank_ms = max(0.0, self.bank_ms - over)
