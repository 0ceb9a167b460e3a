"""The service's settings: what ``referee serve``'s options set (one
:class:`Settings` the :class:`~referee.service.classroom.Classroom` holds)."""

from __future__ import annotations

import msgspec

from ..admission import CHECK_BUDGET_S, VALIDATION_GAMES
from ..bots.netpolicy import AddressPolicy, IPNetwork


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
    #: Uploads (``docker save`` archives, source archives) above this are refused with 413.
    max_upload: int = 1 << 30
    #: An upload is refused (507) while the data folder's disk has less than
    #: this free (``referee serve --min-free-disk``; 0: no floor).
    min_free_disk: int = 1 << 30
    #: What a team's images and waiting uploads may weigh, in all, with the
    #: upload in flight (``--team-image-quota``; 0: no quota; issue 24).
    team_image_quota: int = 2 << 30
    #: A ``docker save`` upload whose layers unpack to more than this, in all,
    #: is refused before the daemon sees it (``referee serve --max-image-unpacked``).
    max_image_unpacked: int = 2 << 30
    #: Where a team's URL bot may be (``--bot-networks``); None: public
    #: addresses only, none of this server's (made when the app starts).
    bot_policy: AddressPolicy | None = None
    #: League files sent through the web may start commands and open unix
    #: sockets on the server (``--allow-house-commands``).
    allow_house_commands: bool = False
    #: A league file's house URL bots may be at any address
    #: (``--house-urls-anywhere``); off: under ``bot_policy``, as the teams'
    #: URLs, admitted and pinned the same way.
    house_urls_anywhere: bool = False
    #: At start, build the built-in house bots' images (random, greedy,
    #: tactician) from the service's own base image when Docker answers
    #: (``referee serve``: on; ``--no-house-images``); until then, and
    #: without Docker, they play as the service's own programs.
    house_images: bool = False
    #: Submissions built and checked at the same time (``referee serve --admission-workers``);
    #: None: one on this machine, one per live node with ``--executor ray --registry``.
    admission_workers: int | None = None
    #: Validation games of the admission check.
    validation_games: int = VALIDATION_GAMES
    #: An admission check (the compliance checks and its validation games)
    #: longer than this, in all, is stopped and the bot refused as too slow
    #: (``referee serve --check-budget``): one team's slow bot cannot hold a
    #: worker longer than this per submission.
    check_budget_s: float = CHECK_BUDGET_S
    #: A source build or an image load longer than this is refused.
    build_timeout_s: float = 300.0
    #: Most a source build may add to its parent image, the bot's files and
    #: their compiled form (``referee serve --max-build-growth``); over it
    #: the build is refused.
    max_build_growth: int = 64 << 20
    #: Cookies only over HTTPS (``referee serve --secure-cookies``, behind TLS).
    secure_cookies: bool = False
    #: Live event streams open at the same time, in all (then 503).
    max_streams: int = 1000
    #: Live event streams open at the same time from one client address (then
    #: 429): the peer's, or behind a proxy of ``trusted_proxies`` the client's.
    max_streams_per_client: int = 4
    #: ... and from one network (then 429): an IPv6 client's /64, or this
    #: host's loopback addresses (:func:`referee.web.live.client_of`); an
    #: IPv4 address is its own network. At least ``max_streams_per_client``.
    max_streams_per_network: int = 32
    #: The share of ``max_streams`` kept for networks that have no stream
    #: open: beyond the rest, a network with a stream gets no other (429).
    stream_reserve: float = 0.25
    #: Watchers of one game in play at the same time (then 429); a watcher's
    #: stream counts against the limits above like a leaderboard's.
    max_watchers_per_game: int = 200
    #: Reverse proxies in front of the server (``--trusted-proxies``): a
    #: request from one of them comes from the address its
    #: ``X-Forwarded-For`` names (:func:`~referee.web.handlers.common.client_address`).
    trusted_proxies: tuple[IPNetwork, ...] = ()
    #: A live stream sends at most one update this often; faster ones are
    #: coalesced (the latest is sent, so the last state always arrives).
    min_update_s: float = 1.0
    #: What the live updates send, in all, at most (bytes a second): with
    #: more viewers each is updated less often (``referee serve --live-rate``;
    #: 500 viewers of a 100-team leaderboard, 80 KB an update: every ~10 s).
    live_bytes_per_s: int = 4 << 20
    #: A leaderboard is computed at most once this often for all who ask
    #: (:mod:`referee.web.boardcache`); a live update computes it afresh.
    board_ttl_s: float = 0.5
    #: The replay viewer's data kept in memory weighs at most this (as JSON);
    #: a replay heavier than that alone is served, not kept.
    replay_cache_bytes: int = 64 << 20
    #: Where runs, ladders and finals play their games (``referee serve
    #: --executor``): "local" (this process) or "ray" (Ray workers, the
    #: executor of ``referee tournament --executor ray``).
    executor: str = "local"
    #: With "ray": an existing cluster (``auto``, ``ray://HOST:10001``); None: a local one.
    executor_address: str | None = None
    #: With "ray": worker actors per run.
    executor_workers: int = 2
    #: With "ray": the registry (``HOST:PORT``) image bots' images are pushed
    #: to, by digest, for the nodes to pull (``--registry``); None: the nodes
    #: share this machine's Docker daemon.
    executor_registry: str | None = None
    #: A submission the service itself could not check (a service fault:
    #: Docker unreachable, the disk full; issue 25) waits this long before its
    #: next try, doubled at each try up to ``fault_retry_max_s``
    #: (``referee serve --fault-retry``); Docker is pinged this often and,
    #: once it answers, every waiting submission goes on at once.
    fault_retry_s: float = 10.0
    fault_retry_max_s: float = 600.0
    #: Practice games a team may ask for in an hour (``referee serve
    #: --practice-per-hour``; 0: no practice games); one in flight at a time.
    practice_per_hour: int = 20
    #: A practice game (its ``table_size`` deals, from its process's start)
    #: longer than this is stopped and failed as the service's
    #: (``referee serve --practice-timeout``).
    practice_timeout_s: float = 900.0
