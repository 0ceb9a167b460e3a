"""The built-in house bots: the sample bots the referee ships, in one table.

Everything that seats a house bot of its own takes it from here: a league
file's ``[[bots]] builtin = "greedy"``, a ladder's ``[ladder] fill``, the
final's empty seats, the admission games' opponent (``referee check`` and
the service) and ``referee play --against``. A built-in bot is the
referee's own code, not a team's: as a command it runs under the referee's
own interpreter (``python``), so the service's ``--allow-house-commands``
(the rule for a league file's own commands) does not apply to it; the
service may also play it as an image it built itself
(:func:`with_image`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from .factory import BotSpec

__all__ = [
    "BUILTIN_BOTS",
    "DEFAULT_HOUSE",
    "HOUSE_PREFIX",
    "builtin_command",
    "builtin_spec",
    "is_builtin",
    "with_image",
]

#: Each built-in house bot, by its short name: the module of ``sample_bots`` that runs it.
BUILTIN_BOTS: Final = {
    "random": "sample_bots.random",
    "greedy": "sample_bots.greedy",
    "tactician": "sample_bots.tactician",
    "searcher": "sample_bots.searcher",
}

#: The built-in house bots of every new competition's default league (the
#: service builds their images): the searcher is left out, being slow.
DEFAULT_HOUSE: Final = ("random", "greedy", "tactician")

#: A built-in house bot's usual name: ``house-greedy``.
HOUSE_PREFIX: Final = "house-"


def builtin_command(builtin: str) -> list[str]:
    """The command that runs built-in bot `builtin` (``python``: the referee's own interpreter)."""
    return ["python", "-m", BUILTIN_BOTS[builtin], "--port", "{port}", "--log-level", "WARNING"]


def builtin_spec(builtin: str, name: str | None = None) -> BotSpec:
    """Built-in bot `builtin` as a command bot named `name` (default ``house-BUILTIN``).
    Raises ``ValueError`` naming the built-in bots when there is no such one."""
    if builtin not in BUILTIN_BOTS:
        raise ValueError(f"{builtin!r} is not a built-in house bot: they are {', '.join(BUILTIN_BOTS)}")
    return BotSpec(name=name or f"{HOUSE_PREFIX}{builtin}", builtin=builtin, command=builtin_command(builtin))


def is_builtin(spec: BotSpec) -> bool:
    """Whether `spec` is a built-in house bot that runs the referee's own
    code: its ``builtin`` names one, and it runs as that one's command (no
    working folder or environment of a league file's) or as an image."""
    if spec.builtin not in BUILTIN_BOTS or spec.url is not None:
        return False
    if spec.image is not None:
        return spec.command is None
    return spec.command == builtin_command(spec.builtin) and spec.cwd is None and not spec.env


def with_image(spec: BotSpec, images: Mapping[str, str]) -> BotSpec:
    """`spec` as the image `images` holds for its built-in bot (by image id
    or tag), when it is a built-in one with an image; else `spec` as it is."""
    image = images.get(spec.builtin or "") if is_builtin(spec) else None
    if image is None:
        return spec
    return msgspec.structs.replace(spec, image=image, command=None)
