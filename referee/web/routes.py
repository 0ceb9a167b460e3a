"""Every URL of the service and its handler: the pages, their JSON mirrors, the writes."""

from __future__ import annotations

from aiohttp import web

from . import live, watch
from .handlers import (
    admin_pages,
    bots,
    competitions,
    diagnostics,
    docs,
    phases,
    practice,
    runs,
    sdk,
    seat,
    static,
    team_pages,
    teams,
)


def setup_routes(app: web.Application) -> None:
    r = app.router
    # Pages
    r.add_get("/", competitions.index_page)
    r.add_get("/c/{cid}", competitions.leaderboard_page)
    r.add_get("/c/{cid}/live", competitions.live_fragment)
    r.add_get("/c/{cid}/earlier", competitions.earlier_page)  # a ladder's earlier versions, paged
    r.add_get("/c/{cid}/bots/{bot}", bots.bot_page)
    r.add_get("/c/{cid}/runs/{rid}/games/{idx}", runs.replay_page)
    r.add_get("/c/{cid}/runs/{rid}/live/{idx}", watch.watch_page)  # a game followed live (issue 36)
    r.add_get("/c/{cid}/tv", watch.tv_page)
    r.add_get("/admin/login", admin_pages.login_page)
    r.add_post("/admin/login", admin_pages.login)
    r.add_post("/admin/logout", admin_pages.logout)
    r.add_get("/admin", admin_pages.home)
    r.add_post("/admin/competitions", admin_pages.new_competition)
    r.add_get("/admin/c/{cid}", admin_pages.competition_page)
    r.add_post("/admin/c/{cid}/teams", admin_pages.add_teams)
    r.add_post("/admin/c/{cid}/{action:open|freeze|final}", phases.admin_action)
    r.add_post("/admin/c/{cid}/extend", phases.admin_extend)
    r.add_post("/admin/c/{cid}/deadlines", phases.admin_deadlines)
    # changing a competition; a team as the teacher sees it (issue 25)
    r.add_post("/admin/c/{cid}/league", admin_pages.edit_league_form)
    r.add_get("/admin/c/{cid}/teams/{tid}", admin_pages.team_page)
    r.add_get("/admin/c/{cid}/teams/{tid}/submissions/{sid}", admin_pages.team_submission_page)
    r.add_get("/admin/c/{cid}/teams/{tid}/diagnostics", admin_pages.team_diagnostics_page)
    r.add_post("/admin/c/{cid}/teams/{tid}/{action:rename|withdraw|token}", admin_pages.team_action)
    r.add_get("/login", team_pages.login_page)
    r.add_post("/login", team_pages.login)
    r.add_post("/logout", team_pages.logout)
    r.add_get("/team", team_pages.team_page)
    r.add_get("/team/live", team_pages.team_live)
    r.add_post("/team/submit", team_pages.submit)
    r.add_get("/team/submissions/{sid}", team_pages.submission_page)
    r.add_get("/team/diagnostics", diagnostics.diagnostics_page)
    # The rules, the protocol, a competition's settings; the starter kits (issue 26)
    r.add_get("/rules", docs.doc_page)
    r.add_get("/protocol", docs.doc_page)
    r.add_get("/c/{cid}/rules", docs.competition_rules_page)
    r.add_get("/team/kit/{kit}.zip", docs.kit_download)
    r.add_get("/sdk/", sdk.sdk_index)  # the SDK as a wheel (issue 35)
    r.add_get("/sdk/{name}", sdk.sdk_wheel_file)
    # issue 26: the team's own replays, its bot's output by turn (a run's game, a validation game)
    r.add_get("/team/runs/{rid}/games/{idx}", diagnostics.team_game_page)
    r.add_get("/team/submissions/{sid}/games/{idx}", diagnostics.check_game_page)
    r.add_get("/api/competitions/{cid}/teams/{tid}/runs/{rid}/games/{idx}", diagnostics.team_game)
    r.add_get("/static/style.css", static.stylesheet)
    r.add_get("/static/app.js", static.script)
    r.add_get("/static/seat.js", static.seat_script)
    r.add_get("/static/table.js", static.table_script)
    r.add_get("/static/watch.js", static.watch_script)
    r.add_get("/favicon.ico", static.favicon_ico)
    r.add_get("/favicon.svg", static.favicon_svg)
    # API
    r.add_get("/api/competitions", competitions.list_competitions)
    r.add_post("/api/competitions", competitions.new_competition)
    r.add_get("/api/competitions/{cid}", competitions.get_competition)
    r.add_get("/api/competitions/{cid}/events", live.events)
    r.add_get("/api/competitions/{cid}/live", watch.live_games)
    r.add_get("/api/competitions/{cid}/runs/{rid}/live/{idx}/events", watch.events)
    r.add_get("/api/competitions/{cid}/teams", teams.list_teams)
    r.add_post("/api/competitions/{cid}/teams", teams.new_team)
    r.add_get("/api/competitions/{cid}/teams/{tid}/bot", teams.own_bot)
    r.add_put("/api/competitions/{cid}/teams/{tid}/bot", teams.submit_bot)
    r.add_post("/api/competitions/{cid}/teams/{tid}/uploads", teams.upload_bot)
    r.add_get("/api/competitions/{cid}/teams/{tid}/submissions", teams.list_submissions)
    r.add_get("/api/competitions/{cid}/teams/{tid}/submissions/{sid}", teams.get_submission)
    r.add_get("/api/competitions/{cid}/teams/{tid}/diagnostics", diagnostics.team_diagnostics)
    r.add_get("/api/competitions/{cid}/admission", competitions.get_admission)  # a team's own token
    r.add_get("/api/competitions/{cid}/league", competitions.get_league)
    r.add_put("/api/competitions/{cid}/league", competitions.put_league)
    r.add_patch("/api/competitions/{cid}/teams/{tid}", teams.patch_team)
    r.add_post("/api/competitions/{cid}/teams/{tid}/withdraw", teams.post_withdraw)
    r.add_post("/api/competitions/{cid}/teams/{tid}/token", teams.post_token)
    r.add_get("/api/competitions/{cid}/bots/{bot}", bots.get_bot)
    r.add_get("/api/competitions/{cid}/runs", runs.list_runs)
    r.add_post("/api/competitions/{cid}/runs", runs.start_run)
    r.add_post("/api/competitions/{cid}/runs/{rid}/stop", runs.stop_run)
    r.add_post("/api/competitions/{cid}/open", phases.open_competition)
    r.add_post("/api/competitions/{cid}/freeze", phases.freeze)
    r.add_post("/api/competitions/{cid}/final", phases.start_final)
    r.add_post("/api/competitions/{cid}/final/extend", phases.extend_final)
    r.add_get("/api/competitions/{cid}/deadlines", phases.get_deadlines)
    r.add_put("/api/competitions/{cid}/deadlines", phases.put_deadlines)
    r.add_delete("/api/competitions/{cid}/deadlines", phases.put_deadlines)
    r.add_get("/api/competitions/{cid}/runs/{rid}/standings.csv", phases.standings_csv)
    r.add_get("/api/competitions/{cid}/runs/{rid}/games", runs.list_games)
    r.add_get("/api/competitions/{cid}/runs/{rid}/games/{idx}", runs.get_game)
    # Practice games (issue 26): the team's own, unrated
    r.add_get("/team/practice", practice.practice_page)
    r.add_post("/team/practice", practice.practice_submit)
    r.add_post("/team/practice/seat", seat.seat_submit)  # a team member seated (issue 36)
    r.add_get("/team/practice/{pid}/play", seat.play_page)
    r.add_get("/team/practice/{pid}/seat", seat.seat_socket)
    r.add_get("/team/practice/{pid}", practice.practice_replay)
    r.add_post("/api/competitions/{cid}/teams/{tid}/practice", practice.api_ask)
    r.add_get("/api/competitions/{cid}/teams/{tid}/practice", practice.api_list)
    r.add_get("/api/competitions/{cid}/teams/{tid}/practice/{pid}", practice.api_game)
    r.add_get("/api/competitions/{cid}/teams/{tid}/practice/{pid}/replay", practice.api_replay)
