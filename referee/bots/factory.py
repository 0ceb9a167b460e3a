"""One way to turn a bot's description into a :class:`~referee.bots.base.Bot`.

A bot is described by a :class:`BotSpec`: a league file's ``[[bots]]``
entry, a service submission, or a command-line SPEC (:func:`parse_spec`:
``http://HOST:PORT``, ``unix:/path.sock``, ``cmd:COMMAND`` with ``{port}``).
:class:`BotFactory` builds the transport for it: an :class:`HttpBot` for a
URL, a :class:`CommandBot` for a command, a
:class:`~referee.bots.sandbox.container.ContainerBot` for an image, with the same
rules wherever the spec came from (``referee match``, ``referee check``,
``referee tournament``, the service).
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import aiohttp
import msgspec

from .base import Bot, BotError
from .http import HttpBot
from .process import CommandBot
from .sandbox.container_limits import ContainerLimits
from .sandbox.instance import Instance, current

if TYPE_CHECKING:
    from .cluster.nodepool import RemoteImages
    from .cluster.registry import PinnedImage

__all__ = ["BotFactory", "BotSpec", "Kind", "parse_spec"]

Kind = Literal["url", "command", "image"]


class BotSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """What a bot is and how to reach or start it (a league file's ``[[bots]]`` entry).

    Exactly one of `url`, `command` (alone) or `image` says the kind.
    """

    name: str
    #: A bot already running: its base URL (``http://127.0.0.1:8001`` or
    #: ``unix:/path/to.sock``).
    url: str | None = None
    #: A bot the referee starts: the command as a list; ``{port}`` is replaced
    #: by a free port the referee picks. ``python``/``python3`` as the
    #: program is the referee's own interpreter.
    command: list[str] | None = None
    #: A bot submitted as a container image (``name:tag``), run sandboxed with
    #: no network; it serves HTTP on the unix socket ``$BOT_UNIX``. With an
    #: image, `command` (optional) replaces the image's CMD and ``{unix}`` in
    #: it is replaced by the socket path.
    image: str | None = None
    #: URL bots: the IP address to connect to for the whole run, whatever the
    #: URL's host resolves to then (the address admitted with the URL, see
    #: :func:`~referee.bots.netpolicy.admit_url`; the service pins team
    #: bots). None: the host is resolved on each new connection.
    address: str | None = None
    #: Shared secret: every request carries its HMAC signature.
    secret: str | None = None
    #: Command and image bots: start a fresh process for every game (no memory
    #: carried from one duplicate game to the next) instead of one for the league.
    fresh_process: bool = False
    #: Working directory of a command bot (relative to the league file).
    cwd: str | None = None
    #: Extra environment variables of a command or image bot.
    env: dict[str, str] = msgspec.field(default_factory=dict)
    #: Image bots: the container's limits. In a league file, the keys given
    #: here override the league's ``[containers]`` table (the loader stores
    #: the merged result); None: the league's limits as they are.
    limits: ContainerLimits | None = None
    #: A built-in house bot (:data:`referee.bots.house.BUILTIN_BOTS`: ``greedy``...):
    #: the referee's own code, run as its command or as the image the service built.
    builtin: str | None = None

    @property
    def kind(self) -> Kind:
        if self.image is not None:
            return "image"
        if self.url is not None:
            return "url"
        return "command"

    @property
    def target(self) -> str | list[str]:
        """The image, the URL or the command: what the kind names."""
        if self.image is not None:
            return self.image
        if self.url is not None:
            return self.url
        return list(self.command or [])

    @property
    def started_here(self) -> bool:
        """Whether the referee starts the bot (a command or an image)."""
        return self.url is None


def parse_spec(text: str, *, secret: str | None = None, name: str = "") -> BotSpec:
    """A command-line bot SPEC: ``http(s)://…``, ``unix:/path``, or ``cmd:COMMAND``.

    Raises ``ValueError`` saying what a SPEC looks like.
    """
    if text.startswith("cmd:"):
        command = shlex.split(text[len("cmd:") :])
        if not command:
            raise ValueError(f"{text!r}: no command after 'cmd:'")
        if not any("{port}" in part for part in command):
            raise ValueError(
                f"{text!r}: the command must say where the port goes, as {{port}} "
                "(it is also in the PORT environment variable)"
            )
        return BotSpec(name=name, command=command, secret=secret)
    if text.startswith(("unix:", "http://", "https://")):
        HttpBot(text)  # raises ValueError for a URL that is not one
        return BotSpec(name=name, url=text, secret=secret)
    raise ValueError(
        f"{text!r}: a bot is a URL (http://127.0.0.1:8001), unix:/path/to.sock, or "
        "cmd:COMMAND with {port} (cmd:python -m sample_bots.random --port {port})"
    )


class BotFactory:
    """Builds the transports of the bots of one run (a game, a league, a check).

    `log_dir`: command bots' stdout and stderr. `base_dir`: what a command
    bot's `cwd` is relative to, and its working directory when it has none
    (the league file's folder; default: the current directory). `session`:
    the HTTP session shared by TCP bots (unix-socket bots own theirs).
    `out_dir`: image bots' sockets and logs (default: `log_dir`'s parent).
    `limits`: image bots' limits when their spec has none. `labels`: Docker
    labels of this run's containers. `instance`: the install whose names and
    label they carry (default: the process's, :func:`~referee.bots.sandbox.instance.current`).
    `nodes`: the cluster image bots play on (the Ray executor): an image bot
    is then a :class:`~referee.bots.cluster.nodepool.NodeBot`, its image pinned by
    :meth:`prepare` (by id, pushed to the registry when there is one) and its
    containers started on the nodes, never here.
    """

    def __init__(
        self,
        *,
        log_dir: str | os.PathLike[str],
        base_dir: str | os.PathLike[str] | None = None,
        session: aiohttp.ClientSession | None = None,
        out_dir: str | os.PathLike[str] | None = None,
        limits: ContainerLimits | None = None,
        labels: Mapping[str, str] | None = None,
        instance: Instance | None = None,
        nodes: RemoteImages | None = None,
    ) -> None:
        self.instance = instance or current()
        self.nodes = nodes
        #: Image bots' images as :meth:`prepare` pinned them, by image name.
        self.pinned: dict[str, PinnedImage] = {}
        self.log_dir = Path(log_dir)
        self.base_dir = Path(base_dir) if base_dir is not None else None
        self.session = session
        self.out_dir = Path(out_dir) if out_dir is not None else self.log_dir.parent
        self.limits = limits
        self.labels = dict(labels or {})

    def make(self, spec: BotSpec) -> Bot:
        """The transport for `spec` (not started: the first handshake starts
        a command or image bot). Raises ``ValueError`` for a bad URL or an
        address pinned for a bot that is not a URL bot."""
        name = spec.name or None
        if spec.address is not None and (spec.url is None or spec.image is not None):
            raise ValueError(f"bot {spec.name!r}: an address is pinned for URL bots only")
        if spec.image is not None and self.nodes is not None:
            return self._node_bot(spec)
        if spec.image is not None:
            from .sandbox.container import ContainerBot

            return ContainerBot(
                spec.image,
                out_dir=self.out_dir,
                name=name,
                limits=spec.limits or self.limits,
                secret=spec.secret,
                command=spec.command,
                env=spec.env or None,
                labels=self.labels or None,
                instance=self.instance,
            )
        if spec.url is not None:
            # unix-socket and pinned bots own their sessions (see HttpBot)
            own = spec.url.startswith("unix:") or spec.address is not None
            return HttpBot(
                spec.url,
                name=name,
                secret=spec.secret,
                session=None if own else self.session,
                address=spec.address,
            )
        assert spec.command is not None
        base = self.base_dir if self.base_dir is not None else Path.cwd()
        return CommandBot(
            spec.command,
            log_dir=self.log_dir,
            name=name,
            secret=spec.secret,
            session=self.session,
            env=spec.env or None,
            cwd=(base / spec.cwd) if spec.cwd else (base if self.base_dir is not None else None),
        )

    def _node_bot(self, spec: BotSpec) -> Bot:
        from .cluster.nodepool import NodeBot, seat_of
        from .sandbox.container_limits import ContainerLimits

        assert spec.image is not None and self.nodes is not None
        pinned = self.pinned.get(spec.image)
        if pinned is None:
            raise ValueError(f"bot {spec.name!r}: its image {spec.image!r} was not prepared (pinned) first")
        seat = seat_of(
            spec.name,
            pinned,
            limits=spec.limits or self.limits or ContainerLimits(),
            secret=spec.secret,
            command=spec.command,
            env=dict(spec.env),
            labels=self.labels,
            fresh=spec.fresh_process,
            instance=self.instance.id,
            out_dir=str(self.out_dir.resolve()),
        )
        return NodeBot(seat, self.nodes)

    async def prepare(self, spec: BotSpec) -> list[str]:
        """Before an image bot's first start: check the Docker daemon, its
        runtime (:func:`~referee.bots.sandbox.docker_daemon.effective_runtime`) and the
        image, give an image pinned by id a tag of this instance when another
        install took its tags away (so ``docker image prune`` cannot delete
        it mid-run), and remove this bot's containers left in `out_dir` by a
        referee of this instance that crashed (their names are returned).
        Nothing for other kinds. Raises :class:`BotError` saying what to do.

        With `nodes` (a cluster), the image is pinned instead (by id; pushed
        to the registry when there is one): its runtime and containers are
        the nodes' business. The cluster's errors (a registry down) are the
        executor's, not a :class:`BotError`: they stop a run, never charge a bot."""
        if spec.image is None:
            return []
        if self.nodes is not None:
            self.pinned[spec.image] = await self.nodes.pin(spec.image)
            return []
        from .sandbox.container_limits import ContainerLimits
        from .sandbox.docker_daemon import (
            check_runtime,
            cleanup_containers,
            docker_client,
            effective_runtime,
            image_exists,
            not_found,
        )

        image, out = spec.image, str(self.out_dir.resolve())
        runtime, field = effective_runtime(spec.limits or self.limits or ContainerLimits())

        def check() -> list[str]:
            client = docker_client()
            if runtime is not None:  # before any game: a runtime the daemon has
                check_runtime(runtime, client, field=field)
            if not image_exists(image, client):
                raise BotError(not_found(image))
            if image.startswith("sha256:"):
                self.instance.ensure_tagged(client, image)
            return cleanup_containers(
                {"referee.out": out, "referee.bot": spec.name},
                orphans_only=True,
                client=client,
                instance=self.instance,
            )

        return await asyncio.to_thread(check)
