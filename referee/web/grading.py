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

import csv
import io
from pathlib import Path

import msgspec

from ..bots.factory import BotSpec
from ..tournament.ladder import ladder_entries
from ..tournament.ratings import Standing
from ..tournament.runner import STANDINGS_FIELDS, csv_cell, load_standings
from .db import Run, ServiceDB, Submission, Team
from .run_start import decode_league, team_entry

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
    """The run's team bots by their names there (`only`: that one alone): a
    ladder's entries name their submission; a run's or the final's bot is
    its team's submission whose image or pinned address the league file of
    the run holds."""
    out: dict[str, Who] = {}
    teams = {t.name: t for t in db.teams(run.competition_id)}
    if run.kind == "ladder":
        for e in ladder_entries(run.out_dir):
            if only is not None and e.name != only:
                continue
            team = teams.get(e.team or "")
            if team is not None and e.submission is not None:
                out[e.name] = Who(team, db.submission(e.submission), db.submission_number(e.submission))
        return out
    for spec in decode_league(run.league_json).bots:
        team = teams.get(spec.name) if only is None or spec.name == only else None
        if team is None:
            continue
        found = next(
            (
                (s, v)
                for s, v in db.numbered_submissions(team.id, 10_000)
                if s.status == "accepted"
                and s.created_at <= run.started_at
                and _same_bot(team_entry(team, s), spec)
            ),
            None,
        )
        out[spec.name] = Who(team, *found) if found else Who(team, None, None)
    return out


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
    return csv_cell(msgspec.structs.asdict(s), key, first=first, last=last)


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
    w = csv.writer(buf)
    w.writerow(fields)
    for i, s in enumerate(standings):
        mine = who.get(s.bot)
        if mine is None and not house:
            continue
        w.writerow([_cell(s, k, mine, i == 0, i == len(standings) - 1) for k in fields])
    return buf.getvalue()
