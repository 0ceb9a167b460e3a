"""JSON Schema of the protocol messages, generated from the Structs.

``python -m protocol.schema`` writes ``protocol/schema/<Name>.json`` (one file
per top-level message, plus ``Action`` and ``State``); ``python -m
protocol.schema --check`` writes nothing and exits 1, naming the stale files,
when the committed files differ from what the Structs generate.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from .messages import Action, ActReply, ActRequest, BotInfo, GameEnd, GameStart, State

__all__ = ["MESSAGES", "SCHEMA_DIR", "main", "rendered", "schemas", "stale", "write"]

#: Where the committed schema files live.
SCHEMA_DIR: Final = Path(__file__).resolve().parent / "schema"

#: Schema name -> type, in the order they are documented.
MESSAGES: Final[dict[str, Any]] = {
    "BotInfo": BotInfo,
    "GameStart": GameStart,
    "ActRequest": ActRequest,
    "ActReply": ActReply,
    "GameEnd": GameEnd,
    "Action": Action,
    "State": State,
}

_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"


def _patch(name: str, schema: dict[str, Any]) -> None:
    """Add what msgspec cannot express to a generated schema."""
    defs = schema.get("$defs", {})
    if "ActReply" in defs:
        # Exactly one of index / action (a null counts as absent).
        defs["ActReply"]["oneOf"] = [
            {"required": ["index"], "properties": {"index": {"type": "integer"}}},
            {"required": ["action"], "properties": {"action": {"type": "object"}}},
        ]


def schemas() -> dict[str, dict[str, Any]]:
    """Name -> JSON Schema (2020-12) of each message."""
    out: dict[str, dict[str, Any]] = {}
    for name, tp in MESSAGES.items():
        schema: dict[str, Any] = {"$schema": _DIALECT, "title": name}
        schema.update(msgspec.json.schema(tp))
        _patch(name, schema)
        out[name] = schema
    return out


def rendered() -> dict[str, str]:
    """File name -> file text: pretty-printed, sorted keys, trailing newline."""
    return {
        f"{name}.json": json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        for name, schema in schemas().items()
    }


def stale(directory: Path = SCHEMA_DIR) -> list[str]:
    """Names of the files in `directory` that are missing, out of date or not generated."""
    expected = rendered()
    bad = []
    for filename, text in expected.items():
        path = directory / filename
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            bad.append(filename)
    if directory.is_dir():
        bad.extend(p.name for p in directory.glob("*.json") if p.name not in expected)
    return sorted(bad)


def write(directory: Path = SCHEMA_DIR) -> list[str]:
    """Bring `directory` up to date; return the names of the files written or removed."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = stale(directory)
    expected = rendered()
    for filename in changed:
        path = directory / filename
        if filename in expected:
            path.write_text(expected[filename], encoding="utf-8")
        else:
            path.unlink()
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m protocol.schema",
        description="Generate the protocol's JSON Schema files into protocol/schema/.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 naming the files that are stale",
    )
    parser.add_argument(
        "--dir", type=Path, default=SCHEMA_DIR, help="schema directory (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    directory: Path = args.dir
    if args.check:
        bad = stale(directory)
        if bad:
            print(
                f"stale JSON Schema in {directory}: {', '.join(bad)}\nrun: python -m protocol.schema",
                file=sys.stderr,
            )
            return 1
        print(f"JSON Schema in {directory} is up to date")
        return 0
    changed = write(directory)
    print(f"updated in {directory}: {', '.join(changed)}" if changed else "nothing to update")
    return 0


if __name__ == "__main__":
    sys.exit(main())
