"""Long lists on the pages, a page at a time, newest first (``?page=N``).

A list of a team's submissions, a bot's games or a competition's runs grows
all term: a page shows :data:`PAGE_SIZE` of them, the newest first, with
links to the newer and older pages (the ``pager`` macro of
``macros.html``). A page past the last shows the last; ``?page=`` that is
not a whole number from 1 is refused (400) saying so.
"""

from __future__ import annotations

import msgspec
from aiohttp import web

from .errors import fail

#: How many rows a page shows.
PAGE_SIZE = 20


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


def page_of(number: int, total: int, size: int = PAGE_SIZE) -> Page:
    """Page `number` of a list of `total` rows (a page past the last: the last)."""
    page = Page(number=1, size=size, total=total)
    page.number = min(number, page.pages)
    return page
