"""Project-wide pytest options."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import budget  # noqa: F401 - loads the hypothesis profile (fast or full) for every test
import pytest
from mounts import unmount_under


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite the golden files under tests/golden/ instead of comparing with them",
    )


#: What plain ``python -m pytest`` (no paths, no -m) runs: the fast suite.
DEFAULT_MARKEXPR = "not slow"


def _plain_run(config: pytest.Config) -> bool:
    """`python -m pytest` with no tests named and no -m: the fast suite."""
    return not config.option.markexpr and config.args_source == pytest.Config.ArgsSource.TESTPATHS


def _fast_workers() -> int:
    """Processes for the fast suite: ``REFEREE_TEST_WORKERS``, else one per
    core up to 4 (its tests wait on loopback more than they compute)."""
    wanted = os.environ.get("REFEREE_TEST_WORKERS", "")
    if wanted.isdigit():
        return int(wanted)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(4, cores)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads -n
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Plain `python -m pytest` runs the fast suite on pytest-xdist's workers
    (``REFEREE_TEST_WORKERS=0``: in this process). The slow suites, and any
    run that names its tests or a mark expression, run in one process as
    asked: their session fixtures (images, a Ray cluster, a second Docker
    daemon) are one per process."""
    if hasattr(config, "workerinput") or not _plain_run(config):
        return
    if (
        config.pluginmanager.hasplugin("xdist")
        and config.option.numprocesses is None
        and not config.option.usepdb
    ):
        workers = _fast_workers()
        if workers > 1:
            config.option.numprocesses = workers


def pytest_configure(config: pytest.Config) -> None:
    # Plain `pytest` is the fast suite; naming tests (`pytest tests/containers`)
    # or a mark expression (`-m "slow or not slow"`, as CI does) runs what is asked.
    # (pytest-xdist's workers parse the same command line, so they decide the same.)
    if _plain_run(config):
        config.option.markexpr = DEFAULT_MARKEXPR
    basetemp = config.option.basetemp
    if basetemp and (left := unmount_under(Path(basetemp))):
        print(f"unmounted {len(left)} mount(s) an earlier run left under {basetemp}", file=sys.stderr)


def pytest_report_header(config: pytest.Config) -> str:
    markexpr = config.option.markexpr
    run = (
        "the fast suite"
        if markexpr == DEFAULT_MARKEXPR
        else f"-m {markexpr!r}"
        if markexpr
        else "the tests named"
    )
    return (
        f"referee: {run}; tests/budget.py profile {budget.PROFILE!r} (-m 'slow or not slow' runs every suite)"
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    basetemp = config.option.basetemp
    if basetemp and (left := unmount_under(Path(basetemp))):
        # A test (or the product) left them: say so, the next run needs them gone.
        print(f"\nunmounted {len(left)} mount(s) left under {basetemp}:", file=sys.stderr)
        for target in left:
            print(f"  {target}", file=sys.stderr)


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


#: pytest-playwright's sync fixtures: a test that asks for one (directly or
#: through another fixture) is a browser test.
PLAYWRIGHT_FIXTURES = frozenset(
    {
        "page",
        "context",
        "browser",
        "browser_type",
        "browser_type_launch_args",
        "playwright",
        "new_context",
        "launch_browser",
    }
)


#: The fixtures among them that start pytest-playwright's session Playwright
#: (`browser_type_launch_args` only reads options).
SESSION_PLAYWRIGHT_FIXTURES = PLAYWRIGHT_FIXTURES - {"browser_type_launch_args"}


def _fixtures(item: pytest.Item) -> set[str]:
    return set(getattr(item, "fixturenames", ()))


def _uses_session_playwright(item: pytest.Item) -> bool:
    return bool(SESSION_PLAYWRIGHT_FIXTURES & _fixtures(item))


def _is_browser_test(item: pytest.Item) -> bool:
    return "test_web_browser" in item.nodeid or bool(PLAYWRIGHT_FIXTURES & _fixtures(item))


#: Suites slow as a whole (they need a Docker daemon, a second one, or Ray):
#: outside the fast default run, in CI's.
SLOW_FOLDERS = ("containers", "cluster")
TESTS = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the marks
def pytest_itemcollected(item: pytest.Item) -> None:
    """Containers, the cluster and the browser are slow suites, every test of
    them, whatever its file says; the default run (``-m "not slow"``) is the
    fast one."""
    path = Path(str(item.path))
    folder = path.relative_to(TESTS).parts[0] if path.is_relative_to(TESTS) else ""
    if folder in SLOW_FOLDERS or _is_browser_test(item):
        item.add_marker(pytest.mark.slow)


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
        # Those that start a Playwright of their own (`sync_playwright()`) before
        # those that use the session's: the session's loop, once running, makes
        # every later `sync_playwright()` fail ("Sync API inside the asyncio loop").
        items[:] = rest + sorted(browser, key=_uses_session_playwright)  # stable: file order kept
