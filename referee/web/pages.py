"""Server-rendered HTML: every value goes through :func:`esc` (team and bot
names are untrusted), charts are inline SVG drawn here, the script is
:data:`referee.web.assets.JS`."""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from ..tournament.ratings import Standing
from .assets import CSS, JS


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def q(value: object) -> str:
    """A path segment."""
    return quote(str(value), safe="")


def layout(title: str, body: str, *, standalone: bool = False) -> str:
    if standalone:
        head_assets = f"<style>{CSS}</style>"
        tail = "<script>" + JS.replace("</", "<\\/") + "</script>"
        nav = f'<header class="top"><span class="brand">referee</span><span>{esc(title)}</span></header>'
    else:
        head_assets = '<link rel="stylesheet" href="/static/style.css">'
        tail = '<script src="/static/app.js"></script>'
        nav = ('<header class="top"><a class="brand" href="/">referee</a>'
               '<a href="/">competitions</a><a href="/api/competitions">JSON API</a></header>')
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{esc(title)}</title>{head_assets}</head><body>{nav}<main>{body}</main>{tail}</body></html>\n"
    )


def _num(v: float | None, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _when(t: float | None) -> str:
    return "–" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


# ----------------------------------------------------------------- index


def index_page(competitions: Sequence[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td class=l><a href=\"/c/{c['id']}\">{esc(c['name'])}</a></td><td>{c['teams']}</td>"
        f"<td class=l><span class=\"status {esc(c['status'])}\">{esc(c['status'])}</span></td>"
        f"<td>{c['games']}/{c['total_games']}</td></tr>"
        for c in competitions
    )
    body = (
        "<h1>Competitions</h1>"
        + (f"<table class=grid><tr><th class=l>competition</th><th>teams</th><th class=l>status</th>"
           f"<th>games</th></tr>{rows}</table>" if competitions
           else "<p class=muted>No competition yet. The admin creates one with "
                "<code>POST /api/competitions</code>.</p>")
    )
    return layout("competitions", body)


# ----------------------------------------------------------- leaderboard


def sigma_bar(s: Standing, lo: float, hi: float, width: int = 180) -> str:
    """μ ± 3σ as a bar, μ as a tick, μ − 3σ (the score) as a dot."""
    span = max(hi - lo, 1e-9)

    def x(v: float) -> float:
        return round(4 + (width - 8) * (v - lo) / span, 1)

    a, b, m = x(s.mu - 3 * s.sigma), x(s.mu + 3 * s.sigma), x(s.mu)
    return (
        f'<svg class="sigma" width="{width}" height="16" viewBox="0 0 {width} 16" role="img" '
        f'aria-label="mu {s.mu:.2f}, sigma {s.sigma:.2f}">'
        f'<line x1="4" y1="8" x2="{width - 4}" y2="8" stroke="#e4e7ec" stroke-width="1"/>'
        f'<rect x="{a}" y="4" width="{max(b - a, 1):.1f}" height="8" rx="3" fill="#9db4ea"/>'
        f'<line x1="{m}" y1="1" x2="{m}" y2="15" stroke="#1d2330" stroke-width="2"/>'
        f'<circle cx="{a}" cy="8" r="3.5" fill="#d92d20"/></svg>'
    )


def standings_table(cid: int, standings: Sequence[Standing], run_id: int | None) -> str:
    if not standings:
        return "<p class=muted>No bots yet.</p>"
    lo = min(s.mu - 3 * s.sigma for s in standings)
    hi = max(s.mu + 3 * s.sigma for s in standings)
    run_q = f"?run={run_id}" if run_id is not None else ""
    series = any(s.points is not None for s in standings)  # V4 [D14]: ranked by points
    rows = []
    for s in standings:
        faults = sum(s.faults.values())
        fault_title = ", ".join(f"{k}: {v}" for k, v in s.faults.items())
        rows.append(
            f"<tr data-bot=\"{esc(s.bot)}\"><td>{s.rank}</td>"
            f"<td class=l><a href=\"/c/{cid}/bots/{q(s.bot)}{run_q}\">{esc(s.bot)}</a></td>"
            f"<td><b>{s.score:.2f}</b></td><td>{s.mu:.2f}</td><td>{s.sigma:.2f}</td>"
            f"<td class=l>{sigma_bar(s, lo, hi)}</td>"
            f"<td class=games>{s.games}</td><td>{s.wins}</td><td>{_num(s.avg_place)}</td>"
            f"<td title=\"{esc(fault_title)}\">{faults}</td>"
            f"<td>{_num(s.latency_p50_ms, 1)}</td><td>{_num(s.latency_p95_ms, 1)}</td>"
            + (f"<td><b>{s.points}</b></td>" if series else "") + "</tr>"
        )
    return (
        "<table class=\"grid standings\"><tr><th>#</th><th class=l>bot</th><th title=\"μ − 3σ\">μ−3σ</th>"
        "<th>μ</th><th>σ</th><th class=l>μ ± 3σ</th><th>games</th><th>wins</th><th>avg place</th>"
        "<th>faults</th><th>p50 ms</th><th>p95 ms</th>"
        + ("<th title=\"V4: penalty points, fewest first\">points</th>" if series else "")
        + "</tr>" + "".join(rows) + "</table>"
    )


def games_table(cid: int, run_id: int, games: Sequence[dict[str, Any]], limit: int = 20,
                highlight: str | None = None) -> str:
    if not games:
        return "<p class=muted>No game finished yet.</p>"
    shown = list(games)[-limit:][::-1]
    rows = []
    for g in shown:
        seats = ", ".join(
            (f"<b>{esc(n)}</b>" if n == highlight else esc(n)) + f" ({p})"
            for n, p in zip(g["seats"], g["places"], strict=False)
        )
        link = (f"<a href=\"/c/{cid}/runs/{run_id}/games/{g['index']}\">replay</a>"
                if g["has_replay"] else "<span class=muted>no replay</span>")
        rows.append(
            f"<tr><td>{g['index']}</td><td class=l>{seats}</td><td>{g['turns']}</td>"
            f"<td>{g['faults']}</td><td class=l>{'adjudicated' if g['adjudicated'] else ''}</td>"
            f"<td class=l>{link}</td></tr>"
        )
    more = f"<p class=muted>{len(games) - len(shown)} earlier games not shown.</p>" if len(games) > len(shown) else ""
    return (
        "<table class=\"grid games\"><tr><th>game</th><th class=l>seats (place)</th><th>turns</th>"
        "<th>faults</th><th class=l></th><th class=l></th></tr>" + "".join(rows) + "</table>" + more
    )


def live_fragment(comp: dict[str, Any]) -> str:
    """The live part of the leaderboard (re-fetched on every server-sent update)."""
    run = comp.get("run")
    cid = comp["id"]
    if run is None:
        status = "<p id=progress><span class=\"status idle\">no run yet</span></p>"
        table = standings_table(cid, comp["standings"], None)
        return status + table
    done, total = comp["games"], run["total_games"]
    err = f" <span class=muted>{esc(run['error'])}</span>" if run.get("error") else ""
    status = (
        f"<p id=progress data-done=\"{done}\" data-total=\"{total}\" data-status=\"{esc(run['status'])}\">"
        f"run {run['id']}: <span class=\"status {esc(run['status'])}\">{esc(run['status'])}</span> "
        f"<progress max=\"{max(total, 1)}\" value=\"{done}\"></progress> "
        f"<span class=count>{done} / {total} games</span>{err}</p>"
    )
    return (status + standings_table(cid, comp["standings"], run["id"])
            + "<h2>Latest games</h2>" + games_table(cid, run["id"], comp["recent_games"], limit=12))


def leaderboard_page(comp: dict[str, Any]) -> str:
    cid = comp["id"]
    teams = ", ".join(esc(t) for t in comp["teams"]) or "<span class=muted>none yet</span>"
    house = ", ".join(esc(b) for b in comp["house_bots"]) or "<span class=muted>none</span>"
    runs = " ".join(
        f"<a href=\"/c/{cid}?run={r['id']}\">run {r['id']}</a> ({esc(r['status'])})" for r in comp["runs"]
    )
    body = (
        f"<h1>{esc(comp['name'])} <span class=muted>leaderboard</span></h1>"
        f"<p class=muted>Teams: {teams}. House bots: {house}. Ranked by TrueSkill μ − 3σ. "
        f"<a href=\"/api/competitions/{cid}\">JSON</a></p>"
        f"<div id=live data-live data-events=\"/api/competitions/{cid}/events\" "
        f"data-fragment=\"/c/{cid}/live{('?run=' + str(comp['run']['id'])) if comp.get('run') and comp.get('pinned') else ''}\">"
        f"{live_fragment(comp)}</div>"
        + (f"<p class=muted>All runs: {runs}</p>" if runs else "")
        + f"<form class=panel data-admin-start data-url=\"/api/competitions/{cid}/runs\">"
        "<b>Admin</b> — start a tournament with the teams' latest bots: "
        "<input type=password name=token placeholder=\"admin token\" autocomplete=off> "
        "<label><input type=checkbox name=resume> resume the last run</label> "
        "<button type=submit>Start tournament</button> <span class=result></span></form>"
    )
    return layout(f"{comp['name']} — leaderboard", body)


# ---------------------------------------------------------------- bot page


def rating_chart(points: Sequence[tuple[int, float, float]], width: int = 760, height: int = 260) -> str:
    """μ over the bot's games with the μ ± 3σ band and the μ − 3σ line, as SVG."""
    if not points:
        return "<p class=muted>No rated game yet.</p>"
    pad_l, pad_r, pad_t, pad_b = 44, 12, 12, 28
    n = len(points)
    los = [m - 3 * s for _, m, s in points]
    his = [m + 3 * s for _, m, s in points]
    lo, hi = min(los), max(his)
    if hi - lo < 1e-6:
        hi, lo = hi + 1, lo - 1

    def x(k: int) -> float:
        return round(pad_l + (width - pad_l - pad_r) * (k / max(n - 1, 1)), 1)

    def y(v: float) -> float:
        return round(pad_t + (height - pad_t - pad_b) * (1 - (v - lo) / (hi - lo)), 1)

    band = " ".join(f"{x(k)},{y(v)}" for k, v in enumerate(his)) + " " + " ".join(
        f"{x(k)},{y(v)}" for k, v in reversed(list(enumerate(los)))
    )
    mu_line = " ".join(f"{x(k)},{y(m)}" for k, (_, m, _) in enumerate(points))
    score_line = " ".join(f"{x(k)},{y(v)}" for k, v in enumerate(los))
    ticks = []
    for t in range(5):
        v = lo + (hi - lo) * t / 4
        ticks.append(
            f'<line x1="{pad_l}" x2="{width - pad_r}" y1="{y(v)}" y2="{y(v)}" stroke="#eef1f5"/>'
            f'<text x="{pad_l - 6}" y="{y(v) + 4}" text-anchor="end" font-size="11" fill="#667085">{v:.1f}</text>'
        )
    xt = []
    for k in sorted({0, (n - 1) // 2, n - 1}):
        xt.append(f'<text x="{x(k)}" y="{height - 8}" text-anchor="middle" font-size="11" fill="#667085">'
                  f'{k + 1}</text>')
    return (
        f'<svg class="chart" id="rating-chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="rating history over {n} games">'
        + "".join(ticks)
        + f'<polygon points="{band}" fill="#9db4ea" fill-opacity="0.35"/>'
        + f'<polyline points="{score_line}" fill="none" stroke="#d92d20" stroke-width="1.5" stroke-dasharray="4 3"/>'
        + f'<polyline class="mu" points="{mu_line}" fill="none" stroke="#1d2330" stroke-width="2"/>'
        + "".join(xt)
        + f'<text x="{width - pad_r}" y="{pad_t + 10}" text-anchor="end" font-size="11" fill="#667085">'
          "μ (line), μ ± 3σ (band), μ − 3σ (dashed); x: games played</text></svg>"
    )


def bot_page(comp: dict[str, Any], bot: dict[str, Any]) -> str:
    cid = comp["id"]
    s = bot["standing"]
    stats = ""
    if s is not None:
        faults = ", ".join(f"{esc(k)}: {v}" for k, v in s["faults"].items()) or "none"
        stats = (
            "<table class=grid><tr><th>rank</th><th>μ−3σ</th><th>μ</th><th>σ</th><th>games</th><th>wins</th>"
            "<th>avg place</th><th class=l>faults</th><th>p50 ms</th><th>p95 ms</th></tr>"
            f"<tr><td>{s['rank']}</td><td><b>{s['score']:.2f}</b></td><td>{s['mu']:.2f}</td>"
            f"<td>{s['sigma']:.2f}</td><td>{s['games']}</td><td>{s['wins']}</td><td>{_num(s['avg_place'])}</td>"
            f"<td class=l>{faults}</td><td>{_num(s['latency_p50_ms'], 1)}</td>"
            f"<td>{_num(s['latency_p95_ms'], 1)}</td></tr></table>"
        )
    points = [(h["game"], h["mu"], h["sigma"]) for h in bot["history"]]
    run = comp.get("run")
    games = games_table(cid, run["id"], bot["games"], limit=30, highlight=bot["name"]) if run else ""
    team = f"<p class=muted>Team bot (submitted {_when(bot['submitted_at'])}).</p>" if bot.get("team") else (
        "<p class=muted>House bot.</p>")
    body = (
        f"<p><a href=\"/c/{cid}\">← {esc(comp['name'])}</a></p>"
        f"<h1>{esc(bot['name'])}</h1>{team}{stats}"
        f"<h2>Rating history</h2>{rating_chart(points)}"
        f"<h2>Games</h2>{games}"
        f"<p class=muted><a href=\"/api/competitions/{cid}/bots/{q(bot['name'])}\">JSON</a></p>"
    )
    return layout(f"{bot['name']} — {comp['name']}", body)


# ------------------------------------------------------------ replay viewer


def replay_page(data: dict[str, Any], *, title: str, standalone: bool = False, back: str = "") -> str:
    from .viewer import json_for_script

    result = data.get("result") or {}
    places = result.get("places") or []
    summary = ", ".join(
        f"{esc(n)}: place {p}" for n, p in zip(data["names"], places, strict=False)
    ) or "no result recorded"
    body = (
        (back if not standalone else "")
        + f"<h1>Replay <span class=muted>{esc(data['game_id'])}</span></h1>"
        f"<p class=muted>Seed {esc(data['seed'])}. {summary}."
        f"{' Adjudicated at the turn limit.' if result.get('adjudicated') else ''}</p>"
        "<div class=controls>"
        "<button id=first title=\"first step\">« first</button><button id=prev title=\"step back (←)\">◀ back</button>"
        "<button id=next title=\"step forward (→)\">forward ▶</button><button id=last title=\"last step\">last »</button>"
        "<input id=slider type=range min=0 value=0> <span id=step></span>"
        "<label>view: <select id=mode><option value=full>full view (all cards)</option></select></label>"
        "</div><div id=label></div>"
        "<div id=centre class=centre></div><div id=seats class=table></div>"
        "<h2>Events</h2><div id=events class=events></div>"
        "<p class=note>Full view: every card, the 3DOWN faces included. A seat's view: exactly what the "
        "referee sent that seat (other hands and all 3DOWN cards hidden; dotted cards are known to be in a "
        "hand because they were picked up from the pile).</p>"
        f"<script type=\"application/json\" id=\"replay-data\">{json_for_script(data)}</script>"
    )
    return layout(title, body, standalone=standalone)


def error_page(status: int, message: str) -> str:
    return layout(f"{status}", f"<h1>{status}</h1><p>{esc(message)}</p><p><a href=\"/\">competitions</a></p>")
