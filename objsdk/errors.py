"""Every error objsdk raises, in one tree.

All of them derive from :class:`ObjsdkError`, so ``except objsdk.ObjsdkError`` catches
anything the library raises on purpose. Each class is defined here, whichever part of
objsdk raises it (the modules that used to define :class:`ConfigError`,
:class:`ShardError`, :class:`XMLParseError` and :class:`ToxiproxyError` re-export them).
Signals that never leave the module raising them (a range the server ignored, a resume
check) are not errors of the library and stay private to it. The tree::

    ObjsdkError
    ├── TransportError              the request never got a complete HTTP answer
    │   ├── ConnectError            could not connect (refused, DNS, TLS handshake)
    │   │   └── ProxyError          the proxy refused to relay the request (407...)
    │   ├── Timeout                 connect or read timeout
    │   └── ProtocolError           connection dropped or the response was malformed
    │       └── XMLParseError       a body that should be S3 XML is not
    ├── S3Error                     the server answered with an S3 error
    │   ├── NoSuchBucket
    │   ├── NoSuchKey
    │   ├── AccessDenied            also bad signatures, unknown access keys, expired tokens
    │   ├── PreconditionFailed      an If-Match / If-None-Match condition failed (412)
    │   ├── InvalidRange            the requested range is not satisfiable (416)
    │   ├── SlowDown                the server asked us to back off (503 SlowDown, 429)
    │   ├── BucketAlreadyExists     also BucketAlreadyOwnedByYou
    │   ├── BucketNotEmpty
    │   ├── InvalidObjectName       the server refused the key
    │   └── InvalidObjectState      the object is archived (GLACIER...): restore it first
    ├── ReadError                   an object stream could not be delivered faithfully
    │   ├── ObjectChangedError      the object was replaced while it was being read
    │   ├── ResumeLimitError        too many consecutive failed resumes
    │   └── IntegrityError          the bytes did not match the stored checksum
    ├── SourceChangedError          a file being uploaded changed while it was sent
    ├── Cancelled                   the transfer was stopped (close(), another part failed)
    ├── DownloadLockedError         another download into the same path is running
    ├── UploadLockedError           another upload of the same file to the same key is running
    ├── CredentialsError            no credentials could be had from their source
    ├── LocalWriteError (OSError)   a download's local file could not be written (disk full)
    ├── InvalidArgument (ValueError) bad input caught before anything was sent
    │   └── ConfigError             the configuration is incomplete or contradictory
    ├── ShardError                  a dataset shard could not be read (objsdk.datasets)
    ├── LocalMinioError             the local MinIO could not be built or started
    └── ToxiproxyError              Toxiproxy could not be started or refused a request

An :class:`S3Error` is built by :func:`s3_error`, which picks the subclass from the S3
error code (or, for an answer without a body, from the status). Messages name what was
wrong (operation, bucket, key or listed prefix, offset) and never contain credentials: no
secret key, session token, signature or presigned URL.
"""

from __future__ import annotations

import ast
import re
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from objsdk._core import failure_chain

__all__ = [
    "AccessDenied",
    "BucketAlreadyExists",
    "BucketNotEmpty",
    "Cancelled",
    "ConfigError",
    "ConnectError",
    "CredentialsError",
    "DownloadLockedError",
    "IntegrityError",
    "InvalidArgument",
    "InvalidObjectName",
    "InvalidObjectState",
    "InvalidRange",
    "LocalMinioError",
    "LocalWriteError",
    "NoSuchBucket",
    "NoSuchKey",
    "ObjectChangedError",
    "ObjsdkError",
    "PreconditionFailed",
    "ProtocolError",
    "ProxyError",
    "ReadError",
    "ResumeLimitError",
    "S3Error",
    "ShardError",
    "SlowDown",
    "SourceChangedError",
    "Timeout",
    "ToxiproxyError",
    "TransportError",
    "UploadLockedError",
    "XMLParseError",
    "error_class_for_code",
    "naming_prefix",
    "s3_error",
]


def _where(bucket: str | None, key: str | None, prefix: str | None = None) -> str:
    if bucket is None:
        return ""
    if key is not None:
        return f" (bucket {bucket!r}, key {key!r})"
    if prefix:
        return f" (bucket {bucket!r}, prefix {prefix!r})"
    return f" (bucket {bucket!r})"


class ObjsdkError(Exception):
    """Base class of every error objsdk raises."""

    def __reduce__(self) -> tuple[object, ...]:
        # Subclasses take keyword-only arguments, which the default exception pickling
        # drops; errors cross process boundaries (dataloader workers), so rebuild from
        # the final message and attributes instead of calling __init__ again.
        return (_rebuild_error, (type(self), self.args, self.__dict__))


