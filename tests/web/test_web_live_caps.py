"""500 viewers do not slow the games (issue 15): the live streams are capped
(per client: 429, in all: 503, a closed stream frees its slot), each sends
at most one update per ``min_update_s`` (coalesced, the last state always
arrives), the leaderboard is computed once for all who ask at the same time
(single-flight, a short TTL, errors not kept), and the replays kept in
memory are bounded by their size.

No assertion here rests on the machine's speed: the rules that involve time
(the update gap, the byte budget, the board's TTL) run on a
:class:`SteppedClock` that moves only when the test says, and the tests wait
on events (the stream's next event, the hub's and the cache's signals),
bounded by generous timeouts only a broken test reaches."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest
from aiohttp import web

from referee.service.classroom import Classroom
from referee.service.store import ServiceDB
from referee.web import Settings, data, make_app, pages
from referee.web.app_state import ROOM
from referee.web.boardcache import BOARDS, BoardCache, BoardKey, Signal
from referee.web.data import CACHES, LRU
from referee.web.live import HUB, update_gap
from referee.web.schemas import Leaderboard
from tests.support.api import auth, error_of, new_competition, new_team, play_run, read_events
from tests.support.clocks import FakeClock, SteppedClock
from tests.support.web import LOOPBACK, league_text, serve

Service = Callable[..., Awaitable[Any]]


async def until(signal: Signal, check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    """Wait until ``check()`` holds, asking again whenever ``signal`` says
    what it looks at changed (a hub's streams, a cache's counters)."""
    try:
        async with asyncio.timeout(timeout):  # a bound for a broken test, never a wait
            await signal.until(check)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def streams_waiting(hub: Any) -> None:
    """Until every stream open has taken in what was published: each waits
    for its time to send the update it holds, or holds none and is idle."""
    await until(
        hub.changed,
        lambda: all(
            s.waiting == "update" or (s.waiting == "idle" and s.pending is None)
            for streams in hub.streams.values()
            for s in streams
        ),
        "every stream waiting",
    )


#: What sleeps on the service's clock when it is idle, besides the streams:
#: the deadline watch, the admission retrier and the live poller.
IDLE_WORKERS = 3


async def stepped_service(
    aiohttp_client: Callable[..., Awaitable[Any]], db_path: Path, **settings: Any
) -> tuple[Any, SteppedClock]:
    """A test client of the service on a :class:`SteppedClock` (its time
    moves only by ``clock.advance``), the live poller idle unless
    ``poll_s`` says otherwise; and the clock (its ``workers``: the service's
    idle workers, a test adds its streams)."""
    clock = SteppedClock(wall=1_700_000_000.0, workers=IDLE_WORKERS)
    quiet = {"poll_s": 3600, "heartbeat_s": 3600, "bot_policy": LOOPBACK}
    room = Classroom(db_path, Settings(**{**quiet, **settings}), clock=clock)
    return await aiohttp_client(make_app(room)), clock


def quiet_app(db_path: Path, **settings: Any) -> tuple[int, web.Application]:
    """A competition on a new database at `db_path`, and an app over it that
    neither polls nor sends heartbeats (`settings` over that, sample bots on
    loopback allowed): the competition's id and the app, to serve."""
    db = ServiceDB(db_path)
    try:
        cid = db.add_competition("class", league_text()).id
    finally:
        db.close()
    return cid, make_app(db_path, Settings(poll_s=3600, heartbeat_s=3600, bot_policy=LOOPBACK, **settings))


async def open_stream(client: Any, cid: int) -> Any:
    """An event stream, once its first update arrived."""
    r = await client.get(f"/api/competitions/{cid}/events")
    assert r.status == 200, await r.text()
    await read_events(r, lambda d: True)
    return r


# ------------------------------------------------------------- stream caps


async def test_a_client_gets_429_beyond_its_streams_and_a_closed_one_frees_its_slot(
    service: Service, admin_token: str
) -> None:
    client = await service()
    hub = client.server.app[HUB]
    cid = await new_competition(client, admin_token)
    streams = [await open_stream(client, cid) for _ in range(4)]
    assert hub.open == 4 and hub.clients["127.0.0.1"] == 4
    r = await client.get(f"/api/competitions/{cid}/events")
    err = await error_of(r, 429)
    assert err["status"] == 429 and "too many live streams" in err["error"]
    assert int(r.headers["Retry-After"]) >= 1
    assert hub.open == 4  # a refused stream takes no slot
    # Another page of the service is not limited by the streams.
    assert (await client.get(f"/api/competitions/{cid}")).status == 200

    streams.pop(0).close()
    await until(hub.changed, lambda: hub.open == 3, "the closed stream's slot")
    streams.append(await open_stream(client, cid))
    await error_of(await client.get(f"/api/competitions/{cid}/events"), 429)

    for s in streams:
        s.close()
    await until(hub.changed, lambda: hub.open == 0, "every slot freed")
    assert not hub.clients and not hub.streams
    streams = [await open_stream(client, cid) for _ in range(4)]
    for s in streams:
        s.close()


