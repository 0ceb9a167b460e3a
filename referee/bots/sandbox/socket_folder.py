"""The socket folder's quota: the one place a container bot can write on the
host is bounded to ``limits.socket_folder`` bytes (1 MiB).

When the referee runs as root it is a tmpfs of that size (:func:`mount_tmpfs`,
owned by the bot's uid, mode 0700), so a bot cannot fill the host's disk
through it (ENOSPC for the bot); without root, a watchdog
(:class:`FolderWatch`) measures it twice a second and the bot stops a
container over the cap. Either way it is emptied (:func:`empty_folder`)
before each container starts. Blocking calls: the bot runs them in a thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

__all__ = [
    "CONTAINER_SOCKET_DIR",
    "FolderWatch",
    "empty_folder",
    "folder_usage",
    "mount_tmpfs",
    "release_orphan_folder",
    "unmount",
]

#: Where the socket folder is mounted inside the container.
CONTAINER_SOCKET_DIR: Final = "/run/bot"


_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MNT_DETACH = 2, 4, 8, 2
#: Files (inodes) the socket folder's tmpfs holds: the socket and a few more.
_FOLDER_INODES: Final = 64


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def mount_tmpfs(folder: Path, size: int, uid: int, gid: int) -> None:
    """Mount a tmpfs of `size` bytes on `folder`, owned by uid:gid, mode 0700
    (root, Linux); OSError when that cannot be done."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        raise OSError(errno.EPERM, "only root can mount a tmpfs")
    options = f"size={size},nr_inodes={_FOLDER_INODES},mode=0700,uid={uid},gid={gid}"
    if (
        _libc().mount(
            b"tmpfs", os.fsencode(folder), b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options.encode()
        )
        != 0
    ):
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def unmount(folder: Path) -> None:
    if _libc().umount2(os.fsencode(folder), _MNT_DETACH) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def release_orphan_folder(folder: Path) -> bool:
    """Unmount the tmpfs a referee that died left on `folder` (its bot's
    socket folder); whether one was there. Blocking; OSError when it cannot."""
    if not os.path.ismount(folder):
        return False
    unmount(folder)  # and what the tmpfs held goes with it
    return True


def empty_folder(folder: Path) -> None:
    """Remove what is in `folder` (never following a link); blocking."""
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def folder_usage(folder: Path, cap: int) -> int:
    """Bytes `folder` holds on disk (4 KiB at least per file), counted until
    past `cap`; blocking."""
    total = 0
    stack = [os.fspath(folder)]
    while stack and total <= cap:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += max(st.st_blocks * 512, 4096)
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    if total > cap:
                        break
        except OSError:
            continue
    return total


class FolderWatch(threading.Thread):
    """Without a tmpfs: measures the socket folder every `every_s` and calls
    `over(used)` once when it holds more than `cap` bytes."""

    def __init__(self, folder: Path, cap: int, over: Callable[[int], None], every_s: float = 0.5) -> None:
        super().__init__(name=f"watch-{folder.name}", daemon=True)
        self.folder, self.cap, self.over, self.every_s = folder, cap, over, every_s
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every_s):
            used = folder_usage(self.folder, self.cap)
            if used > self.cap:
                self.over(used)
                return
