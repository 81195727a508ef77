"""objsdk's S3 errors as the ``OSError`` subclasses fsspec users catch, decided in one table.

The OSError's text is the objsdk error's (operation, S3 code, HTTP status, bucket, key,
the server's message and request id) and the objsdk error is its ``__cause__``, so
``except FileNotFoundError`` works as with s3fs and nothing the server said is lost.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager

from objsdk import errors

__all__ = ["as_oserror", "translated"]

# First match wins: (objsdk error, the OSError raised for it, its errno).
_TABLE: tuple[tuple[type[errors.S3Error], type[OSError], int], ...] = (
    (errors.NoSuchKey, FileNotFoundError, errno.ENOENT),
    (errors.NoSuchBucket, FileNotFoundError, errno.ENOENT),
    (errors.AccessDenied, PermissionError, errno.EACCES),
    (errors.BucketAlreadyExists, FileExistsError, errno.EEXIST),
    (errors.BucketNotEmpty, OSError, errno.ENOTEMPTY),
    (errors.InvalidObjectName, OSError, errno.EINVAL),
    (errors.InvalidObjectState, PermissionError, errno.EACCES),  # archived: as s3fs
    (errors.InvalidRange, OSError, errno.EINVAL),
    (errors.SlowDown, OSError, errno.EBUSY),
)
# Codes objsdk has no class for (a server's own, such as MinIO's InvalidTokenId), by
# HTTP status: refused is refused, not found is not found.
_BY_STATUS: dict[int, tuple[type[OSError], int]] = {
    403: (PermissionError, errno.EACCES),
    404: (FileNotFoundError, errno.ENOENT),
}


def as_oserror(err: errors.S3Error, path: str) -> OSError:
    """The OSError for ``err`` about ``path`` (``str``: ``[Errno 2] <objsdk text>: 'path'``)."""
    for source, target, code in _TABLE:
        if isinstance(err, source):
            return target(code, str(err), path)
    target, code = _BY_STATUS.get(err.status, (OSError, errno.EIO))
    return target(code, str(err), path)


@contextmanager
def translated(path: str) -> Iterator[None]:
    """Raise S3 errors from the block as :func:`as_oserror` says, ``from`` the original."""
    try:
        yield
    except errors.S3Error as err:
        raise as_oserror(err, path) from err
