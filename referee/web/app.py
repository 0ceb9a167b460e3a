"""The classroom service: an aiohttp application over the service database.

Pages (HTML) and the JSON API that mirrors them; the admin's and the teams'
write endpoints; server-sent events for live progress. See
``referee/web/README-section.md`` for the routes and the storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import msgspec
from aiohttp import web

from ..replay import ReplayError
from ..tournament.league import League, LeagueError
from ..tournament.ratings import Standing, Table
from . import pages
from .assets import CSS, JS
from .db import Competition, Run, ServiceDB, Submission, Team
from .runs import (
    RunThread,
    Snapshot,
    StartError,
    check_league_text,
    containers_enabled,
    count_games,
    decode_league,
    games_list,
    house_bots,
    prepare_run,
    replay_path,
    snapshot,
)
from ..replay import frames, read as read_replay

# ----------------------------------------------------------------- settings


class Settings(msgspec.Struct, kw_only=True):
    #: Request bodies above this are refused with 413.
    max_body: int = 64 * 1024
    #: A team may submit this many times per window (then 429).
    submissions_per_window: int = 5
    window_s: float = 60.0
    #: How often the live updates look for new games.
    poll_s: float = 0.25
    #: A comment line on idle event streams, so proxies keep them open.
    heartbeat_s: float = 15.0


# ------------------------------------------------------------ request bodies


class NewCompetition(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    #: Shown on the pages; unique.
    name: str
    #: The league file (TOML): rules, timeouts, ratings, house bots.
    league: str


class NewTeam(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
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


class StartRun(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    #: Continue the last run (interrupted or failed) instead of a new one.
    resume: bool = False


# -------------------------------------------------------------- app state

DB: web.AppKey[ServiceDB] = web.AppKey("db", ServiceDB)
SETTINGS: web.AppKey[Settings] = web.AppKey("settings", Settings)
RUNS: web.AppKey[dict[int, RunThread]] = web.AppKey("runs", dict)


class Hub:
    """Subscribers to a competition's live updates, and the poller that
    notices new games (played by this process or by ``referee start``)."""

    def __init__(self) -> None:
        self.queues: dict[int, set[asyncio.Queue[dict[str, Any] | None]]] = {}
        self.versions: dict[int, tuple[object, ...]] = {}
        self.closing = False

    def subscribe(self, cid: int) -> asyncio.Queue[dict[str, Any] | None]:
        q: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=16)
        self.queues.setdefault(cid, set()).add(q)
        return q

    def unsubscribe(self, cid: int, q: asyncio.Queue[dict[str, Any] | None]) -> None:
        self.queues.get(cid, set()).discard(q)

    def publish(self, cid: int, data: dict[str, Any] | None) -> None:
        for q in list(self.queues.get(cid, ())):
            if q.full():  # a slow reader gets the latest state only
                with contextlib.suppress(asyncio.QueueEmpty):
                    q.get_nowait()
            q.put_nowait(data)

    def close(self) -> None:
        self.closing = True
        for cid in list(self.queues):
            self.publish(cid, None)


HUB: web.AppKey[Hub] = web.AppKey("hub", Hub)


class Cache:
    """Snapshots (by run folder and games recorded) and replay frames (by file)."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self.items: OrderedDict[tuple[object, ...], Any] = OrderedDict()

    def get(self, key: tuple[object, ...]) -> Any:
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
        return value

    def put(self, key: tuple[object, ...], value: Any) -> None:
        self.items[key] = value
        while len(self.items) > self.size:
            self.items.popitem(last=False)


CACHE: web.AppKey[Cache] = web.AppKey("cache", Cache)


# ------------------------------------------------------------------ errors


def fail(status: int, message: str, field: str | None = None, headers: dict[str, str] | None = None) -> NoReturn:
    body: dict[str, Any] = {"error": message, "status": status}
    if field is not None:
        body["field"] = field
    raise _http_error(status, body, headers)


