"""``Client``: buckets and objects on one S3-compatible endpoint."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from objsdk import errors
from objsdk._core.addressing import Endpoint
from objsdk._core.client_config import (
    DEFAULT_MAX_POOL_CONNECTIONS,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    ClientConfig,
    check_ca_bundle,
    resolve_client_config,
    tls_verify,
    with_credentials,
)
from objsdk._core.metadata import ObjectHeaders, standard_headers
from objsdk._core.proxies import Proxies
from objsdk._core.signing import Credentials
from objsdk._core.sizes import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MULTIPART_THRESHOLD,
    DEFAULT_PART_SIZE,
    DEFAULT_READAHEAD_PART_SIZE,
    DEFAULT_WRITER_PARALLEL,
)
from objsdk._core.sse import SSE
from objsdk._io.objectfile import ObjectFile
from objsdk._io.objects_api import ObjectsAPI, release_buffer
from objsdk._io.range_reader import DEFAULT_MAX_RESUME
from objsdk._s3.buckets import BucketsAPI
from objsdk._s3.copies import CopiesAPI, check_copy_names
from objsdk._s3.deletes import DeletesAPI
from objsdk._s3.head import HeadAPI
from objsdk._s3.listing import ListingAPI
from objsdk._s3.presign import PresignAPI
from objsdk._s3.tagging import TaggingAPI
from objsdk._s3.versions import VersionsAPI
from objsdk._transfer.copy import MAX_SINGLE_COPY
from objsdk._transfer.copy import copy as _copy
from objsdk._transfer.download import download as _download
from objsdk._transfer.download import get_into as _get_into
from objsdk._transfer.download_result import DownloadResult
from objsdk._transfer.incomplete_uploads import IncompleteUploadsAPI
from objsdk._transfer.progress import Progress
from objsdk._transfer.upload import UploadSource
from objsdk._transfer.upload import upload as _upload
from objsdk._transfer.upload_plan import CutMemory
from objsdk._transfer.writer import ObjectWriter
from objsdk._transport.base import Transport
from objsdk._transport.credential_fetch import signing_credentials
from objsdk._transport.dialect import ChecksumDialect
from objsdk._transport.http import HTTPTransport
from objsdk._transport.pipeline import encrypting
from objsdk._transport.retry import Policy, make_retry
from objsdk.models import ObjectInfo, UploadInfo

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer as WritableBuffer
    from typing_extensions import Unpack

__all__ = ["Client"]


class Client(
    ObjectsAPI,
    IncompleteUploadsAPI,
    BucketsAPI,
    HeadAPI,
    DeletesAPI,
    CopiesAPI,
    PresignAPI,
    VersionsAPI,
    TaggingAPI,
    ListingAPI,
):
    """A client for one S3-compatible endpoint (MinIO, AWS S3, ...).

    Without an ``endpoint``, AWS S3's in ``region`` (``https://s3.<region>.amazonaws.com``;
    ``https://s3.amazonaws.com`` for us-east-1), its FIPS or dual-stack endpoint with
    ``use_fips_endpoint`` / ``use_dualstack_endpoint``. Without a ``region``, the one
    an AWS endpoint's host name says (``s3.eu-west-1.amazonaws.com``), else
    ``us-east-1``. A bucket found in another region (a 301/307, or a 400 naming the
    region expected) has its requests signed for that region, and on AWS sent to its
    endpoint, from then on. ``addressing_style``: ``"auto"`` puts the bucket in the
    host name on AWS S3's endpoints when its name allows (virtual-hosted style) and in
    the path everywhere else; ``"path"`` or ``"virtual"`` always.
    ``timeout`` is ``(connect_seconds, read_seconds)``; ``retries`` is a count or a
    urllib3 ``Retry`` applied to idempotent requests (see :mod:`objsdk._transport.retry`).
    ``verify`` checks TLS certificates: True (the system's CAs), False, or a CA bundle path; None
    takes ``AWS_CA_BUNDLE`` or ``REQUESTS_CA_BUNDLE`` from the environment if set, else
    True. ``transport`` replaces the HTTP stack (a ``MockTransport`` in unit tests).
    ``request_checksum_calculation`` and ``response_checksum_validation`` are boto3's
    settings: ``"when_supported"`` (send and ask for checksums), ``"when_required"``
    (never: for a service that refuses ``x-amz-checksum-*`` headers), or None (as
    ``when_supported``, and a 400 refusing a checksum header makes this client send
    without them from then on); see docs/compatibility.md. ``sse`` (``SSES3()``,
    ``SSEKMS(key_id)``, ``SSEC(key)``) encrypts what is written and goes with every
    request it belongs on (see :mod:`objsdk._core.sse`). Requests go through the proxy
    ``HTTPS_PROXY`` or ``HTTP_PROXY`` names unless ``NO_PROXY`` excepts the host, as
    boto3's do; the variables are read when the client is built (docs/getting-started.md,
    "Proxies"). Thread-safe: share one client across threads.

    Requests are signed with the keys, else ``credentials`` (a Credentials or a function
    returning one), else the credential chain's (docs/credentials.md), refreshed before
    they expire; unsigned only with ``anonymous=True``.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        *,
        region: str | None = None,
        session_token: str | None = None,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        max_pool_connections: int = DEFAULT_MAX_POOL_CONNECTIONS,
        retries: int | Policy | None = DEFAULT_RETRIES,
        addressing_style: str = "auto",
        verify: bool | str | None = None,
        transport: Transport | None = None,
        pickle_credentials: bool = False,
        request_checksum_calculation: str | None = None,
        response_checksum_validation: str | None = None,
        sse: SSE | None = None,
        use_fips_endpoint: bool = False,
        use_dualstack_endpoint: bool = False,
        credentials: Credentials | Callable[[], Credentials] | None = None,
        anonymous: bool = False,
    ) -> None:
        if transport is not None and (request_checksum_calculation or response_checksum_validation):
            raise errors.InvalidArgument(
                "give the checksum settings to the transport passed (its dialect=), not to Client"
            )
        config = ClientConfig(
            endpoint,
            access_key,
            secret_key,
            session_token,
            region=region,
            timeout=timeout,
            max_pool_connections=max_pool_connections,
            retries=retries,
            addressing_style=addressing_style,
            verify=verify,
            pickle_credentials=pickle_credentials,
            request_checksum_calculation=request_checksum_calculation,
            response_checksum_validation=response_checksum_validation,
            sse=sse,
            use_fips_endpoint=use_fips_endpoint,
            use_dualstack_endpoint=use_dualstack_endpoint,
            credentials=credentials,
            anonymous=anonymous,
        )
        self._build(config, transport)

    def _build(
        self,
        config: ClientConfig,
        transport: Transport | None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """Everything a client holds, from its configuration (the chain's credentials if
        it names none) and a transport to use instead of the HTTP stack it describes.
        ``environ``: the environment the credentials are resolved and fetched from
        (this process's if None)."""
        env = os.environ if environ is None else environ
        if transport is None:  # a transport given signs with its own credentials
            config = with_credentials(config, env)
        self._config = config
        endpoint, region = config.endpoint, config.region
        # ClientConfig fills both in.
        assert endpoint is not None
        assert region is not None
        self.endpoint = Endpoint.parse(endpoint, addressing_style=config.addressing_style)
        self.region = region
        verify = tls_verify(config.verify, os.environ)
        if transport is None and self.endpoint.scheme == "https":
            check_ca_bundle(verify)
        self._transport: Transport = transport or HTTPTransport(
            self.endpoint,
            signing_credentials(config, verify, env),
            region=region,
            timeout=config.timeout,
            max_pool_connections=config.max_pool_connections,
            retry=make_retry(config.retries),
            verify=verify,
            dialect=ChecksumDialect(
                config.request_checksum_calculation, config.response_checksum_validation
            ),
            # Read where the client is built, as verify=None is (and as botocore reads
            # them when it makes a client): a pickled client takes its worker's.
            proxies=Proxies.from_environ(os.environ),
        )
        self._transport = encrypting(self._transport, config.sse)
        # Whether this client's last adaptive upload saw a connection cut mid-part.
        self._cut_memory = CutMemory()

    @classmethod
    def from_config(cls, config: ClientConfig) -> Client:
        """A client with these settings (see :mod:`objsdk._core.client_config`)."""
        client = cls.__new__(cls)
        client._build(config, None)
        return client

    @property
    def credentials(self) -> Credentials | None:
        """The credentials requests are signed with now (None: anonymous)."""
        return self._transport.credentials

    @property
    def config(self) -> ClientConfig:
        """The settings this client was made with (frozen; its repr shows no secret)."""
        return self._config

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
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        max_pool_connections: int = DEFAULT_MAX_POOL_CONNECTIONS,
        retries: int | Policy | EllipsisType | None = ...,
        addressing_style: str | None = None,
        verify: bool | str | None = None,
        request_checksum_calculation: str | None = None,
        response_checksum_validation: str | None = None,
        use_fips_endpoint: bool | None = None,
        use_dualstack_endpoint: bool | None = None,
        credentials: Credentials | Callable[[], Credentials] | None = None,
        anonymous: bool = False,
    ) -> Client:
        """A client configured as the aws CLI and boto3 would be: arguments first, then
        the environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
        ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``,
        ``AWS_PROFILE``, ``AWS_CA_BUNDLE``, ``AWS_MAX_ATTEMPTS``, ``AWS_RETRY_MODE``,
        ``AWS_REQUEST_CHECKSUM_CALCULATION``, ``AWS_RESPONSE_CHECKSUM_VALIDATION``,
        ``AWS_USE_FIPS_ENDPOINT``, ``AWS_USE_DUALSTACK_ENDPOINT``...), then the shared
        files (``~/.aws/credentials``, ``~/.aws/config``: the profile's
        ``max_attempts``, ``request_checksum_calculation``, ``s3 = addressing_style``...
        too), and the credential chain (docs/credentials.md). A ``profile`` named here
        is used even when ``AWS_ACCESS_KEY_ID`` is set. No endpoint anywhere: AWS S3's in
        the region. ``retries`` not given: ``max_attempts`` - 1 if set, else 5. See
        :func:`objsdk._core.client_config.resolve_client_config`."""
        env = os.environ if environ is None else environ
        client = cls.__new__(cls)
        # Its credentials are fetched from the environment they were resolved from.
        client._build(
            resolve_client_config(
                env,
                endpoint=endpoint,
                access_key=access_key,
                secret_key=secret_key,
                session_token=session_token,
                region=region,
                profile=profile,
                timeout=timeout,
                max_pool_connections=max_pool_connections,
                retries=retries,
                addressing_style=addressing_style,
                verify=verify,
                request_checksum_calculation=request_checksum_calculation,
                response_checksum_validation=response_checksum_validation,
                use_fips_endpoint=use_fips_endpoint,
                use_dualstack_endpoint=use_dualstack_endpoint,
                credentials=credentials,
                anonymous=anonymous,
                # An environ without HOME (a test's dict) still finds this user's ~/.aws.
                home=env.get("HOME") or os.path.expanduser("~"),
            ),
            None,
            env,
        )
        return client

    def __repr__(self) -> str:
        return f"Client(endpoint={self.endpoint.url!r}, region={self.region!r})"

    # A client crosses process boundaries (dataloader workers, pickled ObjectFiles) as its
    # configuration, which leaves the secret behind unless pickle_credentials=True; the
    # connection pool is built again on the other side.
    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self).from_config, (self._config,))

    def close(self) -> None:
        """Release pooled connections."""
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        max_stall: float | None = None,
        pin: ObjectInfo | None = None,
    ) -> ObjectFile:
        """A seekable, resumable binary file over the object (see :class:`ObjectFile`).

        Nothing is sent until the first read. With ``readahead=N``, N threads fetch the
        next ``part_size`` parts in parallel while you read (sequential reading only);
        ``0`` is one stream; ``None`` (the default) adapts to the network: parts ahead
        are added while the rate keeps rising. Use it as a context manager. ``max_stall``:
        seconds without progress a read survives (resuming), instead of ``max_resume``.
        ``pin``: the :class:`ObjectInfo` :meth:`head_object` returned for this object:
        the file reads that version or raises :class:`~objsdk.ObjectChangedError`, and
        sends no HEAD of its own.
        """
        f = ObjectFile(
            self,
            bucket,
            key,
            chunk_size=chunk_size,
            max_resume=max_resume,
            version_id=version_id,
            verify=verify,
            readahead=readahead,
            part_size=part_size,
            pin=pin,
            max_stall=max_stall,  # read-ahead parts inherit it (RangeReader.window)
        )
        return f

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
        verify: bool = True,
        version_id: str | None = None,
    ) -> DownloadResult:
        """Download the whole object to a path or a writable buffer, in parallel parts.

        Paths are written atomically (temp file, fsync, rename), and a download that
        failed resumes from the parts it recorded if the object is unchanged (every part
        it finished, after an exception; all but those of its last 32 MiB or half
        second, after a kill). Buffers are filled
        straight from the socket. ``parallel=None`` adapts the parts in flight to the
        network (one at first, more while the rate keeps rising); a number pins it.
        ``version_id`` names a version (default: the current one).
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
            verify=verify,
            version_id=version_id,
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
        verify: bool = True,
        version_id: str | None = None,
    ) -> int:
        """Fill ``buffer`` with the object's bytes from ``offset`` (fewer at the end);
        return how many. Received straight into the buffer, in parallel when large; a
        fill of the whole object is verified unless ``verify=False``. ``version_id``
        names a version (default: the current one)."""
        return _get_into(
            self._transport,
            bucket,
            key,
            buffer,
            offset=offset,
            parallel=parallel,
            part_size=part_size,
            verify=verify,
            version_id=version_id,
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
        resume: bool | None = None,
        **headers: Unpack[ObjectHeaders],
    ) -> UploadInfo:
        """Store a file (path or binary file object) or a buffer, fast and safely.

        Below ``multipart_threshold`` (64 MiB) one PUT, whose body goes by
        ``socket.sendfile`` for a regular file over plain HTTP; above it a multipart
        upload of ``part_size`` parts with ``parallel`` in flight, aborted on a
        failure (a path's is kept to resume, see below). By default the parts in
        flight follow the aggregate rate, parts are 8 to 16 MiB, as many as make whole
        rounds of 16 (5 MiB or a little more once this client's uploads see connections
        cut mid-part), and a fixed ``parallel`` sends parts of 16 MiB. Every upload
        stores a CRC32C that reads verify. The answer is the stored object's
        :class:`ObjectInfo`, with the parts it was sent in, the parts in flight at the
        end and the broken connections that made a part go again. ``cache_control``,
        ``content_encoding``, ``content_disposition`` and ``storage_class`` are stored
        with the object. See :func:`objsdk._transfer.upload.upload`.

        A path uploaded in parts resumes (``resume``, default True): when it stops for a
        reason a later run can get past (Ctrl-C, SIGTERM, a network failure, a crash)
        its multipart upload is kept, the error names it (``kept_upload``), and the same
        call later sends only the parts not stored yet, checked against the file's bytes
        (docs/uploads.md). ``resume=False`` starts over and aborts the earlier upload.
        """
        try:
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
                extra_headers=standard_headers(bucket, key, **headers),
                resume=resume,
            )
        except BaseException as e:
            release_buffer(e)
            del source  # as in put_object
            raise

    def copy(
        self,
        src_bucket: str,
        src_key: str,
        dst_bucket: str,
        dst_key: str,
        *,
        version_id: str | None = None,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        multipart_threshold: int = MAX_SINGLE_COPY,
        part_size: int | None = None,
        parallel: int | None = None,
        progress: Progress | None = None,
        **headers: Unpack[ObjectHeaders],
    ) -> ObjectInfo:
        """Copy an object of any size on the server (boto3's managed ``copy``): one
        CopyObject up to ``multipart_threshold`` (5 GiB, its limit), else parts of
        ``part_size`` (256 MiB, larger where 10,000 would not hold the object) that the
        server copies (UploadPartCopy), ``parallel`` (8) at a time. The source is pinned
        to the ETag a HEAD found: one replaced mid-copy raises
        :class:`~objsdk.ObjectChangedError` and the upload is aborted. Metadata and
        headers as :meth:`copy_object`; ``progress(done, total)`` as :meth:`upload`'s,
        per part copied. Returns the copy as a HEAD describes it. See
        :mod:`objsdk._transfer.copy`."""
        check_copy_names(src_bucket, src_key, dst_bucket, dst_key)
        return _copy(
            self._transport,
            src_bucket,
            src_key,
            dst_bucket,
            dst_key,
            version_id=version_id,
            content_type=content_type,
            metadata=metadata,
            headers=standard_headers(dst_bucket, dst_key, **headers),
            multipart_threshold=multipart_threshold,
            part_size=part_size,
            parallel=parallel,
            progress=progress,
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
        **headers: Unpack[ObjectHeaders],
    ) -> ObjectWriter:
        """A writable binary file whose bytes become the object at ``close()``.

        Small writes are buffered into parts and streamed as a multipart upload (one PUT
        if it stays under a part); leaving a ``with`` block by an exception aborts it.
        The standard headers are those of :meth:`upload`. See :class:`ObjectWriter`.
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
            extra_headers=standard_headers(bucket, key, **headers),
        )
