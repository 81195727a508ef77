"""GET of one object (or a range of it) into memory: ``Client.get_object``."""

from __future__ import annotations

from collections.abc import Mapping

from objsdk import errors
from objsdk._core.addressing import check_count
from objsdk._core.continuation import BadResponse, ranged_body
from objsdk._core.ranges import format_range, parse_content_length, parse_content_range
from objsdk._io.verify import check_body
from objsdk._s3.head import head_object
from objsdk._transport.base import Response, Transport

__all__ = ["get_object"]


def get_object(
    transport: Transport,
    bucket: str,
    key: str,
    *,
    offset: int = 0,
    length: int | None = None,
    version_id: str | None = None,
    verify: bool = True,
) -> bytes:
    """The object's bytes from ``offset``, ``length`` of them (to the end if None), of
    ``version_id`` if given; the whole object is checked against its full-object
    checksum unless ``verify=False``."""
    check_count("offset", offset, 0, bucket, key)
    if length is not None:
        check_count("length", length, 0, bucket, key)
    if length == 0:
        head_object(transport, bucket, key, version_id=version_id)  # still report a missing one
        return b""
    # The stored bytes, as ObjectFile and downloads return them: never decoded, and no
    # server is invited to compress on the fly.
    headers = {"Accept-Encoding": "identity"}
    if verify and offset == 0:
        # S3 sends the stored checksums only when asked (GetObject, ChecksumMode).
        headers["x-amz-checksum-mode"] = "ENABLED"
    operation = "get_object"
    if offset or length is not None:
        end = None if length is None else offset + length - 1
        headers["Range"] = format_range(offset, end)
        operation = f"get_object(offset={offset}, length={length})"
    resp = transport.request(
        "GET",
        operation=operation,
        bucket=bucket,
        key=key,
        params=[("versionId", version_id)] if version_id else (),
        headers=headers,
        ok=(200, 206),
    )
    status, got = resp.status, resp.headers
    content_length = got.get("Content-Length")
    if content_length is None:
        _check_length(transport, bucket, key, version_id, status, got, len(resp.content))
    if status == 200 and "Range" not in headers:
        # The whole object, as asked: of a 200 from offset 0 to the end, ranged_content
        # checks only that its Content-Length is a byte count (the one header that says
        # what a 200 holds), so that is checked here, with one call instead of five.
        try:
            parse_content_length(content_length)
        except ValueError as e:
            raise errors.ProtocolError(
                str(e), operation=operation, bucket=bucket, key=key
            ) from None
        data = resp.content
    else:
        # The bytes asked for, whether a Range was sent or not: a 206 must hold exactly
        # those (the whole object when none was), a 200 (Range ignored) is sliced.
        data = ranged_content(resp, offset, length, operation=operation, bucket=bucket, key=key)
    if verify and offset == 0:
        check_body(bucket, key, status, got, resp.content)
    return data


def _check_length(
    transport: Transport,
    bucket: str,
    key: str,
    version_id: str | None,
    status: int,
    headers: Mapping[str, str],
    got: int,
) -> None:
    """Refuse a body shorter than its answer says, of an answer without Content-Length
    (whose bodies the transport checks). Chunked bodies the transport checks too; a
    close-delimited 206 says its length in Content-Range; a close-delimited 200 is
    compared with HEAD's size, since a connection closed early would otherwise pass for
    the end of the object (RFC 9112 §6.3)."""
    if "chunked" in headers.get("Transfer-Encoding", "").lower():
        return  # the transport checks that framing (a cut chunked body is an error)
    if status == 206:
        cr = parse_content_range(headers.get("Content-Range"))
        expected = None if cr is None else cr.length
    else:
        info = head_object(transport, bucket, key, version_id=version_id)
        if info.etag != headers.get("ETag", info.etag):
            raise errors.ObjectChangedError(
                f"object changed while being read: ETag {headers.get('ETag')} is now {info.etag}",
                bucket=bucket,
                key=key,
            )
        expected = info.size
    if expected is not None and got != expected:
        raise errors.ReadError(
            f"the answer's body ended after {got} of {expected} bytes "
            "(no Content-Length: the connection closed early)",
            bucket=bucket,
            key=key,
            offset=got,
        )


def ranged_content(
    resp: Response, offset: int, length: int | None, *, operation: str, bucket: str, key: str
) -> bytes:
    """The bytes a whole (unstreamed) answer to a ranged GET holds for ``offset`` and
    ``length``: a 206 must say in Content-Range that it holds exactly those, a 200 (Range
    ignored, RFC 9110 §14.2) is sliced; :class:`~objsdk.ProtocolError` otherwise."""
    try:
        return ranged_body(resp.status, resp.headers, resp.content, offset=offset, length=length)
    except BadResponse as e:
        raise errors.ProtocolError(str(e), operation=operation, bucket=bucket, key=key) from None
