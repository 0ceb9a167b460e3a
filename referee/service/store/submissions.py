"""A team's submissions (``submissions``): each version of its bot and its admission check's outcome."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Literal, get_args

import msgspec

from .base import Tables
from .uploads import SlotRevoked

#: A submission's life: queued, then building (an upload made into an
#: image), checking (the admission check), then accepted or refused; or
#: superseded: replaced by the team's newer one before its check began.
#: Or waiting (issue 25): the service itself could not check it (Docker
#: unreachable, the disk full, ...); nothing is wrong with the bot: it is
#: retried at ``retry_at`` (``reason`` says why, for the team and the admin).
SubmissionStatus = Literal["queued", "building", "checking", "accepted", "refused", "superseded", "waiting"]
SUBMISSION_STATUSES: tuple[SubmissionStatus, ...] = get_args(SubmissionStatus)
PENDING: tuple[SubmissionStatus, ...] = ("queued", "building", "checking", "waiting")


class Submission(msgspec.Struct, kw_only=True):
    id: int
    team_id: int
    #: 'url', 'image' (an image on the server: the admin's right), 'archive'
    #: (a ``docker save`` upload) or 'source' (a .zip or .tar.gz to build).
    kind: str
    url: str | None
    image: str | None
    secret: str | None
    note: str
    created_at: float
    #: See :data:`SubmissionStatus`.
    status: SubmissionStatus = "accepted"
    #: Why it was refused (one line; the team's own pages only).
    reason: str | None = None
    #: The admission report (JSON of :class:`referee.admission.AdmissionReport`).
    report: str | None = None
    #: The build or load log (capped).
    log: str | None = None
    #: The image id an upload was pinned to.
    image_id: str | None = None
    #: The address a URL bot was pinned to at admission.
    address: str | None = None
    #: The uploaded file waiting to be built.
    upload: str | None = None
    updated_at: float | None = None
    #: When a waiting submission is tried again (issue 25; None otherwise).
    retry_at: float | None = None

    @property
    def pending(self) -> bool:
        return self.status in PENDING


_SUB_COLUMNS = (
    "id, team_id, kind, url, image, secret, note, created_at, status, reason, report, log,"
    " image_id, address, upload, updated_at, retry_at"
)
_SUB_NAMES = _SUB_COLUMNS.replace(" ", "").split(",")


def _submission(row: tuple[object, ...] | None) -> Submission | None:
    return None if row is None else msgspec.convert(dict(zip(_SUB_NAMES, row, strict=True)), Submission)


class Submissions(Tables):
    """``submissions``: :class:`Submission` rows."""

    def add_submission(
        self,
        tid: int,
        *,
        kind: str,
        url: str | None,
        image: str | None,
        secret: str | None,
        note: str,
        rate_limit: tuple[int, float] | None = None,
        status: SubmissionStatus = "queued",
        upload: str | None = None,
        slot: str | None = None,
    ) -> Submission | None:
        """Record a submission (queued for its admission check unless
        `status` says otherwise); None (and nothing stored) when the team made
        ``rate_limit[0]`` submissions in the last ``rate_limit[1]`` seconds
        (an upload in flight counts as one). `slot`: the upload slot this
        submission's file was streamed under (:meth:`take_upload_slot`),
        given up here in the same transaction."""
        assert status in SUBMISSION_STATUSES
        now = time.time()
        with self.transaction() as db:
            if slot is not None:
                gone = db.execute("DELETE FROM upload_slots WHERE team_id = ? AND token = ?", (tid, slot))
                if gone.rowcount == 0:  # the team's token was replaced (or it withdrew) while it streamed
                    raise SlotRevoked(tid)
            if rate_limit is not None:
                count, window = rate_limit
                recent = db.execute(
                    "SELECT COUNT(*) FROM submissions WHERE team_id = ? AND created_at > ?",
                    (tid, now - window),
                ).fetchone()[0]
                recent += db.execute(
                    "SELECT COUNT(*) FROM upload_slots WHERE team_id = ?", (tid,)
                ).fetchone()[0]
                if recent >= count:
                    return None
            cur = db.execute(
                "INSERT INTO submissions (team_id, kind, url, image, secret, note, created_at, status, upload,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (tid, kind, url, image, secret, note, now, status, upload, now),
            )
            assert cur.lastrowid is not None
            sub = self.submission(cur.lastrowid)
            assert sub is not None
            return sub

    def submission(self, sid: int) -> Submission | None:
        return _submission(
            self.db.execute(f"SELECT {_SUB_COLUMNS} FROM submissions WHERE id = ?", (sid,)).fetchone()
        )

    def update_submission(self, sid: int, /, **fields: str | float | None) -> None:
        """Set some of status, reason, report, log, image_id, address, upload, retry_at."""
        allowed = {"status", "reason", "report", "log", "image_id", "address", "upload", "retry_at"}
        unknown = set(fields) - allowed
        assert not unknown, unknown
        assert fields.get("status", "queued") in SUBMISSION_STATUSES
        names = sorted(fields)
        sets = ", ".join(f"{n} = ?" for n in names)
        self.db.execute(
            f"UPDATE submissions SET {sets}, updated_at = ? WHERE id = ?",
            (*[fields[n] for n in names], time.time(), sid),
        )

    def supersede(self, sid: int, by: int) -> Submission | None:
        """Mark a submission not yet checked as replaced by the team's newer
        one `by` (a final status, with the reason); the submission as it was
        (its upload still to delete), or None when it was no longer pending."""
        with self.transaction() as db:
            sub = self.submission(sid)
            if sub is None or not sub.pending:
                return None
            db.execute(
                "UPDATE submissions SET status = 'superseded', reason = ?, upload = NULL, updated_at = ?"
                " WHERE id = ?",
                (f"replaced by #{int(by)} before its check", time.time(), sid),
            )
            return sub

    def image_submissions(self, tid: int | None = None) -> list[Submission]:
        """Submissions with an image the service made (uploads), of team `tid` or all, oldest first."""
        rows = self.db.execute(
            f"SELECT {_SUB_COLUMNS} FROM submissions WHERE kind IN ('archive', 'source')"
            " AND (image_id IS NOT NULL OR upload IS NOT NULL) AND team_id = COALESCE(?, team_id) ORDER BY id",
            (tid,),
        ).fetchall()
        return [s for s in map(_submission, rows) if s is not None]

    def latest_submission(self, tid: int) -> Submission | None:
        """The team's newest submission, whatever its status."""
        return _submission(
            self.db.execute(
                f"SELECT {_SUB_COLUMNS} FROM submissions WHERE team_id = ? ORDER BY id DESC LIMIT 1", (tid,)
            ).fetchone()
        )

    def playing_submission(self, tid: int, before: float | None = None) -> Submission | None:
        """The version in play: the team's newest accepted submission (a
        refused or pending one leaves the previous version playing); made
        `before` that time only, when given (the final: before the freeze)."""
        return _submission(
            self.db.execute(
                f"SELECT {_SUB_COLUMNS} FROM submissions WHERE team_id = ? AND status = 'accepted'"
                " AND created_at <= COALESCE(?, created_at) ORDER BY id DESC LIMIT 1",
                (tid, before),
            ).fetchone()
        )

    def submission_number(self, sid: int) -> int:
        """A submission's number among its team's (1 for the first): its
        version, "v2" on the pages and "team v2" in the ladder. Every
        submission takes the next number when it is made (a superseded or
        refused one too) and keeps it: a version's name never changes, and a
        running ladder's entries keep theirs."""
        row = self.db.execute(
            "SELECT COUNT(*) FROM submissions WHERE team_id = (SELECT team_id FROM submissions WHERE id = ?)"
            " AND id <= ?",
            (sid, sid),
        ).fetchone()
        return int(row[0])

    def submissions(self, tid: int, limit: int = 50, offset: int = 0) -> list[Submission]:
        """The team's submissions, newest first (`offset` of them skipped)."""
        rows = self.db.execute(
            f"SELECT {_SUB_COLUMNS} FROM submissions WHERE team_id = ? ORDER BY id DESC LIMIT ? OFFSET ?",
            (tid, limit, offset),
        ).fetchall()
        return [s for s in map(_submission, rows) if s is not None]

    def numbered_submissions(
        self, tid: int, limit: int = 50, offset: int = 0
    ) -> list[tuple[Submission, int]]:
        """:meth:`submissions` with each one's :meth:`submission_number`."""
        rows = self.db.execute(
            f"SELECT {_SUB_COLUMNS}, ROW_NUMBER() OVER (ORDER BY id) FROM submissions WHERE team_id = ?"
            " ORDER BY id DESC LIMIT ? OFFSET ?",
            (tid, limit, offset),
        ).fetchall()
        out = []
        for row in rows:
            sub = _submission(row[:-1])
            if sub is not None:
                out.append((sub, int(row[-1])))
        return out

    def pending_submissions(self) -> list[Submission]:
        """Submissions still to check, oldest first (after a restart: all of
        them again, from the start of their pipeline)."""
        marks = ", ".join("?" * len(PENDING))
        rows = self.db.execute(
            f"SELECT {_SUB_COLUMNS} FROM submissions WHERE status IN ({marks}) ORDER BY id", PENDING
        ).fetchall()
        return [s for s in map(_submission, rows) if s is not None]

    def numbered_by_ids(self, sids: Iterable[int]) -> dict[int, tuple[Submission, int]]:
        """The submissions of ids `sids` (those that exist), each with its
        :meth:`submission_number`, by id: one query however many (a ladder's
        entries name thousands; issue 37)."""
        rows = self.db.execute(
            f"SELECT {_SUB_COLUMNS}, (SELECT COUNT(*) FROM submissions AS o"
            " WHERE o.team_id = submissions.team_id AND o.id <= submissions.id)"
            " FROM submissions WHERE id IN (SELECT value FROM json_each(?))",
            (msgspec.json.encode(sorted(set(sids))).decode(),),
        ).fetchall()
        out = {}
        for row in rows:
            sub = _submission(row[:-1])
            if sub is not None:
                out[sub.id] = (sub, int(row[-1]))
        return out

    def submission_teams(self, cid: int, sids: Iterable[int]) -> dict[int, int]:
        """The team id of each of the submissions `sids` made by a team of
        competition `cid`, by submission id (one query, no row decoded)."""
        return {
            int(s): int(t)
            for s, t in self.db.execute(
                "SELECT submissions.id, team_id FROM submissions JOIN teams ON teams.id = team_id"
                " WHERE competition_id = ? AND submissions.id IN (SELECT value FROM json_each(?))",
                (cid, msgspec.json.encode(sorted(set(sids))).decode()),
            )
        }

    def submission_counts(self, cid: int) -> dict[int, tuple[int, int, int | None]]:
        """Each team of competition `cid` that submitted, by id: (its
        submissions, its newest's id, the id of its version in play: its
        newest accepted, None without one), in one query (the admin's page
        lists every team; issue 37)."""
        rows = self.db.execute(
            "SELECT team_id, COUNT(*), MAX(id), MAX(CASE WHEN status = 'accepted' THEN id END)"
            " FROM submissions WHERE team_id IN (SELECT id FROM teams WHERE competition_id = ?) GROUP BY team_id",
            (cid,),
        ).fetchall()
        return {int(t): (int(n), int(last), None if play is None else int(play)) for t, n, last, play in rows}

    def count_submissions(self, tid: int) -> int:
        return int(
            self.db.execute("SELECT COUNT(*) FROM submissions WHERE team_id = ?", (tid,)).fetchone()[0]
        )

    def pinned_images(self) -> list[tuple[int, int, str]]:
        """(team id, the team's version number (:meth:`submission_number`),
        image id) of every upload whose image a run may play (not refused):
        each must keep a tag of this instance, named by that version."""
        rows = self.db.execute(
            "SELECT team_id, version, image_id FROM (SELECT team_id, id, image_id, kind, status,"
            " ROW_NUMBER() OVER (PARTITION BY team_id ORDER BY id) AS version FROM submissions)"
            " WHERE image_id IS NOT NULL AND kind IN ('archive', 'source') AND status != 'refused' ORDER BY id"
        ).fetchall()
        return [(int(r[0]), int(r[1]), str(r[2])) for r in rows]
