"""The SDK as a wheel of its own (issue 35): ``referee-sdk``, what a bot needs
of this repository and nothing else, served by the service at ``/sdk/``.

It holds the protocol (``protocol/``, with its JSON Schemas) and the SDK
(``sample_bots/sdk.py``, with ``sample_bots/__init__.py``), under the names a
bot imports in the service's build image, so one bot runs the same in both
places: ``from protocol import ...`` and ``from sample_bots.sdk import
run_bot``. It depends on msgspec alone (the SDK serves HTTP with the standard
library). The wheel is written here, from the files this referee runs (a
checkout's, or an installed wheel's): no build tool, no network, the same
bytes for the same files (fixed zip dates), so it is made at the service's
first request for it in whatever install.

``python -m referee.web.sdk_wheel DIR`` writes it into DIR.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import os
import sys
import zipfile
from pathlib import Path
from typing import Final

import protocol
from referee import __version__

__all__ = ["DIST", "build", "files", "wheel_name", "write"]

#: The distribution's name (``pip install referee-sdk``).
DIST: Final = "referee-sdk"
#: What the SDK needs beyond the standard library.
REQUIRES: Final = ("msgspec>=0.18",)
#: The zip date of every member (zip's earliest): the same files make the same bytes.
_DATE: Final = (1980, 1, 1, 0, 0, 0)


def wheel_name(version: str = __version__) -> str:
    """``referee_sdk-<version>-py3-none-any.whl``: the referee's own version."""
    return f"{DIST.replace('-', '_')}-{version}-py3-none-any.whl"


def files() -> dict[str, Path]:
    """The wheel's modules by their path in it: protocol/ (Python files and
    schemas) and the SDK, from where this referee imports them."""
    out: dict[str, Path] = {}
    proto = Path(protocol.__file__).parent
    for p in sorted(proto.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".json"):
            out[f"protocol/{p.relative_to(proto).as_posix()}"] = p
    spec = importlib.util.find_spec("sample_bots")
    if spec is None or spec.origin is None:
        raise RuntimeError("the sample_bots package (the SDK) is not installed with this referee")
    bots = Path(spec.origin).parent
    for name in ("__init__.py", "sdk.py"):
        out[f"sample_bots/{name}"] = bots / name
    return out


def _metadata(version: str) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {DIST}",
        f"Version: {version}",
        "Summary: The 3UP 3DOWN bot protocol and SDK (protocol, sample_bots.sdk): "
        "a bot in one decide function",
        "Requires-Python: >=3.11",
        "License: MIT",
        *(f"Requires-Dist: {r}" for r in REQUIRES),
    ]
    return "\n".join(lines) + "\n"


def build(version: str = __version__) -> bytes:
    """The wheel's bytes."""
    info = f"{DIST.replace('-', '_')}-{version}.dist-info"
    members: list[tuple[str, bytes]] = [(name, path.read_bytes()) for name, path in files().items()]
    members.append((f"{info}/METADATA", _metadata(version).encode()))
    wheel = "Wheel-Version: 1.0\nGenerator: referee\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    members.append((f"{info}/WHEEL", wheel.encode()))
    record = []
    for name, data in members:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    members.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            zi = zipfile.ZipInfo(name, _DATE)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return buf.getvalue()


def write(folder: Path) -> Path:
    """Build the wheel into `folder` (made if missing; an older file of the
    same name replaced at once, never seen half-written); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / wheel_name()
    tmp = folder / f".{path.name}.{os.getpid()}.tmp"
    tmp.write_bytes(build())
    os.replace(tmp, path)
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m referee.web.sdk_wheel DIR  (writes the referee-sdk wheel into DIR)")
    print(write(Path(sys.argv[1])))
