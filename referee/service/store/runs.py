"""Runs (``runs``): a run by hand, a competition's ladder or its final, and the folder it plays into."""

from __future__ import annotations

import os
import time
from typing import Literal, get_args

import msgspec

from ...bots.process import pid_alive
from .base import Tables

#: What a run is: a run started by hand ("run"), a competition's ladder
#: ("ladder", played while it is open) or its final ("final").
RUN_KINDS = ("run", "ladder", "final")

#: A run's life (a run by hand, a ladder, a final): running, then finished
#: (every game played; a ladder: its competition froze), interrupted
#: (stopped, or the service stopped meanwhile: it can be resumed) or failed
#: (its ``error`` says why).
RunStatus = Literal["running", "finished", "interrupted", "failed"]
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)


class Run(msgspec.Struct, kw_only=True):
    id: int
    competition_id: int
    out_dir: str
    league_json: str
    total_games: int
    #: See :data:`RunStatus`.
    status: RunStatus
    error: str | None
    pid: int | None
    started_at: float
    finished_at: float | None
    #: JSON {bot name: submission id}: where the run's bots' secrets are read
    #: from when it starts (they are never copied into league_json).
    secrets_from: str | None = None
    #: See :data:`RUN_KINDS`.
    kind: str = "run"
    #: The id of the :class:`LeagueVersion` it played (None: before versions were kept).
    league_version: int | None = None


class Runs(Tables):
    """``runs``: :class:`Run` rows."""

    # ------------------------------------------------------------------- runs

    _RUN_COLUMNS = (
        "id, competition_id, out_dir, league_json, total_games, status, error, pid, started_at,"
        " finished_at, secrets_from, kind, league_version"
    )

    def _run(self, row: tuple[object, ...] | None) -> Run | None:
        if row is None:
            return None
        return msgspec.convert(
            dict(zip(self._RUN_COLUMNS.replace(" ", "").split(","), row, strict=True)), Run
        )

    def begin_run(
        self,
        cid: int,
        *,
        out_dir: str,
        league_json: str,
        total_games: int,
        resume_run: int | None = None,
        secrets_from: str | None = None,
        kind: str = "run",
    ) -> Run | str:
        """Mark a run of competition ``cid`` as running (a new one, or
        ``resume_run`` again); a message instead when one is running already."""
        now = time.time()
        with self.transaction() as db:
            for r in db.execute(
                f"SELECT {self._RUN_COLUMNS} FROM runs WHERE competition_id = ? AND status = 'running'",
                (cid,),
            ).fetchall():
                run = self._run(r)
                assert run is not None
                if pid_alive(run.pid):
                    return f"run {run.id} of this competition is running already"
                db.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (run.id,))
            if resume_run is not None:
                db.execute(
                    "UPDATE runs SET status = 'running', error = NULL, pid = ?, finished_at = NULL WHERE id = ?",
                    (os.getpid(), resume_run),
                )
                rid = resume_run
            else:
                cur = db.execute(
                    "INSERT INTO runs (competition_id, out_dir, league_json, total_games, status, pid, started_at,"
                    " secrets_from, kind, league_version) VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?,"
                    " (SELECT MAX(id) FROM league_versions WHERE competition_id = ?))",
                    (cid, out_dir, league_json, total_games, os.getpid(), now, secrets_from, kind, cid),
                )
                assert cur.lastrowid is not None
                rid = cur.lastrowid
            run = self._run(
                db.execute(f"SELECT {self._RUN_COLUMNS} FROM runs WHERE id = ?", (rid,)).fetchone()
            )
            assert run is not None
            return run

    def end_run(self, rid: int, status: str, error: str | None = None) -> None:
        """Record the end of run `rid`: `status` is one of :data:`RUN_STATUSES`
        (checked here, where it is stored: the run threads still carry it as
        a plain string)."""
        if status not in RUN_STATUSES:
            raise ValueError(f"not a run status: {status!r} (one of {', '.join(RUN_STATUSES)})")
        self.db.execute(
            "UPDATE runs SET status = ?, error = ?, finished_at = ?, pid = NULL WHERE id = ?",
            (status, error, time.time(), rid),
        )

    def set_run_league(
        self, rid: int, league_json: str, *, total_games: int | None = None, version: int | None = None
    ) -> None:
        """The league run `rid` plays from now on (an extended final, a ladder
        taking a league edit), its game budget and the league version it plays."""
        self.db.execute(
            "UPDATE runs SET league_json = ?, total_games = COALESCE(?, total_games),"
            " league_version = COALESCE(?, league_version) WHERE id = ?",
            (league_json, total_games, version, rid),
        )

    def set_out_dir(self, rid: int, out_dir: str) -> None:
        self.db.execute("UPDATE runs SET out_dir = ? WHERE id = ?", (out_dir, rid))

    def run(self, rid: int) -> Run | None:
        return self._run(
            self.db.execute(f"SELECT {self._RUN_COLUMNS} FROM runs WHERE id = ?", (rid,)).fetchone()
        )

    def runs(self, cid: int) -> list[Run]:
        rows = self.db.execute(
            f"SELECT {self._RUN_COLUMNS} FROM runs WHERE competition_id = ? ORDER BY id", (cid,)
        ).fetchall()
        return [r for r in (self._run(row) for row in rows) if r is not None]

    def latest_run_of(self, cid: int, kind: str) -> Run | None:
        return self._run(
            self.db.execute(
                f"SELECT {self._RUN_COLUMNS} FROM runs WHERE competition_id = ? AND kind = ? ORDER BY id DESC LIMIT 1",
                (cid, kind),
            ).fetchone()
        )

    def latest_run(self, cid: int) -> Run | None:
        return self._run(
            self.db.execute(
                f"SELECT {self._RUN_COLUMNS} FROM runs WHERE competition_id = ? ORDER BY id DESC LIMIT 1",
                (cid,),
            ).fetchone()
        )

    def mark_stale_runs(self) -> int:
        """Runs marked running whose process is gone (a crash, a restart):
        interrupted, to be resumed. How many there were."""
        stale = [
            r
            for r in (
                self._run(row)
                for row in self.db.execute(
                    f"SELECT {self._RUN_COLUMNS} FROM runs WHERE status = 'running'"
                ).fetchall()
            )
            if r is not None and (not pid_alive(r.pid) or r.pid == os.getpid())
        ]
        for r in stale:
            self.db.execute("UPDATE runs SET status = 'interrupted', pid = NULL WHERE id = ?", (r.id,))
        return len(stale)


# ------------------------------------------------------- for the event loop
