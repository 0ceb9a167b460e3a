"""Competitions (``competitions``): their league file, phase, deadlines."""

from __future__ import annotations

import time

import msgspec

from .base import Tables

#: A competition's life (issue 15): "setup" (the admin starts runs by hand),
#: "open" (the ladder plays all the time; new versions enter at once),
#: "frozen" (submissions closed, the ladder stopped), "final" (the final
#: league of the frozen bots is played, or was).
COMPETITION_PHASES = ("setup", "open", "frozen", "final")


class Competition(msgspec.Struct, kw_only=True):
    id: int
    name: str
    league_toml: str
    created_at: float
    #: See :data:`COMPETITION_PHASES`.
    phase: str = "setup"
    #: Games at once while the ladder plays (None: the league's ``[ladder]``).
    ladder_concurrency: int | None = None
    #: When submissions closed (the final plays the versions made before).
    frozen_at: float | None = None


class Competitions(Tables):
    """``competitions``: :class:`Competition` rows."""

    def add_competition(self, name: str, league_toml: str) -> Competition:
        now = time.time()
        with self.transaction() as db:
            cur = db.execute(
                "INSERT INTO competitions (name, league_toml, created_at) VALUES (?, ?, ?)",
                (name, league_toml, now),
            )
            assert cur.lastrowid is not None
            db.execute(
                "INSERT INTO league_versions (competition_id, version, league_toml, created_at, who)"
                " VALUES (?, 1, ?, ?, 'at creation')",
                (cur.lastrowid, league_toml, now),
            )
            return Competition(id=cur.lastrowid, name=name, league_toml=league_toml, created_at=now)

    def competition(self, cid: int) -> Competition | None:
        row = self.db.execute(
            "SELECT id, name, league_toml, created_at, phase, ladder_concurrency, frozen_at FROM competitions"
            " WHERE id = ?",
            (cid,),
        ).fetchone()
        return (
            None
            if row is None
            else Competition(
                id=row[0],
                name=row[1],
                league_toml=row[2],
                created_at=row[3],
                phase=row[4],
                ladder_concurrency=row[5],
                frozen_at=row[6],
            )
        )

    def set_phase(self, cid: int, phase: str, *, concurrency: int | None = None) -> None:
        """Move the competition to `phase` (freezing: submissions close now)."""
        assert phase in COMPETITION_PHASES, phase
        frozen = time.time() if phase == "frozen" else None
        self.db.execute(
            "UPDATE competitions SET phase = ?, ladder_concurrency = COALESCE(?, ladder_concurrency),"
            " frozen_at = CASE WHEN ? = 'open' THEN NULL ELSE COALESCE(?, frozen_at) END WHERE id = ?",
            (phase, concurrency, phase, frozen, cid),
        )

    def deadlines(self, cid: int) -> tuple[float | None, float | None] | None:
        """The (freeze_at, final_at) set on the admin page (Unix times, None:
        no such deadline); None: none set there, the league file's apply."""
        row = self.db.execute("SELECT deadlines FROM competitions WHERE id = ?", (cid,)).fetchone()
        if row is None or row[0] is None:
            return None
        both = msgspec.json.decode(str(row[0]), type=tuple[float | None, float | None])
        return both

    def set_deadlines(self, cid: int, times: tuple[float | None, float | None] | None) -> None:
        """Set the competition's deadlines (None: back to the league file's)."""
        value = None if times is None else msgspec.json.encode(times).decode()
        self.db.execute("UPDATE competitions SET deadlines = ? WHERE id = ?", (value, cid))

    def set_frozen_at(self, cid: int, when: float) -> None:
        """Submissions closed at `when` (a deadline applied after it passed)."""
        self.db.execute("UPDATE competitions SET frozen_at = ? WHERE id = ?", (when, cid))

    def competitions_in(self, phase: str) -> list[Competition]:
        ids = [
            int(r[0])
            for r in self.db.execute("SELECT id FROM competitions WHERE phase = ? ORDER BY id", (phase,))
        ]
        return [c for c in (self.competition(i) for i in ids) if c is not None]

    def competition_named(self, name: str) -> Competition | None:
        row = self.db.execute("SELECT id FROM competitions WHERE name = ?", (name,)).fetchone()
        return None if row is None else self.competition(int(row[0]))

    def competitions(self) -> list[Competition]:
        """Every competition, with its phase (the home page says where each stands)."""
        return [
            Competition(
                id=r[0],
                name=r[1],
                league_toml=r[2],
                created_at=r[3],
                phase=r[4],
                ladder_concurrency=r[5],
                frozen_at=r[6],
            )
            for r in self.db.execute(
                "SELECT id, name, league_toml, created_at, phase, ladder_concurrency, frozen_at FROM competitions"
                " ORDER BY id"
            )
        ]
