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
    (errors.InvalidRange, OSError, errno.EINVAL),
    (errors.SlowDown, OSError, errno.EBUSY),
    (errors.S3Error, OSError, errno.EIO),
)


def as_oserror(err: errors.S3Error, path: str) -> OSError:
    """The OSError for ``err`` about ``path`` (``str``: ``[Errno 2] <objsdk text>: 'path'``)."""
    for source, target, code in _TABLE:
        if isinstance(err, source):
            return target(code, str(err), path)
    raise AssertionError("S3Error is the table's last row")  # pragma: no cover


@contextmanager
def translated(path: str) -> Iterator[None]:
    """Raise S3 errors from the block as :func:`as_oserror` says, ``from`` the original."""
    try:
        yield
    except errors.S3Error as err:
        raise as_oserror(err, path) from err
