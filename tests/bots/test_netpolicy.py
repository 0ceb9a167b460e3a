"""Team bot URLs (issue #14, security): the syntax, the address policy, and
pinning in the transport, attacked as the issue says.

The transport tests use real servers on loopback (127.0.0.1 and 127.0.0.2:
Linux routes all of 127/8 to this host) and a name, ``bot.test``, that the
event loop's resolver answers as the test says, so both the admission and an
unpinned transport see it move.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest
from aiohttp import web

from protocol import APIVERSION
from referee.bots import BotError
from referee.bots.factory import BotFactory, BotSpec
from referee.bots.http import HttpBot, make_session
from referee.bots.netpolicy import (
    AddressPolicy,
    AddressRefused,
    MalformedURL,
    PinnedURL,
    UnresolvedHost,
    admit_url,
    check_url,
    host_addresses,
    parse_networks,
)
from sample_bots import random as random_bot
from tests.support.bots import by_name, game_end

LOOPBACK = AddressPolicy(allowed=parse_networks("127.0.0.0/8"))
NAME = "bot.test"


def fixed(answers: dict[str, Sequence[str]]) -> Any:
    """A resolver answering from `answers`; a name not there does not resolve."""
    calls: list[str] = []

    async def resolve(host: str, port: int) -> Sequence[str]:
        calls.append(host)
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return answers[host]

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


# ------------------------------------------------------------------ syntax


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://a:b@bot.example.org/", "user name or password"),
        ("http://user@bot.example.org/", "user name or password"),
        ("http://@bot.example.org/", "user name or password"),
        ("http://bot.example.org/?q=1", "query"),
        ("http://bot.example.org/?", "query"),
        ("http://bot.example.org/#f", "fragment"),
        ("http://bot.example.org#", "fragment"),
        ("ftp://bot.example.org/", "scheme 'ftp:'"),
        ("unix:/tmp/bot.sock", "scheme 'unix:'"),
        ("file:///etc/passwd", "scheme 'file:'"),
        ("bot.example.org:8001", "scheme 'bot.example.org:'"),
        ("192.168.1.20:8001", "must start with http://"),
        ("http:/bot.example.org", "'//'"),
        ("http://", "no host"),
        ("http://:8001/", "no host"),
        ("http://bot.example.org:0/", "invalid port"),
        ("http://bot.example.org:65536/", "invalid port"),
        ("http://bot.example.org:80a/", "invalid port"),
        ("http://bot.example.org:/", "invalid port"),
        ("http://2130706433/", "unusual form"),
        ("http://0x7f000001/", "unusual form"),
        ("http://0x7f.1/", "unusual form"),
        ("http://127.1/", "unusual form"),
        ("http://0177.0.0.1/", "unusual form"),
        ("http://127.0.0.01/", "unusual form"),
        ("http://127.0.0.1./", "unusual form"),
        ("http://[fe80::1%25eth0]/", "zone"),
        ("http://[127.0.0.1]/", "only an IPv6 address"),
        ("http://[::g]/", "not an IPv6 address"),
        ("http://::1/", "brackets"),
        ("http://bot\\example.org/", "'\\'"),
        ("http://bot.example.org/a b", "spaces"),
        ("http://bot.example.org/\n", "control"),
        ("http://-bot.example.org/", "not a valid name"),
        ("http://bot..example.org/", "not a valid name"),
        ("http://b%6Ft.example.org/", "percent-encode"),
        ("http://bot.example.org/" + "a" * 300, "too long"),
        ("", "empty"),
    ],
)
def test_check_url_refuses(url: str, problem: str) -> None:
    with pytest.raises(MalformedURL) as e:
        check_url(url)
    assert problem in str(e.value)


def test_check_url_normalises() -> None:
    p = check_url("HTTP://Bot.Example.ORG:8001/Team3/")
    assert (p.url, p.scheme, p.host, p.port, p.path, p.literal) == (
        "http://bot.example.org:8001/Team3",
        "http",
        "bot.example.org",
        8001,
        "/Team3",
        None,
    )
    assert HttpBot(p.url).url == p.url  # the same string the transport uses
    assert check_url("https://bot.example.org").port == 443
    assert check_url("http://bot.example.org").port == 80
    assert check_url("http://bücher.example/").host == "xn--bcher-kva.example"
    assert check_url("http://192.168.1.20:8001").literal == "192.168.1.20"
    mapped = check_url("http://[::ffff:127.0.0.1]:9/")
    assert mapped.literal == "127.0.0.1" and mapped.port == 9
    assert check_url("http://[2001:DB8::5]:8001").host == "2001:db8::5"
    assert check_url("http://1e100.net/").literal is None


def test_parse_networks() -> None:
    assert parse_networks("") == ()
    assert parse_networks("192.168.1.0/24, fd00:1::/64,10.0.0.7") == (
        ipaddress.ip_network("192.168.1.0/24"),
        ipaddress.ip_network("fd00:1::/64"),
        ipaddress.ip_network("10.0.0.7/32"),
    )
    with pytest.raises(ValueError, match=r"'10.0.0.0/33' is not a network: .*CIDR"):
        parse_networks("10.0.0.0/33")
    with pytest.raises(ValueError, match=r"did you mean 192.168.1.0/24"):
        parse_networks("192.168.1.5/24")
    with pytest.raises(ValueError, match=r"'classroom' is not a network"):
        parse_networks("10.0.0.0/8,classroom")


# ------------------------------------------------------------------ policy


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:8001", "127.0.0.1 is a loopback address"),
        ("http://127.9.9.9:8001", "127.9.9.9 is a loopback address"),
        ("http://[::1]:8001", "::1 is a loopback address"),
        ("http://[::ffff:127.0.0.1]:8001", "127.0.0.1 is a loopback address"),
        ("http://[::ffff:169.254.169.254]/", "cloud metadata"),
        ("http://0.0.0.0:8001", "unspecified"),
        ("http://[::]:8001", "unspecified"),
        ("http://0.1.2.3/", "0.0.0.0/8"),
        ("http://169.254.169.254/latest/meta-data", "link-local address (the cloud metadata service)"),
        ("http://169.254.1.1/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://224.0.0.1/", "multicast"),
        ("http://[ff02::1]/", "multicast"),
        ("http://255.255.255.255/", "broadcast"),
        ("http://10.1.2.3/", "private"),
        ("http://172.16.0.1/", "private"),
        ("http://192.168.1.20:8001", "private"),
        ("http://[fd00::5]/", "private"),
        ("http://100.64.0.1/", "shared"),
        ("http://240.0.0.1/", "reserved"),
        ("http://192.0.2.1/", "private"),  # documentation
        ("http://[2002:7f00:1::]/", "6to4 address embedding 127.0.0.1, a loopback address"),
        ("http://[64:ff9b::a9fe:a9fe]/", "NAT64 address for 169.254.169.254"),
        ("http://[::127.0.0.1]/", "IPv4-compatible address embedding 127.0.0.1"),
    ],
)
async def test_refused_addresses(url: str, why: str) -> None:
    with pytest.raises(AddressRefused) as e:
        await admit_url(url, AddressPolicy(), resolve=fixed({}))
    assert why in str(e.value)
    assert "is refused" in str(e.value)


async def test_refusal_says_what_to_do() -> None:
    with pytest.raises(AddressRefused) as e:
        await admit_url("http://127.0.0.1:8001", AddressPolicy())
    assert str(e.value) == (
        "'http://127.0.0.1:8001' is refused: 127.0.0.1 is a loopback address: bots must be "
        "reachable on the class network or at a public address; ask the admin to allow that "
        "network with referee serve --bot-networks CIDR"
    )


async def test_public_addresses_admitted() -> None:
    pinned = await admit_url("http://8.8.8.8:8001/bot/", AddressPolicy())
    assert pinned == PinnedURL(
        url="http://8.8.8.8:8001/bot", host="8.8.8.8", port=8001, address="8.8.8.8", addresses=("8.8.8.8",)
    )
    nat64 = await admit_url("http://[64:ff9b::808:808]/", AddressPolicy())  # 8.8.8.8 through NAT64
    assert nat64.address == "64:ff9b::808:808"


async def test_name_resolving_to_loopback_refused() -> None:
    resolve = fixed({"bot.example.org": ["127.0.0.1"]})
    with pytest.raises(AddressRefused) as e:
        await admit_url("http://bot.example.org:8001", AddressPolicy(), resolve=resolve)
    assert "bot.example.org resolves to 127.0.0.1, a loopback address: " in str(e.value)
    assert "--bot-networks" in str(e.value)


async def test_localhost_refused_by_the_system_resolver() -> None:
    with pytest.raises(AddressRefused, match="resolves to .*loopback"):
        await admit_url("http://localhost:8001", AddressPolicy())


async def test_one_refused_address_refuses_the_name() -> None:
    resolve = fixed({"bot.example.org": ["93.184.215.14", "2606:2800::1", "::ffff:10.0.0.1"]})
    with pytest.raises(AddressRefused, match="resolves to 10.0.0.1, a private address"):
        await admit_url("http://bot.example.org", AddressPolicy(), resolve=resolve)


async def test_admission_resolves_once_and_pins_the_first_address() -> None:
    resolve = fixed({"bot.example.org": ["93.184.215.14", "2606:2800::1", "93.184.215.14"]})
    pinned = await admit_url("https://bot.example.org/", AddressPolicy(), resolve=resolve)
    assert resolve.calls == ["bot.example.org"]
    assert (pinned.url, pinned.host, pinned.port) == ("https://bot.example.org", "bot.example.org", 443)
    assert pinned.address == "93.184.215.14"
    assert pinned.addresses == ("93.184.215.14", "2606:2800::1")


async def test_unresolved_hosts() -> None:
    with pytest.raises(UnresolvedHost, match="'nowhere.example' does not resolve"):
        await admit_url("http://nowhere.example", AddressPolicy(), resolve=fixed({}))
    with pytest.raises(UnresolvedHost, match="resolves to no address"):
        await admit_url("http://empty.example", AddressPolicy(), resolve=fixed({"empty.example": []}))

    async def slow(host: str, port: int) -> Sequence[str]:
        await asyncio.sleep(10)
        return ["8.8.8.8"]

    with pytest.raises(UnresolvedHost, match="did not resolve within 0.05 s"):
        await admit_url("http://slow.example", AddressPolicy(), resolve=slow, timeout_s=0.05)


async def test_allowed_networks() -> None:
    policy = AddressPolicy(allowed=parse_networks("10.0.0.0/8,127.0.0.0/8,fe80::/10"))
    assert (await admit_url("http://10.1.2.3:8001", policy)).address == "10.1.2.3"
    assert (await admit_url("http://[::ffff:127.0.0.1]:8001", policy)).address == "127.0.0.1"
    assert (await admit_url("http://[fe80::1]:8001", policy)).address == "fe80::1"
    with pytest.raises(AddressRefused, match="private"):
        await admit_url("http://192.168.1.20:8001", policy)
    with pytest.raises(AddressRefused, match="::1 is a loopback"):  # 127/8 is not ::1
        await admit_url("http://[::1]:8001", policy)


@pytest.mark.parametrize(
    "url",
    [
        "http://0.0.0.0/",
        "http://[::]/",
        "http://0.0.0.1/",
        "http://224.0.0.1/",
        "http://[ff02::1]/",
        "http://255.255.255.255/",
        "http://[::ffff:0.0.0.0]/",
    ],
)
async def test_never_allowed(url: str) -> None:
    everything = AddressPolicy(allowed=parse_networks("0.0.0.0/0,::/0"))
    with pytest.raises(AddressRefused, match="no bot can be there"):
        await admit_url(url, everything)


async def test_own_addresses_refused_on_every_port() -> None:
    policy = AddressPolicy(own=frozenset({ipaddress.ip_address("8.8.4.4")}))
    for port in (1, 80, 8001, 65535):
        with pytest.raises(AddressRefused, match="8.8.4.4 is an address of this server"):
            await admit_url(f"http://8.8.4.4:{port}", policy)
    with pytest.raises(AddressRefused, match="resolves to 8.8.4.4, an address of this server"):
        await admit_url("http://me.example", policy, resolve=fixed({"me.example": ["8.8.4.4"]}))


async def test_this_machines_address_refused_even_inside_allowed_networks() -> None:
    mine = sorted(
        (a for a in host_addresses() if not a.is_loopback and not a.is_link_local),
        key=lambda a: (a.version, int(a)),
    )
    if not mine:
        pytest.skip("this machine has no address but loopback and link-local ones")
    address = mine[0]
    url_host = f"[{address}]" if address.version == 6 else str(address)
    policy = AddressPolicy.for_service(
        parse_networks(f"{address}/{address.max_prefixlen}"), listen=[("0.0.0.0", 8080)]
    )
    for port in (8080, 8001, 22):
        with pytest.raises(AddressRefused, match=rf"{address} is (an address of this server|this server)"):
            await admit_url(f"http://{url_host}:{port}", policy)


async def test_the_service_port_refused_even_with_loopback_allowed() -> None:
    policy = AddressPolicy.for_service(parse_networks("127.0.0.0/8"), listen=[("127.0.0.1", 8080)])
    for url in ("http://127.0.0.1:8080", "http://127.0.0.7:8080/", "http://[::ffff:127.0.0.1]:8080"):
        with pytest.raises(AddressRefused, match="this server on port 8080, where the service listens"):
            await admit_url(url, policy)
    assert (await admit_url("http://127.0.0.1:8081", policy)).address == "127.0.0.1"


def test_host_addresses() -> None:
    found = host_addresses()
    assert ipaddress.ip_address("127.0.0.1") in found
    assert all(not (a.version == 6 and a.ipv4_mapped) for a in found)


def test_policy_check_before_a_run() -> None:
    LOOPBACK.check("127.0.0.1", 8001)
    with pytest.raises(AddressRefused, match=r"127.0.0.1:8001 is a loopback address"):
        AddressPolicy().check("127.0.0.1", 8001)


# ------------------------------------------------------------------ transport


class Recorder:
    """Requests seen by the loopback servers: (server, Host header, path)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def app(self, label: str) -> web.Application:
        app = random_bot.create_app(None, seed=1)

        @web.middleware
        async def record(request: web.Request, handler: Any) -> web.StreamResponse:
            self.seen.append((label, request.headers.get("Host", ""), request.path))
            response: web.StreamResponse = await handler(request)
            response.force_close()  # every request on a new connection: resolved again if ever
            return response

        app.middlewares.append(record)
        return app


