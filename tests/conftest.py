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


#: pytest-playwright's sync fixtures: a test that asks for one (directly or
#: through another fixture) is a browser test.
PLAYWRIGHT_FIXTURES = frozenset(
    {"page", "context", "browser", "browser_type", "playwright", "new_context", "launch_browser"}
)


def _is_browser_test(item: pytest.Item) -> bool:
    return "test_web_browser" in item.nodeid or bool(
        PLAYWRIGHT_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Run the browser tests last. pytest-playwright's sync fixtures keep an
    event loop running in the main thread for the rest of the session, which
    breaks any later test that calls ``asyncio.run`` itself (or an async
    fixture); putting them at the end keeps every selection of tests
    (``pytest tests/web tests/match`` included) independent of the order it
    is given in. A browser test is one that uses a Playwright fixture,
    whatever its file is called."""
    browser = [i for i in items if _is_browser_test(i)]
    if browser:
        rest = [i for i in items if not _is_browser_test(i)]
        items[:] = rest + browser
