"""S3 multipart uploads: part planning (pure) and the five S3 calls, one function each.

Limits from the S3 user guide ("Amazon S3 multipart upload limits"): parts are 5 MiB
to 5 GiB (the last may be smaller), at most 10,000 parts, objects at most 5 TiB.
Higher-level uploads (parallel parts, abort on failure, ObjectWriter) build on these.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote_plus
from xml.sax.saxutils import escape

from . import errors
from .signing import payload_sha256
from .transport import Body, raise_error_body

if TYPE_CHECKING:
    from .client import Client

__all__ = [
    "MAX_PARTS",
    "MAX_PART_SIZE",
    "MIN_PART_SIZE",
    "CompletedPart",
    "MultipartUpload",
    "Part",
    "abort_multipart_upload",
    "build_complete_body",
    "complete_multipart_upload",
    "create_multipart_upload",
    "list_multipart_uploads",
    "plan_parts",
    "upload_part",
]

MiB = 1 << 20
MIN_PART_SIZE = 5 * MiB
MAX_PART_SIZE = 5 << 30
MAX_PARTS = 10_000
MAX_OBJECT_SIZE = 5 << 40
DEFAULT_PART_SIZE = 16 * MiB


@dataclass(frozen=True)
class Part:
    """One planned part: S3's 1-based ``number``, and where its bytes lie in the source."""

    number: int
    offset: int
    length: int


