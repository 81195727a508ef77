"""objsdk: a client for S3-compatible object storage that never loses a byte.

The public API is re-exported here; the modules behind it each own one idea
(``signing``, ``transport``, ``client``, ``errors``...).
"""

from ._version import __version__
from .client import Client
from .download import DownloadResult
from .errors import (
    AccessDenied,
    BucketAlreadyExists,
    BucketNotEmpty,
    ConnectError,
    IntegrityError,
    InvalidArgument,
    InvalidObjectName,
    InvalidRange,
    LocalMinioError,
    NoSuchBucket,
    NoSuchKey,
    ObjectChangedError,
    ObjsdkError,
    PreconditionFailed,
    ProtocolError,
    ReadError,
    ResumeLimitError,
    S3Error,
    SlowDown,
    SourceChangedError,
    Timeout,
    TransportError,
)
from .models import BucketInfo, DeleteError, ObjectInfo, ObjectSummary, Prefix
from .objectfile import ObjectFile, ReadStats
from .retry import default_retry
from .writer import ObjectWriter

__all__ = [
    "AccessDenied",
    "BucketAlreadyExists",
    "BucketInfo",
    "BucketNotEmpty",
    "Client",
    "ConnectError",
    "DeleteError",
    "DownloadResult",
    "IntegrityError",
    "InvalidArgument",
    "InvalidObjectName",
    "InvalidRange",
    "LocalMinio",
    "LocalMinioError",
    "NoSuchBucket",
    "NoSuchKey",
    "ObjectChangedError",
    "ObjectFile",
    "ObjectInfo",
    "ObjectSummary",
    "ObjectWriter",
    "ObjsdkError",
    "PreconditionFailed",
    "Prefix",
    "ProtocolError",
    "ReadError",
    "ReadStats",
    "ResumeLimitError",
    "S3Error",
    "SlowDown",
    "SourceChangedError",
    "Timeout",
    "TransportError",
    "__version__",
    "default_retry",
]


def __getattr__(name: str) -> object:
    # LocalMinio pulls in process management; load it only when asked for.
    if name == "LocalMinio":
        from .local_minio import LocalMinio

        return LocalMinio
    raise AttributeError(f"module 'objsdk' has no attribute {name!r}")
