"""The exceptions a failure holds, up to the exception its caller was handling.

Python chains an exception raised inside an ``except`` block to the exception that
block handles (``__context__``, PEP 3134). A request objsdk makes while its caller is
handling an exception of its own (``get_object`` called in the caller's ``except``
block) fails with the caller's exception at the end of its chain. What objsdk reads in
a failure's chain (the innermost cause it names, the kind of failure a retry depends
on) and what it clears there (the locals of finished frames) concern the failure and
what it came through inside objsdk and the HTTP libraries below it: the caller's
exception, and all it chains to, is neither read nor touched.

The caller's exception is told by where its traceback starts: in the frame that caught
it, which is still running (the caller's ``except`` block is calling objsdk). An
exception raised and caught inside objsdk's call has finished frames only, once it is
chained to the failure.
"""

from __future__ import annotations

import sys
from types import FrameType

__all__ = ["links", "running_frames"]


def running_frames() -> frozenset[int]:
    """The ids of the frames running in this thread: the caller's and those above it."""
    running: set[int] = set()
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        running.add(id(frame))
        frame = frame.f_back
    return frozenset(running)


def links(e: BaseException, running: frozenset[int]) -> list[BaseException]:
    """What ``e`` was raised from (``__cause__``) and while handling (``__context__``),
    without an exception a frame of ``running`` (:func:`running_frames`) caught and
    handles: the one the caller was handling when it called objsdk."""
    return [x for x in (e.__cause__, e.__context__) if x is not None and not _handled(x, running)]


def _handled(e: BaseException, running: frozenset[int]) -> bool:
    """Whether ``e`` was caught in a frame still running: its traceback starts there."""
    return e.__traceback__ is not None and id(e.__traceback__.tb_frame) in running
