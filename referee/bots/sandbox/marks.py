"""Where a container bot's lines of output go in its log: the referee's marks
(issue 26, item 5: the lines a bot printed during a turn, next to its move).

The log pump of :class:`referee.bots.sandbox.container.ContainerBot` copies the
container's output into its log file and writes the referee's marks between
the bot's lines: ``--- game <game id>`` and ``--- act <request id> <turn>``
(:mod:`referee.bots.managed`), which :func:`referee.diagnostics.output_by_request`
splits the file by. :class:`OutputMarks` decides where they go, two ways:

* **by the daemon's timestamps** (any bot): a mark made when the referee sent
  a request is written before the first line the daemon read after it. The
  daemon reads a line a little after the bot printed it, so on a busy
  machine a line may land on a later move, never an earlier one.
* **by the bot's own marks** (exact; the SDK's, ``docs/protocol.md``): the
  container gets ``BOT_OUTPUT_MARKS=<token>``, a random token of this
  container; a bot that prints ``--- <token> act <request id> <turn>`` when
  it starts on an ``/act`` and ``--- <token> done <request id>`` when it has
  answered has exactly the lines between them next to that move. Its marks
  become the referee's (and are not shown as its output); from its first
  mark on, the timestamps place no ``/act`` mark of that container. A bot
  mark is taken only for a request the referee sent this bot, with its turn,
  once; any other (a stale token, another request's id, a second time) is
  an ordinary line of output. Lines after ``done`` (a thread still printing,
  the ``/end`` hook) belong to no move.

Either way a line of the bot's that starts like one of the referee's
(``--- ``) is written with one space in front, so that no bot output can
pass for a mark and move lines to another move, game or seat.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections import OrderedDict, deque
from typing import Final

from ..managed import ACT_MARK

__all__ = ["DONE_MARK", "OUTPUT_MARKS_ENV", "OutputMarks", "without_marks"]

#: The environment variable that tells a container bot it may mark its output,
#: holding the token its marks carry (docs/protocol.md).
OUTPUT_MARKS_ENV: Final = "BOT_OUTPUT_MARKS"

#: The line that ends an ``/act``'s part of a log (then the request id): the
#: lines after it are no move's. Written for a bot's ``done`` mark.
DONE_MARK: Final = "--- done "

#: Marks waiting for the bot's next line (the oldest are dropped beyond it).
MARKS_KEPT: Final = 256

#: Requests sent whose bot mark may still come (the oldest are forgotten beyond it).
SENT_KEPT: Final = 4096

#: A bot's mark after its ``--- <token> ``: ``act <request id> <turn>`` or ``done <request id>``.
_BOT_MARK = re.compile(rb"(act) (\S{1,200}) (\d{1,9})|(done) (\S{1,200})")


def without_marks(text: str) -> str:
    """A container log's text without the referee's ``--- act`` and ``--- done``
    lines (for quoting the bot's own output)."""
    if ACT_MARK not in text and DONE_MARK not in text:
        return text
    return "".join(
        line for line in text.splitlines(keepends=True) if not line.startswith((ACT_MARK, DONE_MARK))
    )


class OutputMarks:
    """The referee's marks of one container bot, and where they go in its log
    (the module's docstring). :meth:`add` is called as the referee sends
    (the event loop), :meth:`place` by the log pump's thread for each chunk
    the daemon gives; :meth:`new_container` before each container starts."""

    def __init__(self) -> None:
        self.pending: deque[tuple[float, bool, bytes]] = deque(maxlen=MARKS_KEPT)
        #: Request id -> turn of the requests sent whose bot mark has not come.
        self._sent: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        #: The running container's token (``BOT_OUTPUT_MARKS``).
        self.token = ""
        self._prefix = b""
        #: The container marks its output itself (it printed a valid mark).
        self.by_bot = False
        #: The requests whose ``act`` mark came and ``done`` not yet, latest last.
        self._open: list[tuple[str, int]] = []

    def new_container(self) -> str:
        """A new container's token (for its ``BOT_OUTPUT_MARKS``): its marks
        start afresh (a new container may be another program)."""
        self.token = token = secrets.token_hex(16)
        self._prefix = f"--- {token} ".encode()
        self.by_bot = False
        self._open = []
        return token

    def add(self, game: bool, text: str) -> None:
        """A mark made now: a game's (`game`) or a request's, its line `text`."""
        self.pending.append((time.time(), game, text.encode()))
        if not game and text.startswith(ACT_MARK):
            request_id, _, turn = text[len(ACT_MARK) :].strip().partition(" ")
            if turn.isdigit():
                with self._lock:
                    self._sent[request_id] = int(turn)
                    while len(self._sent) > SENT_KEPT:
                        self._sent.popitem(last=False)

    def _due(self, at: float) -> tuple[list[bytes], bytes | None]:
        """The game marks made by `at` and the latest act mark after them
        (removed from the queue)."""
        games: list[bytes] = []
        act: bytes | None = None
        while self.pending and self.pending[0][0] <= at:
            _, is_game, text = self.pending.popleft()
            if is_game:
                games.append(text)
                act = None
            else:
                act = text
        return games, act

    def due(self, at: float) -> list[bytes]:
        """The marks to write before a line read at `at` by the timestamps
        (removed from the queue): every game mark (a game's id must be known
        to split its lines, even when several start at once), then the latest
        act mark."""
        games, act = self._due(at)
        return games + ([act] if act is not None else [])

    def drain(self) -> list[bytes]:
        return self.due(float("inf"))

    def _taken(self, request_id: str, turn: int) -> bool:
        with self._lock:
            if self._sent.get(request_id) != turn:
                return False
            del self._sent[request_id]
            return True

    def _bot_mark(self, text: bytes) -> list[bytes] | None:
        """What a bot's mark (its text after the token) writes; None when it
        is no valid mark."""
        m = _BOT_MARK.fullmatch(text.rstrip(b"\r\n"))
        if m is None:
            return None
        if m.group(1):
            request_id, turn = m.group(2).decode(), int(m.group(3))
            if not self._taken(request_id, turn):
                return None
            self.by_bot = True
            self._open.append((request_id, turn))
            return [f"{ACT_MARK}{request_id} {turn}\n".encode()]
        request_id = m.group(5).decode()
        at = next((i for i, (r, _) in enumerate(self._open) if r == request_id), None)
        if at is None:
            return None
        del self._open[at]
        out = [f"{DONE_MARK}{request_id}\n".encode()]
        if self._open:  # the one still being answered goes on
            out.append(self._resumed())
        return out

    def _resumed(self) -> bytes:
        request_id, turn = self._open[-1]
        return f"{ACT_MARK}{request_id} {turn}\n".encode()

    def place(self, at: float | None, chunk: bytes, at_line_start: bool) -> bytes:
        """What to write to the log for a `chunk` of the container's output
        (a line, or part of a long one) that the daemon read at `at` (None:
        unknown), the file being `at_line_start` or in a line: the marks due,
        then the chunk, its bot marks turned into the referee's and its lines
        that look like marks escaped."""
        out: list[bytes] = []
        start = at_line_start

        def mark(lines: list[bytes]) -> None:
            nonlocal start
            if lines and not start:
                out.append(b"\n")
            out.extend(lines)
            if lines:
                start = True

        prefix = self._prefix
        if at is not None:
            games, act = self._due(at)
            if self.by_bot or prefix and chunk.startswith(prefix):  # the bot marks its requests
                mark(games + ([self._resumed()] if games and self._open else []))
            else:
                mark(games + ([act] if act is not None else []))
        for line in chunk.splitlines(keepends=True):
            i = line.find(prefix) if prefix else -1
            written = self._bot_mark(line[i + len(prefix) :]) if i >= 0 else None
            if written is not None:
                before = line[:i]
                if before:
                    out.append(b" " + before if start and before.startswith(b"--- ") else before)
                    start = False
                mark(written)
                continue
            if start and line.startswith(b"--- "):
                line = b" " + line
            out.append(line)
            start = line.endswith(b"\n")
        return b"".join(out)
