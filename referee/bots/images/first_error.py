"""The first error in a build log or a bot's output, as one line that points
at the line (issue 35, item 4).

A syntax error's refusal said "the build log shows the error", with the
``SyntaxError`` forty lines into the log; a bot importing numpy was told to
"run the bot on your machine". :func:`first_error` finds the first error of
Python (``compileall``'s report, a traceback) or Node (``node --check``, an
uncaught error) in a text: the file (relative to the bot's folder), the line
and the message; for a module the bot image does not have, its name, with
what a bot may import and how to bring the rest (:func:`missing_module_fix`).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .baseimage import PACKAGES

__all__ = ["SourceError", "first_error", "missing_module_fix"]

#: Where a source bot's files are in its image (source_build.BOT_DIR), left out of the paths shown.
_BOT_DIRS = ("/app/bot/",)

#: ``File "/app/bot/bot.py", line 12`` (a traceback's frame, compileall's report).
_PY_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
#: ``SyntaxError: expected ':'``, ``ModuleNotFoundError: No module named 'numpy'``.
_PY_ERROR = re.compile(r"^(?P<kind>(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit|Interrupt)): ?(?P<msg>.*)$")
#: ``/app/bot/bot.js:5`` (node's first line for a syntax error, and an uncaught one's).
_JS_FRAME = re.compile(r"^(?P<file>/\S+\.(?:js|mjs|cjs)):(?P<line>\d+)$")
#: ``    at Object.<anonymous> (/app/bot/bot.js:3:1)``.
_JS_AT = re.compile(
    r"\((?P<file>/[^():]+\.(?:js|mjs|cjs)):(?P<line>\d+):\d+\)"
    r"|at (?P<file2>/[^():\s]+\.(?:js|mjs|cjs)):(?P<line2>\d+):\d+"
)
_PY_MISSING = re.compile(r"No module named '(?P<module>[^']+)'")
_JS_MISSING = re.compile(r"Cannot find module '(?P<module>[^']+)'")


class SourceError(NamedTuple):
    """An error at a line of the bot's own files."""

    #: The file, relative to the bot's folder ("" when no frame named one).
    file: str
    #: Its line (0 when unknown).
    line: int
    #: The error as printed: ``SyntaxError: expected ':'``.
    message: str
    #: The top-level module the bot imports and the image lacks, if that is the error.
    module: str | None = None
    #: "python" or "node".
    language: str = "python"

    def __str__(self) -> str:
        where = f"{self.file}, line {self.line}: " if self.file and self.line else ""
        return f"{where}{self.message}"


def _shown(path: str) -> str:
    for root in _BOT_DIRS:
        if path.startswith(root):
            return path[len(root) :]
    return path


def first_error(text: str) -> SourceError | None:
    """The first error in `text` (a build log, a bot's stderr), with the file
    and line its nearest frame names; None when there is no error in it."""
    lines = text.splitlines()
    for i, raw in enumerate(lines):
        line = raw.strip()
        if _PY_ERROR.match(line) is None:
            continue
        if _is_node(lines, i):
            return _node(lines, i, line)
        return _python(lines, i, line)
    return None


def _is_node(lines: list[str], at: int) -> bool:
    """Whether the error at `at` is Node's: a ``file.js:N`` frame above it or ``at …js`` frames below."""
    for raw in reversed(lines[max(0, at - 8) : at]):
        if _PY_FRAME.match(raw):
            return False
        if _JS_FRAME.match(raw.strip()):
            return True
    return any(_JS_AT.search(raw) for raw in lines[at + 1 : at + 20])


def _python(lines: list[str], at: int, message: str) -> SourceError:
    file, number = "", 0
    for raw in reversed(lines[:at]):
        frame = _PY_FRAME.match(raw)
        if frame is not None:
            file, number = _shown(frame.group("file")), int(frame.group("line"))
            break
        if raw.startswith("Traceback") or raw.startswith("*** Error compiling"):
            break
    importing = message.startswith(("ModuleNotFoundError", "ImportError"))
    missing = _PY_MISSING.search(message) if importing else None
    module = missing.group("module").split(".")[0] if missing is not None else None
    return SourceError(file, number, message, module, "python")


def _node(lines: list[str], at: int, message: str) -> SourceError:
    file, number = "", 0
    for raw in reversed(lines[:at]):  # node --check: "/app/bot/bot.js:5" above the error
        frame = _JS_FRAME.match(raw.strip())
        if frame is not None:
            file, number = _shown(frame.group("file")), int(frame.group("line"))
            break
    if not file:  # an uncaught error: its first frame below it
        for raw in lines[at + 1 : at + 20]:
            m = _JS_AT.search(raw)
            if m is not None:
                file = _shown(m.group("file") or m.group("file2"))
                number = int(m.group("line") or m.group("line2"))
                break
    missing = _JS_MISSING.search(message)
    named = missing.group("module") if missing is not None else None
    module = named if named is not None and not named.startswith((".", "/")) else None
    return SourceError(file, number, message, module, "node")


def missing_module_fix(error: SourceError) -> str:
    """What to do about a module the bot image does not have."""
    assert error.module is not None
    if error.language == "node":
        return (
            f"the image has no {error.module!r}: a Node bot gets Node's built-in modules only; bring "
            "pure-JavaScript dependencies in node_modules next to your bot (npm install --omit=dev "
            "before you zip it): see 'What a Python bot may import' in the student's guide (docs/student.md)"
        )
    allowed = ", ".join(PACKAGES)
    return (
        f"the image has no {error.module!r}: a Python bot may import the standard library, {allowed} "
        "(with their dependencies), the SDK and the protocol (sample_bots.sdk, protocol, referee.game); "
        f"nothing is installed, so vendor a pure-Python {error.module} by putting its folder next to "
        "your bot.py in the archive, or do without it: see 'What a Python bot may import' in the "
        "student's guide (docs/student.md)"
    )
