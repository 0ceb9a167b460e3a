"""``referee serve``: the classroom service (competitions, teams, submissions,
live leaderboard, bot pages, replay viewer, JSON API); :func:`make_app` builds it."""

from .app import make_app
from .app_state import Settings

__all__ = ["Settings", "make_app"]
