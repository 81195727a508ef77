"""HTTP byte ranges (RFC 9110 §14): building ``Range`` and checking ``Content-Range``.

Pure functions: the reader and the client decide what to do; this module only says
what a header means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from objsdk import errors

__all__ = ["ContentRange", "format_range", "parse_content_range"]

_CONTENT_RANGE_RE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.IGNORECASE)


def format_range(start: int, end: int | None = None) -> str:
    """``Range`` value for bytes ``start`` .. ``end`` inclusive (open-ended when None)."""
    if start < 0 or (end is not None and end < start):
        raise errors.InvalidArgument(f"invalid byte range {start}-{end}")
    return f"bytes={start}-" if end is None else f"bytes={start}-{end}"


@dataclass(frozen=True)
class ContentRange:
    """A parsed ``Content-Range: bytes first-last/total`` (``total`` None for ``*``)."""

    first: int
    last: int
    total: int | None

    @property
    def length(self) -> int:
        return self.last - self.first + 1


def parse_content_range(value: str | None) -> ContentRange | None:
    """Parse a 206 response's ``Content-Range``; None if absent or malformed.

    Unsatisfied-range forms (``bytes */1234``) and inverted ranges count as malformed:
    a 206 carrying one cannot be trusted to hold the bytes we asked for.
    """
    if not value:
        return None
    m = _CONTENT_RANGE_RE.match(value)
    if not m:
        return None
    first, last = int(m.group(1)), int(m.group(2))
    total = None if m.group(3) == "*" else int(m.group(3))
    if last < first or (total is not None and last >= total):
        return None
    return ContentRange(first, last, total)
