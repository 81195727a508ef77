"""SIGTERM and SIGHUP handled like Ctrl-C.

``timeout``, systemd, Kubernetes and Slurm stop a program with SIGTERM; a closed terminal
sends SIGHUP. Left at their defaults, both kill the process on the spot, with nothing
said: a multipart upload in flight stays on the server (and is billed), named nowhere.
Here each raises :class:`Terminated`, a ``KeyboardInterrupt``, in the main thread, so
every transfer stops exactly as after Ctrl-C: an upload of a file keeps its multipart
upload for the same command to resume, and the exit message names it and says how to
resume or discard it (``--no-resume``: aborted); a stream from standard input aborts its
upload; downloads keep their resumable temporary file and never leave a partial file
under the final name. The exit code is the shell's for a death by that signal, 128 +
its number (143, 129; 130 for SIGINT), so a caller sees the command was stopped.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["HANDLED", "Terminated", "exit_code_for_signal", "terminating_signals"]

HANDLED = tuple(
    s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)


def exit_code_for_signal(signum: int) -> int:
    """128 + the signal's number, as a shell reports a process that signal ended."""
    return 128 + int(signum)


class Terminated(KeyboardInterrupt):
    """The process was asked to stop by ``signum`` (SIGTERM or SIGHUP)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return exit_code_for_signal(self.signum)


@contextlib.contextmanager
def terminating_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread.

    A signal the parent set to be ignored stays ignored (``nohup`` ignores SIGHUP on
    purpose). Only the first signal raises: a second one during the clean-up it starts
    (stopping parts, aborting a stream's upload) is ignored, so the clean-up finishes;
    SIGKILL still ends it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal fired
        if fired:
            return
        fired = True
        raise Terminated(signum)

    saved: dict[int, object] = {}
    for signum in HANDLED:
        current = signal.getsignal(signum)
        if current is signal.SIG_IGN:
            continue
        saved[signum] = current
        signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, previous in saved.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]
