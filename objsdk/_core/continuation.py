"""Deciding whether a (re)opened GET continues the same byte stream (pure).

When a read resumes at offset ``want`` it sends ``Range: bytes=<want>-`` and
``If-Match: <etag>``. The answer is trusted only if it provably carries the same
object's bytes from ``want`` on (RFC 9110 §13.1.1 If-Match, §14.4 Content-Range,
§15.3.7 206). Everything here is a function of status and headers, so it is tested
without a network; :mod:`objsdk._io.objectfile` acts on the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from objsdk._core.ranges import (
    parse_content_length,
    parse_content_range,
    parse_unsatisfied_range,
)

__all__ = [
    "BadResponse",
    "Changed",
    "Continuation",
    "Malformed",
    "SizeUnknown",
    "check_response",
    "is_strong_etag",
    "ranged_body",
    "same_etag",
]


def is_strong_etag(etag: str | None) -> bool:
    """Can ``etag`` pin a version with ``If-Match``? Only a strong one: If-Match uses the
    strong comparison, so a weak ETag (``W/"..."``) never matches (RFC 9110 §13.1.1)."""
    return bool(etag) and not etag.startswith("W/")  # type: ignore[union-attr]


def same_etag(a: str, b: str) -> bool:
    """The weak comparison of two ETags (RFC 9110 §8.8.3.2): opaque tags equal."""
    return a.removeprefix("W/") == b.removeprefix("W/")


@dataclass(frozen=True)
class Continuation:
    """The response continues the stream.

    ``start`` is the object offset of the body's first byte; ``discard`` bytes must be
    dropped from the body to reach ``want`` (a server that ignored Range and sent 200);
    ``size`` is the object's total size; ``eof`` means ``want`` is at or past the end
    and there is nothing to read.
    """

    start: int
    size: int | None
    etag: str | None
    discard: int = 0
    eof: bool = False
    last_modified: str | None = None


class Changed(Exception):
    """The response belongs to another version of the object (or none)."""


class SizeUnknown(Exception):
    """A 416 that does not say how big the object is (MinIO sends no Content-Range):
    the caller must learn the size (HEAD) to tell end-of-object from an error."""


class BadResponse(Exception):
    """The response is malformed or does not start where it must; worth another try."""


class Malformed(BadResponse):
    """The answer breaks HTTP's rules for saying what its body holds: a
    ``Content-Length`` or ``Content-Range`` that is not digits where digits belong, or a
    206 without a usable ``Content-Range`` (RFC 9110 §8.6, §14.4, §15.3.7). Not worth
    another try: the server that said it once says it again."""


def _content_length(headers: Mapping[str, str]) -> int | None:
    try:
        return parse_content_length(headers.get("Content-Length"))
    except ValueError as e:
        raise Malformed(str(e)) from None


def check_response(
    status: int,
    headers: Mapping[str, str],
    *,
    want: int,
    etag: str | None,
    size: int | None,
    end: int | None = None,
    last_modified: str | None = None,
) -> Continuation:
    """Validate a GET answer for offset ``want`` of the object pinned to ``etag``/``size``.

    ``end`` (exclusive) is the end of the requested window when the request asked for
    ``bytes=<want>-<end - 1>``; the 206 must then stop there (or at the object's end).
    ``last_modified`` pins the version when no strong ETag can (it was sent as
    ``If-Unmodified-Since``): a different ``Last-Modified`` is another version.

    Raises :class:`Changed` if it belongs to another version, :class:`BadResponse` if it
    cannot be trusted to hold the right bytes (:class:`Malformed` if it breaks HTTP's
    rules doing so).
    """
    if status == 412:
        if is_strong_etag(etag):
            raise Changed(f"If-Match failed: the object's ETag is no longer {etag}")
        raise Changed(f"If-Unmodified-Since failed: modified since {last_modified}")
    got_etag = headers.get("ETag")
    if etag is not None and got_etag is not None and not same_etag(got_etag, etag):
        # Servers that ignore If-Match still reveal the change through the ETag.
        raise Changed(f"ETag changed from {etag} to {got_etag}")
    got_date = headers.get("Last-Modified")
    if last_modified is not None and got_date is not None and got_date != last_modified:
        raise Changed(f"Last-Modified changed from {last_modified} to {got_date}")
    date = got_date or last_modified

    if status == 416:
        # "bytes */<size>": the range starts at or past the end (RFC 9110 §15.5.17).
        try:
            total = parse_unsatisfied_range(headers.get("Content-Range"))
        except ValueError as e:
            raise Malformed(str(e)) from None
        if total is None and size is not None and want < size:
            # Nothing at `want` although the pinned version has bytes there: the object
            # is now shorter, on a server that ignored If-Match (MinIO's 416 says no size).
            raise Changed(f"416 for offset {want}, inside the pinned size {size}")
        if total is None:
            total = size
        if total is None:
            raise SizeUnknown(f"416 for offset {want} without the object size")
        if size is not None and total != size:
            raise Changed(f"object size changed from {size} to {total}")
        if want < total:
            raise BadResponse(f"416 for offset {want} of a {total}-byte object")
        return Continuation(
            start=want, size=total, etag=got_etag or etag, eof=True, last_modified=date
        )

    if status == 200:
        # A full body: the server ignored or was not sent a Range.
        total = _content_length(headers)
        if size is not None and total is not None and total != size:
            raise Changed(f"object size changed from {size} to {total}")
        total = total if total is not None else size
        eof = total is not None and want >= total
        return Continuation(
            start=0,
            size=total,
            etag=got_etag or etag,
            discard=0 if eof else want,
            eof=eof,
            last_modified=date,
        )

    if status == 206:
        cr = parse_content_range(headers.get("Content-Range"))
        if cr is None:
            raise Malformed(f"206 with unusable Content-Range {headers.get('Content-Range')!r}")
        if cr.total is not None and size is not None and cr.total != size:
            raise Changed(f"object size changed from {size} to {cr.total}")
        if cr.first != want:
            raise BadResponse(f"asked for bytes from {want}, got Content-Range from {cr.first}")
        total = cr.total if cr.total is not None else size
        stop = total if end is None or total is None else min(end, total)
        if stop is not None and cr.last != stop - 1:
            raise BadResponse(f"Content-Range ends at {cr.last}, not at {stop - 1}")
        length = _content_length(headers)
        if length is not None and length != cr.length:
            raise BadResponse(f"Content-Length {length} disagrees with Content-Range")
        return Continuation(start=want, size=total, etag=got_etag or etag, last_modified=date)

    raise BadResponse(f"unexpected HTTP {status}")


def ranged_body(
    status: int, headers: Mapping[str, str], body: bytes, *, offset: int, length: int | None
) -> bytes:
    """Bytes ``offset`` to ``offset + length`` (to the end if None) of the whole answer
    (``body``) to a GET sent with that ``Range``.

    A 206 must say, in ``Content-Range``, that it holds exactly those bytes (fewer only
    where it says the object ends) and hold as many; a 200 is the whole object, sliced
    here; a 416 whose ``Content-Range`` puts ``offset`` at or past the end holds no bytes.
    Raises :class:`BadResponse` otherwise.
    """
    end = None if length is None else offset + length
    check_response(status, headers, want=offset, etag=None, size=None, end=end)
    if status == 416:
        return b""  # check_response found ``offset`` at or past the object's end
    if status == 200:
        return body[offset:end]
    cr = parse_content_range(headers.get("Content-Range"))
    assert cr is not None  # check_response refused a 206 without one
    if end is not None and cr.last >= end:
        raise BadResponse(f"Content-Range ends at {cr.last}, past {end - 1}")
    if cr.total is None and (end is None or cr.last != end - 1):
        # "bytes first-last/*": fewer bytes than asked may or may not end the object.
        goal = "the object's end" if end is None else f"byte {end - 1}"
        raise BadResponse(
            f"Content-Range {headers.get('Content-Range')!r} stops before {goal} "
            "without saying the object's size"
        )
    if len(body) != cr.length:
        raise BadResponse(f"{len(body)} body bytes for a Content-Range of {cr.length}")
    return body