def _rebuild_error(
    cls: type[ObjsdkError], args: tuple[object, ...], state: dict[str, object]
) -> ObjsdkError:
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class TransportError(ObjsdkError):
    """The request did not get a complete HTTP response."""

    def __init__(
        self,
        message: str,
        *,
        operation: str | None = None,
        bucket: str | None = None,
        key: str | None = None,
    ) -> None:
        self.operation = operation
        self.bucket = bucket
        self.key = key
        prefix = f"{operation}: " if operation else ""
        super().__init__(f"{prefix}{message}{_where(bucket, key)}")


class ConnectError(TransportError):
    """The connection could not be established. ``endpoint``: the URL it was for
    (scheme, host, port and path: never a query or user info), where known; ``reason``:
    why, in words (``Connection refused``, the host name that did not resolve, the TLS
    failure and what to do about it), where known."""

    def __init__(
        self,
        message: str,
        *,
        operation: str | None = None,
        bucket: str | None = None,
        key: str | None = None,
        endpoint: str | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message, operation=operation, bucket=bucket, key=key)
        self.endpoint = endpoint
        self.reason = reason


class ProxyError(ConnectError):
    """The proxy (``HTTP_PROXY``, ``HTTPS_PROXY``) answered instead of relaying: a 407
    for its credentials, a refused tunnel. Not retried: sending again meets the same
    answer. A proxy that cannot be reached at all is a plain :class:`ConnectError`."""


class Timeout(TransportError):
    """A connect or read timeout expired."""


class ProtocolError(TransportError):
    """The connection broke mid-response, or the response was malformed."""


class XMLParseError(ProtocolError):
    """A response body that should be S3 XML is not."""


