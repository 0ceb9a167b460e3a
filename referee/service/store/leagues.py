"""Every league file a competition had (``league_versions``, issue 25)."""

from __future__ import annotations

import sqlite3
import time

import msgspec

from .base import Tables


class LeagueVersion(msgspec.Struct, kw_only=True):
    id: int
    competition_id: int
    #: 1 for the league the competition was created with, then 2, 3, ...
    version: int
    league_toml: str
    created_at: float
    who: str


class Leagues(Tables):
    """``league_versions``: :class:`LeagueVersion` rows."""

    def _first_version(self, db: sqlite3.Connection, cid: int) -> None:
        """A competition made before versions were kept: its league so far becomes version 1."""
        if db.execute("SELECT 1 FROM league_versions WHERE competition_id = ?", (cid,)).fetchone() is None:
            db.execute(
                "INSERT INTO league_versions (competition_id, version, league_toml, created_at, who)"
                " SELECT id, 1, league_toml, created_at, 'at creation' FROM competitions WHERE id = ?",
                (cid,),
            )

    def set_league(self, cid: int, league_toml: str, who: str) -> LeagueVersion:
        """The competition's new league file (checked by the caller), kept as its next version."""
        now = time.time()
        with self.transaction() as db:
            self._first_version(db, cid)
            number = (
                int(
                    db.execute(
                        "SELECT MAX(version) FROM league_versions WHERE competition_id = ?", (cid,)
                    ).fetchone()[0]
                )
                + 1
            )
            cur = db.execute(
                "INSERT INTO league_versions (competition_id, version, league_toml, created_at, who)"
                " VALUES (?, ?, ?, ?, ?)",
                (cid, number, league_toml, now, who),
            )
            db.execute("UPDATE competitions SET league_toml = ? WHERE id = ?", (league_toml, cid))
            assert cur.lastrowid is not None
            return LeagueVersion(
                id=cur.lastrowid,
                competition_id=cid,
                version=number,
                league_toml=league_toml,
                created_at=now,
                who=who,
            )

    def league_versions(self, cid: int) -> list[LeagueVersion]:
        """The competition's league files, newest first."""
        with self.transaction() as db:
            self._first_version(db, cid)
        return [
            LeagueVersion(
                id=r[0], competition_id=r[1], version=r[2], league_toml=r[3], created_at=r[4], who=r[5]
            )
            for r in self.db.execute(
                "SELECT id, competition_id, version, league_toml, created_at, who FROM league_versions"
                " WHERE competition_id = ? ORDER BY version DESC",
                (cid,),
            )
        ]
