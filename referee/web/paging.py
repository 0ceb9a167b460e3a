"""Long lists on the pages, a page at a time, newest first (``?page=N``),
and a bot's games filtered (``?opponent=NAME&result=won``).

A list of a team's submissions, a bot's games or a competition's runs grows
all term: a page shows :data:`PAGE_SIZE` of them, the newest first, with
links to the newer and older pages (the ``pager`` macro of
``macros.html``). A page past the last shows the last; ``?page=`` that is
not a whole number from 1 is refused (400) saying so.
"""

from __future__ import annotations

from typing import cast

import msgspec
from aiohttp import web

from ..tournament.results import GameFilter, Result
from .errors import fail

#: How many rows a page shows.
PAGE_SIZE = 20

#: The head-to-head rows a bot page and a team's page show (the worst
#: first): a term's ladder bot meets hundreds of opponents; ``?h2h=all`` on
#: the bot page shows every one (its JSON always has every one).
H2H_SHOWN = 20


class Page(msgspec.Struct, kw_only=True):
    #: 1 for the newest rows.
    number: int
    size: int
    #: How many rows the whole list has.
    total: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))

    @property
    def offset(self) -> int:
        """How many of the newest rows the earlier pages show."""
        return (self.number - 1) * self.size

    @property
    def newer(self) -> int | None:
        return self.number - 1 if self.number > 1 else None

    @property
    def older(self) -> int | None:
        return self.number + 1 if self.number < self.pages else None


def query_page(request: web.Request) -> int:
    """The ``?page=N`` asked for (1 when absent)."""
    text = request.query.get("page", "1")
    if not text.isdigit() or len(text) > 9 or int(text) < 1:
        fail(400, f"?page={text[:20]!r} is not a page: give a whole number from 1 (1 is the newest)")
    return int(text)


#: The API's pages (``?page=N&per_page=M``): rows a page by default, and at most.
API_PER_PAGE = 100
API_PER_PAGE_MAX = 1000


def query_api_page(request: web.Request) -> tuple[int, int] | None:
    """The API's ``?page=N`` (1 is the first rows) and ``?per_page=M`` (1 to
    :data:`API_PER_PAGE_MAX`, :data:`API_PER_PAGE` when absent); None when
    neither is given (the whole list, as before pages). Refused (400) saying
    what to give otherwise."""
    if "page" not in request.query and "per_page" not in request.query:
        return None
    number = query_page(request)
    text = request.query.get("per_page", str(API_PER_PAGE))
    if not text.isdigit() or len(text) > 9 or not 1 <= int(text) <= API_PER_PAGE_MAX:
        fail(
            400,
            f"?per_page={text[:20]!r} is not a page size: give a whole number from 1 to {API_PER_PAGE_MAX}",
        )
    return number, int(text)


def page_links(request: web.Request, number: int, size: int, total: int) -> dict[str, str]:
    """The headers of an API page: ``X-Total-Count`` (the rows in all) and
    ``Link`` to the first, previous, next and last pages (RFC 8288, as
    GitHub's API), the request's other parameters kept."""
    last = max(1, -(-total // size))
    links = {
        "first": 1,
        "prev": number - 1 if number > 1 else None,
        "next": number + 1 if number < last else None,
    }
    links["last"] = last
    parts = []
    for rel, n in links.items():
        if n is not None:
            url = request.rel_url.update_query(page=str(n), per_page=str(size))
            parts.append(f'<{url}>; rel="{rel}"')
    return {"X-Total-Count": str(total), "Link": ", ".join(parts)}


def page_of(number: int, total: int, size: int = PAGE_SIZE) -> Page:
    """Page `number` of a list of `total` rows (a page past the last: the last)."""
    page = Page(number=1, size=size, total=total)
    page.number = min(number, page.pages)
    return page


#: The longest ``?opponent=`` taken (a bot's name is far shorter).
OPPONENT_MAX = 200


def query_games_filter(request: web.Request) -> tuple[GameFilter, dict[str, str]]:
    """The filter of a bot's games asked for (``?opponent=NAME``: the games
    played with that bot; ``?result=``: ``won``, ``lost``, ``drawn`` or a
    place, see :class:`~referee.tournament.results.GameFilter`), and those
    parameters as given (for the pager's links, so that paging keeps them).
    An empty parameter is no filter; anything else unknown is refused (400)."""
    opponent = request.query.get("opponent", "").strip() or None
    text = request.query.get("result", "").strip()
    if opponent is not None and len(opponent) > OPPONENT_MAX:
        fail(400, f"?opponent= is too long: a bot's name has at most {OPPONENT_MAX} characters")
    result: Result | None = None
    if text in ("won", "lost", "drawn"):
        result = cast(Result, text)
    elif text.isdigit() and len(text) <= 2 and int(text) >= 1:
        result = int(text)
    elif text:
        fail(
            400,
            f"?result={text[:20]!r} is not a result: give won, lost, drawn (with ?opponent=) "
            "or a place (1 is first)",
        )
    if result == "drawn" and opponent is None:
        fail(400, "?result=drawn needs ?opponent=NAME: a draw is the same place as that opponent's")
    kept = {k: v for k, v in (("opponent", opponent), ("result", text)) if v}
    return GameFilter(opponent=opponent, result=result), kept
