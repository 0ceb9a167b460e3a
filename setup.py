"""The build: the engine and the match loop's per-move path compiled with mypyc
when a C compiler is present, a pure-Python package otherwise (issue 16).

``pip install .`` and ``pip install -e .`` both come here (the metadata is in
pyproject.toml). Neither ever fails for want of a compiler: if there is none,
if mypyc is missing or fails, or if the C compilation fails, the package is
built pure and one line says why. ``REFEREE_BUILD_PURE=1`` builds it pure on
purpose.

A compiled build writes ``referee/_compiled.json`` beside the extensions: the
sha256 of every source file the compiled code was built from (the compiled
modules and every project module they import, whose types and constants
mypyc builds in). At import, :mod:`referee._compiled` compares them with the
files as they are: if one differs, the extensions are refused with a warning
and the source runs, so a compiled module is never stale.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent

#: The compiled modules, chosen by measurement (docs/performance.md): the rules
#: engine as a whole (what a search bot's playouts run) and the match runner,
#: whose per-move path is view_bytes, legal_actions, apply and the record.
#: referee/game/log.py stays Python: msgspec Structs with positional defaults
#: cannot be built by mypyc, and its records are plain data anyway.
COMPILED = (
    "referee/game/cards.py",
    "referee/game/state.py",
    "referee/game/view.py",
    "referee/game/resample.py",
    "referee/game/layout.py",
    "referee/match.py",
)
#: The one shared library of the group: referee/_native__mypyc.*.so.
GROUP = "referee._native"
MANIFEST = "_compiled.json"
PROJECT = ("referee", "protocol")


def _module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """The project modules (and their packages) that ``path`` imports."""
    name = _module_name(path)
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                module = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets.add(module)
            targets.update(f"{module}.{a.name}" for a in node.names)
    found: set[str] = set()
    for t in targets:
        parts = t.split(".")
        if parts[0] not in PROJECT:
            continue
        # A module implies its packages: importing it runs their __init__.
        for k in range(1, len(parts) + 1):
            found.add(".".join(parts[:k]))
    return found


def sources() -> list[Path]:
    """The compiled modules and every project module they import, transitively."""
    todo = [ROOT / p for p in COMPILED]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            f = _module_file(name)
            if f is not None and f not in seen:
                todo.append(f)
    return sorted(seen)


def manifest() -> dict[str, object]:
    import mypy.version

    return {
        "compiler": f"mypyc {mypy.version.__version__}",
        "group": GROUP,
        "modules": [_module_name(ROOT / p) for p in COMPILED],
        "sources": {
            p.relative_to(ROOT).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sources()
        },
    }


def _why_pure() -> str | None:
    """Why this build cannot be compiled, or None when it can be tried."""
    if os.environ.get("REFEREE_BUILD_PURE", "") not in ("", "0"):
        return "REFEREE_BUILD_PURE is set"
    if sys.implementation.name != "cpython":
        return f"mypyc needs CPython, not {sys.implementation.name}"
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        return f"no C compiler ({cc} not found)"
    try:
        import mypyc.build  # noqa: F401
    except ImportError as e:
        return f"mypyc is not installed ({e})"
    return None


def _say(line: str) -> None:
    print(f"referee build: {line}", file=sys.stderr, flush=True)


class BuildCompiled(build_ext):
    """build_ext that runs mypyc first and falls back to pure Python on any failure."""

    def finalize_options(self) -> None:
        why = _why_pure()
        exts: list[Extension] = []
        if why is None:
            try:
                from mypyc.build import mypycify

                cwd = os.getcwd()
                os.chdir(ROOT)  # mypyc reads pyproject.toml's [tool.mypy] and writes build/
                try:
                    exts = mypycify(list(COMPILED), group_name=GROUP, opt_level="3", debug_level="0")
                finally:
                    os.chdir(cwd)
                for ext in exts:  # the generated C sits under ROOT/build
                    ext.sources = [s if os.path.isabs(s) else str(ROOT / s) for s in ext.sources]
                    ext.include_dirs = [d if os.path.isabs(d) else str(ROOT / d) for d in ext.include_dirs]
            except BaseException as e:  # mypy's errors end in SystemExit
                if isinstance(e, KeyboardInterrupt):
                    raise
                why = f"mypyc failed: {type(e).__name__}: {e}"
                exts = []
        self._why_pure = why
        self.distribution.ext_modules = exts
        super().finalize_options()

    def _manifest_dir(self) -> Path:
        return Path(self.get_ext_fullpath(GROUP + "__mypyc")).parent

    def _clean(self) -> None:
        """Remove the manifest and extensions an earlier compiled build left
        where this one puts its files: the build folder (a wheel would take
        them along) and, for ``pip install -e``, the source tree."""
        suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        names = [GROUP + "__mypyc", *(_module_name(ROOT / p) for p in COMPILED)]
        for base in {Path(self.build_lib), *([ROOT] if self.inplace else [])}:
            (base / "referee" / MANIFEST).unlink(missing_ok=True)
            for name in names:
                (base / (name.replace(".", "/") + suffix)).unlink(missing_ok=True)

    def run(self) -> None:
        if self._why_pure is None:
            try:
                super().run()
            except Exception as e:  # a compiler error: build pure rather than fail
                self._why_pure = f"the C compilation failed: {type(e).__name__}: {e}"
                self.distribution.ext_modules = self.extensions = []
        if self._why_pure is not None:
            self._clean()
            _say(f"pure Python ({self._why_pure})")
            return
        out = self._manifest_dir()
        out.mkdir(parents=True, exist_ok=True)
        (out / MANIFEST).write_text(json.dumps(manifest(), indent=1, sort_keys=True) + "\n")
        _say(f"compiled with {manifest()['compiler']}: {', '.join(COMPILED)}")

    def get_outputs(self) -> list[str]:
        outs = super().get_outputs()
        if self._why_pure is None and not self.inplace:
            outs.append(str(self._manifest_dir() / MANIFEST))
        return outs


setup(
    # A placeholder so that setuptools runs build_ext; BuildCompiled puts the
    # real extensions (or none) in its place.
    ext_modules=[Extension(GROUP + "__mypyc", sources=[])],
    cmdclass={"build_ext": BuildCompiled},
)
