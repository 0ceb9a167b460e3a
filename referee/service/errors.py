"""What the competition refuses, said as what happened, never as HTTP says it (issue 33).

A rule that says no raises one of these with a message for the person who
can act on it (the field, the line, the range, whose fault it is and what to
do). They carry no status code: ``referee/web/`` answers each kind with one
(:mod:`referee.web.errors`, in one middleware); the CLI prints the message.
"""

from __future__ import annotations

from typing import Self


class ServiceError(Exception):
    """A refusal of the service: `message` says why and what to do; `field`
    names the value refused (a form's or a body's field), `retry_after` how
    many seconds until asking again may succeed."""

    def __init__(self, message: str, *, field: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.retry_after = retry_after

    def reworded(self, message: str, *, field: str | None = None) -> Self:
        """The same refusal (its kind, its retry-after) said in `message` (and about `field`, when given)."""
        return type(self)(message, field=field or self.field, retry_after=self.retry_after)


class NotFound(ServiceError):
    """What was named does not exist (a competition, a run, a game...)."""


class Invalid(ServiceError):
    """A value given is not one the rules accept (`field` names it)."""


class Unauthorized(ServiceError):
    """Who asks is not (or no longer) who they must be: a token replaced while its upload streamed."""


class Forbidden(ServiceError):
    """Who asks may not do this, whatever its state (an image named by a team)."""


class Conflict(ServiceError):
    """The state of things forbids it now (a phase, a run playing, a withdrawn team...)."""


class RateLimited(ServiceError):
    """Too many, or too soon: `retry_after` seconds until it may be asked again."""


class TooLarge(ServiceError):
    """Over a size the service keeps to (a team's storage quota)."""


class DiskFull(ServiceError):
    """The server's disk is below its floor: the service's problem, not the asker's."""


class NotReady(ServiceError):
    """The service is not set up for this yet (uploads without Docker): the organiser's to fix, not the asker's."""


__all__ = [
    "Conflict",
    "DiskFull",
    "Forbidden",
    "Invalid",
    "NotFound",
    "NotReady",
    "RateLimited",
    "ServiceError",
    "TooLarge",
    "Unauthorized",
]