async def test_a_client_gone_frees_its_slot_without_handler_cancellation(db_path: Path) -> None:
    """As ``referee serve`` runs it (aiohttp does not cancel a handler whose
    client left; the test client's server does): an idle stream whose
    client is gone is noticed, and its slot freed."""
    # No poll and no heartbeat: no write, which would find the client gone.
    cid, app = quiet_app(db_path, max_streams_per_client=1)
    runner, base = await serve(app)
    try:
        async with aiohttp.ClientSession() as session:
            r = await session.get(f"{base}/api/competitions/{cid}/events")
            assert r.status == 200
            await read_events(r, lambda d: True)
            await error_of(await session.get(f"{base}/api/competitions/{cid}/events"), 429)
            r.close()
            await until(app[HUB].changed, lambda: app[HUB].open == 0, "the slot of a client gone")
            r = await session.get(f"{base}/api/competitions/{cid}/events")
            assert r.status == 200
            r.close()
    finally:
        await runner.cleanup()


async def _stream(client: Any, cid: int, forwarded: str | None) -> Any:
    headers = {"X-Forwarded-For": forwarded} if forwarded is not None else {}
    return await client.get(f"/api/competitions/{cid}/events", headers=headers)


async def test_behind_a_trusted_proxy_a_client_is_the_address_it_forwards(
    service: Service, admin_token: str
) -> None:
    """``--trusted-proxies``: every viewer behind a proxy on this host would
    share its address, 4 streams for all of them; the proxy's
    X-Forwarded-For names the client instead, read from the right."""
    client = await service(trusted_proxies=(ipaddress.ip_network("127.0.0.0/8"),))
    hub = client.server.app[HUB]
    cid = await new_competition(client, admin_token)
    # a client may write its own X-Forwarded-For: the proxy appends what it saw, which counts
    opened = [await _stream(client, cid, f"198.51.100.{i}, 203.0.113.5") for i in range(4)]
    assert all(r.status == 200 for r in opened) and hub.clients["203.0.113.5"] == 4
    await error_of(await _stream(client, cid, "203.0.113.5"), 429)
    other = await _stream(client, cid, "203.0.113.6, 127.0.0.1")  # two trusted hops: the next one counts
    assert other.status == 200 and hub.clients["203.0.113.6"] == 1
    assert "127.0.0.1" not in hub.clients
    for r in opened + [other]:
        r.close()
    await until(hub.changed, lambda: hub.open == 0, "every slot freed")


async def test_a_client_cannot_dodge_its_stream_cap_with_a_forwarded_header(
    service: Service, admin_token: str
) -> None:
    """Attack: without a trusted proxy, X-Forwarded-For is the client's own
    words and changes nothing (else any client could open streams without
    limit under made-up addresses)."""
    client = await service()
    hub = client.server.app[HUB]
    cid = await new_competition(client, admin_token)
    opened = [await _stream(client, cid, f"203.0.113.{i}") for i in range(4)]
    assert all(r.status == 200 for r in opened) and hub.clients == {"127.0.0.1": 4}
    await error_of(await _stream(client, cid, "203.0.113.99"), 429)
    for r in opened:
        r.close()
    await until(hub.changed, lambda: hub.open == 0, "every slot freed")