@contextlib.asynccontextmanager
async def two_servers(recorder: Recorder) -> AsyncIterator[int]:
    """The same bot on 127.0.0.1:P ("first") and 127.0.0.2:P ("second")."""
    runners: list[web.AppRunner] = []
    try:
        for _ in range(20):
            first = web.AppRunner(recorder.app("first"))
            await first.setup()
            site = web.TCPSite(first, "127.0.0.1", 0)
            await site.start()
            port = first.addresses[0][1]
            second = web.AppRunner(recorder.app("second"))
            await second.setup()
            try:
                await web.TCPSite(second, "127.0.0.2", port).start()
            except OSError:
                await first.cleanup()
                await second.cleanup()
                continue
            runners = [first, second]
            break
        else:
            pytest.skip("no port free on both 127.0.0.1 and 127.0.0.2")
        yield port
    finally:
        for r in runners:
            await r.cleanup()


@pytest.fixture
async def dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Where the event loop resolves bot.test (for admit_url's system resolver
    and aiohttp's): change the value to move the name."""
    where = {NAME: "127.0.0.1"}
    loop = asyncio.get_running_loop()
    real = loop.getaddrinfo

    async def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == NAME:
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (where[NAME], int(port)))]
        return await real(host, port, *args, **kwargs)

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
    return where


