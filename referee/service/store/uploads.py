"""A team's one upload in flight (``upload_slots``, issue 24) and its rate limit."""

from __future__ import annotations

import secrets
import time

from .base import Tables


class SlotRevoked(Exception):
    """An upload's slot was taken back while it streamed: the team's token
    was replaced, or the team withdrawn (:meth:`ServiceDB.add_submission`)."""

    def __init__(self, tid: int) -> None:
        super().__init__(f"team {tid}'s upload slot was taken back")
        self.team_id = tid


class Uploads(Tables):
    """``upload_slots``: a team's one upload in flight, and its submissions' rate."""

    def take_upload_slot(self, tid: int, rate_limit: tuple[int, float]) -> str | tuple[str, float]:
        """Take the team's one upload slot before its file is streamed: a
        token (give it to :meth:`add_submission`, or back with
        :meth:`release_upload_slot`), else ("busy" or "rate", seconds to
        wait): an upload of the team is in flight, or its submissions fill
        the window already."""
        count, window = rate_limit
        now = time.time()
        with self.transaction() as db:
            row = db.execute("SELECT created_at FROM upload_slots WHERE team_id = ?", (tid,)).fetchone()
            if row is not None:
                return "busy", 5.0
            recent = db.execute(
                "SELECT COUNT(*) FROM submissions WHERE team_id = ? AND created_at > ?", (tid, now - window)
            ).fetchone()[0]
            if recent >= count:
                return "rate", self.retry_after(tid, window)
            token = secrets.token_hex(16)
            db.execute(
                "INSERT INTO upload_slots (team_id, token, created_at) VALUES (?, ?, ?)", (tid, token, now)
            )
            return token

    def upload_in_flight(self, tid: int) -> bool:
        """Whether the team's upload slot is taken (an upload of it streams)."""
        return self.db.execute("SELECT 1 FROM upload_slots WHERE team_id = ?", (tid,)).fetchone() is not None

    def release_upload_slot(self, tid: int, token: str) -> None:
        """Give the slot back (the upload failed, was too large or empty); nothing once it was used."""
        self.db.execute("DELETE FROM upload_slots WHERE team_id = ? AND token = ?", (tid, token))

    def clear_upload_slots(self) -> None:
        """At the service's start: no upload is in flight (a crash left its slots)."""
        self.db.execute("DELETE FROM upload_slots")

    def retry_after(self, tid: int, window: float) -> float:
        """Seconds until the oldest submission in the window leaves it."""
        row = self.db.execute(
            "SELECT MIN(created_at) FROM submissions WHERE team_id = ? AND created_at > ?",
            (tid, time.time() - window),
        ).fetchone()
        return 1.0 if row[0] is None else max(1.0, float(row[0]) + window - time.time())
