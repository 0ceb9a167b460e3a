"""What is mounted under a test's folders, and its removal: a bot's
socket-folder tmpfs (as root) or a second dockerd's exec root left there
makes pytest's clean-up of its base temporary folder fail (EBUSY), and the
next run with the same --basetemp stop at its first tmp_path."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from referee.bots.sandbox.socket_folder import unmount

__all__ = ["mounts_under", "unmount_under"]


def mounts_under(folder: Path) -> list[Path]:
    """Mount points at or under `folder` (Linux; deepest first)."""
    if not sys.platform.startswith("linux"):
        return []
    base = os.path.realpath(folder)
    found: list[Path] = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            target = line.split()[4].replace("\\040", " ")
            if target == base or target.startswith(base + os.sep):
                found.append(Path(target))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def unmount_under(folder: Path) -> list[Path]:
    """Detach (lazily, deepest first; root only) every mount under `folder`;
    the mount points found."""
    left = mounts_under(folder)
    if os.geteuid() == 0:
        for target in left:
            with contextlib.suppress(OSError):
                unmount(target)
    return left
