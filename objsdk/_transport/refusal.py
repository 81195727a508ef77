"""A refusal: the :class:`~objsdk.errors.S3Error` an error answer is, and what the retry
loop remembers of its answer (``Retry-After``, a 403's ``Date``, the region it names)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from objsdk import errors
from objsdk._core.clock_skew import skew_note
from objsdk._core.s3xml import error_from_response, error_in_body
from objsdk._transport.base import Response
from objsdk._transport.routes import keep_redirect

__all__ = [
    "MAX_ERROR_BODY",
    "keep_retry_after",
    "raise_body_error",
    "refusal",
    "retry_after_of",
    "say_clock_skew",
]


def raise_body_error(answer: Response, operation: str, bucket: str | None, key: str | None) -> None:
    """Raise the error a 200 answer reports in its body (CompleteMultipartUpload and
    CopyObject may fail after the server sent 200, S3 API reference)."""
    failure = error_in_body(
        answer.status, answer.content, operation=operation, bucket=bucket, key=key
    )
    if failure is not None:
        raise failure


# An S3Error answer's Retry-After (RFC 9110 §10.2.3), kept by the transport that made it.
_RETRY_AFTER = "_objsdk_retry_after"


def keep_retry_after(error: errors.S3Error, headers: Mapping[str, str]) -> errors.S3Error:
    """``error``, remembering its answer's ``Retry-After`` for the retry loop."""
    value = headers.get("Retry-After")
    if value:
        setattr(error, _RETRY_AFTER, value)
    return error


# Error bodies are small XML documents; never buffer more than this of one.
MAX_ERROR_BODY = 64 * 1024


def refusal(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    operation: str,
    bucket: str | None,
    key: str | None,
) -> errors.S3Error:
    """The error an answer of ``status`` is, remembering its ``Retry-After``, whether it
    says the bucket is in another region and, for a 403, its ``Date`` (the retry loop
    tells a clock too far off from it)."""
    error = keep_retry_after(
        error_from_response(status, headers, body, operation=operation, bucket=bucket, key=key),
        headers,
    )
    if status == 403:
        setattr(error, _DATE, headers.get("Date"))
    return keep_redirect(error, status, headers, body)


# A 403 answer's Date (RFC 9110 §6.6.1), kept by the transport that got it.
_DATE = "_objsdk_date"


def say_clock_skew(error: errors.S3Error, now: datetime) -> None:
    """Complete a 403's message (and ``clock_skew``) when its answer's ``Date`` is more
    than S3's 15 minutes from ``now``: a HEAD's refusal has no text of its own, and a
    GET's ``RequestTimeTooSkewed`` does not say by how much, nor which way."""
    date = getattr(error, _DATE, None)
    noted = skew_note(date if isinstance(date, str) else None, now)
    if noted is None:
        return
    error.clock_skew, note = noted
    error.message = f"{error.message.rstrip('.')}; {note}" if error.message else note
    error.args = (error._text(),)


def retry_after_of(error: errors.S3Error) -> str | None:
    """The ``Retry-After`` of ``error``'s answer, if it had one."""
    value = getattr(error, _RETRY_AFTER, None)
    return value if isinstance(value, str) else None
