"""S3's XML bodies, parsed and built as pure functions (no network).

S3 responses carry the ``http://s3.amazonaws.com/doc/2006-03-01/`` namespace, some
S3-compatible servers omit it; every lookup here uses the ``{*}`` wildcard so both work.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import format_datetime, parsedate_to_datetime
from urllib.parse import unquote_plus

from objsdk import errors
from objsdk.errors import XMLParseError
from objsdk.models import BucketInfo, DeleteError, ObjectSummary, Prefix

__all__ = [
    "CompleteResult",
    "ErrorBody",
    "ListPage",
    "PartListPage",
    "UploadListPage",
    "XMLParseError",
    "build_complete_body",
    "build_delete_body",
    "date_field",
    "error_from_response",
    "error_in_body",
    "http_date",
    "parse_complete_result",
    "parse_copy_result",
    "parse_delete_result",
    "parse_error",
    "parse_http_date",
    "parse_iso_date",
    "parse_list_buckets",
    "parse_list_multipart_uploads",
    "parse_list_objects_v2",
    "parse_list_parts",
    "parse_upload_id",
    "size_field",
    "xml_carries",
    "xml_escape",
    "xml_root",
    "xml_text",
]


# XML 1.0 §2.2 ("Char"): what a document may hold at all, as text or as a character
# reference. Written as what falls outside it (the C0 controls other than tab, LF and
# CR, surrogates, U+FFFE and U+FFFF): the same set as [^Char ranges], but a class of
# small ranges compiles in a tenth of the time, at every start of the command line.
_NOT_XML_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_carries(text: str) -> bool:
    """Whether an XML 1.0 document can hold ``text`` at all (a key such as ``"a\\x01"``
    cannot be named in a request body)."""
    return _NOT_XML_CHAR.search(text) is None


def xml_escape(text: str) -> str:
    """``text`` (which :func:`xml_carries`) as character data every parser reads back
    unchanged: ``&``, ``<`` and ``>`` escaped, and CR and LF as character references,
    because end-of-line handling (XML 1.0 §2.11) reads a literal CR, or CR LF, as one LF
    (S3 user guide, "Naming Amazon S3 objects": XML related object key constraints)."""
    # Not xml.sax.saxutils.escape: it leaves CR as it is (and its module imports
    # urllib.request, with tempfile and shutil, which nothing else here needs).
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\r", "&#13;")
        .replace("\n", "&#10;")
    )


def xml_root(body: bytes) -> ET.Element:
    """The root element of an S3 XML answer; :class:`XMLParseError` if it is not XML."""
    try:
        return ET.fromstring(body)
    # LookupError, ValueError: an XML declaration naming an unknown or unusable encoding.
    except (ET.ParseError, LookupError, ValueError) as e:
        raise XMLParseError(f"malformed XML response ({len(body)} bytes): {e}") from e


def xml_text(el: ET.Element, tag: str) -> str | None:
    """The text of ``el``'s child ``tag`` (any namespace): None if absent, "" if empty."""
    child = el.find(f"{{*}}{tag}")
    if child is None:
        return None
    return child.text or ""


def parse_iso_date(text: str | None) -> datetime | None:
    """``2009-10-12T17:50:30.000Z`` → an aware UTC datetime (None stays None).

    Raises ValueError if ``text`` is not such a date."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def _fields(el: ET.Element) -> dict[str, str]:
    """The text of each of ``el``'s children by tag without its namespace ("" if empty;
    the first of a repeated tag), in one pass: ``find`` per field costs ElementPath's
    machinery each time, felt over a listing's thousand entries."""
    fields: dict[str, str] = {}
    for child in el:
        tag = child.tag
        if isinstance(tag, str):  # not a comment or processing instruction
            fields.setdefault(tag.rpartition("}")[2], child.text or "")
    return fields


def _date(el: ET.Element, tag: str) -> datetime | None:
    """The ISO 8601 date in child ``tag`` (None if absent); XMLParseError if malformed."""
    return date_field(tag, xml_text(el, tag))


def date_field(tag: str, text: str | None) -> datetime | None:
    """The ISO 8601 date ``text`` of field ``tag`` (None if absent or empty);
    :class:`XMLParseError` naming the field and its value if it is not one."""
    try:
        return parse_iso_date(text)
    except (ValueError, OverflowError):
        raise XMLParseError(f"{tag} {(text or '')[:40]!r} is not an ISO 8601 date") from None


