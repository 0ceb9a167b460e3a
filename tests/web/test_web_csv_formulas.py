"""Issue 32 item 7, the service's side: the tokens CSV an admin downloads holds
no formula a spreadsheet would run, whatever the teams are called.

A team name may not hold a control character, a '/' or leading spaces (the
form refuses those), so a tab or CR in front cannot come this way; the four
other formula starts can, and each comes back as text (OWASP: a single
quote in front)."""

from __future__ import annotations

import csv
import io
import re
from typing import Any
from urllib.parse import unquote

from tests.support.api import signed_in
from tests.support.web import league_text

Service = Any
#: What starts a formula in a spreadsheet (OWASP's list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
NAMES = ('=HYPERLINK("x","y")', "+1+1", "-2+3", "@SUM(A1)")


async def test_the_tokens_csv_holds_team_names_as_text_never_as_formulas(
    service: Service, admin_token: str
) -> None:
    client = await service()
    csrf = await signed_in(client, admin_token)
    await client.post("/admin/competitions", data={"csrf": csrf, "name": "class", "league": league_text()})
    r = await client.post("/admin/c/1/teams", data={"csrf": csrf, "names": "\n".join(NAMES)})
    page = await r.text()
    assert r.status == 200, page
    tokens = re.findall(r"<code>([A-Za-z0-9_-]{43})</code>", page)
    href = re.search(r'href="(data:text/csv;charset=utf-8,[^"]+)"', page).group(1)  # type: ignore[union-attr]
    table = list(csv.reader(io.StringIO(unquote(href.split(",", 1)[1]), newline="")))
    assert table[0] == ["team_id", "team", "token"] and len(table) == 1 + len(NAMES)
    formulas = [
        (row, column, cell)
        for row, cells in enumerate(table)
        for column, cell in zip(table[0], cells)
        if cell.startswith(FORMULA_STARTS) and column != "token"
    ]
    assert formulas == [], f"cells a spreadsheet would run: {formulas}"
    assert [row[1] for row in table[1:]] == ["'" + name for name in NAMES]  # the names, as text
    assert [row[0] for row in table[1:]] == ["1", "2", "3", "4"]
    # a token is written as it is (the program's, [A-Za-z0-9_-] only: no
    # formula can be spelled with those), even one starting with '-'
    assert [row[2] for row in table[1:]] == tokens
