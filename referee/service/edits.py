"""A league edit reaches the open ladder (issue 34 item 2).

A saved league version is for every run and final started after it, and it
applies to the competition's ladder from its next games: its house bots
(added ones enter, removed ones retire), its timeouts, its table size (when
the ladder's rules allow that many players) and its ``[ladder]`` table. What
the ladder cannot take while it lives (its rules, fault policy, ratings,
duplicate deals and container limits: its games stay comparable) is said
with the edit and on the admin page; the final and the runs started from
now play the new version whole. A frozen ladder takes the newest version
when it opens again.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from ..bots.netpolicy import PinnedURL
from ..tournament.league import League
from .runs import check_league_text, decode_league, encode_league, pinned_house
from .store import Competition, LeagueVersion, ServiceDB

#: What an open ladder keeps of the league it opened with, and how the page names it.
FIXED = (
    ("rules", "[rules]"),
    ("faults", "[faults]"),
    ("ratings", "[ratings]"),
    ("containers", "[containers]"),
)


def ladder_league(stored: League, new: League) -> tuple[League, list[str]]:
    """The league a ladder playing `stored` plays after the edit `new` (its
    house bots pinned), and what of `new` it cannot take, in plain words."""
    notes: list[str] = []
    t = stored.tournament
    size = new.tournament.table_size
    if size != t.table_size:
        try:
            stored.rules.validate(size)
        except ValueError as e:
            notes.append(
                f"[tournament] table_size stays {t.table_size} in the ladder: the rules it keeps do not "
                f"allow {size} players ({e})"
            )
            size = t.table_size
    if new.tournament.duplicate != t.duplicate:
        notes.append(
            "[tournament] duplicate: the ladder keeps its deals as it opened (the final and the runs "
            "started from now play the new setting)"
        )
    for key, label in FIXED:
        if getattr(new, key) != getattr(stored, key):
            notes.append(
                f"{label}: the ladder keeps what it opened with, so its games stay comparable (the final "
                "and the runs started from now play the new one)"
            )
    merged = msgspec.structs.replace(
        stored,
        bots=list(new.bots),
        timeouts=new.timeouts,
        tournament=msgspec.structs.replace(t, table_size=size),
        ladder=msgspec.structs.replace(new.ladder, concurrency=stored.ladder.concurrency),
    )
    return merged, notes


def latest_ladder_league(
    db: ServiceDB, comp: Competition, stored: League, house: Mapping[str, PinnedURL] | None
) -> tuple[League, list[str], LeagueVersion]:
    """`stored` (a ladder's league) with the competition's newest league
    version applied (:func:`ladder_league`), and that version."""
    new = check_league_text(comp.league_toml)
    new.bots = pinned_house(new.bots, house)
    merged, notes = ladder_league(stored, new)
    return merged, notes, db.league_versions(comp.id)[0]


def kept_by_ladder(db: ServiceDB, cid: int) -> tuple[int | None, list[str]]:
    """The league version the competition's ladder plays and what of the
    newest version it cannot take while it lives (for the admin page)."""
    comp = db.competition(cid)
    ladder = db.latest_run_of(cid, "ladder")
    if comp is None or ladder is None:
        return None, []
    versions = {v.id: v.version for v in db.league_versions(cid)}
    try:
        _, notes = ladder_league(decode_league(ladder.league_json), check_league_text(comp.league_toml))
    except Exception:  # noqa: BLE001 - a league that no longer parses: the page says nothing more
        notes = []
    return versions.get(ladder.league_version) if ladder.league_version is not None else None, notes


def store_ladder_league(db: ServiceDB, rid: int, league: League, version: LeagueVersion) -> None:
    db.set_run_league(rid, encode_league(league), version=version.id)
