"""How much the property tests play: their full counts under CI (``CI=true``)
or ``REFEREE_TEST_FULL=1``, a quarter of them in the fast suite a developer
runs (``python -m pytest``). The assertions are the same either way; only the
number of random games and examples changes. Hypothesis is seeded in both
(``derandomize``): a run gives the same examples as the one before it."""

from __future__ import annotations

import os
from typing import Final

from hypothesis import settings

FULL: Final = os.environ.get("CI") == "true" or os.environ.get("REFEREE_TEST_FULL") == "1"
PROFILE: Final = "full" if FULL else "fast"

settings.register_profile("referee", deadline=None, derandomize=True)
settings.load_profile("referee")


def scaled(full: int) -> int:
    """`full` under the full profile, a quarter of it (at least 1) otherwise."""
    return full if FULL else max(1, full // 4)