def test_serve_refuses_a_trusted_proxy_that_is_not_a_network_and_a_live_rate_that_is_no_size(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from referee.cli import main

    r = CliRunner().invoke(
        main, ["serve", "--db", str(tmp_path / "s.sqlite"), "--trusted-proxies", "10.0.0.1/8"]
    )
    assert r.exit_code == 2 and "--trusted-proxies" in r.output and "did you mean 10.0.0.0/8" in r.output
    for rate, why in (("0", "at least 1k"), ("fast", "expected a size")):
        r = CliRunner().invoke(main, ["serve", "--db", str(tmp_path / "s.sqlite"), "--live-rate", rate])
        assert r.exit_code == 2 and "--live-rate" in r.output and why in r.output, r.output


async def test_the_server_gets_503_beyond_its_streams(service: Service, admin_token: str) -> None:
    client = await service(max_streams=3, max_streams_per_client=10)
    hub = client.server.app[HUB]
    cid = await new_competition(client, admin_token)
    other = await new_competition(client, admin_token, name="other")
    streams = [
        await open_stream(client, cid),
        await open_stream(client, other),
        await open_stream(client, cid),
    ]
    for c in (cid, other):
        r = await client.get(f"/api/competitions/{c}/events")
        err = await error_of(r, 503)
        assert err["status"] == 503 and "live streams" in err["error"]
        assert int(r.headers["Retry-After"]) >= 1
    assert hub.open == 3
    streams.pop(1).close()
    await until(hub.changed, lambda: hub.open == 2, "the closed stream's slot")
    streams.append(await open_stream(client, other))
    for s in streams:
        s.close()
    await until(hub.changed, lambda: hub.open == 0, "every slot freed")


async def test_an_unknown_competition_takes_no_slot(service: Service) -> None:
    client = await service(max_streams_per_client=1)
    for _ in range(3):
        await error_of(await client.get("/api/competitions/99/events"), 404)
    assert client.server.app[HUB].open == 0


# -------------------------------------------------------------- rate cap


async def test_updates_are_coalesced_and_the_last_state_arrives(
    aiohttp_client: Callable[..., Awaitable[Any]], db_path: Path, admin_token: str
) -> None:
    # The poller is kept quiet: the updates here are the test's own.
    client, clock = await stepped_service(aiohttp_client, db_path, min_update_s=0.5)
    hub = client.server.app[HUB]
    cid = await new_competition(client, admin_token)
    r = await client.get(f"/api/competitions/{cid}/events")
    assert r.status == 200
    first = (await read_events(r, lambda d: True))[0]
    board = msgspec.json.decode(json.dumps(first), type=Leaderboard)
    clock.workers += 1  # the stream sleeps on the clock too

    def publish(games: int) -> None:
        hub.publish(cid, msgspec.structs.replace(board, games=games))

    # A burst, all at once: one update, the latest (when its gap has passed).
    for games in range(1, 51):
        publish(games)
    await streams_waiting(hub)
    await clock.advance(0.5)
    seen = await read_events(r, lambda d: d["games"] == 50)
    assert [d["games"] for d in seen] == [50]

    # Updates faster than the cap (one every 0.1 s for 4 s, then 0.5 s for
    # the last to go): fewer arrive than were sent, in order, at most one per
    # 0.5 s of the clock, and the last one is among them.
    for games in range(51, 91):
        publish(games)
        await streams_waiting(hub)
        await clock.advance(0.1)
    await clock.advance(0.5)
    seen = await read_events(r, lambda d: d["games"] == 90)
    got = [d["games"] for d in seen]
    assert got == sorted(set(got)) and got[-1] == 90, got
    assert 2 <= len(got) <= 4.5 / 0.5 + 1, got
    r.close()


async def test_a_board_changing_at_every_poll_is_computed_once_per_min_update(
    aiohttp_client: Callable[..., Awaitable[Any]], db_path: Path, admin_token: str
) -> None:
    """A ladder changes its board at every poll (0.25 s): the poller
    computed and rendered it each time for the streams, 4 boards a second
    that 500 viewers could not use (none may be sent more than once per
    min_update_s) and the games paid for (issue 15, benchmarks/ladder.py:
    0.82x the quiet windows). Now at most one per min_update_s, and the
    last state still arrives."""
    client, clock = await stepped_service(aiohttp_client, db_path, min_update_s=0.5, poll_s=0.02)
    boards = client.server.app[BOARDS]
    cid = await new_competition(client, admin_token)
    r = await open_stream(client, cid)
    clock.workers += 1  # the stream
    computed = boards.computed
    for i in range(40):  # a new team every 0.04 s: the board changes at every other poll
        await new_team(client, admin_token, cid, f"team {i}")
        await clock.advance(0.04)
    await clock.advance(1.0)  # the last change published, and sent
    seen = await read_events(r, lambda d: len(d["teams"]) == 40)
    assert len(seen[-1]["teams"]) == 40
    made = boards.computed - computed
    assert 2 <= made <= 2.6 / 0.5 + 1, made
    r.close()


async def read_live(resp: Any, timeout: float = 60) -> str:
    """The next ``live`` event of a ``?view=live`` stream: its data lines joined as a browser joins them."""

    async def go() -> str:
        buf = b""
        while True:
            while b"\n\n" in buf:
                raw, buf = buf.split(b"\n\n", 1)
                lines = raw.decode().split("\n")
                if "event: live" in lines:
                    return "\n".join(x[len("data: ") :] for x in lines if x.startswith("data: "))
            chunk = await resp.content.readany()
            assert chunk, "the event stream closed"
            buf += chunk

    return await asyncio.wait_for(go(), timeout)


async def test_the_page_stream_carries_the_live_part_rendered_once_for_all_its_streams(
    service: Service, admin_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``?view=live``: the leaderboard page needs no request per update, and
    an update is rendered once however many streams send it (issue 15)."""
    client = await service(min_update_s=0.05, poll_s=3600)
    hub = client.server.app[HUB]
    cid = await new_competition(client, admin_token)
    fragment = await (await client.get(f"/c/{cid}/live")).text()
    page = await (await client.get(f"/c/{cid}")).text()
    assert f'data-events="/api/competitions/{cid}/events?view=live"' in page and "data-fragment" not in page
    streams = []
    for _ in range(3):
        r = await client.get(f"/api/competitions/{cid}/events?view=live")
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
        assert await read_live(r) == fragment  # the same bytes as the fragment's URL
        streams.append(r)

    renders = []
    real = pages.render_string

    def counted(*args: Any, **kwargs: Any) -> str:
        renders.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(pages, "render_string", counted)
    app = client.server.app
    comp = await app[ROOM].db.call(ServiceDB.competition, cid)
    assert comp is not None
    board = await app[BOARDS].refresh(BoardKey(cid, None, False), lambda: data.leaderboard(app, comp, None))
    hub.publish(cid, msgspec.structs.replace(board, teams=["eve <b>"]))
    got = [await read_live(r) for r in streams]
    assert len(set(got)) == 1 and "eve &lt;b&gt;" in got[0] and got[0] != fragment
    assert renders == ["live.html"]
    # The data streams (the API's) are unchanged: JSON ``update`` events.
    r = await client.get(f"/api/competitions/{cid}/events")
    assert (await read_events(r, lambda d: True))[0]["id"] == cid
    err = await error_of(await client.get(f"/api/competitions/{cid}/events?view=html"), 422)
    assert err["field"] == "view" and "update, live" in err["error"]
    for s_ in streams + [r]:
        s_.close()


def test_the_update_gap_grows_with_the_streams_beyond_the_byte_budget() -> None:
    settings = Settings(min_update_s=1.0, live_bytes_per_s=4 << 20)
    assert update_gap(settings, 1, 80_000) == 1.0
    assert update_gap(settings, 50, 80_000) == 1.0  # 3.8 MB/s: within the budget
    assert update_gap(settings, 500, 80_000) == pytest.approx(500 * 80_000 / (4 << 20))  # ~9.5 s
    assert update_gap(Settings(live_bytes_per_s=0), 2, 10) >= 1.0  # never a division by zero


async def test_many_streams_share_the_byte_budget(
    aiohttp_client: Callable[..., Awaitable[Any]], db_path: Path, admin_token: str
) -> None:
    """3 streams and a budget of 3 updates a second in all: each stream is
    updated about once a second although min_update_s allows 20 (issue 15:
    500 viewers cost the server what 50 do)."""
    client, clock = await stepped_service(aiohttp_client, db_path, min_update_s=0.05)
    app = client.server.app
    hub = app[HUB]
    cid = await new_competition(client, admin_token)
    streams = [await client.get(f"/api/competitions/{cid}/events") for _ in range(3)]
    firsts = [(await read_events(r, lambda d: True))[0] for r in streams]
    clock.workers += len(streams)
    board = msgspec.json.decode(json.dumps(firsts[0]), type=Leaderboard)
    size = len(b"event: update\ndata: " + msgspec.json.encode(board) + b"\n\n")
    app[ROOM].settings.live_bytes_per_s = 3 * size  # 3 updates a second in all: 1 s a stream
    for games in range(1, 41):  # one every 0.05 s of the clock, 2 s in all; then 1.5 s for the last
        hub.publish(cid, msgspec.structs.replace(board, games=games))
        await streams_waiting(hub)
        await clock.advance(0.05)
    await clock.advance(1.5)
    for r in streams:
        got = [d["games"] for d in await read_events(r, lambda d: d["games"] == 40)]
        assert got[-1] == 40 and got == sorted(set(got)), got  # the last state arrives, in order
        # ~1 s between updates (the sizes vary by a few bytes): far fewer than 40
        assert len(got) <= 3.5 / 0.9 + 1, got
        r.close()


async def _raw_until(resp: Any, have: Callable[[bytes], bool]) -> bytes:
    """The bytes of a stream as they came (not decoded), until ``have`` them."""
    buf = b""
    async with asyncio.timeout(60):
        while not have(buf):
            chunk = await resp.content.readany()
            assert chunk, "the event stream closed"
            buf += chunk
    return buf


async def test_a_stream_goes_gzipped_to_who_takes_it_each_event_compressed_once(
    service: Service, admin_token: str
) -> None:
    """A board's live part at a term's size is 290 KB of HTML (300 teams),
    23 KB with gzip: 500 viewers get an update 12 times sooner within the
    byte budget. Each event is compressed once for all the streams (the
    same bytes in each), each stream a valid gzip member that ends with its
    trailer; a client that does not take gzip gets the events as they are."""
    client = await service(poll_s=3600)
    app = client.server.app
    hub = app[HUB]
    cid = await new_competition(client, admin_token)
    url = client.make_url(f"/api/competitions/{cid}/events")
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        plain = await session.get(url, headers={"Accept-Encoding": "identity"})
        assert "Content-Encoding" not in plain.headers
        first = await _raw_until(plain, lambda b: b"\n\n" in b)
        assert first.startswith(b"event: update\ndata: ")
        zipped = [await session.get(url, headers={"Accept-Encoding": "br;q=1, gzip;q=0.5"}) for _ in range(2)]
        decoders = [zlib.decompressobj(wbits=31) for _ in zipped]
        for r, d in zip(zipped, decoders, strict=True):
            assert r.headers["Content-Encoding"] == "gzip" and r.headers["Vary"] == "Accept-Encoding"
            got = await _raw_until(r, lambda b, d=d: b"\n\n" in d.copy().decompress(b))  # type: ignore[misc]
            assert d.decompress(got) == first
        comp = await app[ROOM].db.call(ServiceDB.competition, cid)
        assert comp is not None
        board = await app[BOARDS].refresh(
            BoardKey(cid, None, False), lambda: data.leaderboard(app, comp, None)
        )
        hub.publish(cid, msgspec.structs.replace(board, games=7))
        update = b'"games":7'
        packed = [
            await _raw_until(r, lambda b, d=d: update in d.copy().decompress(b))  # type: ignore[misc]
            for r, d in zip(zipped, decoders, strict=True)
        ]
        assert packed[0] == packed[1] and len(packed[0]) < len(first)  # one compression, sent to each
        assert all(update in d.decompress(p) for d, p in zip(decoders, packed, strict=True))
        assert update in await _raw_until(plain, lambda b: update in b)
        hub.close()  # the server stops: each gzip stream ends with its trailer (CRC, length)
        rest = await zipped[0].content.read()
        decoders[0].decompress(rest)
        assert decoders[0].eof and not decoders[0].unused_data
        for r in [plain, *zipped]:
            r.close()


async def test_an_idle_stream_keeps_its_heartbeat(service: Service, admin_token: str) -> None:
    client = await service(heartbeat_s=0.2, poll_s=3600)
    cid = await new_competition(client, admin_token)
    r = await client.get(f"/api/competitions/{cid}/events")
    buf = b""

    async def heartbeat() -> None:
        nonlocal buf
        while b": keep-alive\n\n" not in buf:
            chunk = await r.content.readany()
            assert chunk, "the event stream closed"
            buf += chunk

    await asyncio.wait_for(heartbeat(), 30)
    assert buf.startswith(b"event: update\n")
    r.close()


# -------------------------------------------------------- the board cache


async def test_a_board_is_the_same_object_inside_its_ttl_and_computed_again_after() -> None:
    clock = FakeClock(100.0)
    cache: BoardCache[str, object] = BoardCache(ttl=0.5, clock=clock)

    async def compute() -> object:
        return object()

    a = await cache.get("k", compute)
    clock.now += 0.4
    assert await cache.get("k", compute) is a
    assert (cache.computed, cache.hits) == (1, 1)
    clock.now += 0.2  # 0.6 after it was computed
    b = await cache.get("k", compute)
    assert b is not a and (cache.computed, cache.hits) == (2, 1)
    assert await cache.get("other", compute) is not b and cache.computed == 3


async def test_concurrent_requests_await_one_computation() -> None:
    cache: BoardCache[str, object] = BoardCache(ttl=60)
    release = asyncio.Event()
    calls = 0

    async def compute() -> object:
        nonlocal calls
        calls += 1
        await release.wait()
        return object()

    waiters = [asyncio.create_task(cache.get("k", compute)) for _ in range(50)]
    await until(cache.changed, lambda: cache.joined == 49, "every request awaiting the one computation")
    # One request that goes away does not cancel the others' computation.
    waiters.pop().cancel()
    release.set()
    got = await asyncio.gather(*waiters)
    assert calls == 1 and cache.computed == 1 and all(g is got[0] for g in got)
    assert await cache.get("k", compute) is got[0]


async def test_an_error_reaches_every_waiter_and_is_not_kept() -> None:
    cache: BoardCache[str, object] = BoardCache(ttl=60)
    release = asyncio.Event()
    fail = True

    async def compute() -> object:
        await release.wait()
        if fail:
            raise RuntimeError("the board cannot be computed")
        return "board"

    waiters = [asyncio.create_task(cache.get("k", compute)) for _ in range(5)]
    await until(cache.changed, lambda: cache.joined == 4, "every request awaiting the one computation")
    release.set()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results) and cache.computed == 1
    assert not cache.values and not cache.flights
    fail = False
    assert await cache.get("k", compute) == "board" and cache.computed == 2


async def test_a_refresh_is_not_overwritten_by_an_older_computation() -> None:
    cache: BoardCache[str, str] = BoardCache(ttl=60)
    release = asyncio.Event()

    async def old() -> str:
        await release.wait()
        return "old"

    async def new() -> str:
        return "new"

    older = asyncio.create_task(cache.get("k", old))
    await until(cache.changed, lambda: "k" in cache.flights, "the first computation")
    assert await cache.refresh("k", new) == "new"
    release.set()
    assert await older == "old"  # what that request asked for before the refresh
    assert await cache.get("k", old) == "new" and cache.computed == 2


async def test_the_board_cache_keeps_a_bounded_number_of_keys() -> None:
    cache: BoardCache[str, str] = BoardCache(ttl=60, size=2)

    def value(v: str) -> Callable[[], Any]:
        async def compute() -> str:
            return v

        return compute

    for k in ("a", "b"):
        await cache.get(k, value(k))
    await cache.get("a", value("a"))  # a used last: b goes first
    await cache.get("c", value("c"))
    assert list(cache.values) == ["a", "c"] and cache.computed == 3
    cache.invalidate(lambda k: k == "a")
    assert list(cache.values) == ["c"]


async def test_200_viewers_of_the_live_part_compute_its_board_once(
    service: Service, admin_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = await service(board_ttl_s=60)
    boards = client.server.app[BOARDS]
    cid = await new_competition(client, admin_token)
    release = asyncio.Event()
    real = data.leaderboard

    async def slow(*args: Any, **kwargs: Any) -> Leaderboard:
        await release.wait()
        return await real(*args, **kwargs)

    monkeypatch.setattr(data, "leaderboard", slow)
    computed, hits, joined = boards.computed, boards.hits, boards.joined
    # A session of its own: the test client's would hold 100 connections at most.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def fetch() -> tuple[int, str]:
            async with session.get(client.make_url(f"/c/{cid}/live")) as r:
                return r.status, await r.text()

        viewers = [asyncio.create_task(fetch()) for _ in range(200)]
        await until(
            boards.changed,
            lambda: boards.joined - joined == 199,
            "200 requests awaiting one computation",
            120,
        )
        release.set()
        answers = await asyncio.wait_for(asyncio.gather(*viewers), 120)
    assert {status for status, _ in answers} == {200}
    assert len({text for _, text in answers}) == 1
    assert boards.computed - computed == 1 and boards.hits - hits == 199
    # The page and the JSON mirror share that board.
    assert (await client.get(f"/c/{cid}")).status == 200
    body = await (await client.get(f"/api/competitions/{cid}")).json()
    assert body["id"] == cid and boards.computed - computed == 1 and boards.hits - hits == 201


async def test_after_its_ttl_a_board_is_computed_again(
    aiohttp_client: Callable[..., Awaitable[Any]], db_path: Path, admin_token: str
) -> None:
    client, clock = await stepped_service(aiohttp_client, db_path, board_ttl_s=0.05)
    boards = client.server.app[BOARDS]
    cid = await new_competition(client, admin_token)
    assert (await client.get(f"/c/{cid}/live")).status == 200
    computed = boards.computed
    await clock.advance(0.04)  # inside the TTL: the same board
    assert (await client.get(f"/c/{cid}/live")).status == 200
    assert boards.computed == computed
    await clock.advance(0.02)  # past it: computed again
    assert (await client.get(f"/c/{cid}/live")).status == 200
    assert boards.computed == computed + 1


async def test_a_board_that_fails_is_not_cached(
    service: Service, admin_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = await service(board_ttl_s=60)
    boards = client.server.app[BOARDS]
    cid = await new_competition(client, admin_token)
    release = asyncio.Event()
    real = data.leaderboard
    calls = 0

    async def flaky(*args: Any, **kwargs: Any) -> Leaderboard:
        nonlocal calls
        calls += 1
        await release.wait()
        if calls == 1:
            raise RuntimeError("the run folder is gone")
        return await real(*args, **kwargs)

    monkeypatch.setattr(data, "leaderboard", flaky)
    computed, joined = boards.computed, boards.joined
    requests = [asyncio.create_task(client.get(f"/api/competitions/{cid}")) for _ in range(5)]
    await until(boards.changed, lambda: boards.joined - joined == 4, "5 requests awaiting one computation")
    release.set()
    for r in await asyncio.gather(*requests):
        err = await error_of(r, 500)
        assert "RuntimeError" in err["error"]
    assert calls == 1 and boards.computed - computed == 1
    r = await client.get(f"/api/competitions/{cid}")
    assert r.status == 200 and (await r.json())["id"] == cid
    assert calls == 2 and boards.computed - computed == 2


async def test_writes_of_this_server_are_seen_at_once(service: Service, admin_token: str) -> None:
    client = await service(board_ttl_s=60)
    cid = await new_competition(client, admin_token)
    assert (await (await client.get(f"/api/competitions/{cid}")).json())["teams"] == []
    r = await client.post(f"/api/competitions/{cid}/teams", json={"name": "ada"}, headers=auth(admin_token))
    assert r.status == 201
    assert (await (await client.get(f"/api/competitions/{cid}")).json())["teams"] == ["ada"]


# ---------------------------------------------------------------- replays


def test_the_lru_keeps_what_fits_its_byte_budget() -> None:
    lru: LRU[str, str] = LRU(size=10, max_bytes=100)
    for k in "abc":
        lru.put(k, k, 40)
    assert list(lru.items) == ["b", "c"] and lru.nbytes == 80
    assert lru.get("b") == "b"  # b used last: c goes first
    lru.put("d", "d", 50)
    assert list(lru.items) == ["b", "d"] and lru.nbytes == 90
    lru.put("huge", "huge", 101)  # served by the caller, not kept
    assert lru.get("huge") is None and list(lru.items) == ["b", "d"] and lru.nbytes == 90
    lru.put("b", "b2", 10)  # a new value weighs anew
    assert lru.get("b") == "b2" and lru.nbytes == 60
    counted: LRU[int, int] = LRU(size=2)  # without a budget: by count only
    for k in range(3):
        counted.put(k, k)
    assert list(counted.items) == [1, 2]


async def test_the_replay_cache_evicts_by_bytes_and_a_pinned_board_is_one_key(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    cid = await new_competition(
        client, admin_token, house={"g": bot_urls["greedy"], "r": bot_urls["random"]}, rounds=2
    )
    final = await play_run(client, cid, admin_token)
    rid = final["run"]["id"]
    assert final["games"] >= 3
    games = f"/api/competitions/{cid}/runs/{rid}/games"
    replays = client.server.app[CACHES].replays
    bodies, keys = [], []
    for i in range(3):
        bodies.append(await (await client.get(f"{games}/{i}")).read())
        keys.append(list(replays.items)[-1])  # the one just kept
    sizes = [len(b) for b in bodies]
    # Each entry weighs its encoded JSON (what the API sends).
    assert [replays.weights[k] for k in keys] == sizes and replays.nbytes == sum(sizes)

    # A budget for the last two: the least recently used goes.
    budget = sizes[1] + sizes[2]
    replays.max_bytes = budget
    replays.items.clear()
    replays.weights.clear()
    replays.nbytes = 0
    for i in range(3):
        assert await (await client.get(f"{games}/{i}")).read() == bodies[i]
        assert replays.nbytes <= budget
    assert list(replays.items) == keys[1:] and replays.nbytes == budget
    assert await (await client.get(f"{games}/0")).read() == bodies[0]  # 0 again: 1 goes (2 is newer)
    assert keys[1] not in replays.items and list(replays.items)[-1] == keys[0]

    # From the settings: a budget below every replay serves them, keeps none.
    small = await service(replay_cache_bytes=min(sizes) - 1, board_ttl_s=60)
    kept = small.server.app[CACHES].replays
    for i in range(3):
        r = await small.get(f"{games}/{i}")
        assert r.status == 200 and await r.read() == bodies[i]
    assert not kept.items and kept.nbytes == 0
    # And a pinned run's board is one key of the cache too (a 404 is not kept).
    boards = small.server.app[BOARDS]
    computed = boards.computed
    for path in (f"/c/{cid}?run={rid}", f"/c/{cid}/live?run={rid}", f"/api/competitions/{cid}?run={rid}"):
        assert (await small.get(path)).status == 200, path
    assert boards.computed - computed == 1 and BoardKey(cid, rid, True) in boards.values
    await error_of(await small.get(f"/api/competitions/{cid}?run={rid + 1}"), 404)
    assert boards.computed - computed == 1


# ----------------------------- clients by network, and a reserve (issue 24, item 7)


def test_a_streams_client_is_its_address_and_its_network() -> None:
    """IPv6 addresses of one /64 are one network (one host or site holds it
    whole); IPv4-mapped addresses are their IPv4 address; every loopback
    address is this host; any other IPv4 address is its own network."""
    from referee.web.live import THIS_HOST, client_of

    a, b = client_of("2001:db8:1:2::1"), client_of("2001:db8:1:2:ffff:ffff:ffff:ffff")
    assert a.network == b.network == "2001:db8:1:2::/64" and a.address != b.address
    assert client_of("2001:db8:1:3::1").network == "2001:db8:1:3::/64"
    assert client_of("2001:DB8:1:2::1%eth0") == a  # the zone and the case say nothing of who
    assert client_of("::ffff:192.0.2.7") == client_of("192.0.2.7") == ("192.0.2.7", "192.0.2.7")
    assert client_of("127.0.0.1") == ("127.0.0.1", THIS_HOST)
    assert (
        client_of("127.3.4.5").network
        == client_of("::1").network
        == client_of("::ffff:127.0.0.9").network
        == THIS_HOST
    )
    assert client_of("unknown") == ("unknown", "unknown")


def test_once_the_server_is_busy_a_client_with_a_stream_gets_no_other() -> None:
    """The reserve, counted: 40 slots, a quarter kept for networks with no
    stream. Ten clients asking for 4 each take 32, not 40; the 8 left go to
    8 new clients, one each; then 503."""
    from referee.web.live import Hub, client_of

    hub, settings = Hub(), Settings(max_streams=40)
    got: Counter[str] = Counter()
    for i in range(10):
        for _ in range(4):
            c = client_of(f"203.0.113.{i}")
            if hub.refusal(c, settings) is None:
                hub.subscribe(1, c)
                got[c.address] += 1
    assert hub.open == 32 and got["203.0.113.0"] == 4 and got["203.0.113.9"] == 1
    refused = hub.refusal(client_of("203.0.113.9"), settings)
    assert refused is not None and refused[0] == 429 and "kept for clients with none" in refused[1]
    for i in range(8):
        assert hub.refusal(client_of(f"198.51.100.{i}"), settings) is None
        hub.subscribe(1, client_of(f"198.51.100.{i}"))
    refused = hub.refusal(client_of("198.51.100.200"), settings)
    assert refused is not None and refused[0] == 503


def test_an_ipv6_network_has_one_share_whatever_addresses_it_takes() -> None:
    from referee.web.live import Hub, client_of

    hub, settings = Hub(), Settings(max_streams_per_network=32)
    for i in range(1, 200):  # a new address for each stream: the /64 still counts
        c = client_of(f"2001:db8::{i:x}")
        if hub.refusal(c, settings) is None:
            hub.subscribe(1, c)
    assert hub.open == 32 and hub.networks == {"2001:db8::/64": 32}
    refused = hub.refusal(client_of("2001:db8::ffff"), settings)
    assert refused is not None and refused[0] == 429 and "2001:db8::/64" in refused[1]
    assert hub.refusal(client_of("2001:db8:0:1::1"), settings) is None  # the next /64 is another network


async def _open_from(session: aiohttp.ClientSession, url: str, headers: dict[str, str] | None = None) -> Any:
    r = await session.get(url, headers=headers or {})
    if r.status == 200:
        await read_events(r, lambda d: True)
    else:
        await r.read()
    return r


async def test_250_loopback_addresses_cannot_take_every_slot(db_path: Path) -> None:
    """Attack: 250 loopback addresses x 4 streams took all 1,000 slots (the
    cap counted exact addresses), and the next viewer got 503. Now 127/8 is
    one network (this host): they get 32, and a new client (here through
    the trusted proxy on 127.0.0.1, which forwards its address) gets one."""
    cid, app = quiet_app(db_path, trusted_proxies=(ipaddress.ip_network("127.0.0.1/32"),))
    runner, base = await serve(app)
    url = f"{base}/api/competitions/{cid}/events"
    hub = app[HUB]
    sessions = [
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=(f"127.0.0.{i}", 0), limit=0))
        for i in range(2, 252)
    ]
    newcomer = aiohttp.ClientSession()
    opened: list[Any] = []
    try:
        for batch in range(0, len(sessions), 25):
            opened += await asyncio.gather(
                *(_open_from(s, url) for s in sessions[batch : batch + 25] for _ in range(4))
            )
        statuses = Counter(r.status for r in opened)
        r = await _open_from(newcomer, url, {"X-Forwarded-For": "203.0.113.7"})
        assert r.status == 200, (r.status, await r.text(), hub.open, statuses)
        assert hub.clients["203.0.113.7"] == 1
        r.close()
        assert statuses[200] <= 32 and statuses[429] >= 1000 - 32, statuses
        assert len(hub.clients) >= 8  # many addresses, one network
        refused = next(r for r in opened if r.status == 429)
        assert "this host (loopback)" in await refused.text()
    finally:
        for r in opened:
            r.close()
        for s in [*sessions, newcomer]:
            await s.close()
        await runner.cleanup()


async def test_a_new_client_gets_a_stream_when_the_others_hold_several(
    service: Service, admin_token: str
) -> None:
    """Attack, through a trusted proxy (every client its own IPv4 address):
    10 clients x 4 streams took all of 40 slots; now 32, and 8 newcomers get one each."""
    client = await service(max_streams=40, trusted_proxies=(ipaddress.ip_network("127.0.0.0/8"),))
    hub = client.server.app[HUB]
    cid = await new_competition(client, admin_token)
    opened = [await _stream(client, cid, f"203.0.113.{i}") for i in range(10) for _ in range(4)]
    assert Counter(r.status for r in opened) == {200: 32, 429: 8}
    refused = next(r for r in opened if r.status == 429)
    assert "kept for clients with none" in (await refused.json())["error"]
    newcomers = [await _stream(client, cid, f"198.51.100.{i}") for i in range(9)]
    assert [r.status for r in newcomers] == [200] * 8 + [503]
    for r in opened + newcomers:
        r.close()
    await until(hub.changed, lambda: hub.open == 0, "every slot freed")


def _has_ipv6_loopback() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


async def test_ipv6_clients_of_one_64_share_its_streams_over_http(db_path: Path) -> None:
    """A proxy forwards IPv6 clients of one /64, a new address for each
    stream: they share the network's 32 (and ::1, where available, is this
    host like 127.0.0.1)."""
    cid, app = quiet_app(db_path, trusted_proxies=(ipaddress.ip_network("127.0.0.1/32"),))
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2)
    await runner.setup()
    v6 = _has_ipv6_loopback()
    hosts = ["127.0.0.1", "::1"] if v6 else ["127.0.0.1"]
    for host in hosts:
        await web.TCPSite(runner, host, 0).start()
    ports = {address[0]: address[1] for address in runner.addresses}  # (host, port[, ...]) per socket
    assert sorted(ports) == sorted(hosts)
    port = ports["127.0.0.1"]
    hub = app[HUB]
    opened: list[Any] = []
    try:
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{port}/api/competitions/{cid}/events"
            for i in range(1, 41):
                opened.append(await _open_from(session, url, {"X-Forwarded-For": f"2001:db8:5:6::{i:x}"}))
            assert Counter(r.status for r in opened) == {200: 32, 429: 8}
            assert hub.networks["2001:db8:5:6::/64"] == 32
            assert "2001:db8:5:6::/64" in await opened[-1].text()
            other = await _open_from(session, url, {"X-Forwarded-For": "2001:db8:5:7::1"})
            assert other.status == 200
            opened.append(other)
            if v6:
                ours = await _open_from(session, f"http://[::1]:{ports['::1']}/api/competitions/{cid}/events")
                assert (
                    ours.status == 200
                    and hub.clients["::1"] == 1
                    and hub.networks["this host (loopback)"] == 1
                )
                opened.append(ours)
    finally:
        for r in opened:
            r.close()
        await runner.cleanup()
