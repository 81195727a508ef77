"""What ``os.fork()`` does to the connections, locks and threads a process holds.

A forked child starts with copies of everything its parent held: the same sockets (one
connection, two processes reading it: each gets pieces of the other's answers, at full
length and with no error), locks that a parent thread may have held at the fork (held
for ever in the child), and thread pools whose threads do not exist in the child (a
task handed to one never runs). So every holder of such state makes it again in the
child before using it, and the parent's state is left exactly as it was:

* a socket inherited from the parent is closed in the child, never ``shutdown()``: a
  shutdown acts on the connection both processes share, a close only on this process's
  descriptor (socket(7));
* a lock is made anew, never acquired first;
* a thread pool is dropped, never joined, and made again on first use.

Two ways to hear of a fork: :func:`register` for state that is reset right after the
fork, in the child, while it still has one thread (a transport's pools and their
locks); :data:`generation`, for state that is reset lazily on its next use (a stream
in mid-body, a reader's read-ahead, a dataset's prefetch pool): its holder records the
generation when it makes the state and compares before using it (one integer
comparison).
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol

__all__ = ["Forkable", "generation", "register"]

#: How many forks lie between this process and the one that imported objsdk: 0 there,
#: one more in each forked child. Read it as ``forks.generation`` (the module attribute,
#: never a copy taken at import).
generation = 0


class Forkable(Protocol):
    """State reset in a forked child right after the fork (see :func:`register`)."""

    def after_fork_in_child(self) -> None:
        """Runs in the child, with one thread: drop what the parent holds, without
        touching the parent's sockets beyond closing this process's descriptors."""
        ...


_registered: weakref.WeakSet[Forkable] = weakref.WeakSet()


def register(holder: Forkable) -> None:
    """Call ``holder.after_fork_in_child()`` in every forked child while it lives (held
    weakly)."""
    _registered.add(holder)


def _in_child() -> None:
    global generation
    generation += 1
    for holder in list(_registered):
        holder.after_fork_in_child()


if hasattr(os, "register_at_fork"):  # POSIX: every fork that can copy a socket
    os.register_at_fork(after_in_child=_in_child)
