"""``Client``: buckets and objects on one S3-compatible endpoint."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from itertools import islice
from typing import IO, TYPE_CHECKING, Any

from urllib3.util.retry import Retry

from . import errors
from .addressing import Endpoint, check_bucket, check_key
from .download import DEFAULT_PARALLEL, DownloadResult
from .download import DEFAULT_PART_SIZE as DOWNLOAD_PART_SIZE
from .download import download as _download
from .download import get_into as _get_into
from .integrity import crc32c_b64
from .models import BucketInfo, DeleteError, ObjectInfo, ObjectSummary, Prefix
from .objectfile import DEFAULT_CHUNK_SIZE, DEFAULT_MAX_RESUME, DEFAULT_PART_SIZE, ObjectFile
from .ranges import format_range
from .retry import make_retry
from .s3xml import (
    build_delete_body,
    parse_copy_result,
    parse_delete_result,
    parse_http_date,
    parse_list_buckets,
    parse_list_objects_v2,
)
from .signing import Credentials, encode_key_path, payload_sha256, presign_url
from .transport import Body, Transport, raise_error_body
from .writer import ObjectWriter

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer as WritableBuffer

    from .upload import UploadSource

__all__ = ["Client"]

# Checksum algorithms S3 may store and return as x-amz-checksum-<name>.
CHECKSUM_ALGORITHMS = ("crc32", "crc32c", "crc64nvme", "sha1", "sha256")

# DeleteObjects takes at most 1000 keys per request (S3 API reference, DeleteObjects).
DELETE_BATCH = 1000

# Presigned URLs live at most 7 days with SigV4 ("Sharing objects with presigned URLs").
MAX_PRESIGN_SECONDS = 7 * 24 * 3600

# Header names are RFC 9110 tokens; S3 stores user metadata keys lower-cased.
_META_KEY_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_META_VALUE_RE = re.compile(r"^[\x20-\x7e]*$")


class Client:
    """A client for one S3-compatible endpoint (MinIO, AWS S3, ...).

    ``timeout`` is ``(connect_seconds, read_seconds)``; ``retries`` is a count or a
    urllib3 ``Retry`` applied to idempotent requests (see :mod:`objsdk.retry`).
    Path-style addressing is used unless ``addressing_style="virtual"``.
    Thread-safe: share one client across threads.
    """

    def __init__(
        self,
        endpoint: str,
        access_key: str | None = None,
        secret_key: str | None = None,
        *,
        region: str = "us-east-1",
        session_token: str | None = None,
        timeout: tuple[float, float] = (10.0, 60.0),
        max_pool_connections: int = 16,
        retries: int | Retry | None = 5,
        addressing_style: str = "path",
    ) -> None:
        if addressing_style not in ("path", "virtual"):
            raise errors.InvalidArgument(
                f"addressing_style must be 'path' or 'virtual', got {addressing_style!r}"
            )
        if (access_key is None) != (secret_key is None):
            raise errors.InvalidArgument("give both access_key and secret_key, or neither")
        if max_pool_connections < 1:
            raise errors.InvalidArgument("max_pool_connections must be at least 1")
        self._config: dict[str, Any] = {
            "endpoint": endpoint,
            "access_key": access_key,
            "secret_key": secret_key,
            "region": region,
            "session_token": session_token,
            "timeout": timeout,
            "max_pool_connections": max_pool_connections,
            "retries": retries,
            "addressing_style": addressing_style,
        }
        self.endpoint = Endpoint.parse(endpoint, virtual_hosted=addressing_style == "virtual")
        self.region = region
        self.credentials = (
            Credentials(access_key, secret_key, session_token)
            if access_key is not None and secret_key is not None
            else None
        )
        self._transport = Transport(
            self.endpoint,
            self.credentials,
            region=region,
            timeout=_check_timeout(timeout),
            max_pool_connections=max_pool_connections,
            retry=make_retry(retries),
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kwargs: Any) -> Client:
        """Build a client from ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
        ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN`` and ``AWS_REGION`` (or
        ``AWS_DEFAULT_REGION``). Keyword arguments override the environment."""
        env = os.environ if environ is None else environ
        endpoint = kwargs.pop("endpoint", None) or env.get("AWS_ENDPOINT_URL")
        if not endpoint:
            raise errors.InvalidArgument("AWS_ENDPOINT_URL is not set and no endpoint was given")
        kwargs.setdefault("access_key", env.get("AWS_ACCESS_KEY_ID"))
        kwargs.setdefault("secret_key", env.get("AWS_SECRET_ACCESS_KEY"))
        kwargs.setdefault("session_token", env.get("AWS_SESSION_TOKEN"))
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if region:
            kwargs.setdefault("region", region)
        return cls(endpoint, **kwargs)

    def __repr__(self) -> str:
        return f"Client(endpoint={self.endpoint.url!r}, region={self.region!r})"

    # A client crosses process boundaries (dataloader workers, pickled ObjectFiles) as its
    # configuration; the connection pool is rebuilt on the other side.
    def __getstate__(self) -> dict[str, Any]:
        return dict(self._config)

    def __setstate__(self, state: dict[str, Any]) -> None:
        config = dict(state)
        endpoint = config.pop("endpoint")
        access_key = config.pop("access_key")
        secret_key = config.pop("secret_key")
        self.__init__(endpoint, access_key, secret_key, **config)  # type: ignore[misc]

    def close(self) -> None:
        """Release pooled connections."""
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- buckets ---------------------------------------------------------------------

    def create_bucket(self, bucket: str) -> None:
        """Create ``bucket`` (in the client's region)."""
        check_bucket(bucket)
        body = b""
        if self.region != "us-east-1":
            # us-east-1 is the default location and must not be named explicitly.
            body = (
                "<CreateBucketConfiguration><LocationConstraint>"
                f"{self.region}</LocationConstraint></CreateBucketConfiguration>"
            ).encode()
        self._transport.request(
            "PUT",
            operation="create_bucket",
            bucket=bucket,
            body=body,
            payload_hash=payload_sha256(body),
        )

    def delete_bucket(self, bucket: str) -> None:
        """Delete an empty bucket."""
        check_bucket(bucket)
        self._transport.request("DELETE", operation="delete_bucket", bucket=bucket, ok=(204, 200))

    def bucket_exists(self, bucket: str) -> bool:
        """True if ``bucket`` exists and is reachable; raises on access errors."""
        check_bucket(bucket)
        try:
            self._transport.request("HEAD", operation="bucket_exists", bucket=bucket)
        except errors.NoSuchBucket:
            return False
        return True

    def list_buckets(self) -> list[BucketInfo]:
        """All buckets the credentials can see."""
        resp = self._transport.request("GET", operation="list_buckets")
        return parse_list_buckets(resp.content)

    # -- objects ---------------------------------------------------------------------

    def put_object(
        self,
        bucket: str,
        key: str,
        data: bytes | bytearray | memoryview | IO[bytes],
        *,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectInfo:
        """Store ``data`` under ``key`` in one PUT.

        Bytes-like data is sent from its own buffer, without a copy, with its SHA-256
        signed and a CRC32C the server stores. A binary file object is streamed from its
        current position to its end (it must be seekable, so a retry can rewind it); it is
        never read whole.
        """
        check_bucket(bucket)
        check_key(key)
        headers = _object_headers(bucket, key, content_type, metadata)
        body: Body
        if isinstance(data, (bytes, bytearray, memoryview)):
            body = data
            length = memoryview(data).nbytes
            payload_hash = payload_sha256(data)
            # Stored with the object, so every later read can be verified end to end.
            headers["x-amz-checksum-crc32c"] = crc32c_b64(data)
        else:
            body, length = data, _remaining_length(data, bucket, key)
            payload_hash = "UNSIGNED-PAYLOAD"
        resp = self._transport.request(
            "PUT",
            operation="put_object",
            bucket=bucket,
            key=key,
            headers=headers,
            body=body,
            content_length=length,
            payload_hash=payload_hash,
        )
        return ObjectInfo(
            bucket=bucket,
            key=key,
            size=length,
            etag=resp.headers.get("ETag"),
            version_id=resp.headers.get("x-amz-version-id"),
            content_type=content_type,
            metadata=dict(metadata or {}),
            checksums=_checksums(resp.headers),
        )

    def get_object(
        self, bucket: str, key: str, *, offset: int = 0, length: int | None = None
    ) -> bytes:
        """The object's bytes from ``offset``, ``length`` of them (to the end if None).

        Reads the whole answer into memory; use :meth:`open` to stream large objects.
        """
        check_bucket(bucket)
        check_key(key)
        if not isinstance(offset, int) or offset < 0:
            raise errors.InvalidArgument(
                f"offset must be a non-negative int, got {offset!r} "
                f"(bucket {bucket!r}, key {key!r})"
            )
        if length is not None and (not isinstance(length, int) or length < 0):
            raise errors.InvalidArgument(
                f"length must be a non-negative int or None, got {length!r} "
                f"(bucket {bucket!r}, key {key!r})"
            )
        if length == 0:
            self.head_object(bucket, key)  # still report a missing bucket or key
            return b""
        headers = {}
        operation = "get_object"
        if offset or length is not None:
            end = None if length is None else offset + length - 1
            headers["Range"] = format_range(offset, end)
            operation = f"get_object(offset={offset}, length={length})"
        resp = self._transport.request(
            "GET", operation=operation, bucket=bucket, key=key, headers=headers, ok=(200, 206)
        )
        data = resp.content
        if resp.status_code == 200 and "Range" in headers:
            # A server may ignore Range and send the whole object (RFC 9110 §14.2).
            data = data[offset : None if length is None else offset + length]
        return data

    def open(
        self,
        bucket: str,
        key: str,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        max_resume: int = DEFAULT_MAX_RESUME,
        version_id: str | None = None,
        verify: bool = True,
        readahead: int = 0,
        part_size: int = DEFAULT_PART_SIZE,
    ) -> ObjectFile:
        """A seekable, resumable binary file over the object (see :class:`ObjectFile`).

        Nothing is sent until the first read. With ``readahead=N``, N threads fetch the
        next ``part_size`` parts in parallel while you read (sequential reading only).
        Use it as a context manager.
        """
        return ObjectFile(
            self,
            bucket,
            key,
            chunk_size=chunk_size,
            max_resume=max_resume,
            version_id=version_id,
            verify=verify,
            readahead=readahead,
            part_size=part_size,
        )

    def download(
        self,
        bucket: str,
        key: str,
        dest: str | os.PathLike[str] | WritableBuffer,
        *,
        parallel: int = DEFAULT_PARALLEL,
        part_size: int = DOWNLOAD_PART_SIZE,
        progress: Callable[[int, int], None] | None = None,
        max_resume: int = DEFAULT_MAX_RESUME,
    ) -> DownloadResult:
        """Download the whole object to a path or a writable buffer, in parallel parts.

        Paths are written atomically (temp file, fsync, rename) and a download that was
        killed resumes where it stopped if the object is unchanged. Buffers are filled
        straight from the socket. See :func:`objsdk.download.download`.
        """
        return _download(
            self,
            bucket,
            key,
            dest,
            parallel=parallel,
            part_size=part_size,
            progress=progress,
            max_resume=max_resume,
        )

    def get_into(
        self,
        bucket: str,
        key: str,
        buffer: WritableBuffer,
        *,
        offset: int = 0,
        parallel: int = DEFAULT_PARALLEL,
        part_size: int = DOWNLOAD_PART_SIZE,
    ) -> int:
        """Fill ``buffer`` with the object's bytes from ``offset`` (fewer at the end);
        return how many. Received straight into the buffer, in parallel when large."""
        return _get_into(
            self, bucket, key, buffer, offset=offset, parallel=parallel, part_size=part_size
        )

    def upload(self, bucket: str, key: str, source: UploadSource, **kwargs: Any) -> ObjectInfo:
        """Store a file (path or binary file object) or a buffer, fast and safely.

        Below ``multipart_threshold`` (64 MiB) one PUT, whose body goes by
        ``socket.sendfile`` for a regular file over plain HTTP; above it a multipart
        upload with ``parallel`` parts in flight, aborted on any failure. Every upload
        stores a CRC32C that reads verify. Options: ``part_size``, ``parallel``,
        ``content_type``, ``metadata``, ``progress(done, total)``,
        ``multipart_threshold`` (see :func:`objsdk.upload.upload`).
        """
        from .upload import upload  # upload.py builds on this module

        return upload(self, bucket, key, source, **kwargs)

    def open_write(self, bucket: str, key: str, **kwargs: Any) -> ObjectWriter:
        """A writable binary file whose bytes become the object at ``close()``.

        Small writes are buffered into parts and streamed as a multipart upload (one PUT
        if it stays under a part); leaving a ``with`` block by an exception aborts it.
        See :class:`ObjectWriter` for the options.
        """
        return ObjectWriter(self, bucket, key, **kwargs)

    def head_object(self, bucket: str, key: str, *, version_id: str | None = None) -> ObjectInfo:
        """Size, ETag, dates, type, metadata, version and stored checksums of an object."""
        check_bucket(bucket)
        check_key(key)
        params = [("versionId", version_id)] if version_id else []
        resp = self._transport.request(
            "HEAD",
            operation="head_object",
            bucket=bucket,
            key=key,
            params=params,
            # Without this S3 omits the x-amz-checksum-* headers (HeadObject, ChecksumMode).
            headers={"x-amz-checksum-mode": "ENABLED"},
        )
        return object_info_from_headers(bucket, key, resp.headers)

    def delete_object(self, bucket: str, key: str) -> None:
        """Delete ``key`` (S3 reports success for a key that does not exist)."""
        check_bucket(bucket)
        check_key(key)
        self._transport.request(
            "DELETE", operation="delete_object", bucket=bucket, key=key, ok=(204, 200)
        )

    def delete_objects(self, bucket: str, keys: Iterable[str]) -> list[DeleteError]:
        """Delete many keys, 1000 per request; return the keys that failed (empty if none)."""
        check_bucket(bucket)
        failures: list[DeleteError] = []
        it = iter(keys)
        while batch := list(islice(it, DELETE_BATCH)):
            for key in batch:
                check_key(key)
            body = build_delete_body(batch)
            resp = self._transport.request(
                "POST",
                operation="delete_objects",
                bucket=bucket,
                params=[("delete", "")],
                # DeleteObjects requires an integrity header (S3 API reference).
                headers={"Content-MD5": base64.b64encode(hashlib.md5(body).digest()).decode()},
                body=body,
                payload_hash=payload_sha256(body),
            )
            failures.extend(parse_delete_result(resp.content))
        return failures

    def copy_object(
        self, src_bucket: str, src_key: str, dst_bucket: str, dst_key: str
    ) -> ObjectInfo:
        """Server-side copy of one object (up to 5 GiB, S3's single-copy limit)."""
        for b, k in ((src_bucket, src_key), (dst_bucket, dst_key)):
            check_bucket(b)
            check_key(k)
        resp = self._transport.request(
            "PUT",
            operation=f"copy_object(from {src_bucket}/{src_key})",
            bucket=dst_bucket,
            key=dst_key,
            headers={"x-amz-copy-source": f"/{src_bucket}/{encode_key_path(src_key)}"},
        )
        raise_error_body(resp, operation="copy_object", bucket=dst_bucket, key=dst_key)
        etag, last_modified = parse_copy_result(resp.content)
        return ObjectInfo(
            bucket=dst_bucket,
            key=dst_key,
            etag=etag,
            last_modified=last_modified,
            version_id=resp.headers.get("x-amz-version-id"),
        )

    def list_objects(
        self,
        bucket: str,
        prefix: str = "",
        delimiter: str | None = None,
        start_after: str | None = None,
        page_size: int = 1000,
    ) -> Iterator[ObjectSummary | Prefix]:
        """Lazily list keys under ``prefix`` (ListObjectsV2), following continuation tokens.

        With a ``delimiter``, common prefixes are yielded as :class:`Prefix` values, in
        key order among the objects.
        """
        check_bucket(bucket)
        if not 1 <= page_size <= 1000:
            raise errors.InvalidArgument(f"page_size must be 1..1000, got {page_size}")
        token: str | None = None
        while True:
            params = [
                ("list-type", "2"),
                ("max-keys", str(page_size)),
                # URL-encoded keys survive characters XML 1.0 cannot carry.
                ("encoding-type", "url"),
                ("prefix", prefix),
            ]
            if delimiter:
                params.append(("delimiter", delimiter))
            if token:
                params.append(("continuation-token", token))
            elif start_after:
                params.append(("start-after", start_after))
            resp = self._transport.request(
                "GET", operation="list_objects", bucket=bucket, params=params
            )
            page = parse_list_objects_v2(resp.content)
            entries: list[ObjectSummary | Prefix] = [*page.objects, *page.prefixes]
            entries.sort(key=lambda e: e.key)
            yield from entries
            if not page.is_truncated:
                return
            if not page.next_token:
                raise errors.ProtocolError(
                    "truncated listing without a continuation token",
                    operation="list_objects",
                    bucket=bucket,
                )
            token = page.next_token

    def presign(
        self,
        method: str,
        bucket: str,
        key: str,
        expires: int | timedelta = 3600,
    ) -> str:
        """A URL that lets its holder perform ``method`` on the object until it expires.

        The URL carries a signature: treat it as a secret, do not log it.
        """
        check_bucket(bucket)
        check_key(key)
        if self.credentials is None:
            raise errors.InvalidArgument("presign needs credentials")
        seconds = int(expires.total_seconds()) if isinstance(expires, timedelta) else expires
        if not 1 <= seconds <= MAX_PRESIGN_SECONDS:
            raise errors.InvalidArgument(
                f"expires must be 1 s to 7 days, got {seconds} s (bucket {bucket!r}, key {key!r})"
            )
        return presign_url(
            method.upper(),
            self.endpoint.build_url(bucket, key),
            credentials=self.credentials,
            region=self.region,
            now=datetime.now(timezone.utc),
            expires=seconds,
        )


def object_info_from_headers(bucket: str, key: str, headers: Mapping[str, str]) -> ObjectInfo:
    """An :class:`ObjectInfo` from the headers of a HEAD or GET response."""
    length = headers.get("Content-Length")
    return ObjectInfo(
        bucket=bucket,
        key=key,
        size=int(length) if length is not None else None,
        etag=headers.get("ETag"),
        last_modified=parse_http_date(headers.get("Last-Modified")),
        content_type=headers.get("Content-Type"),
        metadata={
            name[len("x-amz-meta-") :].lower(): value
            for name, value in headers.items()
            if name.lower().startswith("x-amz-meta-")
        },
        version_id=headers.get("x-amz-version-id"),
        checksums=_checksums(headers),
        checksum_type=headers.get("x-amz-checksum-type"),
    )


def _checksums(headers: Mapping[str, str]) -> dict[str, str]:
    found = {}
    for algo in CHECKSUM_ALGORITHMS:
        value = headers.get(f"x-amz-checksum-{algo}")
        if value:
            found[algo] = value
    return found


def _object_headers(
    bucket: str, key: str, content_type: str | None, metadata: Mapping[str, str] | None
) -> dict[str, str]:
    headers = {}
    if content_type:
        headers["Content-Type"] = content_type
    for name, value in (metadata or {}).items():
        # S3 sends metadata as raw HTTP headers: anything outside printable ASCII is
        # mangled or refused by servers, so refuse it here with a clear message.
        if not isinstance(name, str) or not _META_KEY_RE.match(name):
            raise errors.InvalidArgument(
                f"metadata key {name!r} must be ASCII letters, digits or -_.!#$%&'*+^`|~ "
                f"(bucket {bucket!r}, key {key!r})"
            )
        if not isinstance(value, str) or not _META_VALUE_RE.match(value):
            raise errors.InvalidArgument(
                f"metadata value for {name!r} must be printable ASCII "
                f"(bucket {bucket!r}, key {key!r})"
            )
        headers[f"x-amz-meta-{name.lower()}"] = value
    return headers


def _remaining_length(f: IO[bytes], bucket: str, key: str) -> int:
    """Bytes from the file's position to its end; refuses streams that cannot rewind."""
    try:
        if not f.seekable():
            raise io.UnsupportedOperation
        pos = f.tell()
        end = f.seek(0, os.SEEK_END)
        f.seek(pos)
    except (AttributeError, OSError, io.UnsupportedOperation):
        raise errors.InvalidArgument(
            "put_object needs bytes or a seekable binary file (so a retry can rewind it); "
            f"got {type(f).__name__} for bucket {bucket!r}, key {key!r}"
        ) from None
    return max(0, end - pos)


def _check_timeout(timeout: tuple[float, float]) -> tuple[float, float]:
    try:
        connect, read = timeout
        if connect > 0 and read > 0:
            return (float(connect), float(read))
    except (TypeError, ValueError):
        pass
    raise errors.InvalidArgument(
        f"timeout must be (connect_seconds, read_seconds), both > 0; got {timeout!r}"
    )
