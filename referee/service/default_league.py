"""The league file a new competition starts from when none is given (the
API's ``POST /api/competitions`` without ``league``, and what the admin
page's *New competition* form shows, editable): the game's rules as they
are, tables of four, and the service's three built-in house bots, so that
practice, the ladder and the final play from the first team on."""

from __future__ import annotations

from typing import Final

from ..bots.house import DEFAULT_HOUSE, HOUSE_PREFIX

__all__ = ["DEFAULT_LEAGUE", "league_or_default"]

_BOTS: Final = "\n".join(f'[[bots]]\nname = "{HOUSE_PREFIX}{b}"\nbuiltin = "{b}"\n' for b in DEFAULT_HOUSE)

#: The default league's text (docs/league-file.md says what each key does).
DEFAULT_LEAGUE: Final = f"""# A new competition's league file: edit it as you like (docs/league-file.md).
[tournament]
table_size = 4          # players at a table, 2 to 6
concurrency = 4         # games at once

[timeouts]
move_ms = 1000          # per /act reply

[ladder]
fill = "greedy"         # fewer players than seats: built-in greedy bots fill them (the final too)

# The service's built-in house bots: practice opponents from the start, and
# players of the ladder and the final (flagged as house in the grading CSV).
# builtin = "random", "greedy", "tactician" or "searcher"; remove the ones you do not want.
{_BOTS}"""


def league_or_default(text: str | None) -> str:
    """`text`, or the default league when it is missing or blank."""
    return text if text is not None and text.strip() else DEFAULT_LEAGUE
