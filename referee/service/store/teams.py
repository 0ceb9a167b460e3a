"""Teams (``teams``): their names, tokens' hashes, withdrawal."""

from __future__ import annotations

import hmac
import time

import msgspec

from .base import Tables, hash_token, new_token


class Team(msgspec.Struct, kw_only=True):
    id: int
    competition_id: int
    name: str
    created_at: float
    #: When the admin withdrew it (its token stopped, it plays no more; its history is kept).
    withdrawn_at: float | None = None


class Teams(Tables):
    """``teams``: :class:`Team` rows, their tokens' hashes."""

    def add_team(self, cid: int, name: str) -> tuple[Team, str]:
        """A new team and its token (shown once)."""
        token = new_token()
        now = time.time()
        with self.transaction() as db:
            cur = db.execute(
                "INSERT INTO teams (competition_id, name, token_sha256, created_at) VALUES (?, ?, ?, ?)",
                (cid, name, hash_token(token), now),
            )
            assert cur.lastrowid is not None
            return Team(id=cur.lastrowid, competition_id=cid, name=name, created_at=now), token

    def team(self, tid: int) -> Team | None:
        row = self.db.execute(
            "SELECT id, competition_id, name, created_at, withdrawn_at FROM teams WHERE id = ?", (tid,)
        ).fetchone()
        return (
            None
            if row is None
            else Team(id=row[0], competition_id=row[1], name=row[2], created_at=row[3], withdrawn_at=row[4])
        )

    def team_named(self, cid: int, name: str) -> Team | None:
        row = self.db.execute(
            "SELECT id FROM teams WHERE competition_id = ? AND name = ?", (cid, name)
        ).fetchone()
        return None if row is None else self.team(int(row[0]))

    def teams(self, cid: int) -> list[Team]:
        """All the competition's teams, withdrawn ones too (their history is kept)."""
        return [
            Team(id=r[0], competition_id=r[1], name=r[2], created_at=r[3], withdrawn_at=r[4])
            for r in self.db.execute(
                "SELECT id, competition_id, name, created_at, withdrawn_at FROM teams WHERE competition_id = ?"
                " ORDER BY id",
                (cid,),
            )
        ]

    def playing_teams(self, cid: int) -> list[Team]:
        """The teams that play in runs, ladders and finals: all but the withdrawn."""
        return [t for t in self.teams(cid) if t.withdrawn_at is None]

    def team_token_matches(self, tid: int, token: str) -> bool:
        """`token` is the team's and the team is not withdrawn (a withdrawn team's token stops)."""
        row = self.db.execute(
            "SELECT token_sha256 FROM teams WHERE id = ? AND withdrawn_at IS NULL", (tid,)
        ).fetchone()
        return row is not None and hmac.compare_digest(hash_token(token), str(row[0]))

    def team_by_token(self, token: str) -> Team | None:
        """The team whose token this is (looked up by its hash); None for a withdrawn team."""
        row = self.db.execute(
            "SELECT id FROM teams WHERE token_sha256 = ? AND withdrawn_at IS NULL", (hash_token(token),)
        ).fetchone()
        return None if row is None else self.team(int(row[0]))

    def add_teams(self, cid: int, names: list[str]) -> list[tuple[Team, str]]:
        """Several teams at once, all or none (a name taken refuses them all): each with its token."""
        out = []
        now = time.time()
        with self.transaction() as db:
            for name in names:
                token = new_token()
                cur = db.execute(
                    "INSERT INTO teams (competition_id, name, token_sha256, created_at) VALUES (?, ?, ?, ?)",
                    (cid, name, hash_token(token), now),
                )
                assert cur.lastrowid is not None
                out.append((Team(id=cur.lastrowid, competition_id=cid, name=name, created_at=now), token))
        return out

    # ------------------------------------------- changing a team (issue 25)

    def rename_team(self, tid: int, name: str) -> None:
        """The team's new name (its id, token, submissions and sessions stay)."""
        self.db.execute("UPDATE teams SET name = ? WHERE id = ?", (name, tid))

    def withdraw_team(self, tid: int) -> None:
        """The team leaves: it plays no more, its token stops and its sessions end at once; its history stays."""
        with self.transaction() as db:
            db.execute(
                "UPDATE teams SET withdrawn_at = COALESCE(withdrawn_at, ?) WHERE id = ?", (time.time(), tid)
            )
            db.execute("DELETE FROM sessions WHERE team_id = ?", (tid,))
            db.execute("DELETE FROM upload_slots WHERE team_id = ?", (tid,))  # an upload streaming is refused

    def new_team_token(self, tid: int) -> str:
        """A new token for the team (shown once): the old one stops and the team's sessions end at once,
        and an upload streaming under the old one is refused at its end (its slot is taken back)."""
        token = new_token()
        with self.transaction() as db:
            db.execute("UPDATE teams SET token_sha256 = ? WHERE id = ?", (hash_token(token), tid))
            db.execute("DELETE FROM sessions WHERE team_id = ?", (tid,))
            db.execute("DELETE FROM upload_slots WHERE team_id = ?", (tid,))
        return token
