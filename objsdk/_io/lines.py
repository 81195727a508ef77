"""Lines of an :class:`~objsdk.ObjectFile`: ``for line in f``, and botocore's
``StreamingBody.iter_chunks`` and ``iter_lines``.

``for line in f`` splits the buffered network chunk into lines in C, a window at a time,
and hands them out one by one while nothing else has read, sought or received since
(the tail's generation says so); anything else goes through the file's locked
``readline``. ``iter_chunks`` and ``iter_lines`` are plain reads and splits.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from objsdk._core.addressing import check_count
from objsdk._core.sizes import DEFAULT_CHUNK_SIZE

if TYPE_CHECKING:
    from objsdk._io.read_stats import ReadStats

__all__ = ["Lines"]

T = TypeVar("T")

# A line of a binary file: up to and including b"\n" (io.IOBase.readline).
_LINE = re.compile(rb"[^\n]*\n")
# The bytes iteration splits into lines at a time.
_SPLIT = 64 * 1024


class Lines:
    """The line iteration of :class:`~objsdk.ObjectFile`, which holds the state below."""

    if TYPE_CHECKING:
        bucket: str
        key: str
        stats: ReadStats
        _lock: threading.Lock
        _lines: list[bytes]
        _lines_gen: int
        _tail: bytes | memoryview
        _tail_off: int
        _tail_gen: int
        _pos: int

        def read(self, size: int | None = -1) -> bytes: ...

        def _guard(self, op: Callable[[Any], T], arg: Any) -> T: ...

        def _readline(self, size: int | None = -1) -> bytes: ...

    def __next__(self) -> bytes:
        # `for line in f` (iter(f) is f, as for any file, so a loop resumes after a
        # seek): the next complete line of the buffered chunk, split out with the rest
        # of them in C (readline's search and copy per line cost several times more).
        # A split is stale once anything else reads, seeks or receives (_tail_gen moves
        # on); then the locked path takes one line and splits the chunk it leaves.
        # acquire(False), not blocking=False: a keyword costs a third of a line's time.
        lines = self._lines
        if lines and self._lock.acquire(False):
            try:
                if self._lines_gen == self._tail_gen:
                    line = lines.pop()
                    n = len(line)
                    self._tail_off += n
                    self._pos += n
                    self.stats.bytes_delivered += n
                    return line
            finally:
                self._lock.release()
        line = self._guard(self._line_and_split, None)
        if not line:
            raise StopIteration
        return line

    def iter_chunks(self, chunk_size: int = DEFAULT_CHUNK_SIZE) -> Iterator[bytes]:
        """The rest of the object in pieces of ``chunk_size`` bytes (the last one
        shorter), as botocore's ``StreamingBody.iter_chunks``; each piece is one
        :meth:`read`, so the position is after the last piece yielded."""
        check_count("chunk_size", chunk_size, 1, self.bucket, self.key)
        while chunk := self.read(chunk_size):
            yield chunk

    def iter_lines(
        self, chunk_size: int = DEFAULT_CHUNK_SIZE, keepends: bool = False
    ) -> Iterator[bytes]:
        r"""The rest of the object's lines as botocore's ``StreamingBody.iter_lines``
        yields them: split at ``b"\n"``, ``b"\r"`` and ``b"\r\n"``
        (``bytes.splitlines``), without their ends unless ``keepends``, the last one
        whether or not it ends. Read ``chunk_size`` bytes at a time (botocore reads
        1 KiB) and split in C, so a line costs a fraction of ``for line in f``; the
        position is after the last chunk read, not the last line yielded."""
        pending = b""
        for chunk in self.iter_chunks(chunk_size):
            data = pending + chunk if pending else chunk
            lines = data.splitlines(keepends=True)
            # The last line may go on in the next chunk (a b"\r" may meet its b"\n").
            pending = lines.pop()
            if keepends:
                yield from lines
            else:
                yield from data[: len(data) - len(pending)].splitlines()
        if pending:
            yield from pending.splitlines(keepends)

    def _line_and_split(self, _: None) -> bytes:
        line = self._readline()
        # Split 64 KiB at a time: the list of a whole chunk of 2-byte lines would take
        # 17 times the chunk's memory.
        tail, off = self._tail, self._tail_off
        window = tail[off : off + _SPLIT]
        rest = window if isinstance(window, bytes) else bytes(window)
        # bytes.splitlines also ends lines at b"\r"; a file's lines end at b"\n" only.
        if b"\r" in rest:
            lines = _LINE.findall(rest)
        else:
            lines = rest.splitlines(keepends=True)
            if lines and not lines[-1].endswith(b"\n"):
                lines.pop()  # the start of a line the next chunk ends
        lines.reverse()
        self._lines, self._lines_gen = lines, self._tail_gen
        return line