#: The largest byte count S3 sends: its sizes are Longs (S3 API reference, data types
#: ``Object``, ``ObjectVersion``), signed 64-bit.
_MAX_LONG = 2**63 - 1
_DIGITS = re.compile("[0-9]{1,19}")


def size_field(tag: str, text: str | None) -> int:
    """The byte count ``text`` of field ``tag`` (0 if absent or empty: a delete marker
    has none); :class:`XMLParseError` naming the field and its value unless it is ASCII
    digits (``-5``, ``+5`` and ``1.5`` are not; ``²`` is a digit to ``str.isdigit()``,
    not to ``int()``) within a Long."""
    text = (text or "0").strip()
    size = int(text) if _DIGITS.fullmatch(text) else -1
    if not 0 <= size <= _MAX_LONG:
        raise XMLParseError(f"{tag} {text[:40]!r} is not a byte count")
    return size


def parse_http_date(text: str | None) -> datetime | None:
    """An RFC 7231 ``Last-Modified`` value → an aware UTC datetime, or None if absent/bad."""
    if not text:
        return None
    try:
        return parsedate_to_datetime(text).astimezone(timezone.utc)
    except (TypeError, ValueError):
        return None


def http_date(when: datetime | None) -> str | None:
    """An aware datetime as an HTTP date (RFC 9110 §5.6.7), for If-Unmodified-Since."""
    return None if when is None else format_datetime(when.astimezone(timezone.utc), usegmt=True)


@dataclass(frozen=True)
class ErrorBody:
    """The fields of an S3 ``<Error>`` document."""

    code: str
    message: str = ""
    request_id: str | None = None
    bucket: str | None = None
    key: str | None = None
    #: Where a request to the wrong region should go: the region S3 expected
    #: (AuthorizationHeaderMalformed) and the host name of a redirect (PermanentRedirect).
    region: str | None = None
    endpoint: str | None = None


def parse_error(body: bytes) -> ErrorBody | None:
    """Parse an ``<Error>`` body; None when the body is empty or not an S3 error.

    Only Code, Message, RequestId, BucketName, Key, Region and Endpoint are kept: AWS
    also returns ``StringToSign``/``SignatureProvided`` on signature errors, which must
    never reach an exception message.
    """
    if not body or not body.lstrip().startswith(b"<"):
        return None
    try:
        root = xml_root(body)
    except XMLParseError:
        return None
    if root.tag.rsplit("}", 1)[-1] != "Error":
        return None
    return ErrorBody(
        code=xml_text(root, "Code") or "Unknown",
        message=xml_text(root, "Message") or "",
        request_id=xml_text(root, "RequestId"),
        bucket=xml_text(root, "BucketName"),
        key=xml_text(root, "Key"),
        region=xml_text(root, "Region"),
        endpoint=xml_text(root, "Endpoint"),
    )


def error_from_response(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    operation: str,
    bucket: str | None,
    key: str | None,
) -> errors.S3Error:
    """The :class:`~objsdk.errors.S3Error` an error response stands for.

    HEAD answers have no body; MinIO then puts the code in ``x-minio-error-code``, and
    without it the status decides.
    """
    parsed = parse_error(body)
    code = (
        parsed.code
        if parsed
        else headers.get("x-minio-error-code")
        or errors.code_for_status(status, has_key=key is not None)
    )
    message = parsed.message if parsed else headers.get("x-minio-error-desc", "")
    if status == 400 and not message:
        code, message = _bad_request(code, bucket)
    elif code == "InvalidBucketName" and bucket is not None and not _PORTABLE_BUCKET.match(bucket):
        message = f"{message.strip().rstrip('.')}; {_BUCKET_RULE}"
    return errors.s3_error(
        status,
        code,
        message.strip('"'),
        request_id=(parsed.request_id if parsed else None) or headers.get("x-amz-request-id"),
        bucket=bucket,
        key=key,
        operation=operation,
    )


# The bucket names every S3 service accepts ("Bucket naming rules", S3 user guide): the
# client lets others through (old regions allow upper case and '_'), so a bare 400 on
# one of those is most likely the name.
_PORTABLE_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_BUCKET_RULE = (
    "bucket names are 3-63 characters from a-z, 0-9, '.' and '-', starting and ending "
    "with a letter or digit"
)