def plan_parts(size: int, part_size: int | None = None) -> list[Part]:
    """Split ``size`` bytes into parts within S3's limits.

    ``part_size`` (default 16 MiB) is raised when needed to stay within 10,000 parts,
    rounded up to a whole MiB. A 0-byte object is one empty part.
    """
    if size < 0 or size > MAX_OBJECT_SIZE:
        raise errors.InvalidArgument(f"object size {size} is outside 0..5 TiB")
    want = DEFAULT_PART_SIZE if part_size is None else part_size
    if not MIN_PART_SIZE <= want <= MAX_PART_SIZE:
        raise errors.InvalidArgument(f"part_size must be 5 MiB to 5 GiB (S3's limits), got {want}")
    if size > want * MAX_PARTS:
        want = -(-size // MAX_PARTS)  # ceil
        want = -(-want // MiB) * MiB
    if size == 0:
        return [Part(1, 0, 0)]
    return [
        Part(i + 1, offset, min(want, size - offset))
        for i, offset in enumerate(range(0, size, want))
    ]


@dataclass(frozen=True)
class CompletedPart:
    """What S3 answered for one uploaded part."""

    number: int
    etag: str
    checksum_crc32c: str | None = None


def build_complete_body(parts: Sequence[CompletedPart]) -> bytes:
    """The ``CompleteMultipartUpload`` document, parts in ascending order."""
    out = ["<CompleteMultipartUpload>"]
    for p in sorted(parts, key=lambda p: p.number):
        out.append(f"<Part><PartNumber>{p.number}</PartNumber><ETag>{escape(p.etag)}</ETag>")
        if p.checksum_crc32c:
            out.append(f"<ChecksumCRC32C>{p.checksum_crc32c}</ChecksumCRC32C>")
        out.append("</Part>")
    out.append("</CompleteMultipartUpload>")
    return "".join(out).encode()


def _text(root: ET.Element, tag: str) -> str | None:
    el = root.find(f"{{*}}{tag}")
    return None if el is None else (el.text or "")


@dataclass(frozen=True)
class MultipartUpload:
    """An upload in progress, as ListMultipartUploads reports it."""

    key: str
    upload_id: str


def create_multipart_upload(
    client: Client, bucket: str, key: str, *, headers: dict[str, str] | None = None
) -> str:
    """Start an upload; return its upload id. ``headers`` carry content type,
    metadata and ``x-amz-checksum-algorithm``/``x-amz-checksum-type``."""
    resp = client._transport.request(
        "POST",
        operation="create_multipart_upload",
        bucket=bucket,
        key=key,
        params=[("uploads", "")],
        headers=headers,
    )
    upload_id = _text(ET.fromstring(resp.content), "UploadId")
    if not upload_id:
        raise errors.ProtocolError(
            "no UploadId in the answer", operation="create_multipart_upload", bucket=bucket, key=key
        )
    return upload_id


def upload_part(
    client: Client,
    bucket: str,
    key: str,
    upload_id: str,
    part: Part,
    body: Body,
    *,
    checksum_crc32c: str | None = None,
) -> CompletedPart:
    """Upload one part from ``body`` (bytes-like, or a seekable file positioned at the
    part's first byte). PUT is idempotent, so the transport retries it whole."""
    headers = {}
    if checksum_crc32c:
        headers["x-amz-checksum-crc32c"] = checksum_crc32c
    resp = client._transport.request(
        "PUT",
        operation=f"upload_part({part.number})",
        bucket=bucket,
        key=key,
        params=[("partNumber", str(part.number)), ("uploadId", upload_id)],
        headers=headers,
        body=body,
        content_length=part.length,
    )
    etag = resp.headers.get("ETag")
    if not etag:
        raise errors.ProtocolError(
            f"no ETag for part {part.number}", operation="upload_part", bucket=bucket, key=key
        )
    return CompletedPart(part.number, etag, resp.headers.get("x-amz-checksum-crc32c"))


def complete_multipart_upload(
    client: Client,
    bucket: str,
    key: str,
    upload_id: str,
    parts: Sequence[CompletedPart],
    *,
    headers: dict[str, str] | None = None,
) -> dict[str, str]:
    """Assemble the parts; return the final response's headers plus its ``ETag`` and
    checksum fields. S3 may answer 200 with an error body (CompleteMultipartUpload)."""
    body = build_complete_body(parts)
    resp = client._transport.request(
        "POST",
        operation="complete_multipart_upload",
        bucket=bucket,
        key=key,
        params=[("uploadId", upload_id)],
        headers=headers,
        body=body,
        payload_hash=payload_sha256(body),
    )
    raise_error_body(resp, operation="complete_multipart_upload", bucket=bucket, key=key)
    root = ET.fromstring(resp.content)
    result = dict(resp.headers)
    for tag in ("ETag", "ChecksumCRC32C", "ChecksumType"):
        value = _text(root, tag)
        if value:
            result[tag] = value
    return result


def abort_multipart_upload(client: Client, bucket: str, key: str, upload_id: str) -> None:
    """Abandon an upload so its parts are freed (a missing upload is not an error)."""
    try:
        client._transport.request(
            "DELETE",
            operation="abort_multipart_upload",
            bucket=bucket,
            key=key,
            params=[("uploadId", upload_id)],
            ok=(204, 200),
        )
    except errors.S3Error as e:
        if e.code != "NoSuchUpload":
            raise


def list_multipart_uploads(
    client: Client, bucket: str, prefix: str = ""
) -> Iterator[MultipartUpload]:
    """Uploads started and neither completed nor aborted, under ``prefix``."""
    key_marker = upload_marker = ""
    while True:
        params = [("uploads", ""), ("prefix", prefix), ("encoding-type", "url")]
        if key_marker:
            params += [("key-marker", key_marker), ("upload-id-marker", upload_marker)]
        resp = client._transport.request(
            "GET", operation="list_multipart_uploads", bucket=bucket, params=params
        )
        root = ET.fromstring(resp.content)
        encoded = (_text(root, "EncodingType") or "").lower() == "url"
        for up in root.iterfind("{*}Upload"):
            key = _text(up, "Key") or ""
            yield MultipartUpload(
                unquote_plus(key) if encoded else key, _text(up, "UploadId") or ""
            )
        if (_text(root, "IsTruncated") or "").lower() != "true":
            return
        key_marker = _text(root, "NextKeyMarker") or ""
        upload_marker = _text(root, "NextUploadIdMarker") or ""
        if not key_marker:
            return
