"""``referee serve``: the classroom service (competitions, teams, submissions,
live leaderboard, bot pages, replay viewer, JSON API). See README-section.md."""

from .app import Settings, make_app
from .db import ServiceDB

__all__ = ["ServiceDB", "Settings", "make_app"]
