"""Project-wide pytest options."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import budget
from tests.support.mounts import unmount_under


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite the golden files under tests/golden/ instead of comparing with them, and the screenshots the docs show (docs/*.png) that the browser tests take",
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
    # Each pytest-xdist worker is an install of its own on the Docker daemon
    # (referee.bots.sandbox.instance): its own tags, labels and pinned ids, so
    # that two workers never build, re-tag or remove each other's images (CI's
    # slow pass runs the container suites on two workers).
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker and not os.environ.get("REFEREE_INSTANCE"):
        os.environ["REFEREE_INSTANCE"] = f"u{os.getuid()}{worker}"
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
    return f"referee: {run}; tests/support/budget.py profile {budget.PROFILE!r} (-m 'slow or not slow' runs every suite)"


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


#: The docs' folder: a test writes into it only when asked to (``--update-golden``).
DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.fixture
def docs_screenshot(update_golden: bool, tmp_path: Path) -> Callable[[str], Path]:
    """Where a browser test saves the screenshot ``docs/NAME`` shows: there
    with ``--update-golden``, else in the test's own folder (a test run
    never rewrites the docs)."""
    return lambda name: (DOCS if update_golden else tmp_path) / name


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
    if item.get_closest_marker("slow") is not None and item.get_closest_marker("xdist_group") is None:
        item.add_marker(pytest.mark.xdist_group(_slow_group(item, folder)))


#: Files of Ray tests outside tests/cluster: a Ray cluster of their own each.
RAY_FILES = frozenset({"test_ray_executor.py", "test_ray_exposure.py", "test_web_ladder_ray.py"})


def _slow_group(item: pytest.Item, folder: str) -> str:
    """The slow tests' groups for pytest-xdist's ``--dist loadgroup`` (CI's
    slow pass on two workers): a group runs on one worker, in collection
    order. The browser tests are one (one worker's Playwright, run last:
    :func:`pytest_collection_modifyitems`); the cluster and Ray tests are one
    (a second Docker daemon, its registry on a fixed port, Ray clusters); each
    other file is one (its module fixtures built once, its own fixed names)."""
    if _is_browser_test(item):
        return "browser"
    if folder == "cluster" or item.path.name in RAY_FILES:
        return "cluster"
    path = Path(str(item.path))
    return str(path.relative_to(TESTS)) if path.is_relative_to(TESTS) else path.name


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
