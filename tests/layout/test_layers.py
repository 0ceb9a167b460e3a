"""The code's shape: no import circles, and dependencies that point one way (issue 12).

Every import is counted, the ones inside functions too (a lazy import is
still a dependency). Modules are files; a package's ``__init__`` is its own
module. The layers, from the top: the CLI and the service; competitions
(tournaments, ladders, admission, diagnostics); the match runner (with its
record, replays and report); the transports; the engine; support (the package
root, config); the protocol. Every top-level module has a layer (LAYERS), and
imports only its own and lower ones; ALLOWED narrows some further.
``sample_bots`` sit beside the referee and may use only the protocol and the
pure engine.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("referee", "protocol", "sample_bots")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `name` imports, resolved to files."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    found: set[str] = set()

    def add(target: str) -> None:
        # `from a.b import c`: c may be a module (a.b.c) or a name in a.b.
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                add(f"{module}.{alias.name}")
    return {m for m in found if m.split(".")[0] in PACKAGES}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles() -> None:
    graph = _graph()
    assert len(graph) > 40  # the walk found the code
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check above could not pass by finding nothing."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


#: The transports of referee/bots/ (its top-level modules but the factory).
BOTS_TRANSPORTS = tuple(
    f"referee.bots.{m}"
    for m in ("base", "clock", "deadline", "dropped", "http", "human", "managed", "netpolicy", "process")
)

#: What each layer may import from the project (a prefix allows its submodules).
ALLOWED = {
    "protocol": ("protocol",),
    "referee.game": ("protocol", "referee.game"),
    "referee.bots": ("protocol", "referee", "referee.bots", "referee.config"),
    # referee/bots/ by job (issue 33): the transports at its top (the Bot protocol, HTTP,
    # processes, clocks and deadlines, the URL policy); the sandbox of a container bot on
    # them; a team's images on the sandbox; the cluster's nodes on the sandbox; the factory,
    # which makes any bot, over all of them.
    **{
        transport: ("protocol", "referee", "referee.config", *BOTS_TRANSPORTS)
        for transport in BOTS_TRANSPORTS
    },
    "referee.bots.sandbox": (
        "protocol",
        "referee",
        "referee.config",
        *BOTS_TRANSPORTS,
        "referee.bots.sandbox",
    ),
    "referee.bots.images": (
        "protocol",
        "referee",
        "referee.config",
        *BOTS_TRANSPORTS,
        "referee.bots.sandbox",
        "referee.bots.images",
    ),
    "referee.bots.cluster": (
        "protocol",
        "referee",
        "referee.config",
        *BOTS_TRANSPORTS,
        "referee.bots.sandbox",
        "referee.bots.cluster",
    ),
    "referee.record": ("protocol", "referee.game"),
    "referee.replay": ("protocol", "referee.game", "referee.record", "referee.report"),
    "referee.report": ("protocol", "referee.record", "referee.textsafe", "referee.tournament.ratings"),
    "referee.match": (
        "protocol",
        "referee",
        "referee.game",
        "referee.bots",
        "referee.record",
        "referee.replay",
    ),
    "sample_bots": ("protocol", "referee.game", "sample_bots"),
}


def _allowed(target: str, prefixes: tuple[str, ...]) -> bool:
    """`target` is one of `prefixes` or below one; ``referee`` alone (the
    package root, which holds ``version()``) allows only itself."""
    return any(target == p or (p != "referee" and target.startswith(p + ".")) for p in prefixes)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_dependencies_point_down(layer: str) -> None:
    graph = _graph()
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        if module == layer or module.startswith(layer + ".")
        for target in targets
        if not _allowed(target, ALLOWED[layer])
    )
    assert wrong == []


#: The layer of every top-level module (a package's modules are its own), from
#: the bottom: a module may import its own layer and the layers below it.
LAYERS = (
    ("protocol", ("protocol",)),
    # the package root (version()), its compiled-engine check, TOML loading, untrusted text leaving
    ("support", ("referee", "referee._compiled", "referee.config", "referee.textsafe")),
    ("engine", ("referee.game",)),
    ("transports", ("referee.bots",)),
    # one game: the runner, its record, replays and report; a bot's checks
    ("match", ("referee.match", "referee.record", "referee.replay", "referee.report", "referee.check")),
    # many games: tournaments and ladders, a submission's admission games, a team's diagnostics
    ("competition", ("referee.tournament", "referee.admission", "referee.diagnostics")),
    # the classroom competition without HTTP (issue 33): its store, rules and errors
    ("classroom", ("referee.service",)),
    # the top: the command line (referee/cli/, every command) and the web service
    ("service", ("referee.cli", "referee.web")),
    # beside the referee: nothing imports them (what they may import: ALLOWED)
    ("sample bots", ("sample_bots",)),
)
#: Imports that go up a layer, each with its reason.
UPWARD = {
    (
        "referee.report",
        "referee.tournament.ratings",
    ): "type names only (TYPE_CHECKING): the tables it formats",
}


def _top(module: str) -> str:
    """The top-level module `module` belongs to: ``referee.web.pages`` -> ``referee.web``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "referee" and len(parts) > 1 else parts[0]