class S3Error(ObjsdkError):
    """The server answered with an S3 error response.

    ``code`` is S3's error code (``NoSuchKey``, ``SlowDown``...), ``message`` the
    server's human-readable text. ``prefix`` is the key prefix a listing asked for, if
    the request was one. ``clock_skew``: for a 403 whose answer's ``Date`` is more than
    S3's 15 minutes from this machine's clock, how far the local clock is ahead
    (negative: behind), which the message then says; else None.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str = "",
        *,
        request_id: str | None = None,
        bucket: str | None = None,
        key: str | None = None,
        operation: str | None = None,
        prefix: str | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.bucket = bucket
        self.key = key
        self.operation = operation
        self.prefix = prefix
        self.clock_skew: timedelta | None = None
        super().__init__(self._text())

    def _text(self) -> str:
        head = f"{self.operation}: " if self.operation else ""
        where = _where(self.bucket, self.key, self.prefix)
        text = f"{head}{self.code} (HTTP {self.status}){where}"
        if self.message:
            text += f": {self.message}"
        if self.request_id:
            text += f" [request id {self.request_id}]"
        return text


class NoSuchBucket(S3Error):
    """The bucket does not exist."""


class NoSuchKey(S3Error):
    """The key does not exist in the bucket."""


class AccessDenied(S3Error):
    """Access refused: missing permission, bad signature, unknown key or expired token."""


class PreconditionFailed(S3Error):
    """A conditional request (If-Match, If-None-Match) did not hold."""


class InvalidRange(S3Error):
    """The requested byte range lies outside the object."""


class SlowDown(S3Error):
    """The server is throttling requests (S3's 503 ``SlowDown``, a 429
    ``TooManyRequests`` from MinIO and others); it still said so after all retries."""


class BucketAlreadyExists(S3Error):
    """The bucket name is taken (possibly by you)."""


class BucketNotEmpty(S3Error):
    """A bucket that still holds objects cannot be deleted."""


class InvalidObjectName(S3Error):
    """The server refused the key (for example ``..`` segments or ``//`` on MinIO)."""


class InvalidObjectState(S3Error):
    """The object is held in an archive storage class (GLACIER, DEEP_ARCHIVE) and is not
    restored: it cannot be read (GetObject's ``InvalidObjectState``) or copied
    (CopyObject's ``ObjectNotInActiveTierError``) until a RestoreObject brings it back."""


_CODE_TO_CLASS: dict[str, type[S3Error]] = {
    "NoSuchBucket": NoSuchBucket,
    "NoSuchKey": NoSuchKey,
    "AccessDenied": AccessDenied,
    "SignatureDoesNotMatch": AccessDenied,
    "InvalidAccessKeyId": AccessDenied,
    "InvalidToken": AccessDenied,
    "ExpiredToken": AccessDenied,
    "InvalidSecurity": AccessDenied,
    "AllAccessDisabled": AccessDenied,
    "RequestTimeTooSkewed": AccessDenied,
    "PreconditionFailed": PreconditionFailed,
    "InvalidRange": InvalidRange,
    "SlowDown": SlowDown,
    "SlowDownRead": SlowDown,
    "SlowDownWrite": SlowDown,
    # MinIO past MINIO_API_REQUESTS_MAX, and others: 429 (RFC 6585 §4), the same request.
    "TooManyRequests": SlowDown,
    "BucketAlreadyExists": BucketAlreadyExists,
    "BucketAlreadyOwnedByYou": BucketAlreadyExists,
    "BucketNotEmpty": BucketNotEmpty,
    "InvalidObjectName": InvalidObjectName,
    "XMinioInvalidObjectName": InvalidObjectName,
    "XMinioInvalidResourceName": InvalidObjectName,
    "KeyTooLongError": InvalidObjectName,
    "InvalidObjectState": InvalidObjectState,
    "ObjectNotInActiveTierError": InvalidObjectState,
}

# Used when a response has no XML body to read the code from (HEAD requests, proxies).
_STATUS_TO_CODE: dict[int, str] = {
    403: "AccessDenied",
    412: "PreconditionFailed",
    416: "InvalidRange",
    429: "TooManyRequests",
    503: "SlowDown",
}


def error_class_for_code(code: str) -> type[S3Error]:
    """The :class:`S3Error` subclass for an S3 error code (``S3Error`` if none fits)."""
    return _CODE_TO_CLASS.get(code, S3Error)


def code_for_status(status: int, *, has_key: bool) -> str:
    """A best-guess S3 error code for a response without a body."""
    if status == 404:
        return "NoSuchKey" if has_key else "NoSuchBucket"
    return _STATUS_TO_CODE.get(status, f"HTTP{status}")


def s3_error(
    status: int,
    code: str | None = None,
    message: str = "",
    *,
    bucket: str | None = None,
    key: str | None = None,
    request_id: str | None = None,
    operation: str | None = None,
) -> S3Error:
    """The :class:`S3Error` for an S3 answer, of the subclass its ``code`` names
    (:func:`error_class_for_code`). Without a code (an answer with no body, or a
    condition found without asking, such as a missing bucket) the status decides
    (:func:`code_for_status`: 404 is ``NoSuchKey`` with a key, ``NoSuchBucket`` without).
    """
    if code is None:
        code = code_for_status(status, has_key=key is not None)
    return error_class_for_code(code)(
        status,
        code,
        message,
        request_id=request_id,
        bucket=bucket,
        key=key,
        operation=operation,
    )


@contextmanager
def naming_prefix(prefix: str) -> Iterator[None]:
    """The :class:`S3Error` a listing's request raises names the ``prefix`` it asked
    for: the error is the same object, its ``prefix`` and message completed."""
    try:
        yield
    except S3Error as e:
        if prefix and e.key is None and e.prefix is None:
            e.prefix = prefix
            e.args = (e._text(),)
        raise


class ReadError(ObjsdkError):
    """An object stream could not be delivered as one faithful byte sequence."""

    def __init__(
        self,
        message: str,
        *,
        bucket: str | None = None,
        key: str | None = None,
        offset: int | None = None,
    ) -> None:
        self.bucket = bucket
        self.key = key
        self.offset = offset
        at = f" at offset {offset}" if offset is not None else ""
        super().__init__(f"{message}{_where(bucket, key)}{at}")


class ObjectChangedError(ReadError):
    """The object was overwritten or deleted while it was being read."""


class ResumeLimitError(ReadError):
    """The stream broke and could not be resumed within the allowed attempts."""


class IntegrityError(ReadError):
    """The bytes read did not match the checksum stored with the object."""


class SourceChangedError(ObjsdkError):
    """The file or stream being uploaded changed (shrank, was modified) while it was sent."""


class Cancelled(ObjsdkError):
    """A transfer was stopped before it finished: its reader was closed, or another part
    of the same transfer failed first."""


class CredentialsError(ObjsdkError):
    """The credentials could not be had from their source: an STS, the SSO portal, the
    container credentials endpoint or the EC2 instance metadata service refused or did
    not answer. The message names the source (``profile `ml` (role ...)``) and what
    it answered, never a secret or token; a source configured wrongly (a profile to
    log in again, a failing ``credential_process``) is a :class:`ConfigError`."""


class DownloadLockedError(ObjsdkError):
    """Another download (in this or another process) is writing to the same path."""


class UploadLockedError(ObjsdkError):
    """Another upload (in this or another process) is sending the same file to the same
    key of the same endpoint: two would interleave the parts of one multipart upload."""


class LocalWriteError(ObjsdkError, OSError):
    """A downloaded object could not be written to its local file: the disk or a quota
    is full (``ENOSPC``, ``EDQUOT``), the file would be too large (``EFBIG``), an I/O
    error. Also an :class:`OSError` carrying that ``errno`` and ``strerror``, with the
    destination as ``filename``. Nothing is left under the destination's name; what was
    written stays in the temporary file for the next call to resume."""

    def __init__(
        self, errno: int | None, strerror: str | None, path: str, *, bucket: str, key: str
    ) -> None:
        super().__init__(errno, strerror, path)
        self.bucket = bucket
        self.key = key

    def __str__(self) -> str:
        return f"cannot write s3://{self.bucket}/{self.key} to {self.filename}: {self.strerror}"

    def __reduce__(self) -> tuple[object, ...]:
        # OSError keeps errno, strerror and filename in C fields that the base class's
        # rebuild from args would lose.
        return (
            _rebuild_local_write_error,
            (self.errno, self.strerror, self.filename, self.bucket, self.key),
        )


def _rebuild_local_write_error(
    errno: int | None, strerror: str | None, path: str, bucket: str, key: str
) -> LocalWriteError:
    return LocalWriteError(errno, strerror, path, bucket=bucket, key=key)


class InvalidArgument(ObjsdkError, ValueError):
    """Bad input detected before any request was sent."""


class ConfigError(InvalidArgument):
    """The configuration is incomplete or contradictory (a missing profile, half a key
    pair, an unreadable config file). Messages name the setting and where it was read,
    never a secret."""


# The "(shard ..., member ..., offset ...)" tail of a ShardError's message, as its
# __init__ writes it.
_SHARD_WHERE = re.compile(
    r"\(shard (?P<shard>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"(?:, member (?P<member>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"))?"
    r"(?:, offset (?P<offset>\d+))?\)"
)


class ShardError(ObjsdkError):
    """A shard could not be read: missing, refused, corrupt, truncated or malformed.

    ``shard`` is ``bucket/key``; ``member`` the tar member being read (or the last one
    read before the failure, or None at the start); ``offset`` the byte offset in the
    shard where the problem is. ``__cause__`` holds the underlying error, if any.

    ``ShardError(message)`` alone is how torch's DataLoader rebuilds an error raised in a
    worker (from its formatted text): ``shard``, ``member`` and ``offset`` are then read
    back from the message, so ``except ShardError`` and the attributes work across the
    worker boundary.
    """

    def __init__(
        self,
        message: str,
        *,
        shard: str | None = None,
        member: str | None = None,
        offset: int | None = None,
    ) -> None:
        if shard is None:
            found = list(_SHARD_WHERE.finditer(message))
            last = found[-1] if found else None
            self.shard = _literal(last["shard"]) if last else None
            self.member = _literal(last["member"]) if last else None
            self.offset = int(last["offset"]) if last and last["offset"] else None
            super().__init__(message)
            return
        self.shard = shard
        self.member = member
        self.offset = offset
        where = f"shard {shard!r}"
        if member is not None:
            where += f", member {member!r}"
        if offset is not None:
            where += f", offset {offset}"
        super().__init__(f"{message} ({where})")


def _literal(text: str | None) -> str | None:
    if text is None:
        return None
    value = ast.literal_eval(text)
    return value if isinstance(value, str) else None


class LocalMinioError(ObjsdkError):
    """The local MinIO server could not be built, started or stopped."""


class ToxiproxyError(ObjsdkError):
    """Toxiproxy could not be started, or its API refused a request."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


def drop_frame_locals(exc: BaseException) -> None:
    """Clear the locals of the finished frames in ``exc``'s tracebacks (and those of
    the exceptions it chains to, up to the one the caller was handling when it called
    objsdk: see :mod:`objsdk._core.failure_chain`, whose frames are the caller's).

    Those frames hold slices of the destination buffer; as long as one lives, the
    caller's mmap or SharedMemory cannot be closed (BufferError: exported pointers
    exist), and the exception travels back to the caller. The traceback itself (files,
    lines) is kept.
    """
    running = failure_chain.running_frames()
    seen: set[int] = set()
    stack = [exc]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        traceback.clear_frames(e.__traceback__)
        stack.extend(failure_chain.links(e, running))
