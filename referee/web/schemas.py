"""What the service's API reads and answers, as Structs.

Request bodies are decoded strictly (``forbid_unknown_fields``: a typo is a
422 naming the field, see :func:`referee.web.validation.read_body`). The
answers are encoded as they are declared: the field order here is the order
in the JSON. The pages render the same Structs the API sends.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ..admission import AdmissionReport
from ..service.finals import PairEstimate
from ..service.store import RunStatus, SubmissionStatus
from ..tournament.ratings import Standing
from ..tournament.results import Opponent
from ..tournament.store import GameRow

# ------------------------------------------------------------ request bodies


class NewCompetition(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    #: Shown on the pages; unique.
    name: str
    #: The league file (TOML): rules, timeouts, ratings, house bots; none
    #: (or blank): the default league, with the built-in house bots.
    league: str | None = None


class NewTeam(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: str


class LeagueEdit(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    #: The competition's new league file (TOML), checked as a new competition's.
    league: str


class TeamRename(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    #: The team's new name (the checks of a new team's).
    name: str


class BotSubmission(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    #: The bot's base URL (http:// or https://), or
    url: str | None = None
    #: a container image (when the server runs container bots).
    image: str | None = None
    #: Optional: the referee signs every request with it (X-Referee-Signature).
    secret: str | None = None
    #: Free text for the team (a version, a change note).
    note: str = ""


class OpenCompetition(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    #: Games played at once while the ladder plays (default: the league's
    #: ``[ladder] concurrency``, else its ``[tournament] concurrency``).
    concurrency: int | None = None


class StartFinal(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    #: The seed the final's deals derive from (default: a new secret one,
    #: published when the final is finished); give the published seed to
    #: play the same final again.
    seed: int | None = None


class ExtendFinal(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    #: How many more games the finished final may play (its budget raised by that).
    games: int


class StartRun(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    #: Continue the last run (interrupted or failed) instead of a new one.
    resume: bool = False


# ------------------------------------------------------------------ answers


class ErrorBody(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Every error: what is wrong, the status, and the field for invalid input."""

    error: str
    status: int
    field: str | None = None


class RunInfo(msgspec.Struct, kw_only=True):
    id: int
    #: running, finished, interrupted or failed
    status: RunStatus
    total_games: int
    error: str | None
    started_at: float
    finished_at: float | None
    #: "run" (started by hand), "ladder" or "final".
    kind: str = "run"
    #: The seed every deal derives from: published once a final is finished
    #: (never while games remain that it would reveal).
    seed: int | None = None
    #: The competition's league version it plays (1, 2, ...; a ladder takes
    #: each edit from its next games); None: before versions were kept.
    league_version: int | None = None


class CompetitionSummary(msgspec.Struct, kw_only=True):
    """A line of ``GET /api/competitions`` and of the index page."""

    id: int
    name: str
    #: How many teams.
    teams: int
    #: The latest run's status, or "no run yet".
    status: RunStatus | Literal["no run yet"]
    games: int
    total_games: int
    run: RunInfo | None
    #: setup, open (the ladder plays), frozen or final.
    phase: str = "setup"
    #: Where it stands, in words, from its phase and its latest run ("open: the
    #: ladder plays", "frozen: the final is next", "final: running"...): what the index shows.
    stage: str = ""


class Leaderboard(msgspec.Struct, kw_only=True):
    """``GET /api/competitions/{cid}``, every live update, the leaderboard page."""

    id: int
    name: str
    created_at: float
    teams: list[str]
    house_bots: list[str]
    runs: list[RunInfo]
    #: The run shown (the latest, or the one asked for with ?run=).
    run: RunInfo | None
    #: The run was asked for (?run=): the page stays on it.
    pinned: bool
    games: int
    standings: list[Standing]
    recent_games: list[GameRow]
    #: setup, open (the ladder plays), frozen or final.
    phase: str = "setup"
    #: A ladder's retired and dropped versions, with the history they keep.
    retired: list[Standing] = msgspec.field(default_factory=list)
    #: Why the ladder plays no game now and what to do, in plain words
    #: (None while it plays, or when the run is no ladder playing).
    waiting: str | None = None
    #: Games of the run adjudicated at the turn limit [D12] (of `games`), and that limit.
    adjudicated: int = 0
    turn_limit: int = 1000
    #: The league's confidence: what "settled" and the rank intervals are at.
    confidence: float = 0.95
    #: A finished final's neighbouring pairs not separated at the confidence,
    #: each with about how many more games it needs (issue 34).
    unsettled: list[PairEstimate] = msgspec.field(default_factory=list)
    #: About how many more games would settle the separable pairs (None: none is).
    suggested_games: int | None = None


