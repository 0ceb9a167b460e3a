"""Alerts (``alerts``): an automatic step that could not go on (issue 34, item 3).

One row per step and competition while it stands (``resolved_at`` NULL);
raising it again only moves ``last_at`` and rewords it; resolved, it stays
as history and a new one is raised the next time. A service-wide alert
(admission stuck on a service fault) has no competition (``competition_id``
NULL)."""

from __future__ import annotations

import msgspec

from .base import Tables


class AlertRow(msgspec.Struct, kw_only=True, frozen=True):
    id: int
    #: None: the whole service (admission).
    competition_id: int | None
    #: What could not go on: "freeze", "final", "ladder", "admission".
    step: str
    #: Why, for the teacher (may name the server's paths or a team's error).
    cause: str
    #: What the teacher does.
    action: str
    #: What anyone may read on the leaderboard (nothing private).
    public: str
    first_at: float
    last_at: float
    resolved_at: float | None = None


_COLUMNS = "id, competition_id, step, cause, action, public, first_at, last_at, resolved_at"


def _row(r: tuple[object, ...]) -> AlertRow:
    return AlertRow(
        id=int(r[0]),  # type: ignore[call-overload]
        competition_id=None if r[1] is None else int(r[1]),  # type: ignore[call-overload]
        step=str(r[2]),
        cause=str(r[3]),
        action=str(r[4]),
        public=str(r[5]),
        first_at=float(r[6]),  # type: ignore[arg-type]
        last_at=float(r[7]),  # type: ignore[arg-type]
        resolved_at=None if r[8] is None else float(r[8]),  # type: ignore[arg-type]
    )


class Alerts(Tables):
    """``alerts``: :class:`AlertRow` rows."""

    def raise_alert(
        self, cid: int | None, step: str, cause: str, action: str, public: str, now: float
    ) -> AlertRow:
        """The standing alert of `step` (for competition `cid`) seen at `now`:
        made, or its words and ``last_at`` brought up to date."""
        with self.transaction() as db:
            found = db.execute(
                "SELECT id FROM alerts WHERE competition_id IS ? AND step = ? AND resolved_at IS NULL",
                (cid, step),
            ).fetchone()
            if found is None:
                cur = db.execute(
                    "INSERT INTO alerts (competition_id, step, cause, action, public, first_at, last_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (cid, step, cause, action, public, now, now),
                )
                aid = cur.lastrowid
            else:
                aid = int(found[0])
                db.execute(
                    "UPDATE alerts SET cause = ?, action = ?, public = ?, last_at = ? WHERE id = ?",
                    (cause, action, public, now, aid),
                )
            row = db.execute(f"SELECT {_COLUMNS} FROM alerts WHERE id = ?", (aid,)).fetchone()
        return _row(row)

    def resolve_alert(self, cid: int | None, step: str, now: float) -> bool:
        """The standing alert of `step` (for `cid`) resolved at `now` (False: none stood)."""
        cur = self.db.execute(
            "UPDATE alerts SET resolved_at = ? WHERE competition_id IS ? AND step = ? AND resolved_at IS NULL",
            (now, cid, step),
        )
        return cur.rowcount > 0

    def standing_alerts(self, cid: int | None = None, *, service_wide: bool = True) -> list[AlertRow]:
        """The alerts not resolved: of competition `cid` (and the service-wide
        ones, unless not `service_wide`); every one when `cid` is None."""
        if cid is None:
            rows = self.db.execute(
                f"SELECT {_COLUMNS} FROM alerts WHERE resolved_at IS NULL ORDER BY first_at, id"
            )
        else:
            rows = self.db.execute(
                f"SELECT {_COLUMNS} FROM alerts WHERE resolved_at IS NULL"
                " AND (competition_id = ? OR (? AND competition_id IS NULL)) ORDER BY first_at, id",
                (cid, int(service_wide)),
            )
        return [_row(r) for r in rows]

    def alert_history(self, cid: int) -> list[AlertRow]:
        """Every alert of competition `cid`, resolved ones too, newest first."""
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM alerts WHERE competition_id = ? ORDER BY id DESC", (cid,)
        )
        return [_row(r) for r in rows]
