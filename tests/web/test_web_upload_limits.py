"""What a team's uploads may hold of the server's disk (issue 24, item 4),
each rule with the attack it stops: parallel uploads past the submission
limit, the disk's floor, the team's quota. Real HTTP on loopback; the
uploads are not archives (their check refuses them), what is measured is
what they hold while they stream."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from referee.service.store import ServiceDB
from referee.web.app_state import ROOM
from tests.support.api import auth, csrf_of, error_of, login, new_competition, new_team, url_of

Service = Any

MIB = 1 << 20
CHUNK = 256 * 1024


def uploads_dir(db_path: Path, tid: int) -> Path:
    return db_path.parent / "service-data" / "teams" / str(tid) / "uploads"


def held(folder: Path) -> int:
    """Bytes in the team's upload folder now."""
    total = 0
    try:
        for p in folder.iterdir():
            try:
                total += p.stat().st_size
            except FileNotFoundError:
                pass
    except FileNotFoundError:
        pass
    return total


async def slow_body(size: int, pause: float = 0.02) -> AsyncIterator[bytes]:
    """`size` bytes, a chunk at a time with a pause: an upload that stays in flight a while."""
    sent = 0
    while sent < size:
        n = min(CHUNK, size - sent)
        yield os.urandom(n)
        sent += n
        await asyncio.sleep(pause)


def submissions_of(db_path: Path, tid: int) -> int:
    db = ServiceDB(db_path)
    try:
        return db.count_submissions(tid)
    finally:
        db.close()


async def test_twelve_parallel_uploads_hold_one_upload_of_disk(
    service: Service, admin_token: str, db_path: Path
) -> None:
    """Issue 24: the 5-a-minute limit was checked once a file was on disk:
    12 uploads at once all streamed to disk (12 x the cap held). Now the
    team's slot is taken first: one upload in flight, the others refused
    with 429 before their bodies are read."""
    cap = 4 * MIB
    client = await service(max_upload=cap)  # the default rate: 5 a minute
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    folder = uploads_dir(db_path, tid)
    peak = 0
    stop = asyncio.Event()

    async def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, held(folder))
            await asyncio.sleep(0.002)

    async def one() -> tuple[int, str, str | None]:
        r = await client.post(url_of(cid, tid), data=slow_body(cap - CHUNK), headers=auth(token))
        return r.status, await r.text(), r.headers.get("Retry-After")

    watcher = asyncio.create_task(watch())
    results = await asyncio.gather(*(one() for _ in range(12)))
    stop.set()
    await watcher
    statuses = sorted(s for s, _, _ in results)
    print(
        f"\n12 parallel uploads of {(cap - CHUNK) / MIB:.2f} MiB: peak {peak / MIB:.2f} MiB held; "
        f"statuses {statuses}"
    )
    assert peak <= cap, f"{peak / MIB:.1f} MiB held at once in the team's upload folder"
    assert statuses.count(201) == 1, results
    refused = [(text, retry) for s, text, retry in results if s == 429]
    assert len(refused) == 11
    assert all("in flight" in text and retry is not None and int(retry) >= 1 for text, retry in refused)
    assert submissions_of(db_path, tid) == 1


async def test_a_second_upload_is_answered_before_its_body_is_sent(
    service: Service, admin_token: str, db_path: Path
) -> None:
    """The refusal comes before a byte of the body is read: a client that
    sends only the headers (Content-Length 3 MiB) is answered at once."""
    client = await service(max_upload=4 * MIB)
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    first = asyncio.create_task(
        client.post(url_of(cid, tid), data=slow_body(2 * MIB, pause=0.05), headers=auth(token))
    )
    folder = uploads_dir(db_path, tid)
    for _ in range(200):
        if held(folder) > 0:
            break
        await asyncio.sleep(0.01)
    assert held(folder) > 0, "the first upload did not start"
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    try:
        writer.write(
            (
                f"POST {url_of(cid, tid)} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/octet-stream\r\nContent-Length: {3 * MIB}\r\n\r\n"
            ).encode()
        )
        await writer.drain()
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        except TimeoutError:
            raise AssertionError("no answer in 5 s: the server waits for the second upload's body") from None
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 429"), head
    assert b"Retry-After:" in head
    r = await first  # the first upload is not disturbed
    assert r.status == 201, await r.text()


async def test_the_rate_limit_holds_under_concurrency(
    service: Service, admin_token: str, db_path: Path
) -> None:
    """Rounds of 12 parallel uploads never record more than the window allows."""
    client = await service(max_upload=MIB, submissions_per_window=3)
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")

    async def one() -> int:
        r = await client.post(url_of(cid, tid), data=slow_body(64 * 1024, pause=0.01), headers=auth(token))
        return r.status

    statuses = []
    for _ in range(5):
        statuses += await asyncio.gather(*(one() for _ in range(12)))
    assert statuses.count(201) == submissions_of(db_path, tid) == 3, statuses
    assert set(statuses) == {201, 429}
    r = await client.post(url_of(cid, tid), data=b"x" * 1000, headers=auth(token))
    assert "too many submissions" in (await error_of(r, 429))["error"]


