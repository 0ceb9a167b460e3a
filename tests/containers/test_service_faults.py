"""A service fault is never a team's refusal (issue 25, item 1), for real:
the service's Docker client pointed at a dead socket, a team's upload waits
(status ``waiting``), its page and the API say that nothing is wrong with its
bot and when it is tried again, ``/admin`` shows the banner with the exact
cause; pointed at the real daemon again, the submission goes on by itself
and is accepted, and the banner goes. A team's own fault (a syntax error) is
still refused with its reason, never ``waiting``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.support.api import auth, new_competition, new_team, settled
from tests.support.builds import make_zip, python_bot_files
from tests.support.containers import upload_settled

pytestmark = pytest.mark.slow


@pytest.fixture
async def client(service_client: Callable[..., Awaitable[Any]]) -> Any:
    return await service_client(fault_retry_s=0.5, fault_retry_max_s=2.0)


async def status_of(client: Any, cid: int, tid: int, token: str, sid: int) -> dict[str, Any]:
    r = await client.get(f"/api/competitions/{cid}/teams/{tid}/submissions/{sid}", headers=auth(token))
    assert r.status == 200, await r.text()
    return dict(await r.json())


async def sick_daemon(path: Path) -> web.AppRunner:
    """A Docker daemon on a unix socket that answers its ping and version, and fails everything else with 500."""

    async def ping(request: web.Request) -> web.Response:
        return web.Response(text="OK")

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"ApiVersion": "1.41", "Version": "20.10.0", "MinAPIVersion": "1.12"})

    async def fail(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"message": "sick daemon: out of inodes"}, status=500)

    app = web.Application(client_max_size=1 << 30)
    app.router.add_get("/_ping", ping)
    app.router.add_get("/v{v}/_ping", ping)
    app.router.add_get("/version", version)
    app.router.add_get("/v{v}/version", version)
    app.router.add_route("*", "/{tail:.*}", fail)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, str(path)).start()
    return runner


async def until(
    client: Any, cid: int, tid: int, token: str, sid: int, status: str, timeout: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        detail = await status_of(client, cid, tid, token, sid)
        if detail["submission"]["status"] == status:
            return detail
        assert detail["submission"]["status"] not in ("accepted", "refused"), detail
        assert time.monotonic() < deadline, detail
        await asyncio.sleep(0.1)


async def test_docker_gone_uploads_wait_and_go_on_when_it_is_back_and_a_syntax_error_is_still_refused(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cid = await new_competition(client, client.admin)
    tid, token = await new_team(client, client.admin, cid, "team a")
    r = await client.post("/admin/login", data={"token": client.admin}, allow_redirects=False)
    assert r.status == 303
    assert "service-banner" not in await (await client.get("/admin")).text()

    # a daemon that answers, but fails (its 5xx): the upload waits, with the daemon's words
    sick = await sick_daemon(tmp_path / "sick.sock")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'sick.sock'}")
    zipped = make_zip(tmp_path / "bot.zip", python_bot_files())
    r = await client.post(
        f"/api/competitions/{cid}/teams/{tid}/uploads?kind=source",
        data=zipped.read_bytes(),
        headers=auth(token),
    )
    assert r.status == 201, await r.text()
    first = (await r.json())["id"]
    sub = (await until(client, cid, tid, token, first, "waiting"))["submission"]
    assert sub["reason"].startswith(
        "nothing is wrong with your bot: the server could not check it (the "
        "Docker daemon failed (500)); it will be retried at"
    ), sub
    admin_page = await (await client.get("/admin")).text()
    assert "the Docker daemon failed (500): sick daemon: out of inodes" in admin_page
    await sick.cleanup()

    # no daemon at all: it waits, and a newer upload replaces the waiting one (the team's one place)
    dead = tmp_path / "nothing.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{dead}")
    r = await client.post(
        f"/api/competitions/{cid}/teams/{tid}/uploads?kind=source",
        data=zipped.read_bytes(),
        headers=auth(token),
    )
    assert r.status == 201, await r.text()
    sid = (await r.json())["id"]
    replaced = (await until(client, cid, tid, token, first, "superseded"))["submission"]
    assert replaced["reason"] == f"replaced by #{sid} before its check", replaced
    detail = await until(client, cid, tid, token, sid, "waiting")
    sub = detail["submission"]
    assert sub["reason"].startswith(
        "nothing is wrong with your bot: the server could not check it (Docker is not reachable"
    ), sub
    assert "it will be retried at" in sub["reason"] and sub["retry_at"] > time.time() - 5
    assert str(dead) not in sub["reason"], "the team is told what failed, not the server's paths"
    # it stays waiting over several tries (back-off 0.5, 1, 2, 2 s), never refused
    await asyncio.sleep(3)
    again = (await status_of(client, cid, tid, token, sid))["submission"]
    assert again["status"] == "waiting" and again["retry_at"] >= sub["retry_at"], again
    assert [p for p in tmp_path.rglob("upload-*") if p.is_file()], "the upload is kept while it waits"
    # the admin's banner, with the exact cause
    admin_page = await (await client.get("/admin")).text()
    assert 'id="service-banner"' in admin_page and "Docker is not reachable" in admin_page
    assert str(dead) in admin_page, "the admin sees the exact cause"
    assert "1 submission(s) wait" in admin_page
    assert "sick daemon" not in admin_page, "the banner says the latest cause"

    # Docker back: the submission goes on by itself and is accepted; the banner goes
    monkeypatch.delenv("DOCKER_HOST")
    done = await settled(client, cid, tid, token, sid, timeout=300)
    assert done["submission"]["status"] == "accepted", done
    assert done["submission"]["reason"] is None and done["submission"]["retry_at"] is None
    assert "service-banner" not in await (await client.get("/admin")).text()
    assert not [p for p in tmp_path.rglob("upload-*") if p.is_file()], (
        "the upload goes once its image is made"
    )

    # a team's own fault is refused, with its reason, never waiting
    broken = make_zip(tmp_path / "broken.zip", {"bot.py": "def act(:\n    pass\n"})
    bad = await upload_settled(client, cid, tid, token, broken.read_bytes(), timeout=120)
    assert bad["submission"]["status"] == "refused", bad
    assert "Python could not compile" in bad["submission"]["reason"]
    assert "service-banner" not in await (await client.get("/admin")).text()
