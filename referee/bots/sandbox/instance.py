"""One install's names on a shared Docker daemon (issue 24, item 8).

Two services (or a service and a CLI user) on one daemon must never take
each other's images or containers. Each install has an **instance id** (a
short lowercase word: ``referee serve`` makes a random one at the first
start and keeps it in its database; the CLI uses ``--instance`` /
``REFEREE_INSTANCE``, else ``u<uid>``, one per user), and every name it gives
carries it:

- tags: ``referee-base:<id>``, ``referee-node-base:<id>``,
  ``referee-sdk-python:<id>``, ``referee-bot-greedy:<id>`` and a team's
  ``referee-<id>-team-<team>:v<submission>``;
- container names: ``referee-<id>-<bot>-<random>``;
- the label ``referee.instance=<id>`` on every image it makes and every
  container it starts.

``referee cleanup`` and the service's pruning filter on that label, so they
only ever touch their own instance's containers and images.

Names alone do not protect against a hostile neighbour, who can re-tag any
name on the daemon (labels included: a label is copied by ``FROM``). So an
instance **pins by id** what it built (:meth:`Instance.pinned`, kept in a
small JSON file: the service's data folder, else the user's cache): a
base image is reused only when the id pinned for its tag still exists with
the same inputs, never because some image under that tag says so; what is
built FROM it names it by id. And an image a run pins by id is given back a
tag of this instance when another install took its tag away
(:meth:`Instance.ensure_tagged`, at the service's start and before every
container bot's first start), so that a daemon-wide ``docker image prune``
(which removes untagged images) never deletes a live bot.

Functions take an explicit `instance` where they name something; without
one they use the process's (:func:`current`, set once by ``referee serve``,
``referee start`` and the CLI's ``--instance``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import tempfile
import threading
from pathlib import Path
from typing import Any, Final

__all__ = [
    "INSTANCE_LABEL",
    "VERSION_LABEL",
    "Instance",
    "check_instance_id",
    "cli_instance",
    "current",
    "default_instance_id",
    "new_instance_id",
    "use",
]

#: The label every image and container of an instance carries.
INSTANCE_LABEL: Final = "referee.instance"
#: The label of a team's image: the team's version number it was built as (its tag's ``v<N>``).
VERSION_LABEL: Final = "referee.version"
#: What an instance id may be: fits in a tag, a repository and a container name.
_ID: Final = re.compile(r"^[a-z0-9]{1,20}$")
#: Most pins kept (the newest): every image an instance built stays pinned.
_MAX_PINS: Final = 2000

#: The docker package ships no type information: its objects are Any here.
DockerClient = Any


def check_instance_id(text: str) -> str:
    """`text` when it is a usable instance id (1-20 of a-z, 0-9); ValueError saying what to do."""
    if not _ID.match(text):
        raise ValueError(f"not an instance id: {text!r} (1 to 20 lowercase letters and digits, e.g. 'lab2')")
    return text


def new_instance_id() -> str:
    """A fresh random id (what ``referee serve`` keeps in its database): ``i`` and 10 hex digits."""
    return "i" + secrets.token_hex(5)


def default_instance_id() -> str:
    """The CLI's instance: ``REFEREE_INSTANCE``, else one per user (``u<uid>``)."""
    env = os.environ.get("REFEREE_INSTANCE", "").strip()
    if env:
        return check_instance_id(env)
    getuid = getattr(os, "getuid", None)
    return f"u{getuid()}" if getuid is not None else "local"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "referee"


