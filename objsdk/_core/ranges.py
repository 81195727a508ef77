"""HTTP byte ranges (RFC 9110 §14): building ``Range``, and reading ``Content-Range``
and ``Content-Length``, which say what an answer's body holds.

Pure functions: the reader and the client decide what to do; this module only says
what a header means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from objsdk import errors

__all__ = [
    "ContentRange",
    "format_range",
    "parse_content_length",
    "parse_content_range",
    "parse_unsatisfied_range",
]

# Digits are ASCII digits (RFC 5234 DIGIT): a header decoded as Latin-1 may hold "²",
# which str.isdigit() takes and int() refuses. And at most 19 of them, a 64-bit count:
# RFC 9110 §8.6 has recipients "anticipate potentially large decimal numerals and
# prevent parsing errors due to integer conversion overflows"; int() refuses more than
# 4300 digits (sys.get_int_max_str_digits) with a ValueError of its own.
_N = "[0-9]{1,19}"
_CONTENT_RANGE_RE = re.compile(rf"^\s*bytes\s+({_N})-({_N})/({_N}|\*)\s*$", re.IGNORECASE)
_UNSATISFIED_RANGE_RE = re.compile(rf"^\s*bytes\s+\*/({_N})\s*$", re.IGNORECASE)
_DIGITS_RE = re.compile(_N)


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


def parse_unsatisfied_range(value: str | None) -> int | None:
    """The object's size a 416's ``Content-Range: bytes */<size>`` states (RFC 9110
    §14.4); None if there is none (MinIO sends none). Raises :class:`ValueError` if the
    header is there but says something else: no size can be read from it."""
    if value is None:
        return None
    m = _UNSATISFIED_RANGE_RE.match(value)
    if not m:
        raise ValueError(f"416 with unusable Content-Range {value!r}")
    return int(m.group(1))


def parse_content_length(value: str | None) -> int | None:
    """An answer's ``Content-Length``; None if absent. Raises :class:`ValueError` unless
    it is digits, at most 19 (RFC 9110 §8.6): ``int()`` would take ``"+5"``, ``" 5"`` or
    ``"5_0"``, and urllib3 reads a negative one as no length at all."""
    if value is None:
        return None
    if not _DIGITS_RE.fullmatch(value):
        raise ValueError(f"Content-Length {value!r} is not a byte count")
    return int(value)
