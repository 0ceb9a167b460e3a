"""Project-wide pytest options."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite the golden files under tests/golden/ instead of comparing with them",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the browser tests last. pytest-playwright's sync fixtures keep an
    event loop running in the main thread for the rest of the session, which
    breaks any later test that calls ``asyncio.run`` itself; putting them at
    the end keeps every selection of tests (``pytest tests/web tests/match``
    included) independent of the order it is given in."""
    browser = [i for i in items if "test_web_browser" in i.nodeid]
    if browser:
        rest = [i for i in items if "test_web_browser" not in i.nodeid]
        items[:] = rest + browser
