"""Which network addresses a team's bot URL may point at (issue #14, security).

A classroom service calls URLs that untrusted teams give it, so a URL is a
way to make the service connect somewhere: to itself, to a database beside it,
to a cloud metadata service. Three steps keep that in bounds:

1. :func:`check_url`, the syntax of a team's URL: ``http`` or ``https``, a
   host, an optional port and path; no user name or password, no query, no
   fragment, no IPv4 address in a legacy form (``2130706433``, ``0x7f.1``,
   ``127.1``). Raises :class:`MalformedURL`.
2. :func:`admit_url` resolves the host *once* and checks every address it
   resolves to against an :class:`AddressPolicy`. Raises
   :class:`AddressRefused` (or :class:`UnresolvedHost`); returns a
   :class:`PinnedURL` holding the address to use.
3. The transport connects to that address for the whole run, whatever the
   name resolves to later (``HttpBot(url, address=...)``, ``BotSpec.address``;
   see :mod:`referee.bots.http`): no DNS rebinding.

The policy (:meth:`AddressPolicy.refusal`), for an address and a port:

* never a bot: the unspecified address (``0.0.0.0``, ``::``), ``0.0.0.0/8``
  ("this network", which Linux routes to this host), multicast, the limited
  broadcast address, and an address of this server on a port the service
  listens on (the service itself). Allowed networks do not change these.
* an address of this server on any port (:attr:`AddressPolicy.own`: every
  interface address, the listening addresses) is refused, even inside an
  allowed network, except a loopback address inside one (allowing
  ``127.0.0.0/8`` says the bots run on this machine).
* an address inside an allowed network (``referee serve --bot-networks``) is
  accepted.
* otherwise only global (public) addresses are accepted: loopback,
  link-local (``169.254.0.0/16``, with the cloud metadata service, and
  ``fe80::/10``), private (``10/8``, ``172.16/12``, ``192.168/16``,
  ``fc00::/7``), shared (``100.64/10``), documentation, reserved and other
  special-purpose addresses are refused.

IPv4-mapped IPv6 addresses (``::ffff:127.0.0.1``) are judged as the IPv4
address they are; NAT64 addresses (``64:ff9b::/96``) as the IPv4 address they
translate to; 6to4 and IPv4-compatible addresses are refused when the IPv4
address they embed is.

This module has no aiohttp: the transport's side is in :mod:`.http`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import struct
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple, TypeAlias

import msgspec
from yarl import URL

__all__ = [
    "MAX_URL_LENGTH",
    "RESOLVE_TIMEOUT_S",
    "AddressPolicy",
    "AddressRefused",
    "BotURLError",
    "IPAddress",
    "IPNetwork",
    "MalformedURL",
    "ParsedURL",
    "PinnedURL",
    "Refusal",
    "Resolve",
    "UnresolvedHost",
    "admit_url",
    "canonical",
    "check_url",
    "host_addresses",
    "parse_networks",
]

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Longest team URL accepted, in characters.
MAX_URL_LENGTH: Final = 300

#: How long :func:`admit_url` waits for the name to resolve, in seconds.
RESOLVE_TIMEOUT_S: Final = 5.0

#: Resolves (host, port) to the addresses it names, as strings; the default
#: is the system resolver (``getaddrinfo``). Injected in tests.
Resolve: TypeAlias = Callable[[str, int], Awaitable[Sequence[str]]]

_FIX_NETWORK: Final = (
    "bots must be reachable on the class network or at a public address; "
    "ask the admin to allow that network with referee serve --bot-networks CIDR"
)
_FIX_NEVER: Final = "no bot can be there; give the address of the machine the bot runs on"
_FIX_SELF: Final = (
    "bots must run on another machine (this server's addresses are refused even inside --bot-networks)"
)
_FIX_SERVICE: Final = "that is the referee service itself; give the address of your bot"


# ------------------------------------------------------------------ errors


class BotURLError(ValueError):
    """A team's bot URL is not accepted; the message says why and what to do."""


class MalformedURL(BotURLError):
    """The URL is not written as a bot URL must be (:func:`check_url`)."""


class UnresolvedHost(BotURLError):
    """The URL's host name does not resolve (or not in time)."""


