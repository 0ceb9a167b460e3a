"""``referee serve``: the classroom service (competitions, teams, submissions,
live leaderboard, bot pages, replay viewer, JSON API); :func:`make_app` builds it."""

from .app import make_app
from .app_state import Settings
from .db import ServiceDB

__all__ = ["ServiceDB", "Settings", "make_app"]
