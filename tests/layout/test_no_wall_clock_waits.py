"""The fast suite waits on events, never on the wall clock (issue 33, item 6).

A test that sleeps a fixed time, or asks again and again until a deadline on
``time.monotonic()``, passes on an idle machine and fails on a loaded one
(``.ci/stress``): the thing it waited for took longer than the guess. A test
waits on what it waits for instead: ``room.until(...)`` (the service's change
signal), ``room.pipeline.wait_for(sid)``, an ``asyncio.Event`` set from a
runner's ``on_game``, the live event stream, a ``SteppedClock``; and bounds
the wait, if at all, with a large ``asyncio.timeout`` that only a broken test
reaches.

What counts, in the code a fast-suite test runs (its own body, its file's
helpers and fixtures, and the ``tests.support`` functions it reaches, by
name, transitively; nested functions count for the function they are in):

- ``time.sleep(c)`` or ``asyncio.sleep(c)`` with a positive constant ``c``;
- a ``while`` loop that reads ``time.monotonic()`` (or ``loop.time()``) in
  its test or its body: a poll until a deadline.

``asyncio.sleep(0)`` (one turn of the loop) is no wait on the clock. A sleep
that is the behaviour under test (a bot that is slow on purpose, the clock
code itself) is listed in ALLOWED with the reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent

#: Folders whose every test is slow (tests/conftest.py's SLOW_FOLDERS).
SLOW_FOLDERS = frozenset({"containers", "cluster"})
#: pytest-playwright's fixtures (tests/conftest.py): a test that asks for one is a slow browser test.
BROWSER_FIXTURES = frozenset(
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

#: The waits on the clock a fast test may keep, by "path::function", and why:
#: the behaviour under test is a slow or hanging party, or the clock code itself.
ALLOWED: dict[str, str] = {
    "tests/bots/test_bots_sdk.py::test_a_decide_runs_off_the_event_loop": "a decide that blocks its thread is the subject",
    "tests/bots/test_bots_sdk.py::test_slow_async_decide_is_cancelled": "a decide slower than its deadline is the subject",
    "tests/bots/test_bots_sdk.py::test_the_guard_can_be_switched_off": "a decide that blocks its thread is the subject",
    "tests/bots/test_deadline.py::test_a_block_that_ends_in_time_is_left_alone": "the clock code itself: a deadline on the loop's timer",
    "tests/bots/test_deadline.py::test_a_cancellation_from_elsewhere_stays_a_cancellation": "the clock code itself: a deadline on the loop's timer",
    "tests/bots/test_deadline.py::test_a_deadline_already_past_cancels_at_the_first_await": "the clock code itself: a deadline on the loop's timer",
    "tests/bots/test_deadline.py::test_an_overrunning_block_raises_timeout_error_at_its_deadline": "the clock code itself: a deadline on the loop's timer",
    "tests/bots/test_deadline.py::test_each_event_loop_has_its_own_timer": "the clock code itself: a deadline on the loop's timer",
    "tests/bots/test_netpolicy.py::test_unresolved_hosts": "a resolver that hangs is the subject",
    "tests/bots/test_searcher_budget.py::_canary": "measures the loop's lag under the searcher: a timer is the instrument",
    "tests/match/test_match_http.py::test_connection_limit_per_bot": "a bot busy on each request, so that requests overlap: the subject",
    "tests/match/test_match_http.py::test_handshake_timeout": "a bot that hangs past its timeout is the subject",
    "tests/match/test_match_http.py::test_timeout_cancels_the_call": "a bot that hangs past its timeout is the subject",
    "tests/web/test_web_slow_clients.py::test_headers_time_out_but_an_event_stream_and_a_kept_alive_connection_in_use_do_not": "a client that trickles its headers is the subject",
    "tests/web/test_web_upload_limits.py::test_a_failed_upload_gives_its_slot_back": "an upload that trickles its body is the subject",
    "tests/web/test_web_upload_limits.py::test_a_second_upload_is_answered_before_its_body_is_sent": "an upload that trickles its body is the subject",
    "tests/web/test_web_upload_limits.py::test_the_team_pages_form_shares_the_one_upload_in_flight": "an upload that trickles its body is the subject",
    "tests/web/test_web_upload_limits.py::test_twelve_parallel_uploads_hold_one_upload_of_disk": "uploads that trickle their bodies are the subject",
}


@dataclass(frozen=True)
class Wait:
    where: str  # path::function
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.where} (line {self.line}): {self.what}"


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _positive_constant(node: ast.expr) -> bool:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    ):
        return node.value > 0
    if isinstance(node, ast.BinOp):  # 2 * 0.5, 10**6
        return _positive_constant(node.left) and _positive_constant(node.right)
    return False


def _reads_the_clock(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            name = _dotted(n.func)
            if name.endswith("time.monotonic") or name.endswith("loop().time") or name == "loop.time":
                return True
    return False


def waits_in(fn: ast.AST) -> Iterator[tuple[int, str]]:
    """The waits on the wall clock in a function (its nested ones included)."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and _dotted(n.func) in ("time.sleep", "asyncio.sleep"):
            if n.args and _positive_constant(n.args[0]):
                yield n.lineno, f"{_dotted(n.func)}({ast.unparse(n.args[0])})"
        elif isinstance(n, ast.While) and (
            _reads_the_clock(n.test)
            or any(_reads_the_clock(s) for s in n.body if not isinstance(s, ast.While))
        ):
            yield n.lineno, "a while loop until a time.monotonic() deadline"


