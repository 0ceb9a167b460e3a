"""Every number a league file holds and its range (docs/league-file.md), and
the attacks on each bound the league and service tests make."""

from __future__ import annotations

import typing

#: A league with no table of numbers: each case adds the one it attacks.
#: Bot 2 is an image bot, for its ``limits`` table.
BASE = """\
[[bots]]
name = "a"
url = "http://127.0.0.1:9001"

[[bots]]
name = "b"
image = "bot:1"
"""


HUGE = 9223372036854775807  # the attack: 2**63 - 1


GiB = 1024**3


class Range(typing.NamedTuple):
    low: float
    high: float
    whole: bool = True
    #: Both ends excluded.
    exclusive: bool = False


class Size(typing.NamedTuple):
    """A Docker size ("128m"), as written in the message: low and high."""

    low: str
    high: str


#: Every number a league file holds, and its range (docs/league-file.md).
#: ``bots.limits``: a ``[[bots]]`` table's ``limits``, as ``[containers]``.
CONTAINERS: dict[str, Range | Size] = {
    "memory": Size("6m", "64g"),
    "cpus": Range(0.01, 64, whole=False),
    "pids": Range(4, 4096),
    "tmpfs": Size("4k", "64g"),
    "ready_timeout_s": Range(0.1, 600, whole=False),
    "log_limit": Size("1k", "1g"),
    "socket_folder": Size("4k", "1g"),
}

FIELDS: dict[str, dict[str, Range | Size]] = {
    "tournament": {
        "seed": Range(0, HUGE),
        "table_size": Range(2, 6),
        "rounds": Range(1, 1000),
        "concurrency": Range(1, 256),
    },
    "ladder": {"concurrency": Range(1, 256), "catch_up": Range(0, 10_000)},
    "stop": {
        "confidence": Range(0.5, 1, whole=False, exclusive=True),
        "top": Range(1, 1000),
        "max_games": Range(2, 10_000_000),
        "extended_from": Range(2, 10_000_000),  # each of its budgets
    },
    "rules": {"turn_limit": Range(1, 100_000)},
    "rules.deck": {
        "copies": Range(1, 10),
        "clear": Range(0, 100),
        "clear_plus1": Range(0, 100),
        "clear_plus2": Range(0, 100),
    },
    "timeouts": {
        "move_ms": Range(1, 60_000),
        "bank_ms": Range(0, 3_600_000),
        "start_ms": Range(1, 300_000),
        "end_ms": Range(1, 60_000),
    },
    "faults": {"strikes": Range(1, 1000)},
    "ratings": {
        "mu": Range(-10_000, 10_000, whole=False),
        "sigma": Range(0.001, 10_000, whole=False),
        "beta": Range(0.001, 10_000, whole=False),
        "tau": Range(0, 10_000, whole=False),
        "draw_probability": Range(0, 0.99, whole=False),
    },
    "containers": CONTAINERS,
    "bots.limits": CONTAINERS,
}


def number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def range_text(bound: Range | Size) -> str:
    if isinstance(bound, Size):
        return f"a size from {bound.low} to {bound.high}"
    kind = "a whole number" if bound.whole else "a number"
    if bound.exclusive:
        return f"{kind} between {number(bound.low)} and {number(bound.high)} (both excluded)"
    return f"{kind} from {number(bound.low)} to {number(bound.high)}"


def attacks(bound: Range | Size) -> list[tuple[str, str]]:
    """(TOML value, how the message quotes it): below, above, huge, and a
    value of the wrong kind."""
    if isinstance(bound, Size):
        return [('"1"', "'1'"), ('"100000g"', "'100000g'"), (f'"{"9" * 400}g"', "'999"), ("128", "128")]
    low, high = bound.low, bound.high
    if bound.whole:
        below, above = int(low) - 1, int(high) + 1
        cases = [(str(below), str(below)), (str(above), str(above))]
        if high < HUGE:
            cases.append((str(HUGE), str(HUGE)))
        cases += [(f"{low + 0.5}", f"{low + 0.5}"), ("true", "true"), (f'"{int(low)}"', f"'{int(low)}'")]
        return cases
    below = low if bound.exclusive else low - (0.001 if low < 1 else 1)
    above = high if bound.exclusive else high + 1
    return [
        (repr(below), repr(below)),
        (repr(above), repr(above)),
        (str(HUGE), str(HUGE)),
        ("nan", "nan"),
        ("inf", "inf"),
        ("-inf", "-inf"),
    ]


def case_text(table: str, key: str, value: str) -> tuple[str, int, str]:
    """A league with `key` = `value` in `table`: (text, the key's line, the message's table)."""
    if table == "bots.limits":
        text = f"{BASE}\n[bots.limits]\n{key} = {value}\n"
        return text, len(text.splitlines()), "[[bots]] #2 limits"
    return f"[{table}]\n{key} = {value}\n\n{BASE}", 2, f"[{table}]"