def _layer(module: str) -> int | None:
    """The rank of `module`'s layer in LAYERS; None when it has none."""
    top = _top(module)
    return next((rank for rank, (_, tops) in enumerate(LAYERS) if top in tops), None)


def _without_layer(modules: set[str] | dict[str, set[str]]) -> list[str]:
    return sorted(m for m in modules if _layer(m) is None)


def _upward(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in graph.items():
        here = _layer(module)
        for target in targets:
            there = _layer(target)
            if here is None or there is None or there <= here or (module, target) in UPWARD:
                continue
            wrong.append(f"{module} ({LAYERS[here][0]}) imports {target} ({LAYERS[there][0]})")
    return sorted(wrong)


def test_every_module_has_a_layer() -> None:
    """A new top-level module fails here until LAYERS says where it sits."""
    graph = _graph()
    assert _without_layer(graph) == []
    assert {_top(m) for m in graph} == {top for _, tops in LAYERS for top in tops}  # no stale entry


def test_layers_point_down() -> None:
    graph = _graph()
    assert _upward(graph) == []
    for module, target in UPWARD:  # each exception is still needed
        assert target in graph[module], f"{module} no longer imports {target}: drop it from UPWARD"


def test_the_layer_checks_find_what_is_wrong() -> None:
    """The checks above could not pass by finding nothing."""
    assert _without_layer({"referee.newthing", "referee.web.pages", "elsewhere"}) == [
        "elsewhere",
        "referee.newthing",
    ]
    assert _layer("referee.bots.sandbox.container") == _layer("referee.bots") != _layer("referee.web.app")
    graph = {
        "referee.game.cards": {"referee.bots.http"},
        "referee.web.app": {"referee.game.cards"},
        "referee.match": {"referee.match"},
    }
    assert _upward(graph) == ["referee.game.cards (engine) imports referee.bots.http (transports)"]


def test_nothing_below_the_service_imports_it() -> None:
    graph = _graph()
    top = ("referee.cli", "referee.web")
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        if not module.startswith(top)
        for target in targets
        if target.startswith(top)
    )
    assert wrong == []


def test_nothing_imports_the_command_line() -> None:
    """``referee/cli/`` is the top of the tree: the web service beside it, and
    everything below, never import a command (a command imports them)."""
    graph = _graph()
    assert any(m.startswith("referee.cli.") for m in graph)  # the package and its modules
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        if not (module == "referee.cli" or module.startswith("referee.cli."))
        for target in targets
        if target == "referee.cli" or target.startswith("referee.cli.")
    )
    assert wrong == []


def _third_party(path: Path) -> set[str]:
    """The top-level names of every module `path` imports (lazy imports too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_classroom_core_never_imports_the_web_framework() -> None:
    """``referee.service`` is the competition without HTTP (issue 33): no aiohttp, no web."""
    modules = {
        n: p for n, p in _modules().items() if n == "referee.service" or n.startswith("referee.service.")
    }
    assert modules, "no referee.service package found"
    graph = _graph()
    wrong = sorted(
        f"{name} imports {what}"
        for name, path in modules.items()
        for what in sorted(
            {m for m in _third_party(path) if m in ("aiohttp", "aiohttp_jinja2", "jinja2")}
            | {t for t in graph[name] if t == "referee.web" or t.startswith("referee.web.")}
        )
    )
    assert wrong == []


#: The modules that may import sqlite3: the two stores (issue 33, item 2).
SQL_MODULES = ("referee.service.store", "referee.tournament.store")


def _sql_outside_the_stores(modules: dict[str, Path]) -> list[str]:
    allowed = SQL_MODULES
    return sorted(
        f"{name} imports sqlite3"
        for name, path in modules.items()
        if "sqlite3" in _third_party(path) and not _allowed(name, allowed)
    )


def test_only_the_stores_run_sql() -> None:
    """Every SQL statement of the service is in ``referee.service.store``, of a
    tournament's database in ``referee.tournament.store``: no other module of
    the referee imports sqlite3 (a lazy import too)."""
    modules = {n: p for n, p in _modules().items() if n.startswith("referee")}
    assert "referee.service.store.db" in modules
    assert _sql_outside_the_stores(modules) == []


def test_the_sql_check_finds_an_import(tmp_path: Path) -> None:
    """The check above could not pass by finding nothing."""
    (tmp_path / "lazy.py").write_text("def f() -> None:\n    import sqlite3\n")
    (tmp_path / "plain.py").write_text("import json\n")
    found = _sql_outside_the_stores(
        {
            "referee.web.lazy": tmp_path / "lazy.py",
            "referee.service.store.runs": tmp_path / "lazy.py",
            "referee.web.plain": tmp_path / "plain.py",
        }
    )
    assert found == ["referee.web.lazy imports sqlite3"]