def _http_error(status: int, body: dict[str, Any], headers: dict[str, str] | None) -> web.HTTPException:
    classes: dict[int, type[web.HTTPException]] = {
        400: web.HTTPBadRequest, 401: web.HTTPUnauthorized, 403: web.HTTPForbidden, 404: web.HTTPNotFound,
        409: web.HTTPConflict, 413: web.HTTPRequestEntityTooLarge, 422: web.HTTPUnprocessableEntity,
        429: web.HTTPTooManyRequests, 500: web.HTTPInternalServerError,
    }
    cls = classes.get(status, web.HTTPBadRequest)
    if cls is web.HTTPRequestEntityTooLarge:
        return web.HTTPRequestEntityTooLarge(
            max_size=0, actual_size=0, text=json.dumps(body), content_type="application/json", headers=headers
        )
    return cls(text=json.dumps(body), content_type="application/json", headers=headers)


@web.middleware
async def errors_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """JSON errors under /api/, HTML ones elsewhere; security headers on all."""
    api = request.path.startswith("/api/")
    try:
        response = await handler(request)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        message = e.reason if e.status != 413 else "the request body is too large"
        if e.content_type == "application/json" and e.text:
            with contextlib.suppress(ValueError, TypeError):
                message = str(json.loads(e.text)["error"])
            if api:
                raise
        if api:
            raise _http_error(e.status, {"error": message, "status": e.status}, None) from None
        e.text = pages.error_page(e.status, message)
        e.content_type = "text/html"
        raise
    except Exception as e:  # noqa: BLE001
        import logging

        logging.getLogger("referee.web").exception("unhandled error on %s", request.path)
        if api:
            raise _http_error(500, {"error": f"internal error: {type(e).__name__}", "status": 500}, None) from None
        raise web.HTTPInternalServerError(text=pages.error_page(500, "internal error"),
                                          content_type="text/html") from None
    _secure(response)
    return response