async def _play_a_little(bot: HttpBot) -> None:
    sc = by_name("ordinary play")
    info = await bot.handshake()
    assert info.apiversion == APIVERSION and info.name == "random"
    assert await bot.start(sc.start("g1"), 2.0) is None
    outcome = await bot.act(sc.request(game_id="g1"), 2.0)
    assert outcome.fault is None, outcome.fault
    assert await bot.end(game_end("g1"), 2.0, 3) is None


async def test_pinned_bot_plays_at_the_admitted_address(dns: dict[str, str]) -> None:
    recorder = Recorder()
    async with two_servers(recorder) as port:
        pinned = await admit_url(f"http://{NAME}:{port}/", LOOPBACK)  # the system resolver
        assert pinned.address == "127.0.0.1"
        spec = BotSpec(name="team", url=pinned.url, address=pinned.address)
        async with make_session() as shared:
            bot = BotFactory(log_dir="logs", session=shared).make(spec)
            assert isinstance(bot, HttpBot) and bot.address == "127.0.0.1"
            try:
                await _play_a_little(bot)
            finally:
                await bot.close()
    assert recorder.seen == [("first", f"{NAME}:{port}", p) for p in ("/", "/start", "/act", "/end")]


async def test_dns_rebinding_is_not_followed(dns: dict[str, str]) -> None:
    recorder = Recorder()
    async with two_servers(recorder) as port:
        url = f"http://{NAME}:{port}"
        pinned = await admit_url(url, LOOPBACK)
        dns[NAME] = "127.0.0.2"  # the name moves after admission
        async with HttpBot(pinned.url, address=pinned.address) as bot:
            await _play_a_little(bot)
            await _play_a_little(bot)
        # The attack works on a bot that is not pinned: it follows the name.
        async with make_session() as session:
            assert (await HttpBot(url, session=session).handshake()).name == "random"
    pinned_part, unpinned_part = recorder.seen[:8], recorder.seen[8:]
    assert {label for label, _, _ in pinned_part} == {"first"}
    assert all(host == f"{NAME}:{port}" for _, host, _ in recorder.seen)
    assert unpinned_part == [("second", f"{NAME}:{port}", "/")]


