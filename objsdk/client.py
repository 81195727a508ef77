"""``Client``: buckets and objects on one S3-compatible endpoint."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from itertools import islice
from typing import IO, TYPE_CHECKING, Any

from objsdk import errors
from objsdk._core.addressing import Endpoint, check_bucket, check_key
from objsdk._core.config import credentials_for, resolve_config
from objsdk._core.ranges import format_range
from objsdk._core.s3xml import (
    build_delete_body,
    error_in_body,
    parse_copy_result,
    parse_delete_result,
    parse_list_buckets,
)
from objsdk._core.signing import Credentials, encode_key_path, payload_sha256, presign_url
from objsdk._core.sizes import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MULTIPART_THRESHOLD,
    DEFAULT_PART_SIZE,
    DEFAULT_READAHEAD_PART_SIZE,
    DEFAULT_WRITER_PARALLEL,
)
from objsdk._io.head import head_object
from objsdk._io.listing import list_objects
from objsdk._io.objectfile import ObjectFile
from objsdk._io.range_reader import DEFAULT_MAX_RESUME, ranged_content
from objsdk._transfer.download import DownloadResult
from objsdk._transfer.download import download as _download
from objsdk._transfer.download import get_into as _get_into
from objsdk._transfer.progress import Progress
from objsdk._transfer.put import put_object
from objsdk._transfer.upload import UploadSource
from objsdk._transfer.upload import upload as _upload
from objsdk._transfer.upload_plan import CutMemory
from objsdk._transfer.writer import ObjectWriter
from objsdk._transport.base import Transport
from objsdk._transport.http import HTTPTransport
from objsdk._transport.retry import Policy, make_retry
from objsdk.models import BucketInfo, DeleteError, ObjectInfo, ObjectSummary, Prefix, UploadInfo

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer as WritableBuffer

__all__ = ["Client"]

# DeleteObjects takes at most 1000 keys per request (S3 API reference, DeleteObjects).
DELETE_BATCH = 1000

# Presigned URLs live at most 7 days with SigV4 ("Sharing objects with presigned URLs").
MAX_PRESIGN_SECONDS = 7 * 24 * 3600


class Client:
    """A client for one S3-compatible endpoint (MinIO, AWS S3, ...).

    ``timeout`` is ``(connect_seconds, read_seconds)``; ``retries`` is a count or a
    urllib3 ``Retry`` applied to idempotent requests (see :mod:`objsdk._transport.retry`).
    Path-style addressing is used unless ``addressing_style="virtual"``. ``verify``
    checks TLS certificates: True (the system's CAs), False, or a CA bundle path; None
    takes ``AWS_CA_BUNDLE`` or ``REQUESTS_CA_BUNDLE`` from the environment if set, else
    True. ``transport`` replaces the HTTP stack (a ``MockTransport`` in unit tests).
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
        retries: int | Policy | None = 5,
        addressing_style: str = "path",
        verify: bool | str | None = None,
        transport: Transport | None = None,
        pickle_credentials: bool = False,
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
            "verify": verify,
            "pickle_credentials": pickle_credentials,
        }
        self.endpoint = Endpoint.parse(endpoint, virtual_hosted=addressing_style == "virtual")
        self.region = region
        self.credentials = (
            Credentials(access_key, secret_key, session_token)
            if access_key is not None and secret_key is not None
            else None
        )
        if verify is None:
            verify = os.environ.get("AWS_CA_BUNDLE") or os.environ.get("REQUESTS_CA_BUNDLE") or True
        self._transport: Transport = transport or HTTPTransport(
            self.endpoint,
            self.credentials,
            region=region,
            timeout=_check_timeout(timeout),
            max_pool_connections=max_pool_connections,
            retry=make_retry(retries),
            verify=verify,
        )
        # Whether this client's last adaptive upload saw a connection cut mid-part.
        self._cut_memory = CutMemory()

    @property
    def transport(self) -> Transport:
        """The transport every request of this client goes through."""
        return self._transport

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        endpoint: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        session_token: str | None = None,
        region: str | None = None,
        profile: str | None = None,
        timeout: tuple[float, float] = (10.0, 60.0),
        max_pool_connections: int = 16,
        retries: int | Policy | None = 5,
        addressing_style: str = "path",
        verify: bool | str | None = None,
    ) -> Client:
        """A client configured as the aws CLI and boto3 would be: arguments first, then
        the environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
        ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``,
        ``AWS_PROFILE``, ``AWS_CA_BUNDLE``...), then the shared files
        (``~/.aws/credentials``, ``~/.aws/config``). See :mod:`objsdk._core.config`."""
        env = os.environ if environ is None else environ
        cfg = resolve_config(
            env,
            endpoint=endpoint,
            access_key=access_key,
            secret_key=secret_key,
            session_token=session_token,
            region=region,
            profile=profile,
            # An environ without HOME (a test's dict) still finds this user's ~/.aws.
            home=env.get("HOME") or os.path.expanduser("~"),
        )
        if not cfg.endpoint:
            raise errors.InvalidArgument(
                "AWS_ENDPOINT_URL is not set and no endpoint was given (nor endpoint_url in "
                f"~/.aws/config for profile {cfg.profile!r})"
            )
        if verify is None:
            verify = env.get("AWS_CA_BUNDLE") or env.get("REQUESTS_CA_BUNDLE") or True
        return cls(
            cfg.endpoint,
            cfg.access_key,
            cfg.secret_key,
            region=cfg.region or "us-east-1",
            session_token=cfg.session_token,
            timeout=timeout,
            max_pool_connections=max_pool_connections,
            retries=retries,
            addressing_style=addressing_style,
            verify=verify,
        )

    def __repr__(self) -> str:
        return f"Client(endpoint={self.endpoint.url!r}, region={self.region!r})"

    # A client crosses process boundaries (dataloader workers, pickled ObjectFiles) as its
    # configuration; the connection pool is rebuilt on the other side.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self._config)
        if not state["pickle_credentials"]:
            state["secret_key"] = state["session_token"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        config = dict(state)
        endpoint = config.pop("endpoint")
        access_key = config.pop("access_key")
        secret_key = config.pop("secret_key")
        if access_key is not None and secret_key is None:
            secret_key, config["session_token"] = credentials_for(
                endpoint, access_key, os.environ, home=os.path.expanduser("~")
            )
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
        return put_object(
            self._transport, bucket, key, data, content_type=content_type, metadata=metadata
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
        # The stored bytes, as ObjectFile and downloads return them: never decoded, and no
        # server is invited to compress on the fly.
        headers = {"Accept-Encoding": "identity"}
        operation = "get_object"
        if offset or length is not None:
            end = None if length is None else offset + length - 1
            headers["Range"] = format_range(offset, end)
            operation = f"get_object(offset={offset}, length={length})"
        resp = self._transport.request(
            "GET", operation=operation, bucket=bucket, key=key, headers=headers, ok=(200, 206)
        )
        if "Range" not in headers:
            return resp.content
        return ranged_content(resp, offset, length, operation=operation, bucket=bucket, key=key)

    def open(
        self,
        bucket: str,
        key: str,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        max_resume: int = DEFAULT_MAX_RESUME,
        version_id: str | None = None,
        verify: bool = True,
        readahead: int | None = None,
        part_size: int = DEFAULT_READAHEAD_PART_SIZE,
    ) -> ObjectFile:
        """A seekable, resumable binary file over the object (see :class:`ObjectFile`).

        Nothing is sent until the first read. With ``readahead=N``, N threads fetch the
        next ``part_size`` parts in parallel while you read (sequential reading only);
        ``0`` is one stream; ``None`` (the default) adapts to the network: parts ahead
        are added while the rate keeps rising. Use it as a context manager.
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
        parallel: int | None = None,
        part_size: int | None = None,
        progress: Progress | None = None,
        max_resume: int = DEFAULT_MAX_RESUME,
    ) -> DownloadResult:
        """Download the whole object to a path or a writable buffer, in parallel parts.

        Paths are written atomically (temp file, fsync, rename) and a download that was
        killed resumes where it stopped if the object is unchanged. Buffers are filled
        straight from the socket. ``parallel=None`` adapts the parts in flight to the
        network (one at first, more while the rate keeps rising); a number pins it.
        See :func:`objsdk._transfer.download.download`.
        """
        return _download(
            self._transport,
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
        parallel: int | None = None,
        part_size: int | None = None,
    ) -> int:
        """Fill ``buffer`` with the object's bytes from ``offset`` (fewer at the end);
        return how many. Received straight into the buffer, in parallel when large."""
        return _get_into(
            self._transport,
            bucket,
            key,
            buffer,
            offset=offset,
            parallel=parallel,
            part_size=part_size,
        )

    def upload(
        self,
        bucket: str,
        key: str,
        source: UploadSource,
        *,
        part_size: int | None = None,
        parallel: int | None = None,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        progress: Progress | None = None,
        multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
    ) -> UploadInfo:
        """Store a file (path or binary file object) or a buffer, fast and safely.

        Below ``multipart_threshold`` (64 MiB) one PUT, whose body goes by
        ``socket.sendfile`` for a regular file over plain HTTP; above it a multipart
        upload of ``part_size`` parts with ``parallel`` in flight, aborted on any
        failure. By default the parts in flight follow the aggregate rate, parts are
        8 to 16 MiB, as many as make whole rounds of 16 (5 MiB or a little more once
        this client's uploads see connections cut mid-part), and a fixed ``parallel``
        sends parts of 16 MiB. Every upload stores a CRC32C that reads verify. The
        answer is the stored object's :class:`ObjectInfo`, with the parts it was sent
        in, the parts in flight at the end and the broken connections that made a part
        go again. See :func:`objsdk._transfer.upload.upload`.
        """
        return _upload(
            self._transport,
            bucket,
            key,
            source,
            part_size=part_size,
            parallel=parallel,
            content_type=content_type,
            metadata=metadata,
            progress=progress,
            multipart_threshold=multipart_threshold,
            cut_memory=self._cut_memory,
        )

    def open_write(
        self,
        bucket: str,
        key: str,
        *,
        part_size: int = DEFAULT_PART_SIZE,
        parallel: int = DEFAULT_WRITER_PARALLEL,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        progress: Progress | None = None,
    ) -> ObjectWriter:
        """A writable binary file whose bytes become the object at ``close()``.

        Small writes are buffered into parts and streamed as a multipart upload (one PUT
        if it stays under a part); leaving a ``with`` block by an exception aborts it.
        See :class:`ObjectWriter`.
        """
        return ObjectWriter(
            self,
            bucket,
            key,
            part_size=part_size,
            parallel=parallel,
            content_type=content_type,
            metadata=metadata,
            progress=progress,
        )

    def head_object(self, bucket: str, key: str, *, version_id: str | None = None) -> ObjectInfo:
        """Size, ETag, dates, type, metadata, version and stored checksums of an object."""
        check_bucket(bucket)
        check_key(key)
        return head_object(self._transport, bucket, key, version_id=version_id)

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
        failure = error_in_body(
            resp.status, resp.content, operation="copy_object", bucket=dst_bucket, key=dst_key
        )
        if failure is not None:
            raise failure
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
        return list_objects(self._transport, bucket, prefix, delimiter, start_after, page_size)

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
