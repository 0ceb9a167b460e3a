"""The service's own faults, told from a team's (issue 25, item 1).

When the service itself cannot check a bot, nothing is wrong with the bot:
Docker unreachable (:class:`~referee.bots.sandbox.docker_daemon.DockerUnavailable`, a
connection refused), the daemon's own error (a 5xx), the service's base or
SDK image failing to build, the data disk full (``ENOSPC``), the database
locked. Such a submission is never refused: it **waits** (status
``waiting``, the cause and the time of the next try kept with it), is tried
again with capped exponential back-off (``Settings.fault_retry_s`` doubled
at each try up to ``Settings.fault_retry_max_s``), and when Docker answers
again every waiting submission goes on at once. A team's archive, build or
check failing is the team's: refused, as before.

:class:`Health` is the service's state while it is degraded (what failed,
since when, the next try), shown as a banner on ``/admin`` and the admin
pages (:func:`banner`, a template context processor).
"""

from __future__ import annotations

import errno
import logging
import time

import msgspec

from .clock import SYSTEM, Clock
from .store import is_busy

log = logging.getLogger("referee.service.health")

#: What a team is told about its waiting submission, before the cause.
NOT_YOUR_BOT = "nothing is wrong with your bot: the server could not check it"


class ServiceFault(Exception):
    """The service could not check a submission; nothing the team did. `cause`: what failed, exactly."""

    def __init__(self, cause: str, *, docker: bool = False) -> None:
        super().__init__(cause)
        #: What failed, exactly (for the admin: it may name the server's paths).
        self.cause = cause
        #: Whether it is Docker that failed (then a ping says when it is back).
        self.docker = docker

    @property
    def summary(self) -> str:
        """What failed, in a few words (for the team): the cause up to its first colon."""
        return self.cause.split(":", 1)[0]


def _first_line(text: str, limit: int = 300) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line[:limit]


def classify(exc: BaseException) -> ServiceFault | None:
    """The service fault `exc` is, or None when it is not one (then the team's
    input caused it). An unknown exception in the pipeline is the service's
    own bug, never the team's: a service fault, named by its type and text."""
    from ..bots.sandbox.docker_daemon import DockerUnavailable, docker_module

    if isinstance(exc, ServiceFault):
        return exc
    if isinstance(exc, DockerUnavailable):
        return ServiceFault(f"Docker is not reachable: {_first_line(str(exc))}", docker=True)
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return ServiceFault(f"the server's disk is full: {_first_line(str(exc))}")
    if is_busy(exc):
        return ServiceFault(f"the service's database is locked: {_first_line(str(exc))}")
    try:
        import requests.exceptions

        errors = docker_module().errors
    except ImportError:  # pragma: no cover - the containers extra
        pass
    else:
        if isinstance(exc, errors.APIError):
            status = exc.status_code
            return ServiceFault(
                f"the Docker daemon failed ({status}): {_first_line(str(exc.explanation or exc))}",
                docker=True,
            )
        if isinstance(exc, (requests.exceptions.ConnectionError, errors.DockerException)):
            return ServiceFault(f"Docker is not reachable: {_first_line(str(exc))}", docker=True)
    if isinstance(exc, RuntimeError) and str(exc).startswith("building referee-"):
        return ServiceFault(f"the service's own base image could not be built: {_first_line(str(exc))}")
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return ServiceFault(
            f"Docker is not reachable: {type(exc).__name__}: {_first_line(str(exc))}", docker=True
        )
    return ServiceFault(f"an error in the service: {type(exc).__name__}: {_first_line(str(exc))}")


#: Refusals whose words come from the team's own files (a compile error
#: quotes them): never read as the server's.
_TEAM_WORDS = ("Python could not compile", "node --check found")


#: Refusals of the daemon's about what the service itself sent it (its own
#: Dockerfile and build context; a look at the image it made): the daemon's.
_DAEMON_WORDS = ("the Docker daemon refused the build:", "the server could not measure the built image")


def refusal_is_service(reason: str | None) -> ServiceFault | None:
    """A refusal the build module returned that is the server's (the
    daemon's disk full while it built or loaded): a service fault, else None.
    (Docker gone meanwhile is found by a ping: :func:`docker_ok`.)"""
    text = reason or ""
    if text.startswith(_TEAM_WORDS):
        return None
    if "no space left on device" in text.lower():
        return ServiceFault(f"the server's disk is full: {_first_line(text)}")
    if text.startswith(_DAEMON_WORDS):  # the service's own Dockerfile, or its own look at the image
        return ServiceFault(f"the Docker daemon failed: {_first_line(text)}", docker=True)
    return None


