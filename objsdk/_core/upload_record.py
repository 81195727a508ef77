"""The record a resumable upload of a file keeps, and what a later run may reuse (pure).

An upload of a path in parts keeps its multipart upload's record in
``$XDG_CACHE_HOME/objsdk/uploads/<tag>.json`` (see
:mod:`objsdk._transfer.upload_resume` for where and how it is written). ``tag`` is a
keyed hash (HMAC-SHA256, :func:`record_tag`) of the endpoint, bucket, key and the
file's absolute path, under the random key the download records use, so no bucket, key
or path can name another upload's record. The record is a journal: a first line that
says which upload it is, then one line per part the service stored, appended as each is
stored::

    {"format": 1, "endpoint": "https://s3.example.com", "bucket": "b", "key": "k",
     "path": "/abs/file", "size": 402653184, "mtime_ns": 1700000000000000000,
     "upload_id": "2~x...", "part_size": 12582912, "fields": "5d41...", "created": 1.7e9}
    {"n": 10000, "start": 401604608, "size": 1048576, "crc32c": "yZRlqg==",
     "etag": "\\"9b2c...\\"", "opaque": false}
    ...

A record holds no credentials: ``fields`` is a SHA-256 of the object's headers (type,
metadata, storage class...) the upload was created with, so that a call asking for
others starts over instead of storing the old ones.

A later run reuses a stored part only when the service's ``ListParts`` and the file's
bytes now agree with the record (:func:`check_for`): same number, size and ETag, and
either the service's CRC32C of the part equals the CRC32C of the file's bytes now, or,
where the service keeps no checksum, its ETag is the MD5 of those bytes. The ETag is
never taken for an MD5 where the part's answer said SSE-KMS or SSE-C (``opaque``): such
a part is sent again. The parts kept and those sent again must still make one upload
(:func:`plan_rest`), so the object is the file as it is now, never a splice of two of
its versions.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from objsdk import errors
from objsdk._core.parts import Part, split_evenly, upload_part_size
from objsdk._core.sizes import MAX_PART_SIZE, MAX_PARTS, MIN_PART_SIZE, MiB

__all__ = [
    "IDLE_SECONDS",
    "MAX_RECORD_BYTES",
    "KeptUpload",
    "ListedPart",
    "StoredPart",
    "UploadRecord",
    "abort_command",
    "check_for",
    "fields_digest",
    "keeps_upload",
    "md5_etag_matches",
    "parse_record",
    "plan_rest",
    "record_tag",
]

RECORD_FORMAT = 1
#: A record of 10,000 parts is about 1.3 MB; a file larger than this is not one.
MAX_RECORD_BYTES = 4 * MiB
#: A record nothing has used for this long is pruned (its upload stays on the server
#: until ``objsdk uploads abort`` or a lifecycle rule removes it).
IDLE_SECONDS = 7 * 24 * 3600
_TAG_CHARS = 32  # 128 bits of the HMAC, in hex
_MD5_ETAG = re.compile(r'"?[0-9a-fA-F]{32}"?')


def record_tag(secret: bytes, endpoint: str, bucket: str, key: str, path: str) -> str:
    """The name (without suffix) of the record of an upload of the file ``path``
    (absolute) to ``bucket/key`` on ``endpoint``: an HMAC under ``secret``."""
    what = json.dumps(["upload", endpoint, bucket, key, path]).encode()
    return hmac.new(secret, what, hashlib.sha256).hexdigest()[:_TAG_CHARS]


def fields_digest(headers: Mapping[str, str]) -> str:
    """A digest of the headers an upload is created with (what the object stores
    besides its bytes): two calls that would store the same object agree on it."""
    items = sorted((k.lower(), v) for k, v in headers.items())
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()


@dataclass(frozen=True)
class UploadRecord:
    """Which multipart upload a record is of, and of which file as it was then."""

    endpoint: str
    bucket: str
    key: str
    path: str
    size: int
    mtime_ns: int
    upload_id: str
    part_size: int
    fields: str
    created: float = 0.0

    def header(self) -> bytes:
        """The record's first line."""
        return _line({"format": RECORD_FORMAT, **asdict(self)})

    def same_target(self, endpoint: str, bucket: str, key: str, path: str, fields: str) -> bool:
        """Whether this record is of an upload of ``path`` to ``bucket/key`` on
        ``endpoint``, storing the object's fields ``fields``."""
        return (self.endpoint, self.bucket, self.key, self.path, self.fields) == (
            endpoint,
            bucket,
            key,
            path,
            fields,
        )


