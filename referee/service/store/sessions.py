"""Signed-in sessions of the teams (``sessions``) and of the admin (``admin_sessions``)."""

from __future__ import annotations

import time

import msgspec

from .base import Tables, hash_token, new_token

#: How long a signed-in team's session lasts.
SESSION_S = 12 * 3600.0


class Session(msgspec.Struct, kw_only=True):
    team_id: int
    csrf: str
    expires_at: float


class Sessions(Tables):
    """``sessions`` and ``admin_sessions``: only the cookies' hashes."""

    def new_session(self, tid: int, lifetime_s: float = SESSION_S) -> tuple[str, str]:
        """A signed-in session for team `tid`: (cookie value, CSRF token).
        Only the cookie's hash is stored; expired sessions are swept here."""
        sid, csrf = new_token(), new_token()
        now = time.time()
        with self.transaction() as db:
            db.execute("DELETE FROM sessions WHERE expires_at < ?", (now,))
            db.execute(
                "INSERT INTO sessions (id_sha256, team_id, csrf, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
                (hash_token(sid), tid, csrf, now, now + lifetime_s),
            )
        return sid, csrf

    def session(self, sid: str) -> Session | None:
        row = self.db.execute(
            "SELECT team_id, csrf, expires_at FROM sessions WHERE id_sha256 = ?", (hash_token(sid),)
        ).fetchone()
        if row is None or float(row[2]) < time.time():
            return None
        return Session(team_id=int(row[0]), csrf=str(row[1]), expires_at=float(row[2]))

    def end_session(self, sid: str) -> None:
        self.db.execute("DELETE FROM sessions WHERE id_sha256 = ?", (hash_token(sid),))

    def new_admin_session(self, lifetime_s: float = SESSION_S) -> tuple[str, str]:
        """A signed-in admin session: (cookie value, CSRF token)."""
        sid, csrf = new_token(), new_token()
        now = time.time()
        with self.transaction() as db:
            db.execute("DELETE FROM admin_sessions WHERE expires_at < ?", (now,))
            db.execute(
                "INSERT INTO admin_sessions (id_sha256, csrf, created_at, expires_at) VALUES (?, ?, ?, ?)",
                (hash_token(sid), csrf, now, now + lifetime_s),
            )
        return sid, csrf

    def admin_session(self, sid: str) -> str | None:
        """The session's CSRF token, or None when there is no such live session."""
        row = self.db.execute(
            "SELECT csrf, expires_at FROM admin_sessions WHERE id_sha256 = ?", (hash_token(sid),)
        ).fetchone()
        return None if row is None or float(row[1]) < time.time() else str(row[0])

    def end_admin_session(self, sid: str) -> None:
        self.db.execute("DELETE FROM admin_sessions WHERE id_sha256 = ?", (hash_token(sid),))