class RatingPoint(msgspec.Struct, kw_only=True):
    """A bot's rating after one of its games: the history keeps a bounded
    number of them, evenly spread over its games, and the latest
    (:class:`~referee.tournament.results.Trail`)."""

    #: The game's index in the run's schedule.
    game: int
    mu: float
    sigma: float
    score: float
    #: The bot's games so far (this one is its `played`-th); 0: not known.
    played: int = 0


class SubmissionBrief(msgspec.Struct, kw_only=True):
    kind: str
    created_at: float
    #: Its team's number for it ("v2"; 0: not known).
    version: int = 0


class BotData(msgspec.Struct, kw_only=True):
    """``GET /api/competitions/{cid}/bots/{bot}`` and the bot page."""

    name: str
    #: A team's bot / a house bot of the league file.
    team: bool
    house: bool
    submission: SubmissionBrief | None
    submitted_at: float | None
    run: int | None
    #: The bot plays in that run.
    in_run: bool
    standing: Standing | None
    history: list[RatingPoint]
    #: Its games in the run (those ``?opponent=`` and ``?result=`` keep).
    games: list[GameRow]
    #: Against each opponent it met in the run's recorded games, the one it
    #: fares worst against first: a win is a better place than the
    #: opponent's in a game, the same place half a win.
    head_to_head: list[Opponent] = msgspec.field(default_factory=list)


class SubmissionInfo(msgspec.Struct, kw_only=True):
    """A submission as the admin and its team see it: never the secret."""

    id: int
    kind: str
    url: str | None
    image: str | None
    has_secret: bool
    note: str
    created_at: float
    #: queued, building, checking, accepted, refused or superseded (replaced by a newer one before its check).
    status: SubmissionStatus = "accepted"
    #: Why it was refused (one line).
    reason: str | None = None
    #: The image an upload was made into, pinned by id.
    image_id: str | None = None
    #: The address a URL bot was pinned to at admission.
    address: str | None = None
    #: Its number among its team's submissions (1 for the first): the pages
    #: say "v2", the ladder names it "team v2"; `id` is the service-wide id
    #: (in URLs). Every submission takes the next number when it is made,
    #: a superseded or refused one too, and keeps it.
    version: int = 0
    #: waiting (issue 25): the service could not check it, nothing is wrong
    #: with the bot (``reason`` says what failed); it is tried again then (a Unix time).
    retry_at: float | None = None
    #: When it was accepted or refused (a Unix time; None: not yet decided).
    decided_at: float | None = None


class SubmissionDetail(msgspec.Struct, kw_only=True):
    """A submission as its own team sees it: the admission report, line by
    line, and the build log."""

    submission: SubmissionInfo
    report: AdmissionReport | None
    log: str | None


class TeamInfo(msgspec.Struct, kw_only=True):
    id: int
    name: str
    created_at: float
    submissions: int
    bot: SubmissionInfo | None
    #: When the admin withdrew the team (None: it plays).
    withdrawn_at: float | None = None


class CompetitionCreated(msgspec.Struct, kw_only=True):
    id: int
    name: str
    created_at: float


class TeamCreated(msgspec.Struct, kw_only=True):
    id: int
    name: str
    competition: int
    #: Shown only in this answer.
    token: str
    note: str = "the token is shown only now: give it to the team"


class Submitted(msgspec.Struct, kw_only=True):
    team: int
    #: The bot's name: the team's.
    bot: str
    id: int
    kind: str
    url: str | None
    image: str | None
    has_secret: bool
    note: str
    created_at: float
    status: SubmissionStatus = "queued"
    #: Its number among the team's submissions: see :attr:`SubmissionInfo.version`.
    version: int = 0


class OwnBot(msgspec.Struct, kw_only=True):
    team: int
    name: str
    submissions: int
    #: The newest submission, whatever its status.
    bot: SubmissionInfo | None
    #: The version in play: the newest accepted one.
    playing: SubmissionInfo | None = None


# ------------------------------------------------- league versions, team changes (issue 25)


class VersionRun(msgspec.Struct, kw_only=True):
    id: int
    kind: str
    status: RunStatus
    started_at: float


class LeagueVersionInfo(msgspec.Struct, kw_only=True):
    #: The version's id (runs record it).
    id: int
    #: 1, 2, ... in the competition.
    version: int
    league: str
    created_at: float
    who: str
    #: The runs that played this version, oldest first.
    runs: list[VersionRun]
    #: In the answer of an edit: where the open ladder took it and what it
    #: keeps, and what the file holds that has no meaning somewhere.
    notes: list[str] = msgspec.field(default_factory=list)


class TeamChanged(msgspec.Struct, kw_only=True):
    id: int
    name: str
    competition: int
    withdrawn_at: float | None = None
    #: A new token: shown this once (only its hash is kept).
    token: str | None = None