@dataclass(frozen=True)
class StoredPart:
    """One part the service stored, as its UploadPart answer said: bytes ``[start,
    start + size)`` of the file, their CRC32C (base64) and the part's ETag; ``opaque``:
    the answer said SSE-KMS or SSE-C, so the ETag is not an MD5 of the bytes."""

    number: int
    start: int
    size: int
    crc32c: str
    etag: str
    opaque: bool = False

    @property
    def part(self) -> Part:
        return Part(self.number - 1, self.start, self.start + self.size)

    def line(self) -> bytes:
        """The record's line for this part."""
        return _line(
            {
                "n": self.number,
                "start": self.start,
                "size": self.size,
                "crc32c": self.crc32c,
                "etag": self.etag,
                "opaque": self.opaque,
            }
        )


def _line(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode() + b"\n"


def parse_record(data: bytes) -> tuple[UploadRecord, dict[int, StoredPart]] | None:
    """The record in ``data`` and its parts by number; None if it is not a valid
    record (the upload then starts over). A last line without its line feed (a write a
    crash cut short) and every line after a malformed one are ignored: the parts they
    name are sent again."""
    if len(data) > MAX_RECORD_BYTES:
        return None
    lines = data.split(b"\n")
    try:
        raw = json.loads(lines[0])
        if raw.pop("format") != RECORD_FORMAT:
            return None
        record = UploadRecord(**raw)
        _check(record)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    parts: dict[int, StoredPart] = {}
    for line in lines[1:-1]:  # the last item follows the last line feed
        try:
            f = json.loads(line)
            part = StoredPart(
                f["n"], f["start"], f["size"], f["crc32c"], f["etag"], f.get("opaque", False)
            )
            _check_part(part, record.size)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            break
        parts[part.number] = part
    return record, parts


def _check(record: UploadRecord) -> None:
    for name in ("endpoint", "bucket", "key", "path", "upload_id", "fields"):
        _typed(getattr(record, name), str)
    for name in ("size", "mtime_ns", "part_size"):
        _typed(getattr(record, name), int)
    if not isinstance(record.created, (int, float)) or isinstance(record.created, bool):
        raise TypeError("created")
    if record.size < 1 or record.part_size < 1 or not record.upload_id:
        raise ValueError("not an upload")


def _check_part(part: StoredPart, size: int) -> None:
    for name in ("number", "start", "size"):
        _typed(getattr(part, name), int)
    _typed(part.crc32c, str)
    _typed(part.etag, str)
    _typed(part.opaque, bool)
    if not 1 <= part.number <= MAX_PARTS or part.start < 0 or part.size < 0:
        raise ValueError("not a part")
    if part.start + part.size > size:
        raise ValueError("a part beyond the file")


def _typed(value: Any, kind: type[Any]) -> None:
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise TypeError(f"expected {kind.__name__}, got {value!r}")


@dataclass(frozen=True)
class ListedPart:
    """One part as ``ListParts`` lists it: its number, size, ETag and, where the
    service keeps one, its CRC32C (base64)."""

    number: int
    size: int
    etag: str
    crc32c: str | None = None


def check_for(stored: StoredPart, listed: ListedPart) -> Literal["crc32c", "md5"] | None:
    """How to tell whether the part the service lists is still the file's bytes the
    record says it holds: compare the service's CRC32C with the file's (``"crc32c"``),
    or, where the service keeps no checksum, its ETag with their MD5 (``"md5"``); None
    if it cannot be told (another size or ETag than recorded, an ETag that is not an
    MD5): the part is sent again."""
    if (stored.number, stored.size, stored.etag) != (listed.number, listed.size, listed.etag):
        return None
    if listed.crc32c is not None:
        return "crc32c" if listed.crc32c == stored.crc32c else None
    if not stored.opaque and _MD5_ETAG.fullmatch(listed.etag):
        return "md5"
    return None


def md5_etag_matches(etag: str, md5_hex: str) -> bool:
    """Whether a part's ETag is the MD5 ``md5_hex`` (S3 quotes it)."""
    return etag.strip('"').lower() == md5_hex.lower()


def plan_rest(size: int, part_size: int, reused: Iterable[Part]) -> tuple[list[Part], list[Part]]:
    """The parts of ``reused`` (stored, their bytes checked) that one upload of ``size``
    bytes can keep, and the parts, of about ``part_size`` bytes, that hold the rest.

    CompleteMultipartUpload joins parts in number order, every part but the last of
    at least 5 MiB, numbered 1 to 10,000 ("UploadPart"). So the parts sent again fill
    each run of bytes between two kept parts with the numbers between theirs; a kept
    part whose run before it is too short for a part of 5 MiB, or has too few numbers
    left, is not kept but sent again.
    """
    if size < 1:
        raise errors.InvalidArgument(f"a multipart upload of {size} bytes has nothing to resume")
    part_size = upload_part_size(size, max(part_size, MIN_PART_SIZE))
    keep = _chain(sorted(reused, key=lambda p: p.number), size)
    while True:
        todo, bad = _fill(keep, size, part_size)
        if bad is None:
            return keep, todo
        del keep[bad]


def _chain(parts: list[Part], size: int) -> list[Part]:
    """Of ``parts`` (in number order), those that ascend in bytes as in numbers without
    overlapping, each at least 5 MiB unless it ends the object."""
    chain: list[Part] = []
    for part in parts:
        if chain and part.start < chain[-1].stop:
            continue
        if not 1 <= part.number <= MAX_PARTS or part.stop > size or part.length > MAX_PART_SIZE:
            continue
        if part.length < MIN_PART_SIZE and part.stop != size:
            continue
        chain.append(part)
    return chain


def _fill(keep: list[Part], size: int, part_size: int) -> tuple[list[Part], int | None]:
    """The parts that fill the runs of bytes between the parts of ``keep``; else the
    position in ``keep`` of a part to give up (one whose run cannot be filled)."""
    todo: list[Part] = []
    number, stop = 0, 0  # the last kept part's number and end (none yet)
    for i in range(len(keep) + 1):
        last = i == len(keep)
        nxt_number, nxt_start = (MAX_PARTS + 1, size) if last else (keep[i].number, keep[i].start)
        if nxt_start > stop:
            run = _run_parts(stop, nxt_start, nxt_number - number - 1, number, part_size, last)
            if run is None:
                assert keep, "an empty upload always has room"
                return [], i - 1 if last else i
            todo += run
        if not last:
            number, stop = keep[i].number, keep[i].stop
    return todo, None


def _run_parts(
    start: int, stop: int, slots: int, after: int, part_size: int, last: bool
) -> list[Part] | None:
    """``[start, stop)`` as parts of about ``part_size`` numbered from ``after + 1``,
    at most ``slots`` of them, each of 5 MiB to 5 GiB (``last``: the final one may be
    smaller); None if that cannot be."""
    length = stop - start
    count = min(max(1, length // part_size, -(-length // MAX_PART_SIZE)), slots)
    if count < 1 or -(-length // count) > MAX_PART_SIZE:
        return None
    if length // count < MIN_PART_SIZE and not (last and count == 1):
        return None
    return split_evenly(start, stop, count, after)


# -- when an upload stops ----------------------------------------------------------------

# S3 error codes a later run can get past (the service busy or slow, credentials that
# expired or a clock to set right before it): the upload is kept for it.
_PASSING = frozenset(
    {
        "SlowDown",
        "SlowDownRead",
        "SlowDownWrite",
        "TooManyRequests",
        "RequestTimeout",
        "ServiceUnavailable",
        "InternalError",
        "ExpiredToken",
        "RequestTimeTooSkewed",
    }
)


def keeps_upload(error: BaseException) -> bool:
    """Whether an upload of a file that stopped with ``error`` is kept to be resumed: a
    stop a later run can get past (Ctrl-C, SIGTERM, SIGHUP, a transfer cancelled, a
    network failure or timeout, the service throttling or failing past the retries).
    Anything else is final and the upload is aborted: the file changed or went, the
    service refused (a 4xx such as AccessDenied or NoSuchBucket), the upload is gone
    (NoSuchUpload), a bad argument, or an exception from the caller's ``progress``."""
    if isinstance(error, (KeyboardInterrupt, SystemExit, errors.Cancelled)):
        return True
    if isinstance(error, errors.TransportError):
        return True
    if isinstance(error, errors.S3Error):
        return error.status >= 500 or error.status == 429 or error.code in _PASSING
    return False


@dataclass(frozen=True)
class KeptUpload:
    """A path upload that stopped and was kept for a later run to resume."""

    bucket: str
    key: str
    upload_id: str
    path: str

    def advice(self, rerun: str = "the same upload") -> str:
        """What the user can do about it, in one sentence; ``rerun``: what to run again
        (the same upload, the same command). The command it names to discard the upload
        aborts this one upload and nothing else (:func:`abort_command`)."""
        return (
            f"the multipart upload of {self.path} to s3://{self.bucket}/{self.key} is "
            f"kept with the parts stored so far (upload id {self.upload_id}): running "
            f"{rerun} again resumes it; "
            f"`{abort_command(self.bucket, self.key, self.upload_id)}` discards it"
        )


def abort_command(bucket: str, key: str, upload_id: str) -> str:
    """The command line that aborts the multipart upload ``upload_id`` of ``bucket/key``
    and no other: not another writer's upload of the same key, nor any upload of a key
    that begins with it (``uploads abort s3://b/k --all`` would take ``k2`` and ``k/part``
    too). Quoted for a POSIX shell, so that it can be pasted as it is."""
    where = shlex.quote(f"s3://{bucket}/{key}")
    return f"objsdk uploads abort {where} --upload-id {shlex.quote(upload_id)}"