def _bad_request(code: str, bucket: str | None) -> tuple[str, str]:
    """Code and message for a 400 that says nothing (a HEAD answer has no body)."""
    if bucket is not None and not _PORTABLE_BUCKET.match(bucket):
        return (
            "InvalidBucketName",
            f"the service refused the bucket name {bucket!r}; {_BUCKET_RULE}",
        )
    return ("BadRequest" if code == "HTTP400" else code), "Bad Request (the answer gave no reason)"


def error_in_body(
    status: int, body: bytes, *, operation: str, bucket: str | None, key: str | None
) -> errors.S3Error | None:
    """The error a 200 answer reports in its body, or None: CopyObject and
    CompleteMultipartUpload may fail after the server sent 200 (S3 API reference)."""
    if parse_error(body) is None:
        return None
    return error_from_response(status, {}, body, operation=operation, bucket=bucket, key=key)


def parse_list_buckets(body: bytes) -> list[BucketInfo]:
    """``ListAllMyBucketsResult`` → buckets in the server's order."""
    root = xml_root(body)
    return [
        BucketInfo(name=xml_text(b, "Name") or "", creation_date=_date(b, "CreationDate"))
        for b in root.iterfind("{*}Buckets/{*}Bucket")
    ]


@dataclass(frozen=True)
class ListPage:
    """One ``ListObjectsV2`` page."""

    objects: list[ObjectSummary] = field(default_factory=list)
    prefixes: list[Prefix] = field(default_factory=list)
    is_truncated: bool = False
    next_token: str | None = None


def parse_list_objects_v2(body: bytes) -> ListPage:
    """``ListBucketResult`` (ListObjectsV2) → one page.

    When the response says ``EncodingType=url`` (we always ask for it, so keys with
    control characters survive XML), keys and prefixes are URL-decoded the way botocore
    does it (``unquote_plus``: S3 encodes a space as ``+`` and ``+`` as ``%2B``).
    """
    root = xml_root(body)
    encoded = (xml_text(root, "EncodingType") or "").lower() == "url"

    def decode(value: str | None) -> str:
        value = value or ""
        return unquote_plus(value) if encoded else value

    objects = [
        ObjectSummary(
            key=decode(f.get("Key")),
            size=size_field("Size", f.get("Size")),
            etag=f.get("ETag"),
            last_modified=date_field("LastModified", f.get("LastModified")),
            storage_class=f.get("StorageClass"),
        )
        for f in map(_fields, root.iterfind("{*}Contents"))
    ]
    prefixes = [Prefix(decode(xml_text(p, "Prefix"))) for p in root.iterfind("{*}CommonPrefixes")]
    return ListPage(
        objects=objects,
        prefixes=prefixes,
        is_truncated=(xml_text(root, "IsTruncated") or "").lower() == "true",
        next_token=xml_text(root, "NextContinuationToken") or None,
    )


def build_delete_body(keys: Iterable[str], *, quiet: bool = True) -> bytes:
    """The ``<Delete>`` document for DeleteObjects (at most 1000 keys, caller's job)."""
    parts = ["<Delete>"]
    if quiet:
        # Quiet mode: the response lists only failures, keeping it small for 1000 keys.
        parts.append("<Quiet>true</Quiet>")
    for key in keys:
        parts.append(f"<Object><Key>{xml_escape(key)}</Key></Object>")
    parts.append("</Delete>")
    return "".join(parts).encode("utf-8")


def parse_delete_result(body: bytes) -> list[DeleteError]:
    """``DeleteResult`` → the keys that failed (deleted ones are not reported)."""
    root = xml_root(body)
    return [
        DeleteError(
            key=xml_text(e, "Key") or "",
            code=xml_text(e, "Code") or "Unknown",
            message=xml_text(e, "Message") or "",
            version_id=xml_text(e, "VersionId") or None,
        )
        for e in root.iterfind("{*}Error")
    ]


def parse_copy_result(body: bytes) -> tuple[str | None, datetime | None]:
    """``CopyObjectResult`` → (etag, last_modified).

    S3 can answer CopyObject with 200 and an ``<Error>`` body when it fails after the
    headers were sent (S3 API reference, CopyObject); callers check :func:`parse_error`
    first.
    """
    root = xml_root(body)
    return xml_text(root, "ETag"), _date(root, "LastModified")


