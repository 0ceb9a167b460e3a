"""Which engine runs: the mypyc-compiled modules, or their Python source (issue 16).

Imported by ``referee/__init__.py``, so it decides before any compiled module
can load. A compiled build (setup.py) leaves ``_compiled.json`` beside the
extensions: the sha256 of every source the compiled code was built from. The
compiled modules run only if

* ``REFEREE_PURE`` is not set (``REFEREE_PURE=1`` forces the source),
* every one of those sources is as it was when compiled, and
* the shared library of the compiled group loads.

Otherwise the extensions are refused, all of them at once (mypyc calls
between compiled modules natively, so one stale module would leak into the
others), and a finder placed first on ``sys.meta_path`` imports the ``.py``
file of every ``referee`` module that has an extension beside it. A refusal
the user did not ask for (a source edited since the build, an extension that
does not load, extensions with no manifest) prints one warning line on
stderr. :func:`status` is the line the commands print at start-up.

Never compiled itself, and imports only the standard library.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

__all__ = ["COMPILED", "REASON", "status"]

_HERE = Path(__file__).resolve().parent
_MANIFEST = _HERE / "_compiled.json"
_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)


class _SourceFirst(importlib.abc.MetaPathFinder):
    """Imports a ``referee`` module from its ``.py`` file when an extension
    module of the same name sits beside it (the normal finder would take the
    extension)."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if path is None or not fullname.startswith("referee."):
            return None
        leaf = fullname.rpartition(".")[2]
        for entry in path:
            source = os.path.join(entry, leaf + ".py")
            if os.path.isfile(source):
                if any(os.path.exists(os.path.join(entry, leaf + s)) for s in _SUFFIXES):
                    return importlib.util.spec_from_file_location(fullname, source)
                return None
        return None


def _extensions() -> list[str]:
    """The extension modules in this package's tree (relative paths)."""
    return sorted(
        p.relative_to(_HERE.parent).as_posix() for p in _HERE.rglob("*") if p.name.endswith(_SUFFIXES)
    )


def _decide() -> tuple[bool, str, bool]:
    """(compiled?, what runs or why not, warn?)."""
    if os.environ.get("REFEREE_PURE", "") not in ("", "0"):
        return False, "REFEREE_PURE is set", False
    if not _MANIFEST.is_file():
        found = _extensions()
        if found:
            return False, f"extension modules without a build manifest ({found[0]}, ...)", True
        return False, "not compiled at install", False
    try:
        manifest = json.loads(_MANIFEST.read_text())
        recorded: dict[str, str] = manifest["sources"]
        compiler = str(manifest["compiler"])
        group = str(manifest["group"])
        modules = [str(m) for m in manifest["modules"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return False, f"unreadable build manifest {_MANIFEST.name}: {e}", True
    root = _HERE.parent
    changed = []
    for rel, digest in recorded.items():
        try:
            now = hashlib.sha256((root / rel).read_bytes()).hexdigest()
        except OSError:
            now = ""
        if now != digest:
            changed.append(rel)
    if changed:
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        return False, f"{changed[0]}{more} changed since compiled; reinstall to recompile", True
    for module in modules:  # a compiled module without its extension would mix the builds
        base = root.joinpath(*module.split("."))
        if not any(base.with_name(base.name + s).is_file() for s in _SUFFIXES):
            return False, f"the extension of {module} is missing; reinstall to recompile", True
    try:
        importlib.import_module(group + "__mypyc")
    except Exception as e:  # ImportError, or a broken library's own error
        return False, f"the compiled modules do not load ({type(e).__name__}: {e})", True
    return True, compiler, False


#: True when the compiled modules run.
COMPILED: bool
#: The compiler (when compiled) or why the source runs.
REASON: str
COMPILED, REASON, _warn = _decide()
if not COMPILED:
    sys.meta_path.insert(0, _SourceFirst())
    if _warn:
        print(f"referee: compiled engine refused, running the Python source: {REASON}", file=sys.stderr)


def status() -> str:
    """The start-up line: ``engine: compiled (mypyc 1.x)`` or ``engine: pure Python (why)``."""
    return f"engine: compiled ({REASON})" if COMPILED else f"engine: pure Python ({REASON})"