class AddressRefused(BotURLError):
    """The URL is, or resolves to, an address the policy refuses."""

    def __init__(self, message: str, what: str = "") -> None:
        super().__init__(message)
        #: The address refused and why, without what to do:
        #: ``"127.0.0.1 is a loopback address"``.
        self.what = what or message


# ------------------------------------------------------------------ addresses


def canonical(address: str | IPAddress) -> IPAddress:
    """The address as connected to: an IPv4-mapped IPv6 address
    (``::ffff:127.0.0.1``) is its IPv4 address. Raises ``ValueError`` for a
    string that is not an address (a zone index, ``%eth0``, is kept)."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def within(address: str | IPAddress, networks: Sequence[IPNetwork]) -> bool:
    """Whether `address` (:func:`canonical`) is inside one of `networks`;
    False for a string that is not an address."""
    try:
        ip = canonical(address)
    except ValueError:
        return False
    return any(ip.version == net.version and ip in net for net in networks)


_THIS_NETWORK: Final = ipaddress.IPv4Network("0.0.0.0/8")
_BROADCAST: Final = ipaddress.IPv4Address("255.255.255.255")
_SHARED: Final = ipaddress.IPv4Network("100.64.0.0/10")
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE: Final = ipaddress.IPv6Network("::/96")


def _unscoped(ip: IPAddress) -> IPAddress:
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        return ipaddress.IPv6Address(str(ip).split("%", 1)[0])
    return ip


def _embedded(ip: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """IPv4 addresses an IPv6 address carries (that some route could reach)."""
    found: list[tuple[str, ipaddress.IPv4Address]] = []
    if ip.sixtofour is not None:
        found.append(("a 6to4 address", ip.sixtofour))
    if ip.teredo is not None:
        server, client = ip.teredo
        found += [("a Teredo address", server), ("a Teredo address", client)]
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:
        found.append(("an IPv4-compatible address", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)))
    return found


def _kind(ip: IPAddress) -> str | None:
    """What a non-public address is ("a loopback address"); None for a global one."""
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        if ip == ipaddress.IPv4Address("169.254.169.254"):
            return "a link-local address (the cloud metadata service)"
        return "a link-local address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED:
        return "a shared (carrier-grade NAT) address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return "a site-local address"
    if ip.is_reserved:
        return "a reserved address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:
        return "not a public address"
    return None


class Refusal(NamedTuple):
    """Why an address is refused: what it is, and what to do instead."""

    #: What the address is, as a phrase: ``"a loopback address"``.
    what: str
    #: What to do about it.
    fix: str


@dataclass(frozen=True)
class AddressPolicy:
    """Which addresses a team's bot may be at (see the module's documentation).

    Build the service's policy with :meth:`for_service`; the default policy
    (``AddressPolicy()``) allows global addresses only and knows no address
    of this server.
    """

    #: Networks the admin allows (``--bot-networks``): addresses inside them
    #: are accepted although not public (but see :meth:`refusal`).
    allowed: tuple[IPNetwork, ...] = ()
    #: The addresses of this server: refused on every port.
    own: frozenset[IPAddress] = frozenset()
    #: The ports the service listens on: an own or loopback address with one
    #: of these ports is refused even inside an allowed network.
    own_ports: frozenset[int] = frozenset()

    @classmethod
    def for_service(
        cls,
        allowed: Iterable[IPNetwork] = (),
        *,
        listen: Iterable[tuple[str, int]] = (),
        extra_own: Iterable[str | IPAddress] = (),
    ) -> AddressPolicy:
        """The policy of a service listening on `listen` (``(host, port)``
        pairs, ``("0.0.0.0", 8080)``): its own addresses are those of this
        host's interfaces (:func:`host_addresses`), the addresses the listening
        hosts resolve to, and `extra_own` (say, a public address a NAT maps to
        this host, which no interface shows). Blocking: resolves names."""
        own = set(host_addresses())
        ports: set[int] = set()
        for host, port in listen:
            ports.add(port)
            for info in _getaddrinfo_sync(host, port):
                own.add(info)
        own.update(canonical(a) for a in extra_own)
        own = {_unscoped(a) for a in own if not a.is_unspecified}
        return cls(allowed=tuple(allowed), own=frozenset(own), own_ports=frozenset(ports))

    def is_allowed(self, ip: IPAddress) -> bool:
        """Whether `ip` is inside a network the admin allows."""
        return within(ip, self.allowed)

    def refusal(self, address: str | IPAddress, port: int) -> Refusal | None:
        """Why a bot at `address`:`port` is refused, or None when it may be
        there. Raises ``ValueError`` when `address` is not an address."""
        ip = _unscoped(canonical(address))
        # Never a bot, whatever is allowed.
        if ip.is_unspecified:
            return Refusal("the unspecified address", _FIX_NEVER)
        if isinstance(ip, ipaddress.IPv4Address) and ip in _THIS_NETWORK:
            return Refusal("in 0.0.0.0/8 ('this network', which means this server)", _FIX_NEVER)
        if ip.is_multicast:
            return Refusal("a multicast address", _FIX_NEVER)
        if ip == _BROADCAST:
            return Refusal("the broadcast address", _FIX_NEVER)
        is_own = ip in self.own
        if (is_own or ip.is_loopback) and port in self.own_ports:
            return Refusal(f"this server on port {port}, where the service listens", _FIX_SERVICE)
        if isinstance(ip, ipaddress.IPv6Address):
            if ip in _NAT64:  # the IPv4 address it translates to is what is reached
                inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
                refused = self.refusal(inner, port)
                if refused is None:
                    return None
                return Refusal(f"a NAT64 address for {inner}, {refused.what}", refused.fix)
            for how, inner in _embedded(ip):
                refused = self.refusal(inner, port)
                if refused is not None:
                    return Refusal(f"{how} embedding {inner}, {refused.what}", refused.fix)
        if self.is_allowed(ip) and (not is_own or ip.is_loopback):
            return None
        if ip.is_loopback:
            return Refusal("a loopback address", _FIX_NETWORK)
        if is_own:
            return Refusal("an address of this server", _FIX_SELF)
        kind = _kind(ip)
        return Refusal(kind, _FIX_NETWORK) if kind is not None else None

    def check(self, address: str | IPAddress, port: int) -> None:
        """Raise :class:`AddressRefused` when :meth:`refusal` refuses (a check
        before a run that a pinned address is still acceptable)."""
        refused = self.refusal(address, port)
        if refused is not None:
            raise AddressRefused(
                f"{canonical(address)}:{port} is {refused.what}: {refused.fix}",
                f"{canonical(address)} is {refused.what}",
            )


def parse_networks(text: str) -> tuple[IPNetwork, ...]:
    """The networks of ``--bot-networks``: CIDRs separated by commas
    (``192.168.1.0/24,fd00:1::/64``; an address alone is a one-address
    network). Raises ``ValueError`` naming the one that is not a network."""
    networks: list[IPNetwork] = []
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        try:
            networks.append(ipaddress.ip_network(part, strict=True))
        except ValueError as e:
            hint = ""
            if "host bits set" in str(e):
                hint = f" (did you mean {ipaddress.ip_network(part, strict=False)}?)"
            raise ValueError(
                f"{part!r} is not a network: {e}{hint}; write networks as CIDR, "
                "like 192.168.1.0/24 or fd00:1::/64, separated by commas"
            ) from None
    return tuple(networks)


# ------------------------------------------------------------------ this host


def host_addresses() -> frozenset[IPAddress]:
    """Every address of this host's network interfaces, best effort.

    On Linux, from the kernel (a netlink ``RTM_GETADDR`` dump: all IPv4 and
    IPv6 addresses, secondary ones too), plus ``/proc/net/if_inet6``; on every
    system, the addresses the host's own name resolves to, and psutil's list
    when psutil is installed. Loopback and link-local addresses are refused
    anyway, so a system where only the host name works still refuses those.
    """
    found: set[IPAddress] = set()
    for source in (_netlink_addresses, _proc_inet6_addresses, _psutil_addresses):
        try:
            found.update(source())
        except (OSError, ValueError, struct.error, ImportError):
            pass
    try:
        found.update(_getaddrinfo_sync(socket.gethostname(), None))
    except OSError:
        pass
    return frozenset(_unscoped(canonical(a)) for a in found)


def _getaddrinfo_sync(host: str, port: int | None) -> list[IPAddress]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return []
    return [canonical(str(info[4][0])) for info in infos]


_NLMSG_ERROR: Final = 2
_NLMSG_DONE: Final = 3
_RTM_NEWADDR: Final = 20
_RTM_GETADDR: Final = 22
_NLM_F_REQUEST_DUMP: Final = 0x1 | 0x300
_IFA_ADDRESS: Final = 1
_IFA_LOCAL: Final = 2


def _netlink_addresses() -> list[IPAddress]:
    """The addresses of every interface, from a netlink RTM_GETADDR dump (Linux)."""
    family = getattr(socket, "AF_NETLINK", None)
    if family is None:
        return []
    found: list[IPAddress] = []
    with socket.socket(family, socket.SOCK_RAW, 0) as sock:  # NETLINK_ROUTE
        sock.settimeout(2.0)
        sock.bind((0, 0))
        # nlmsghdr (len, type, flags, seq, pid) + ifaddrmsg (family, prefixlen, flags, scope, index)
        request = struct.pack("=IHHII", 24, _RTM_GETADDR, _NLM_F_REQUEST_DUMP, 1, 0)
        request += struct.pack("=BBBBI", socket.AF_UNSPEC, 0, 0, 0, 0)
        sock.send(request)
        while True:
            data = sock.recv(1 << 16)
            if not data:
                return found
            offset = 0
            while offset + 16 <= len(data):
                length, kind, _, _, _ = struct.unpack_from("=IHHII", data, offset)
                if length < 16:
                    return found
                if kind == _NLMSG_DONE:
                    return found
                if kind == _NLMSG_ERROR:
                    raise OSError("netlink refused the address dump")
                if kind == _RTM_NEWADDR:
                    found += _ifaddr(data[offset + 16 : offset + length])
                offset += (length + 3) & ~3


def _ifaddr(message: bytes) -> list[IPAddress]:
    """The address of one RTM_NEWADDR message (IFA_LOCAL, else IFA_ADDRESS:
    on a point-to-point link IFA_ADDRESS is the peer's)."""
    family = message[0]
    attrs: dict[int, bytes] = {}
    offset = 8
    while offset + 4 <= len(message):
        length, kind = struct.unpack_from("=HH", message, offset)
        if length < 4:
            break
        attrs.setdefault(kind, message[offset + 4 : offset + length])
        offset += (length + 3) & ~3
    raw = attrs.get(_IFA_LOCAL) or attrs.get(_IFA_ADDRESS)
    if raw is None:
        return []
    if family == socket.AF_INET and len(raw) == 4:
        return [ipaddress.IPv4Address(raw)]
    if family == socket.AF_INET6 and len(raw) == 16:
        return [ipaddress.IPv6Address(raw)]
    return []


def _proc_inet6_addresses() -> list[IPAddress]:
    with open("/proc/net/if_inet6", encoding="ascii") as f:
        return [ipaddress.IPv6Address(int(line.split()[0], 16)) for line in f if line.strip()]


def _psutil_addresses() -> list[IPAddress]:
    import importlib

    psutil = importlib.import_module("psutil")
    found: list[IPAddress] = []
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family in (socket.AF_INET, socket.AF_INET6):
                found.append(ipaddress.ip_address(str(a.address).split("%", 1)[0]))
    return found


# ------------------------------------------------------------------ URLs


class ParsedURL(msgspec.Struct, frozen=True, kw_only=True):
    """A team's URL that passed :func:`check_url`."""

    #: The URL as the transport uses it (``HttpBot.url``): normalised, no
    #: trailing slash.
    url: str
    #: ``"http"`` or ``"https"``.
    scheme: str
    #: The host as connected to: lower case, IDNA-encoded, an IPv6 address
    #: without brackets.
    host: str
    #: The port, the scheme's default when the URL gives none.
    port: int
    #: The path, ``""`` for none.
    path: str
    #: The host's address when the host is an IP address, canonical
    #: (``::ffff:127.0.0.1`` is ``127.0.0.1``); None for a name.
    literal: str | None = None


class PinnedURL(msgspec.Struct, frozen=True, kw_only=True):
    """A team's URL admitted by :func:`admit_url`: connect to `address`."""

    #: The URL as the transport uses it (``HttpBot.url``, ``BotSpec.url``).
    url: str
    #: The host, as in :attr:`ParsedURL.host`.
    host: str
    #: The port.
    port: int
    #: The address to connect to for the whole run (``BotSpec.address``).
    address: str
    #: Every address the host resolved to at admission (each one accepted).
    addresses: tuple[str, ...] = ()


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
_NUMERIC_LABEL = re.compile(r"(0x[0-9a-f]*|[0-9]+)")
_EXAMPLE: Final = "http://192.168.1.20:8001 or https://bot.example.org"


def _malformed(url: str, problem: str) -> MalformedURL:
    shown = url if len(url) <= 80 else url[:77] + "..."
    return MalformedURL(f"{shown!r}: {problem}")


def check_url(url: str) -> ParsedURL:
    """The syntax of a team's bot URL: ``http`` or ``https``, a host (a name
    or an IP address, IPv6 in brackets), a port (1 to 65535) and a path, both
    optional; no user name or password, query or fragment; at most
    :data:`MAX_URL_LENGTH` characters. Raises :class:`MalformedURL` naming
    the problem and the fix. Says nothing about the address: see
    :func:`admit_url`."""
    if not url:
        raise MalformedURL(f"the URL is empty: give the bot's base URL, like {_EXAMPLE}")
    if len(url) > MAX_URL_LENGTH:
        raise _malformed(url, f"is too long: {len(url)} characters, at most {MAX_URL_LENGTH}")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise _malformed(url, "must not contain spaces or control characters")
    if "\\" in url:
        raise _malformed(url, "must not contain '\\': separate the path with '/'")
    m = _SCHEME.match(url)
    if m is None:
        raise _malformed(url, f"must start with http:// or https://, like {_EXAMPLE}")
    scheme = m.group(1).lower()
    if scheme not in ("http", "https"):
        raise _malformed(
            url, f"the scheme '{m.group(1)}:' is not allowed: a bot URL starts with http:// or https://"
        )
    rest = url[m.end() :]
    if not rest.startswith("//"):
        raise _malformed(url, f"'{m.group(1)}:' must be followed by '//' and the host, like {_EXAMPLE}")
    rest = rest[2:]
    end = len(rest)
    for stop in "/?#":
        at = rest.find(stop)
        if at != -1:
            end = min(end, at)
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        raise _malformed(
            url,
            "must not contain a user name or password ('user:password@'): give only "
            "the host and port; to authenticate the referee, give a secret with the submission",
        )
    if "#" in tail:
        raise _malformed(url, "must not have a fragment ('#...'): remove it")
    if "?" in tail:
        raise _malformed(
            url,
            "must not have a query ('?...'): give the bot's base URL; "
            "the referee adds /start, /act and /end to it",
        )
    path = tail
    host, port_text = _split_authority(url, authority)
    literal: str | None = None
    if ":" in host:  # an IPv6 address (the brackets are removed)
        if "%" in host:
            raise _malformed(url, "must not give an IPv6 zone ('%...'): give a routable address")
        try:
            ip6 = ipaddress.IPv6Address(host)
        except ValueError:
            raise _malformed(url, f"[{host}] is not an IPv6 address") from None
        literal = str(canonical(ip6))
        host = str(ip6)
    else:
        if "%" in host:
            raise _malformed(url, "must not percent-encode the host ('%'): write the name as it is")
        if not host:
            raise _malformed(
                url, f"has no host: give the name or address of the bot's machine, like {_EXAMPLE}"
            )
        host = _check_name(url, host)
        try:
            literal = str(ipaddress.IPv4Address(host))
        except ValueError:
            literal = None
    if port_text is None:
        port = 443 if scheme == "https" else 80
    else:
        if not port_text.isdigit() or len(port_text) > 5 or not 0 < int(port_text) < 65536:
            raise _malformed(url, f"has an invalid port {port_text!r}: a port is a number from 1 to 65535")
        port = int(port_text)
    shown_host = f"[{host}]" if ":" in host else host
    shown_port = f":{port_text}" if port_text is not None else ""
    try:
        normal = str(URL(f"{scheme}://{shown_host}{shown_port}{path}".rstrip("/")))
    except ValueError as e:
        raise _malformed(url, f"is not a valid URL ({e})") from None
    return ParsedURL(url=normal, scheme=scheme, host=host, port=port, path=path.rstrip("/"), literal=literal)


def _split_authority(url: str, authority: str) -> tuple[str, str | None]:
    """(host, port text or None) of ``host[:port]`` or ``[v6][:port]``."""
    if authority.startswith("["):
        close = authority.find("]")
        if close == -1:
            raise _malformed(
                url, "has '[' without ']': an IPv6 address goes in brackets, like http://[2001:db8::5]:8001"
            )
        host, after = authority[1:close], authority[close + 1 :]
        if after and not after.startswith(":"):
            raise _malformed(url, "after ']' comes the port (':8001') or the path ('/')")
        if ":" not in host:
            raise _malformed(url, "only an IPv6 address goes in brackets")
        return host, (after[1:] if after else None)
    if authority.count(":") > 1:
        raise _malformed(url, "an IPv6 address goes in brackets, like http://[2001:db8::5]:8001")
    host, colon, port = authority.partition(":")
    return host, (port if colon else None)


def _check_name(url: str, host: str) -> str:
    """A host name or IPv4 address, IDNA-encoded and lower case."""
    try:
        raw = URL.build(scheme="http", host=host).raw_host
    except (ValueError, UnicodeError) as e:
        raise _malformed(url, f"the host {host!r} is not a valid name ({e})") from None
    name = (raw or "").lower()
    if len(name) > 253:
        raise _malformed(url, "the host name is too long: at most 253 characters")
    labels = name[:-1].split(".") if name.endswith(".") else name.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise _malformed(
            url,
            f"the host {host!r} is not a valid name: letters, digits and '-' "
            "separated by dots, or an IP address",
        )
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        try:
            if str(ipaddress.IPv4Address(name)) == name:
                return name
        except ValueError:
            pass
        raise _malformed(
            url,
            f"the host {host!r} reads as an IPv4 address in an unusual form: write "
            "the address as four decimal numbers, like 192.168.1.20",
        )
    return name


# ------------------------------------------------------------------ admission


async def _system_resolve(host: str, port: int) -> Sequence[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


async def admit_url(
    url: str,
    policy: AddressPolicy,
    *,
    resolve: Resolve | None = None,
    timeout_s: float = RESOLVE_TIMEOUT_S,
) -> PinnedURL:
    """Check a team's URL (:func:`check_url`), resolve its host once and
    check every address against `policy`: the bot is admitted only when all
    of them are accepted, and is then to be reached at the first one
    (:attr:`PinnedURL.address`) for the whole run.

    Raises :class:`MalformedURL`, :class:`UnresolvedHost` or
    :class:`AddressRefused` (naming the address and why). `resolve` replaces
    the system resolver (tests).
    """
    parsed = check_url(url)
    if parsed.literal is not None:
        found: list[IPAddress] = [canonical(parsed.literal)]
    else:
        found = await _resolve(parsed, resolve or _system_resolve, timeout_s)
    unique = list(dict.fromkeys(_unscoped(a) for a in found))
    for ip in unique:
        refused = policy.refusal(ip, parsed.port)
        if refused is None:
            continue
        if parsed.literal is not None:
            subject = f"{ip} is"
        else:
            subject = f"{parsed.host} resolves to {ip},"
        raise AddressRefused(
            f"{parsed.url!r} is refused: {subject} {refused.what}: {refused.fix}", f"{subject} {refused.what}"
        )
    return PinnedURL(
        url=parsed.url,
        host=parsed.host,
        port=parsed.port,
        address=str(unique[0]),
        addresses=tuple(str(a) for a in unique),
    )


async def _resolve(parsed: ParsedURL, resolve: Resolve, timeout_s: float) -> list[IPAddress]:
    try:
        async with asyncio.timeout(timeout_s):
            answers = await resolve(parsed.host, parsed.port)
    except TimeoutError:
        raise UnresolvedHost(
            f"{parsed.host!r} did not resolve within {timeout_s:g} s: check the name, or give an IP address"
        ) from None
    except (OSError, UnicodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise UnresolvedHost(
            f"{parsed.host!r} does not resolve ({why}): check the name, or give an IP address"
        ) from None
    addresses: list[IPAddress] = []
    for answer in answers:
        try:
            addresses.append(canonical(answer))
        except ValueError:
            raise UnresolvedHost(f"{parsed.host!r} resolved to {answer!r}, not an address") from None
    if not addresses:
        raise UnresolvedHost(f"{parsed.host!r} resolves to no address: check the name")
    return addresses
