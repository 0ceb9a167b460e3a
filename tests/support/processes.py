"""Child processes in the tests: wait on what a child prints, never on the clock.

A bot started as a process says when it is up: the SDK logs ``NAME VERSION
listening on WHERE`` (on stderr, or on stdout when ``BOT_OUTPUT_MARKS`` joins
the two), the Node.js bots print ``NAME listening on WHERE``, a zoo bot
``zoo bot KIND listening on URL``. A test reads the child's output line by line
until that line (:meth:`Output.wait_for`), rather than knocking at its port
until a deadline; and reads what a child printed once the child has exited
(:meth:`Output.text` after ``proc.wait()``), rather than after a pause.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Final

#: What every bot of this project prints once it listens.
LISTENING: Final = "listening on"
#: The bound on a wait for a child: only a broken test reaches it.
BROKEN_S: Final = 60.0


class Output:
    """One output stream of a child (a pipe), read line by line by a thread of
    its own until the child closes it (by exiting): every line is kept, and
    copied to `copy` as it comes if given. Reading it to the end also keeps a
    chatty child from blocking on a full pipe. A child's two streams read
    apart (:meth:`both`) share one condition, so that a test can wait for a
    line on either (:func:`first_line`)."""

    def __init__(
        self,
        stream: IO[bytes] | None,
        copy: Path | None = None,
        what: str = "the child",
        changed: threading.Condition | None = None,
    ) -> None:
        assert stream is not None, "start the child with this stream as subprocess.PIPE"
        self.what = what
        self._lines: list[str] = []
        self._closed = False
        self._changed = changed if changed is not None else threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream, copy), daemon=True)
        self._thread.start()

    @classmethod
    def both(cls, proc: subprocess.Popen[bytes], what: str = "the child") -> tuple[Output, Output]:
        """`proc`'s stdout and stderr (both started as pipes), each read on its own."""
        changed = threading.Condition()
        return (
            cls(proc.stdout, what=f"{what}'s stdout", changed=changed),
            cls(proc.stderr, what=f"{what}'s stderr", changed=changed),
        )

    def _read(self, stream: IO[bytes], copy: Path | None) -> None:
        try:
            with contextlib.ExitStack() as stack:
                out = stack.enter_context(copy.open("ab")) if copy is not None else None
                for raw in stream:
                    if out is not None:
                        out.write(raw)
                        out.flush()
                    with self._changed:
                        self._lines.append(raw.decode("utf-8", "replace"))
                        self._changed.notify_all()
        finally:
            stream.close()
            with self._changed:
                self._closed = True
                self._changed.notify_all()

    def _find(self, text: str) -> str | None:
        return next((line for line in self._lines if text in line), None)

    def wait_for(self, text: str, within_s: float = BROKEN_S) -> str:
        """The first line holding `text`, as soon as the child printed it.
        Fails, with all it printed, if the child closed the stream (exited)
        without printing it, or (a broken test) after `within_s`."""
        return first_line(text, self, within_s=within_s)[1]

    def text(self, within_s: float = BROKEN_S) -> str:
        """All the child printed, once it closed the stream: call it after the
        child exited (``proc.wait()``)."""
        self._thread.join(within_s)
        assert not self._thread.is_alive(), f"{self.what} kept its output open {within_s:g} s after"
        return "".join(self._lines)


def first_line(text: str, *outputs: Output, within_s: float = BROKEN_S) -> tuple[Output, str]:
    """Which of `outputs` (one child's streams, :meth:`Output.both`) printed
    a line holding `text` first, and the line, as soon as one did. Fails,
    with all they printed, once all were closed (the child exited) without
    it, or (a broken test) after `within_s`."""
    changed = outputs[0]._changed
    assert all(o._changed is changed for o in outputs), "wait on the streams of one child (Output.both)"

    def found() -> tuple[Output, str] | None:
        return next(((o, line) for o in outputs if (line := o._find(text)) is not None), None)

    with changed:
        changed.wait_for(lambda: found() is not None or all(o._closed for o in outputs), within_s)
        hit = found()
        closed = all(o._closed for o in outputs)
        printed = "".join(f"--- {o.what}:\n{''.join(o._lines)[-3000:]}" for o in outputs)
    if hit is None:
        why = "ended without printing" if closed else f"printed within {within_s:g} s no"
        raise AssertionError(
            f"{' and '.join(o.what for o in outputs)} {why} a line holding {text!r}:\n{printed}"
        )
    return hit


def stop(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> int:
    """SIGTERM, then SIGKILL after `grace_s`; the exit code, once reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


@contextlib.contextmanager
def serving(
    argv: Sequence[str],
    *,
    ready: str = LISTENING,
    copy: Path | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    what: str | None = None,
) -> Iterator[tuple[subprocess.Popen[bytes], Output]]:
    """Run `argv` (stdout and stderr one pipe, copied to `copy` if given)
    until the block ends, once it printed a line holding `ready`; stop it
    then (:func:`stop`), its output read to the end."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = Output(proc.stdout, copy, what or " ".join(argv))
    try:
        output.wait_for(ready)
        yield proc, output
    finally:
        stop(proc)
        output.text()