class Module:
    """A parsed file of tests/: its top-level functions and what its names import."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rel = path.relative_to(ROOT).as_posix()
        self.tree = ast.parse(path.read_text())
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.imported: dict[str, tuple[str, str]] = {}  # local name -> (module path, name)
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                        self.functions[f"{node.name}.{sub.name}"] = sub
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests.support"):
                target = ROOT / (node.module.replace(".", "/") + ".py")
                for alias in node.names:
                    self.imported[alias.asname or alias.name] = (
                        target.relative_to(ROOT).as_posix(),
                        alias.name,
                    )

    def slow_module(self) -> bool:
        folder = self.path.relative_to(TESTS).parts[0]
        if folder in SLOW_FOLDERS or "test_web_browser" in self.path.name:
            return True
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and any(_dotted(t) == "pytestmark" for t in node.targets):
                if "slow" in ast.unparse(node.value):
                    return True
        return False


def _marked_slow(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("mark.slow" in ast.unparse(d) for d in fn.decorator_list)


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    return {a.arg for a in fn.args.args + fn.args.kwonlyargs}


def fast_suite_waits() -> list[Wait]:
    modules = {
        m.rel: m
        for m in (Module(p) for p in sorted(TESTS.rglob("*.py")))
        if "fixtures" not in m.path.parts and "programs" not in m.path.parts
    }
    conftests = [m for m in modules.values() if m.path.name == "conftest.py"]
    todo: list[tuple[str, str]] = []
    for m in modules.values():
        if not m.path.name.startswith("test_") or m.slow_module():
            continue
        for name, fn in m.functions.items():
            leaf = name.rsplit(".", 1)[-1]
            if leaf.startswith("test_") and not _marked_slow(fn) and not (BROWSER_FIXTURES & _params(fn)):
                todo.append((m.rel, name))
    seen: set[tuple[str, str]] = set()
    found: list[Wait] = []
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        m = modules[key[0]]
        fn = m.functions[key[1]]
        for line, what in waits_in(fn):
            found.append(Wait(f"{key[0]}::{key[1]}", line, what))
        names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | _params(fn)
        for name in names:
            if name in m.functions:
                todo.append((m.rel, name))
            elif name in m.imported and m.imported[name][0] in modules:
                target = m.imported[name]
                if target[1] in modules[target[0]].functions:
                    todo.append(target)
            else:  # a fixture of a conftest
                todo.extend((c.rel, name) for c in conftests if name in c.functions)
    return sorted(found, key=lambda w: (w.where, w.line))


def test_the_fast_suite_waits_on_events_not_on_the_wall_clock() -> None:
    waits = [w for w in fast_suite_waits() if w.where not in ALLOWED]
    assert not waits, (
        f"{len(waits)} wait(s) on the wall clock in the fast suite: wait on an event instead "
        "(room.until, room.pipeline.wait_for, an asyncio.Event from on_game, the live stream, a SteppedClock), "
        "or mark the test slow, or list it in ALLOWED with the reason:\n" + "\n".join(map(str, waits))
    )


def test_the_allowed_list_names_waits_that_exist() -> None:
    places = {w.where for w in fast_suite_waits()}
    stale = sorted(set(ALLOWED) - places)
    assert not stale, f"ALLOWED names functions that no longer wait on the clock (take them off): {stale}"


def test_the_check_sees_a_sleep_and_a_poll() -> None:
    """The check itself: what it must find, and what it must let be."""
    src = (
        "import asyncio, time\n"
        "async def f():\n"
        "    await asyncio.sleep(0.05)\n"
        "    await asyncio.sleep(0)\n"
        "    deadline = time.monotonic() + 5\n"
        "    while time.monotonic() < deadline:\n"
        "        pass\n"
        "    time.sleep(2 * 0.5)\n"
    )
    found = [what for _, what in sorted(waits_in(ast.parse(src)))]
    assert found == [
        "asyncio.sleep(0.05)",
        "a while loop until a time.monotonic() deadline",
        "time.sleep(2 * 0.5)",
    ], found
