"""The bots' tests: the deadline tests run on a loop of virtual time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest

from tests.support.clocks import VirtualTimeLoop

#: The modules whose tests run on a loop of virtual time (VirtualTimeLoop):
#: the deadlines are the subject, and a loaded machine must not move them.
VIRTUAL_TIME = frozenset({"test_deadline.py"})


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    """Virtual time for the modules of VIRTUAL_TIME, asyncio's own loop for the others."""
    if item.path.name in VIRTUAL_TIME:
        return {"virtual_time": VirtualTimeLoop}
    return {"asyncio": asyncio.new_event_loop}