# -- multipart uploads --------------------------------------------------------------------


def parse_upload_id(body: bytes) -> str | None:
    """``InitiateMultipartUploadResult`` → the upload id (None if absent)."""
    return xml_text(xml_root(body), "UploadId") or None


def build_complete_body(parts: Iterable[tuple[int, str, str | None]]) -> bytes:
    """The ``CompleteMultipartUpload`` document from (number, ETag, CRC32C or None),
    in ascending part order."""
    out = ["<CompleteMultipartUpload>"]
    for number, etag, crc in sorted(parts):
        out.append(f"<Part><PartNumber>{number}</PartNumber><ETag>{xml_escape(etag)}</ETag>")
        if crc:
            out.append(f"<ChecksumCRC32C>{xml_escape(crc)}</ChecksumCRC32C>")
        out.append("</Part>")
    out.append("</CompleteMultipartUpload>")
    return "".join(out).encode()


@dataclass(frozen=True)
class CompleteResult:
    """The fields of a ``CompleteMultipartUploadResult``."""

    etag: str | None = None
    checksum_crc32c: str | None = None
    checksum_type: str | None = None


def parse_complete_result(body: bytes) -> CompleteResult:
    """``CompleteMultipartUploadResult`` → ETag and checksum fields."""
    root = xml_root(body)
    return CompleteResult(
        xml_text(root, "ETag") or None,
        xml_text(root, "ChecksumCRC32C") or None,
        xml_text(root, "ChecksumType") or None,
    )


@dataclass(frozen=True)
class UploadListPage:
    """One ``ListMultipartUploads`` page: (key, upload id, initiated, initiator) and where
    to go on. The initiator is the ``Initiator``'s (ID, DisplayName), None if absent."""

    uploads: list[tuple[str, str, datetime | None, tuple[str, str] | None]] = field(
        default_factory=list
    )
    next_key_marker: str | None = None
    next_upload_id_marker: str | None = None
    is_truncated: bool = False


def parse_list_multipart_uploads(body: bytes) -> UploadListPage:
    """``ListMultipartUploadsResult`` → one page (keys URL-decoded if so encoded)."""
    root = xml_root(body)
    encoded = (xml_text(root, "EncodingType") or "").lower() == "url"
    uploads = []
    for up in root.iterfind("{*}Upload"):
        key = xml_text(up, "Key") or ""
        initiator = up.find("{*}Initiator")
        uploads.append(
            (
                unquote_plus(key) if encoded else key,
                xml_text(up, "UploadId") or "",
                _date(up, "Initiated"),
                None
                if initiator is None
                else (xml_text(initiator, "ID") or "", xml_text(initiator, "DisplayName") or ""),
            )
        )
    truncated = (xml_text(root, "IsTruncated") or "").lower() == "true"
    return UploadListPage(
        uploads,
        (xml_text(root, "NextKeyMarker") or None) if truncated else None,
        (xml_text(root, "NextUploadIdMarker") or None) if truncated else None,
        truncated,
    )


@dataclass(frozen=True)
class PartListPage:
    """One ``ListParts`` page: each stored part's (number, size, ETag, CRC32C or None),
    and where the next page starts (``NextPartNumberMarker``)."""

    parts: list[tuple[int, int, str, str | None]] = field(default_factory=list)
    next_marker: str | None = None
    is_truncated: bool = False


def parse_list_parts(body: bytes) -> PartListPage:
    """``ListPartsResult`` → one page; XMLParseError for a part without a number in
    S3's 1 to 10,000 or without a size."""
    root = xml_root(body)
    parts = []
    for el in root.iterfind("{*}Part"):
        f = _fields(el)
        number = size_field("PartNumber", f.get("PartNumber"))
        if not 1 <= number <= 10_000 or "Size" not in f:
            raise XMLParseError(f"a listed part has no valid PartNumber or Size: {f!r}"[:200])
        parts.append(
            (
                number,
                size_field("Size", f["Size"]),
                f.get("ETag", ""),
                f.get("ChecksumCRC32C") or None,
            )
        )
    truncated = (xml_text(root, "IsTruncated") or "").lower() == "true"
    marker = (xml_text(root, "NextPartNumberMarker") or None) if truncated else None
    return PartListPage(parts, marker, truncated)