def docker_ok() -> str | None:
    """None when the Docker daemon answers a ping, else what failed (blocking)."""
    from ..bots.sandbox.docker_daemon import DockerUnavailable, docker_client

    try:
        docker_client().ping()
    except DockerUnavailable as e:
        return f"Docker is not reachable: {_first_line(str(e))}"
    except Exception as e:  # noqa: BLE001 - docker's and requests' errors alike
        return f"Docker is not reachable: {type(e).__name__}: {_first_line(str(e))}"
    return None


#: The one install line for a service that takes uploads (README, docs/service.md).
UPLOADS_INSTALL = "pip install -e '.[containers]'"


def uploads_missing() -> str | None:
    """None when this install can take the teams' uploads (source and
    ``docker save`` archives, images), else what is missing from it and what
    the organiser installs. Said by ``referee serve`` at start and to a team
    whose upload is refused: the server's to fix, never the team's bot.

    Only what no retry mends (the install): a Docker daemon that does not
    answer is a fault that passes, and the submissions wait for it
    (:class:`ServiceFault`); ``referee serve`` warns of it at start."""
    from ..bots.sandbox.docker_daemon import docker_module
    from .runs import containers_enabled

    if not containers_enabled():
        return "this install of referee has no container bots module (referee.bots.sandbox.container)"
    try:
        docker_module()
    except ImportError:
        return (
            "the Docker client for Python (the docker package) is not installed on the server: "
            f"{UPLOADS_INSTALL} in the service's checkout (or pip install 'referee[containers]'), "
            "then restart referee serve"
        )
    return None


def backoff(attempt: int, base_s: float, max_s: float) -> float:
    """Seconds before try `attempt` + 1 (1: the first retry): `base_s` doubled each time, at most `max_s`."""
    return float(min(max_s, base_s * 2 ** max(0, min(attempt - 1, 30))))


def clock(t: float) -> str:
    """A time a person reads: ``14:05:09 UTC``."""
    return time.strftime("%H:%M:%S UTC", time.gmtime(t))


def team_reason(cause: str, retry_at: float) -> str:
    """What a team sees of its waiting submission."""
    return f"{NOT_YOUR_BOT} ({cause}); it will be retried at {clock(retry_at)}, by itself: no need to upload again"


class Degraded(msgspec.Struct, kw_only=True):
    """What failed, since when, and when the service tries again."""

    cause: str
    since: float
    retry_at: float
    #: Submissions waiting on it.
    waiting: int


class Health:
    """The service's state: degraded (a service fault seen, not yet gone) or not."""

    def __init__(self, now: Clock = SYSTEM) -> None:
        self.degraded: Degraded | None = None
        self.now = now

    def fault(self, cause: str, retry_at: float, waiting: int) -> None:
        if self.degraded is None:
            log.error("the service is degraded: %s (submissions wait; retried at %s)", cause, clock(retry_at))
            self.degraded = Degraded(cause=cause, since=self.now.time(), retry_at=retry_at, waiting=waiting)
        else:
            self.degraded = msgspec.structs.replace(
                self.degraded, cause=cause, retry_at=retry_at, waiting=waiting
            )

    def recovered(self) -> None:
        if self.degraded is not None:
            log.warning(
                "the service is well again (it was degraded for %.0f s: %s)",
                self.now.time() - self.degraded.since,
                self.degraded.cause,
            )
        self.degraded = None

    def banner(self) -> str | None:
        d = self.degraded
        if d is None:
            return None
        return (
            f"The service is degraded since {clock(d.since)}: {d.cause}. {d.waiting} submission(s) wait "
            f"(not refused: nothing is wrong with the teams' bots); the next try is at {clock(d.retry_at)}, "
            "and they go on by themselves once this is fixed."
        )


__all__ = [
    "NOT_YOUR_BOT",
    "UPLOADS_INSTALL",
    "Degraded",
    "Health",
    "ServiceFault",
    "backoff",
    "classify",
    "docker_ok",
    "refusal_is_service",
    "team_reason",
    "uploads_missing",
]
