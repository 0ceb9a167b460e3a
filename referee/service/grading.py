"""A finished run's standings as a CSV a teacher can grade from (issue 25).

One row a bot, best first, with the columns of the run's ``standings.csv``
and then whose bot it is: the team's id and name, its version (the team's "v2", as
its pages say) and the submission's id, and a ``house`` column that flags
the league file's own bots (``?house=0`` leaves them out; the ranks stay
the run's). ``separated_above`` is empty for the first row and
``separated_below`` for the last: there is no bot there to be separated
from.
"""

from __future__ import annotations

import io
from pathlib import Path

import msgspec

from ..bots.factory import BotSpec
from ..textsafe import csv_writer
from ..tournament.ladder import entry_submissions, ladder_entries
from ..tournament.ratings import Standing
from ..tournament.runner import STANDINGS_FIELDS, load_standings, standings_cell
from .runs import decode_league, team_entry
from .store import Run, ServiceDB, Submission, Team

#: Who a bot is: its team's id and name, its version, its submission's id (all empty for a house bot).
WHO_FIELDS = ("team_id", "team", "version", "submission", "house")

#: The run's standings.csv columns as they were (readers by position keep working), then whose bot.
FIELDS = STANDINGS_FIELDS


class Who:
    def __init__(self, team: Team, sub: Submission | None, version: int | None) -> None:
        self.team, self.sub, self.version = team, sub, version


def _same_bot(a: BotSpec, b: BotSpec) -> bool:
    return (a.image, a.url, a.address) == (b.image, b.url, b.address)


def whose(db: ServiceDB, run: Run, only: str | None = None) -> dict[str, Who]:
    """The run's team bots by their names there (`only`: that one alone),
    found by ids, never by a team's name now (issue 32: a team renamed, or
    two teams' names swapped, changes labels only). A ladder's entry names
    its submission, whose team it is; a run's or the final's bot is the
    submission the run recorded for it (:attr:`Run.secrets_from`). A run
    that recorded none for a bot (one made before every bot's submission was
    recorded) is matched by its image or pinned address among the
    submissions accepted before it started, and only when several teams'
    match, by the name it played under as the last resort."""
    out: dict[str, Who] = {}
    # the competition's teams and the submissions named, each read once (a ladder names thousands: issue 37)
    by_id = {t.id: t for t in db.teams(run.competition_id)}
    teams = list(by_id.values())
    if run.kind == "ladder":
        if only is not None:  # one entry: read by its name
            named = [(e.name, e.submission) for e in ladder_entries(run.out_dir, [only])]
        else:
            named = [(n, sid) for n, sid, _ in entry_submissions(run.out_dir)]
        subs = db.numbered_by_ids(sid for _, sid in named if sid is not None)
        for name, sid in named:
            got = subs.get(sid) if sid is not None else None
            team = by_id.get(got[0].team_id) if got is not None else None
            if got is not None and team is not None:
                out[name] = Who(team, got[0], got[1])
        return out
    recorded = msgspec.json.decode(run.secrets_from or "{}", type=dict[str, int])
    bots = [spec for spec in decode_league(run.league_json).bots if only is None or spec.name == only]
    subs = db.numbered_by_ids(recorded[b.name] for b in bots if b.name in recorded)
    for spec in bots:
        sid = recorded.get(spec.name)
        got = subs.get(sid) if sid is not None else None
        team = by_id.get(got[0].team_id) if got is not None else None
        if got is not None and team is not None:
            out[spec.name] = Who(team, got[0], got[1])
            continue
        found = [
            Who(t, s, v)
            for t in teams
            for s, v in db.numbered_submissions(t.id, 10_000)
            if s.status == "accepted" and s.created_at <= run.started_at and _same_bot(team_entry(t, s), spec)
        ]
        mine = {w.team.id for w in found}
        if len(mine) > 1:  # the same bot submitted by two teams: the name it played under decides
            found = [w for w in found if w.team.name == spec.name]
        if found:
            out[spec.name] = max(found, key=lambda w: w.sub.id if w.sub is not None else 0)
    return out


def entry_teams(db: ServiceDB, run: Run) -> dict[str, int]:
    """A ladder's team entries' team ids by their names, through their
    submissions as :func:`whose` finds them (no submission read whole: a
    term's ladder has thousands of entries)."""
    entries = entry_submissions(run.out_dir)
    teams = db.submission_teams(run.competition_id, (sid for _, sid, _ in entries if sid is not None))
    return {name: teams[sid] for name, sid, _ in entries if sid is not None and sid in teams}


def team_bots(db: ServiceDB, run: Run, team: Team) -> list[str]:
    """The names team `team`'s bot played under in `run` (a ladder: each of
    its versions', oldest first), by its id: :func:`whose` (in a ladder, the
    entries of its submissions: the same, without the other teams')."""
    if run.kind == "ladder":
        return [name for name, tid in entry_teams(db, run).items() if tid == team.id]
    return [name for name, who in whose(db, run).items() if who.team.id == team.id]


def _cell(s: Standing, key: str, who: Who | None, first: bool, last: bool) -> object:
    if key in WHO_FIELDS:
        if key == "house":
            return "" if who is not None else "yes"
        if who is None:
            return ""
        if key == "team_id":
            return who.team.id
        if key == "team":
            return who.team.name
        if key == "version":
            return "" if who.version is None else f"v{who.version}"
        return "" if who.sub is None else who.sub.id
    return standings_cell(msgspec.structs.asdict(s), key, first=first, last=last)


def standings_csv(db: ServiceDB, run: Run, house: bool = True) -> str | None:
    """The CSV (None when the run wrote no standings); without `house`, no house bot's row."""
    out = Path(run.out_dir)
    if not (out / "standings.json").exists():
        return None
    standings = load_standings(out)
    who = whose(db, run)
    series = any(s.points is not None for s in standings)
    fields = FIELDS + (("points",) if series else ()) + WHO_FIELDS
    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(fields)
    for i, s in enumerate(standings):
        mine = who.get(s.bot)
        if mine is None and not house:
            continue
        w.writerow([_cell(s, k, mine, i == 0, i == len(standings) - 1) for k in fields])
    return buf.getvalue()