async def test_a_pinned_session_connects_nowhere_else() -> None:
    recorder = Recorder()
    async with two_servers(recorder) as port:
        async with make_session(pins={(NAME, port): "127.0.0.1"}) as session:
            async with session.get(f"http://{NAME}:{port}/") as r:
                assert r.status == 200
            for other in (f"http://localhost:{port}/", f"http://{NAME}:{port + 1}/"):
                with pytest.raises(aiohttp.ClientConnectorError, match="pinned address only"):
                    await session.get(other)
        bot = HttpBot(f"http://{NAME}:{port}", address="127.0.0.1")
        try:
            await bot.handshake()
        finally:
            await bot.close()
    assert [label for label, _, _ in recorder.seen] == ["first", "first"]


async def test_https_uses_the_name_for_sni_and_the_certificate(tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    try:
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-keyout",
                str(key),
                "-out",
                str(cert),
                "-subj",
                f"/CN={NAME}",
                "-addext",
                f"subjectAltName=DNS:{NAME}",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        pytest.skip("openssl cannot make a test certificate here")
    names: list[str | None] = []
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: names.append(name)  # type: ignore[assignment,misc,unused-ignore]
    runner = web.AppRunner(random_bot.create_app(None, seed=1))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with HttpBot(f"https://{NAME}:{port}", address="127.0.0.1") as bot:
            with pytest.raises(BotError, match="certificate"):
                await bot.handshake(2.0)  # self-signed: the check is made, and fails
    finally:
        await runner.cleanup()
    assert names == [NAME]


def test_http_bot_pin_arguments() -> None:
    assert HttpBot("http://bot.test:8001").address is None
    assert HttpBot("http://bot.test:8001", address="::ffff:10.0.0.5").address == "10.0.0.5"
    assert HttpBot("http://10.0.0.5:8001", address="10.0.0.5").address == "10.0.0.5"
    assert HttpBot("http://[::ffff:10.0.0.5]:8001", address="10.0.0.5").address == "10.0.0.5"
    assert "at 10.0.0.5" in repr(HttpBot("http://bot.test", address="10.0.0.5"))
    with pytest.raises(ValueError, match="cannot be pinned to 10.0.0.6"):
        HttpBot("http://10.0.0.5:8001", address="10.0.0.6")
    with pytest.raises(ValueError, match="not an IP address"):
        HttpBot("http://bot.test:8001", address="bot.test")
    with pytest.raises(ValueError, match="unix socket"):
        HttpBot("unix:/tmp/bot.sock", address="10.0.0.5")
    with pytest.raises(ValueError, match="not a plain IP address"):
        HttpBot("http://127.1:8001", address="127.0.0.1")


async def test_http_bot_pin_owns_its_session() -> None:
    async with make_session() as session:
        with pytest.raises(ValueError, match="owns its session"):
            HttpBot("http://bot.test:8001", address="10.0.0.5", session=session)
    bot = HttpBot("http://bot.test:8001", address="10.0.0.5")
    assert await bot.endpoint() == ("http://bot.test:8001", None, "10.0.0.5")  # a worker pins it too
    await bot.close()


async def test_a_worker_in_another_process_connects_to_the_pinned_address() -> None:
    """The Ray worker's body gets the address with the URL: the name (which
    does not even resolve here) is never looked up."""

    from protocol.messages import Rules, Timeouts
    from referee.record import FaultPolicy
    from referee.tournament.executors import GameJob, GameWorker
    from tests.support.programs.zoo import good_app, serve

    async with serve(good_app("a")) as a, serve(good_app("b")) as b:
        urls = [u.replace("127.0.0.1", "bot.invalid") for u in (a, b)]
        job = GameJob(
            seed=3,
            names=["a", "b"],
            urls=urls,
            secrets=[None, None],
            rules=Rules(),
            timeouts=Timeouts(),
            policy=FaultPolicy(),
            addresses=["127.0.0.1", "127.0.0.1"],
        )
        done = (await GameWorker().play_job(job)).done
    assert done is not None
    assert done.result.faults == [[], []] and sorted(done.result.places) == [1, 2]


def test_bot_spec_address() -> None:
    spec = msgspec.json.decode(b'{"name": "a", "url": "http://bot.test:8001"}', type=BotSpec)
    assert spec.address is None
    spec = msgspec.json.decode(
        b'{"name": "a", "url": "http://bot.test:8001", "address": "10.0.0.5"}', type=BotSpec
    )
    assert spec.address == "10.0.0.5"
    factory = BotFactory(log_dir="logs")
    with pytest.raises(ValueError, match="URL bots only"):
        factory.make(BotSpec(name="c", command=["./bot", "{port}"], address="10.0.0.5"))
    with pytest.raises(ValueError, match="URL bots only"):
        factory.make(BotSpec(name="b", image="bot:1", address="10.0.0.5"))


def test_within_reads_an_address_as_connected_to() -> None:
    """One membership test for the bot policy and the trusted proxies: an
    IPv4-mapped IPv6 peer (a dual-stack listener's view of 127.0.0.1) is
    inside 127.0.0.0/8; something that is not an address is inside nothing."""
    from referee.bots.netpolicy import within

    loopback = parse_networks("127.0.0.0/8")
    assert within("::ffff:127.0.0.1", loopback) and within("127.0.0.9", loopback)
    assert not within("::1", loopback) and not within("unknown", loopback)
    assert within("::1", parse_networks("::1/128"))