def _secure(response: web.StreamResponse) -> None:
    h = response.headers
    h.setdefault("X-Content-Type-Options", "nosniff")
    h.setdefault("Referrer-Policy", "no-referrer")
    h.setdefault("X-Frame-Options", "DENY")
    h.setdefault(
        "Content-Security-Policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    )


async def _on_prepare(request: web.Request, response: web.StreamResponse) -> None:
    _secure(response)


# ------------------------------------------------------------ input helpers


_MSGSPEC_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")

T = TypeVar("T")


async def read_body(request: web.Request, typ: type[T]) -> T:
    """The request's JSON body decoded strictly as ``typ``: 413 over the
    size limit, 422 naming the field otherwise."""
    limit = request.app[SETTINGS].max_body
    if request.content_length is not None and request.content_length > limit:
        fail(413, f"the request body is too large: {request.content_length} bytes, at most {limit}")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        fail(413, f"the request body is too large: at most {limit} bytes")
    if len(raw) > limit:
        fail(413, f"the request body is too large: {len(raw)} bytes, at most {limit}")
    if not raw.strip():
        fail(422, "the request body is empty: send a JSON object")
    try:
        return msgspec.json.decode(raw, type=typ)
    except msgspec.ValidationError as e:
        text = str(e)
        m = _MSGSPEC_PATH.search(text)
        path = m.group("path") if m else ""
        message = text[: m.start()] if m else text
        unknown = re.match(r"Object contains unknown field `([^`]+)`", message)
        missing = re.match(r"Object missing required field `([^`]+)`", message)
        field = path.lstrip(".") or None
        if unknown:
            allowed = ", ".join(f.encode_name for f in msgspec.structs.fields(typ))  # type: ignore[arg-type]
            fail(422, f"unknown field '{unknown.group(1)}' (expected one of: {allowed})", unknown.group(1))
        if missing:
            fail(422, f"'{missing.group(1)}' is required", missing.group(1))
        words = re.sub(r"`([^`]+)`", r"\1", message)
        fail(422, f"'{field}': {words}" if field else words, field)
    except msgspec.DecodeError as e:
        fail(422, f"the body is not valid JSON: {e}")


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def check_name(value: str, field: str, max_len: int, *, slash: bool = False) -> str:
    if not value.strip():
        fail(422, f"'{field}' must not be empty", field)
    if value != value.strip():
        fail(422, f"'{field}' must not start or end with spaces", field)
    if len(value) > max_len:
        fail(422, f"'{field}' is too long: {len(value)} characters, at most {max_len}", field)
    if _CONTROL.search(value):
        fail(422, f"'{field}' must not contain control characters", field)
    if not slash and "/" in value:
        fail(422, f"'{field}' must not contain '/'", field)
    return value


_URL = re.compile(r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?(/[^\s]*)?$")
_IMAGE = re.compile(r"^[a-z0-9]+([._/-][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$")


def check_submission(sub: BotSubmission) -> tuple[str, str | None, str | None]:
    """(kind, url, image) of a valid submission; 422 otherwise."""
    if (sub.url is None) == (sub.image is None):
        fail(422, "give exactly one of 'url' (a running bot) and 'image' (a container image)",
             "url" if sub.url is None else "image")
    if sub.secret is not None:
        if not sub.secret or len(sub.secret) > 200 or _CONTROL.search(sub.secret):
            fail(422, "'secret' must be 1 to 200 printable characters", "secret")
    if len(sub.note) > 500:
        fail(422, f"'note' is too long: {len(sub.note)} characters, at most 500", "note")
    if sub.url is not None:
        if len(sub.url) > 300 or not _URL.match(sub.url):
            fail(422, f"'url' must be http://host:port or https://host:port (got {sub.url[:300]!r})", "url")
        port = re.search(r":(\d+)(/|$)", sub.url.split("://", 1)[1])
        if port and not 0 < int(port.group(1)) < 65536:
            fail(422, f"'url' has an invalid port: {port.group(1)}", "url")
        return "url", sub.url.rstrip("/"), None
    assert sub.image is not None
    if not containers_enabled():
        fail(422, "image submissions are not enabled on this server (container bots are not available "
                  "here): submit the 'url' of a running bot instead", "image")
    if len(sub.image) > 255 or not _IMAGE.match(sub.image):
        fail(422, f"'image' must be a container image reference like 'name:tag' (got {sub.image[:255]!r})",
             "image")
    return "image", None, sub.image


def _int(request: web.Request, key: str) -> int:
    try:
        return int(request.match_info[key])
    except ValueError:
        raise web.HTTPNotFound() from None


# -------------------------------------------------------------------- auth


def bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


_AUTH = {"WWW-Authenticate": 'Bearer realm="referee"'}


def require_admin(request: web.Request) -> None:
    db = request.app[DB]
    token = bearer(request)
    if token is None:
        fail(401, "missing token: send 'Authorization: Bearer <admin token>'", headers=_AUTH)
    if db.is_admin(token):
        return
    if db.team_by_token(token) is not None:
        fail(403, "a team token cannot do this: it needs the admin token")
    fail(401, "unknown token", headers=_AUTH)


def require_team(request: web.Request, team: Team) -> None:
    db = request.app[DB]
    token = bearer(request)
    if token is None:
        fail(401, "missing token: send 'Authorization: Bearer <team token>'", headers=_AUTH)
    if db.team_token_matches(team.id, token):
        return
    if db.team_by_token(token) is not None:
        fail(403, f"this token belongs to another team, not to team {team.id}")
    if db.is_admin(token):
        fail(403, "bots are submitted with the team's own token, not the admin token")
    fail(401, "unknown token", headers=_AUTH)


# ---------------------------------------------------------------- reading


def _competition(request: web.Request) -> Competition:
    comp = request.app[DB].competition(_int(request, "cid"))
    if comp is None:
        fail(404, f"no competition {request.match_info['cid']}")
    return comp


def _run_dict(run: Run) -> dict[str, Any]:
    return {"id": run.id, "status": run.status, "total_games": run.total_games, "error": run.error,
            "started_at": run.started_at, "finished_at": run.finished_at}


def _pick_run(request: web.Request, comp: Competition) -> tuple[Run | None, bool]:
    db = request.app[DB]
    want = request.query.get("run")
    if want is not None:
        try:
            run = db.run(int(want))
        except ValueError:
            run = None
        if run is None or run.competition_id != comp.id:
            fail(404, f"no run {want} in competition {comp.id}")
        return run, True
    return db.latest_run(comp.id), False


async def _snapshot(app: web.Application, run: Run) -> Snapshot:
    league = decode_league(run.league_json)
    games = await asyncio.to_thread(count_games, run.out_dir)
    key = ("snap", run.id, games)
    snap = app[CACHE].get(key)
    if snap is None:
        snap = await asyncio.to_thread(snapshot, run.out_dir, league)
        app[CACHE].put(key, snap)
    assert isinstance(snap, Snapshot)
    return snap


def _prospective(db: ServiceDB, comp: Competition) -> list[Standing]:
    """Before any run: the bots that would play, unrated."""
    try:
        league = check_league_text(comp.league_toml)
    except LeagueError:
        return []
    names = [b.name for b in league.bots]
    names += [t.name for t in db.teams(comp.id) if db.latest_submission(t.id) is not None]
    return Table(names, league.ratings, series=league.rules.scoring).standings()


async def competition_data(app: web.Application, comp: Competition, run: Run | None,
                           pinned: bool = False) -> dict[str, Any]:
    """The leaderboard's data (GET /api/competitions/{cid}, the SSE updates)."""
    db = app[DB]
    teams = db.teams(comp.id)
    try:
        house = house_bots(comp.league_toml)
    except LeagueError:
        house = []
    data: dict[str, Any] = {
        "id": comp.id, "name": comp.name, "created_at": comp.created_at,
        "teams": [t.name for t in teams], "house_bots": house,
        "runs": [_run_dict(r) for r in db.runs(comp.id)],
        "run": None, "pinned": pinned, "games": 0, "standings": [], "recent_games": [],
    }
    if run is None:
        data["standings"] = _prospective(db, comp)
        return data
    snap = await _snapshot(app, run)
    recent = await asyncio.to_thread(games_list, run.out_dir, None, 12)
    data.update(run=_run_dict(run), games=snap.games, standings=snap.standings, recent_games=recent)
    return data


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=msgspec.json.encode(data), status=status, content_type="application/json")


def _html(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html")


# ------------------------------------------------------------- API: reads


async def api_competitions(request: web.Request) -> web.Response:
    return _json(await _index_data(request.app))


async def _index_data(app: web.Application) -> list[dict[str, Any]]:
    db = app[DB]
    out = []
    for c in db.competitions():
        run = db.latest_run(c.id)
        games = await asyncio.to_thread(count_games, run.out_dir) if run is not None else 0
        out.append({"id": c.id, "name": c.name, "teams": len(db.teams(c.id)),
                    "status": run.status if run else "no run yet", "games": games,
                    "total_games": run.total_games if run else 0,
                    "run": _run_dict(run) if run else None})
    return out


async def api_competition(request: web.Request) -> web.Response:
    comp = _competition(request)
    run, pinned = _pick_run(request, comp)
    return _json(await competition_data(request.app, comp, run, pinned))


async def api_runs(request: web.Request) -> web.Response:
    comp = _competition(request)
    return _json([_run_dict(r) for r in request.app[DB].runs(comp.id)])


async def _bot_data(request: web.Request) -> tuple[Competition, dict[str, Any], dict[str, Any]]:
    app = request.app
    db = app[DB]
    comp = _competition(request)
    run, pinned = _pick_run(request, comp)
    name = request.match_info["bot"]
    team = db.team_named(comp.id, name)
    sub = db.latest_submission(team.id) if team else None
    league: League | None = decode_league(run.league_json) if run else None
    in_league = league is not None and any(b.name == name for b in league.bots)
    try:
        house = house_bots(comp.league_toml)
    except LeagueError:
        house = []
    if not in_league and team is None and name not in house:
        fail(404, f"no bot {name!r} in competition {comp.id}")
    standing: Standing | None = None
    history: list[dict[str, Any]] = []
    games: list[dict[str, Any]] = []
    if run is not None and in_league:
        snap = await _snapshot(app, run)
        standing = next((s for s in snap.standings if s.bot == name), None)
        history = [{"game": g, "mu": round(mu, 4), "sigma": round(sg, 4), "score": round(mu - 3 * sg, 4)}
                   for g, b, mu, sg in snap.history if b == name]
        games = await asyncio.to_thread(games_list, run.out_dir, name)
    comp_data = {"id": comp.id, "name": comp.name, "run": _run_dict(run) if run else None, "pinned": pinned}
    bot = {
        "name": name, "team": team is not None, "house": name in house,
        "submission": None if sub is None else {"kind": sub.kind, "created_at": sub.created_at},
        "submitted_at": sub.created_at if sub else None,
        "run": run.id if run else None, "in_run": in_league,
        "standing": msgspec.to_builtins(standing) if standing else None,
        "history": history, "games": games,
    }
    return comp, comp_data, bot


async def api_bot(request: web.Request) -> web.Response:
    _, _, bot = await _bot_data(request)
    return _json(bot)


async def _run_of(request: web.Request, comp: Competition) -> Run:
    run = request.app[DB].run(_int(request, "rid"))
    if run is None or run.competition_id != comp.id:
        fail(404, f"no run {request.match_info['rid']} in competition {comp.id}")
    return run


async def api_games(request: web.Request) -> web.Response:
    comp = _competition(request)
    run = await _run_of(request, comp)
    return _json(await asyncio.to_thread(games_list, run.out_dir, request.query.get("bot")))


async def _replay_data(request: web.Request) -> tuple[Competition, Run, int, dict[str, Any]]:
    comp = _competition(request)
    run = await _run_of(request, comp)
    idx = _int(request, "idx")
    path = await asyncio.to_thread(replay_path, run.out_dir, idx)
    if path is None or not path.exists():
        fail(404, f"no replay of game {idx} in run {run.id}")
    key = ("replay", str(path), path.stat().st_mtime)
    data = request.app[CACHE].get(key)
    if data is None:
        try:
            data = await asyncio.to_thread(lambda: frames(read_replay(path)))
        except ReplayError as e:
            fail(500, f"the replay of game {idx} cannot be read: {e}")
        request.app[CACHE].put(key, data)
    assert isinstance(data, dict)
    return comp, run, idx, data


async def api_game(request: web.Request) -> web.Response:
    _, _, _, data = await _replay_data(request)
    return _json(data)


# ---------------------------------------------------------------- events


async def api_events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``update`` with the leaderboard's data now and
    whenever a game is recorded or the run's status changes."""
    app = request.app
    comp = _competition(request)
    hub = app[HUB]
    resp = web.StreamResponse(headers={
        "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
    })
    await resp.prepare(request)
    q = hub.subscribe(comp.id)
    try:
        run = app[DB].latest_run(comp.id)
        await _send(resp, await competition_data(app, comp, run))
        heartbeat = app[SETTINGS].heartbeat_s
        while not hub.closing:
            try:
                data = await asyncio.wait_for(q.get(), heartbeat)
            except asyncio.TimeoutError:
                await resp.write(b": keep-alive\n\n")
                continue
            if data is None:
                break
            await _send(resp, data)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        hub.unsubscribe(comp.id, q)
    return resp


async def _send(resp: web.StreamResponse, data: dict[str, Any]) -> None:
    await resp.write(b"event: update\ndata: " + msgspec.json.encode(data) + b"\n\n")


async def _poller(app: web.Application) -> None:
    """Publish a competition's data when its latest run changed (new games,
    new status, a new run), for competitions someone is watching."""
    hub, db, settings = app[HUB], app[DB], app[SETTINGS]
    while True:
        await asyncio.sleep(settings.poll_s)
        for cid, queues in list(hub.queues.items()):
            if not queues:
                continue
            try:
                comp = db.competition(cid)
                if comp is None:
                    continue
                run = db.latest_run(cid)
                games = await asyncio.to_thread(count_games, run.out_dir) if run else 0
                version = (run.id if run else None, run.status if run else None, games,
                           len(db.teams(cid)))
                if hub.versions.get(cid) == version:
                    continue
                first = cid not in hub.versions
                hub.versions[cid] = version
                if not first:
                    hub.publish(cid, await competition_data(app, comp, run))
            except Exception:  # noqa: BLE001 - keep polling
                import logging

                logging.getLogger("referee.web").exception("live update of competition %s", cid)


# ------------------------------------------------------------- API: writes


async def api_new_competition(request: web.Request) -> web.Response:
    require_admin(request)
    body = await read_body(request, NewCompetition)
    db = request.app[DB]
    name = check_name(body.name, "name", 80, slash=True)
    if db.competition_named(name) is not None:
        fail(422, f"a competition named {name!r} exists already", "name")
    try:
        check_league_text(body.league, "league")
    except LeagueError as e:
        fail(422, f"'league': {e}", "league")
    comp = db.add_competition(name, body.league)
    return _json({"id": comp.id, "name": comp.name, "created_at": comp.created_at}, 201)


async def api_teams(request: web.Request) -> web.Response:
    require_admin(request)
    comp = _competition(request)
    db = request.app[DB]
    out = []
    for t in db.teams(comp.id):
        sub = db.latest_submission(t.id)
        out.append({"id": t.id, "name": t.name, "created_at": t.created_at,
                    "submissions": db.count_submissions(t.id), "bot": _sub_dict(sub)})
    return _json(out)


def _sub_dict(sub: Submission | None) -> dict[str, Any] | None:
    if sub is None:
        return None
    return {"id": sub.id, "kind": sub.kind, "url": sub.url, "image": sub.image,
            "has_secret": sub.secret is not None, "note": sub.note, "created_at": sub.created_at}


async def api_new_team(request: web.Request) -> web.Response:
    require_admin(request)
    comp = _competition(request)
    body = await read_body(request, NewTeam)
    db = request.app[DB]
    name = check_name(body.name, "name", 40)
    if name.startswith("__team_slot_"):
        fail(422, "'name': names starting with '__team_slot_' are reserved", "name")
    if db.team_named(comp.id, name) is not None:
        fail(422, f"a team named {name!r} exists already in this competition", "name")
    try:
        house = house_bots(comp.league_toml)
    except LeagueError:
        house = []
    if name in house:
        fail(422, f"{name!r} is the name of a house bot of this competition", "name")
    team, token = db.add_team(comp.id, name)
    return _json({"id": team.id, "name": team.name, "competition": comp.id, "token": token,
                  "note": "the token is shown only now: give it to the team"}, 201)


def _team(request: web.Request, comp: Competition) -> Team:
    team = request.app[DB].team(_int(request, "tid"))
    if team is None or team.competition_id != comp.id:
        fail(404, f"no team {request.match_info['tid']} in competition {comp.id}")
    return team


async def api_submit(request: web.Request) -> web.Response:
    comp = _competition(request)
    team = _team(request, comp)
    require_team(request, team)
    body = await read_body(request, BotSubmission)
    kind, url, image = check_submission(body)
    db = request.app[DB]
    settings = request.app[SETTINGS]
    sub = db.add_submission(team.id, kind=kind, url=url, image=image, secret=body.secret, note=body.note,
                            rate_limit=(settings.submissions_per_window, settings.window_s))
    if sub is None:
        wait = db.retry_after(team.id, settings.window_s)
        fail(429, f"too many submissions: at most {settings.submissions_per_window} every "
                  f"{settings.window_s:g} s; try again in {wait:.0f} s",
             headers={"Retry-After": str(int(wait + 0.999))})
    return _json({"team": team.id, "bot": team.name, **(_sub_dict(sub) or {}),
                  "note": "the next run plays this bot"}, 201)


async def api_own_bot(request: web.Request) -> web.Response:
    comp = _competition(request)
    team = _team(request, comp)
    require_team(request, team)
    db = request.app[DB]
    return _json({"team": team.id, "name": team.name, "submissions": db.count_submissions(team.id),
                  "bot": _sub_dict(db.latest_submission(team.id))})


async def api_start_run(request: web.Request) -> web.Response:
    require_admin(request)
    comp = _competition(request)
    body = await read_body(request, StartRun) if await _has_body(request) else StartRun()
    app = request.app
    db = app[DB]
    try:
        run, league = prepare_run(db, comp.id, resume=body.resume)
    except StartError as e:
        fail(e.status, e.message)
    thread = RunThread(db.path, run, league, resume=body.resume)
    app[RUNS][run.id] = thread
    await asyncio.to_thread(thread.start)
    fresh = db.run(run.id)
    assert fresh is not None
    return _json(_run_dict(fresh), 202)


async def _has_body(request: web.Request) -> bool:
    if request.content_length == 0:
        return False
    return request.can_read_body


async def api_stop_run(request: web.Request) -> web.Response:
    require_admin(request)
    comp = _competition(request)
    run = await _run_of(request, comp)
    thread = request.app[RUNS].get(run.id)
    if thread is None or not thread.thread.is_alive():
        fail(409, f"run {run.id} is not running in this server")
    thread.stop(abandon=True)
    await asyncio.to_thread(thread.join, 30)
    fresh = request.app[DB].run(run.id)
    assert fresh is not None
    return _json(_run_dict(fresh))


# ------------------------------------------------------------------ pages


async def page_index(request: web.Request) -> web.Response:
    return _html(pages.index_page(await _index_data(request.app)))


async def page_leaderboard(request: web.Request) -> web.Response:
    comp = _competition(request)
    run, pinned = _pick_run(request, comp)
    return _html(pages.leaderboard_page(await competition_data(request.app, comp, run, pinned)))


async def page_live(request: web.Request) -> web.Response:
    comp = _competition(request)
    run, pinned = _pick_run(request, comp)
    resp = _html(pages.live_fragment(await competition_data(request.app, comp, run, pinned)))
    resp.headers["Cache-Control"] = "no-store"
    return resp


async def page_bot(request: web.Request) -> web.Response:
    _, comp_data, bot = await _bot_data(request)
    return _html(pages.bot_page(comp_data, bot))


async def page_game(request: web.Request) -> web.Response:
    comp, run, idx, data = await _replay_data(request)
    back = (f"<p><a href=\"/c/{comp.id}?run={run.id}\">← {pages.esc(comp.name)}</a> · "
            f"<a href=\"/api/competitions/{comp.id}/runs/{run.id}/games/{idx}\">JSON</a></p>")
    return _html(pages.replay_page(data, title=f"game {idx} — {comp.name}", back=back))


async def static_css(request: web.Request) -> web.Response:
    return web.Response(text=CSS, content_type="text/css")


async def static_js(request: web.Request) -> web.Response:
    return web.Response(text=JS, content_type="application/javascript")


# ------------------------------------------------------------ app factory


async def _db_ctx(app: web.Application) -> AsyncIterator[None]:
    db = app[DB]
    db.mark_stale_runs()
    yield
    db.close()


async def _runs_ctx(app: web.Application) -> AsyncIterator[None]:
    yield
    threads = list(app[RUNS].values())
    for t in threads:
        t.stop(abandon=True)
    for t in threads:
        await asyncio.to_thread(t.join, 30)


async def _hub_ctx(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(_poller(app))
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _on_shutdown(app: web.Application) -> None:
    app[HUB].close()


def make_app(db_path: str | Path, settings: Settings | None = None) -> web.Application:
    """The service over the database at ``db_path`` (created if missing).
    The admin token is made by :meth:`ServiceDB.ensure_admin_token` (``referee serve`` does)."""
    settings = settings or Settings()
    app = web.Application(middlewares=[errors_middleware], client_max_size=settings.max_body)
    app[SETTINGS] = settings
    app[DB] = ServiceDB(db_path)
    app[RUNS] = {}
    app[HUB] = Hub()
    app[CACHE] = Cache()
    # Order: the database outlives the runs (they record their end in it).
    app.cleanup_ctx.append(_db_ctx)
    app.cleanup_ctx.append(_runs_ctx)
    app.cleanup_ctx.append(_hub_ctx)
    app.on_shutdown.append(_on_shutdown)
    app.on_response_prepare.append(_on_prepare)
    r = app.router
    r.add_get("/", page_index)
    r.add_get("/c/{cid}", page_leaderboard)
    r.add_get("/c/{cid}/live", page_live)
    r.add_get("/c/{cid}/bots/{bot}", page_bot)
    r.add_get("/c/{cid}/runs/{rid}/games/{idx}", page_game)
    r.add_get("/static/style.css", static_css)
    r.add_get("/static/app.js", static_js)
    r.add_get("/api/competitions", api_competitions)
    r.add_post("/api/competitions", api_new_competition)
    r.add_get("/api/competitions/{cid}", api_competition)
    r.add_get("/api/competitions/{cid}/events", api_events)
    r.add_get("/api/competitions/{cid}/teams", api_teams)
    r.add_post("/api/competitions/{cid}/teams", api_new_team)
    r.add_get("/api/competitions/{cid}/teams/{tid}/bot", api_own_bot)
    r.add_put("/api/competitions/{cid}/teams/{tid}/bot", api_submit)
    r.add_get("/api/competitions/{cid}/bots/{bot}", api_bot)
    r.add_get("/api/competitions/{cid}/runs", api_runs)
    r.add_post("/api/competitions/{cid}/runs", api_start_run)
    r.add_post("/api/competitions/{cid}/runs/{rid}/stop", api_stop_run)
    r.add_get("/api/competitions/{cid}/runs/{rid}/games", api_games)
    r.add_get("/api/competitions/{cid}/runs/{rid}/games/{idx}", api_game)
    return app


__all__ = ["DB", "HUB", "RUNS", "SETTINGS", "Settings", "make_app"]
