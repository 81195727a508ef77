"""objsdk: a client for S3-compatible object storage that never loses a byte.

The public API is re-exported here; the modules behind it each own one idea
(``signing``, ``transport``, ``client``, ``errors``...).
"""

import logging

from objsdk._core.client_config import ClientConfig
from objsdk._core.signing import Credentials
from objsdk._core.sse import SSE, SSEC, SSEKMS, SSES3
from objsdk._io.objectfile import ObjectFile, ReadStats
from objsdk._transfer.download_result import DownloadResult
from objsdk._transfer.writer import ObjectWriter
from objsdk._transport.retry import default_retry
from objsdk._version import __version__
from objsdk.client import Client
from objsdk.errors import (
    AccessDenied,
    BucketAlreadyExists,
    BucketNotEmpty,
    Cancelled,
    ConfigError,
    ConnectError,
    CredentialsError,
    DownloadLockedError,
    IntegrityError,
    InvalidArgument,
    InvalidObjectName,
    InvalidObjectState,
    InvalidRange,
    LocalMinioError,
    LocalWriteError,
    NoSuchBucket,
    NoSuchKey,
    ObjectChangedError,
    ObjsdkError,
    PreconditionFailed,
    ProtocolError,
    ProxyError,
    ReadError,
    ResumeLimitError,
    S3Error,
    SlowDown,
    SourceChangedError,
    Timeout,
    TransportError,
    UploadLockedError,
)
from objsdk.models import (
    BucketInfo,
    DeleteError,
    MultipartUpload,
    ObjectInfo,
    ObjectSummary,
    ObjectVersion,
    Prefix,
    UploadInfo,
)

# A library logs, the application decides where it goes: without this handler, Python's
# last-resort handler would print objsdk's warnings (retries, say) on stderr of every
# program that configured no logging (Python docs, "Configuring Logging for a Library").
logging.getLogger("objsdk").addHandler(logging.NullHandler())

__all__ = [
    "SSE",
    "SSEC",
    "SSEKMS",
    "SSES3",
    "AccessDenied",
    "BucketAlreadyExists",
    "BucketInfo",
    "BucketNotEmpty",
    "Cancelled",
    "Client",
    "ClientConfig",
    "ConfigError",
    "ConnectError",
    "Credentials",
    "CredentialsError",
    "DeleteError",
    "DownloadLockedError",
    "DownloadResult",
    "IntegrityError",
    "InvalidArgument",
    "InvalidObjectName",
    "InvalidObjectState",
    "InvalidRange",
    "LocalMinio",
    "LocalMinioError",
    "LocalWriteError",
    "MultipartUpload",
    "NoSuchBucket",
    "NoSuchKey",
    "ObjectChangedError",
    "ObjectFile",
    "ObjectInfo",
    "ObjectSummary",
    "ObjectVersion",
    "ObjectWriter",
    "ObjsdkError",
    "PreconditionFailed",
    "Prefix",
    "ProtocolError",
    "ProxyError",
    "ReadError",
    "ReadStats",
    "ResumeLimitError",
    "S3Error",
    "SlowDown",
    "SourceChangedError",
    "Timeout",
    "TransportError",
    "UploadInfo",
    "UploadLockedError",
    "__version__",
    "default_retry",
]


def __getattr__(name: str) -> object:
    # LocalMinio pulls in process management; load it only when asked for.
    if name == "LocalMinio":
        from objsdk.testing.local_minio import LocalMinio

        return LocalMinio
    raise AttributeError(f"module 'objsdk' has no attribute {name!r}")