class Instance:
    """One install's id, its names, and the image ids it pinned.

    `pins_file`: where the pinned ids are kept (JSON, mode 0600); None: in
    this process only (a new process then builds its base images again).
    """

    def __init__(self, instance_id: str, *, pins_file: str | os.PathLike[str] | None = None) -> None:
        self.id = check_instance_id(instance_id)
        self.pins_file = Path(pins_file) if pins_file is not None else None
        self._pins: dict[str, str] = {}
        self._lock = threading.Lock()
        self._load()

    def __repr__(self) -> str:
        return f"Instance({self.id!r})"

    # ------------------------------------------------------------ names

    @property
    def label(self) -> dict[str, str]:
        """``{"referee.instance": id}``: on every image and container of this instance."""
        return {INSTANCE_LABEL: self.id}

    @property
    def label_filter(self) -> str:
        """``referee.instance=<id>`` (a Docker ``--filter label=`` value)."""
        return f"{INSTANCE_LABEL}={self.id}"

    @property
    def base_tag(self) -> str:
        """The Python base image: ``referee-base:<id>``."""
        return f"referee-base:{self.id}"

    @property
    def node_base_tag(self) -> str:
        """The Node.js base image: ``referee-node-base:<id>``."""
        return f"referee-node-base:{self.id}"

    @property
    def sdk_tag(self) -> str:
        """The image Python source bots are built FROM: ``referee-sdk-python:<id>``."""
        return f"referee-sdk-python:{self.id}"

    def bot_tag(self, bot: str) -> str:
        """A sample bot's image: ``referee-bot-greedy:<id>``."""
        return f"referee-bot-{bot}:{self.id}"

    def team_tag(self, tid: int, version: int) -> str:
        """A team's uploaded version: ``referee-<id>-team-<tid>:v<version>``,
        `version` the team's own number ("v2" on its pages), not the
        service-wide submission id (images built before issue 34 were
        tagged with that: :func:`~referee.service.pipeline.retag_pinned`
        tags them again at the service's start)."""
        return f"referee-{self.id}-team-{int(tid)}:v{int(version)}"

    def keep_tag(self, image_id: str) -> str:
        """The tag that keeps an image a run pins, when it has no other of
        this instance: ``referee-<id>-pinned:<12 hex digits of its id>``."""
        return f"referee-{self.id}-pinned:{image_id.removeprefix('sha256:')[:12]}"

    @property
    def container_prefix(self) -> str:
        """Every container name of this instance starts so: ``referee-<id>-``."""
        return f"referee-{self.id}-"

    def owns_tag(self, tag: str) -> bool:
        """Whether `tag` is one of this instance's names."""
        repository, _, version = tag.rpartition(":")
        return (version == self.id and repository.startswith("referee-")) or repository.startswith(
            self.container_prefix
        )

    # ------------------------------------------------------------ pins

    def _load(self) -> None:
        if self.pins_file is None:
            return
        try:
            data = json.loads(self.pins_file.read_text())
        except (OSError, ValueError):
            return
        if isinstance(data, dict):
            self._pins.update({str(k): str(v) for k, v in data.items() if isinstance(v, str)})

    def _save(self) -> None:
        if self.pins_file is None:
            return
        self.pins_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        merged = {}
        with contextlib.suppress(OSError, ValueError):  # another process of this instance may have pinned too
            disk = json.loads(self.pins_file.read_text())
            if isinstance(disk, dict):
                merged.update({str(k): str(v) for k, v in disk.items() if isinstance(v, str)})
        merged.update(self._pins)
        while len(merged) > _MAX_PINS:
            merged.pop(next(iter(merged)))
        fd, tmp = tempfile.mkstemp(dir=self.pins_file.parent, prefix=".pins-")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(merged, f, indent=0, sort_keys=True)
            os.replace(tmp, self.pins_file)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def pinned(self, tag: str) -> str | None:
        """The id of the image this instance built as `tag`, or None."""
        with self._lock:
            return self._pins.get(tag)

    def pin(self, tag: str, image_id: str) -> None:
        """Remember that this instance built `tag` as the image `image_id`."""
        with self._lock:
            self._pins.pop(tag, None)
            self._pins[tag] = image_id
            self._save()

    # ------------------------------------------------------------ tags

    def ensure_tagged(self, client: DockerClient, image_id: str, tag: str | None = None) -> str | None:
        """Make sure the image `image_id` (one a run pins) keeps a tag of this
        instance, so ``docker image prune`` never deletes it: `tag` when given,
        else the team tag its labels name when this instance made it (else
        :meth:`keep_tag`). The tag set, or None when it had one of ours
        already. Raises docker's ImageNotFound when the image is gone."""
        image = client.images.get(image_id)
        tags = list(image.tags or [])
        if tag is None:
            if any(self.owns_tag(t) for t in tags):
                return None
            labels = (image.attrs.get("Config") or {}).get("Labels") or {}
            team, version = labels.get("referee.team", ""), labels.get(VERSION_LABEL, "")
            # an image built before the version label (its submission id only) gets the keep tag:
            # its old ":v<submission id>" now names another version of the team
            if labels.get(INSTANCE_LABEL) == self.id and team.isdigit() and version.isdigit():
                tag = self.team_tag(int(team), int(version))
            else:
                tag = self.keep_tag(str(image.id))
        elif tag in tags:
            return None
        repository, _, version = tag.rpartition(":")
        image.tag(repository, version)
        return tag

    def images(self, client: DockerClient) -> list[dict[str, Any]]:
        """The images labelled with this instance (the daemon's listing: Id, RepoTags, Labels, ...)."""
        return list(client.api.images(filters={"label": self.label_filter}))


_current: Instance | None = None
_current_lock = threading.Lock()


def current() -> Instance:
    """The process's instance: the one :func:`use` set, else the CLI's
    default (:func:`default_instance_id`, pins in the user's cache)."""
    global _current
    with _current_lock:
        if _current is None:
            _current = cli_instance()
        return _current


def cli_instance(instance_id: str | None = None) -> Instance:
    """A CLI instance: `instance_id` (else :func:`default_instance_id`), its
    pins in the user's cache (``~/.cache/referee/instance-<id>.json``)."""
    iid = check_instance_id(instance_id) if instance_id is not None else default_instance_id()
    return Instance(iid, pins_file=_cache_dir() / f"instance-{iid}.json")


def use(instance: Instance) -> Instance:
    """Make `instance` the process's (``referee serve`` with its database's id); returns it."""
    global _current
    with _current_lock:
        _current = instance
    return instance