async def test_a_failed_upload_gives_its_slot_back(service: Service, admin_token: str, db_path: Path) -> None:
    """Too large, empty, or the client gone: the slot (and the window's
    allowance) is the team's again; the file is gone."""
    client = await service(max_upload=MIB, submissions_per_window=1)
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    url = url_of(cid, tid)
    r = await client.post(url, data=slow_body(2 * MIB, pause=0), headers=auth(token))  # no Content-Length
    assert "too large" in (await error_of(r, 413))["error"]
    r = await client.post(url, data=b"", headers=auth(token))
    assert "empty" in (await error_of(r, 422))["error"]
    # a client that goes away halfway
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    writer.write(
        (
            f"POST {url} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Length: {MIB // 2}\r\n\r\n"
        ).encode()
        + b"z" * 100_000
    )
    await writer.drain()
    folder = uploads_dir(db_path, tid)
    for _ in range(200):
        if held(folder) > 0:
            break
        await asyncio.sleep(0.01)
    writer.close()
    for _ in range(300):
        if held(folder) == 0 and not any(folder.iterdir()):
            break
        await asyncio.sleep(0.01)
    assert not any(folder.iterdir())
    r = await client.post(url, data=b"x" * 1000, headers=auth(token))
    assert r.status == 201, await r.text()
    r = await client.post(url, data=b"x" * 1000, headers=auth(token))
    assert "too many submissions" in (await error_of(r, 429))["error"]
    assert submissions_of(db_path, tid) == 1


async def test_an_upload_is_refused_507_when_the_disk_is_below_its_floor(
    service: Service, admin_token: str, db_path: Path
) -> None:
    """Issue 24: nothing kept a floor of free disk for the database and the
    games. Below it: 507, before the body is read, saying it is the server's
    disk; and again while an upload streams."""
    client = await service(max_upload=64 * MIB)
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    data = db_path.parent / "service-data"
    st = os.statvfs(data)
    free = st.f_bavail * st.f_frsize
    client.app[ROOM].settings.min_free_disk = free + (1 << 40)  # more than this disk has free
    r = await client.post(url_of(cid, tid), data=b"x" * MIB, headers=auth(token))
    err = await error_of(r, 507)
    assert "server's disk" in err["error"] and "not your team's fault" in err["error"], err
    folder = uploads_dir(db_path, tid)
    assert held(folder) == 0
    # the floor a few MiB below the free space: the upload crosses it as it streams
    st = os.statvfs(data)
    client.app[ROOM].settings.min_free_disk = st.f_bavail * st.f_frsize - 3 * MIB
    r = await client.post(url_of(cid, tid), data=slow_body(32 * MIB, pause=0), headers=auth(token))
    assert "server's disk" in (await error_of(r, 507))["error"]
    assert held(folder) == 0 and not any(folder.iterdir())
    assert submissions_of(db_path, tid) == 0
    client.app[ROOM].settings.min_free_disk = 0  # the slot was given back
    r = await client.post(url_of(cid, tid), data=b"x" * 1000, headers=auth(token))
    assert r.status == 201, await r.text()


async def test_an_upload_over_the_teams_quota_is_refused(
    service: Service, admin_token: str, db_path: Path
) -> None:
    """Issue 24: a team could keep any amount of the disk. Its images, its
    uploads waiting and the upload in flight count against its quota."""
    client = await service(max_upload=16 * MIB, team_image_quota=2 * MIB)
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    r = await client.post(url_of(cid, tid), data=b"x" * (3 * MIB), headers=auth(token))  # declared
    err = await error_of(r, 413)
    assert "quota is 2.0 MiB" in err["error"] and "use 0.0 MiB" in err["error"], err
    r = await client.post(url_of(cid, tid), data=slow_body(3 * MIB, pause=0), headers=auth(token))  # streamed
    assert "quota" in (await error_of(r, 413))["error"]
    assert held(uploads_dir(db_path, tid)) == 0 and submissions_of(db_path, tid) == 0
    r = await client.post(url_of(cid, tid), data=b"x" * MIB, headers=auth(token))
    assert r.status == 201, await r.text()


async def test_the_team_pages_form_shares_the_one_upload_in_flight(
    service: Service, admin_token: str, db_path: Path
) -> None:
    """The team page's upload form takes the same slot: while an upload of
    the team streams, the form's file is refused before it is written."""
    from aiohttp import FormData

    client = await service(max_upload=4 * MIB)
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    await login(client, token)
    csrf = csrf_of(await (await client.get("/team")).text())

    def form() -> FormData:
        body = FormData()
        body.add_field("csrf", csrf)
        body.add_field("kind", "source")
        body.add_field("file", os.urandom(MIB), filename="bot.zip", content_type="application/zip")
        return body

    first = asyncio.create_task(
        client.post(url_of(cid, tid), data=slow_body(2 * MIB, pause=0.05), headers=auth(token))
    )
    folder = uploads_dir(db_path, tid)
    for _ in range(200):
        if held(folder) > 0:
            break
        await asyncio.sleep(0.01)
    r = await client.post("/team/submit", data=form(), allow_redirects=False)
    assert r.status == 429, (r.status, await r.text())
    assert "in flight" in await r.text()
    assert held(folder) <= 2 * MIB
    assert (await first).status == 201
    r = await client.post("/team/submit", data=form(), allow_redirects=False)
    assert r.status == 303, await r.text()
    assert submissions_of(db_path, tid) == 2


async def test_a_slot_left_by_a_crash_is_free_again_at_the_next_start(
    service: Service, admin_token: str, db_path: Path
) -> None:
    """A service that died mid-upload left the team's slot taken: the next
    start gives it back (else the team could never upload again)."""
    from referee.service.store import ServiceDB

    client = await service()
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    db = ServiceDB(db_path)
    try:
        assert isinstance(db.take_upload_slot(tid, (5, 60.0)), str)  # as the dead process took it
    finally:
        db.close()
    r = await client.post(url_of(cid, tid), data=b"x" * 1000, headers=auth(token))
    assert "in flight" in (await error_of(r, 429))["error"]
    restarted = await service()
    r = await restarted.post(url_of(cid, tid), data=b"x" * 1000, headers=auth(token))
    assert r.status == 201, await r.text()
