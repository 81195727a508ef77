"""The :class:`~objsdk.Client` methods for whole objects in memory: ``put_object`` and
``get_object``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, TYPE_CHECKING

from objsdk._core.addressing import check_bucket, check_key
from objsdk._core.metadata import ObjectHeaders, standard_headers
from objsdk._io.get import get_object
from objsdk._s3.objects import put_object
from objsdk._transport.base import Transport
from objsdk.errors import drop_frame_locals
from objsdk.models import ObjectInfo

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer
    from typing_extensions import Unpack

__all__ = ["ObjectsAPI", "release_buffer"]


class ObjectsAPI:
    """The :class:`~objsdk.Client` methods for whole objects in memory."""

    _transport: Transport

    def put_object(
        self,
        bucket: str,
        key: str,
        data: ReadableBuffer | IO[bytes],
        *,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        **headers: Unpack[ObjectHeaders],
    ) -> ObjectInfo:
        """Store ``data`` under ``key`` in one PUT, with the standard headers given (as
        :meth:`upload`: ``cache_control``, ``content_encoding``, ``storage_class``...).

        Bytes-like data (bytes, bytearray, memoryview, array.array, a C-contiguous numpy
        array: its bytes in memory order) is sent from its own buffer, without a copy,
        with its SHA-256 signed and a CRC32C the server stores. A binary file object is
        sent from its current position to its end (it must be seekable, so a retry can
        rewind it): read once for its CRC32C, which the server checks the bytes that
        arrive against, then streamed, never read whole (up to 64 KiB: read and sent as
        bytes).
        """
        check_bucket(bucket)
        check_key(key)
        extra = standard_headers(bucket, key, **headers)
        try:
            return put_object(
                self._transport,
                bucket,
                key,
                data,
                content_type=content_type,
                metadata=metadata,
                extra_headers=extra,
            )
        except BaseException as e:
            release_buffer(e)
            del data  # this frame goes with the traceback: it must not hold the view either
            raise

    def get_object(
        self,
        bucket: str,
        key: str,
        *,
        offset: int = 0,
        length: int | None = None,
        version_id: str | None = None,
        verify: bool = True,
    ) -> bytes:
        """The object's bytes from ``offset``, ``length`` of them (to the end if None), of
        ``version_id`` if given, else of the current version.

        Reads the whole answer into memory; use :meth:`open` to stream large objects.
        The whole object is checked against its full-object checksum unless
        ``verify=False`` (:class:`~objsdk.IntegrityError` on mismatch).
        """
        check_bucket(bucket)
        check_key(key)
        return get_object(
            self._transport,
            bucket,
            key,
            offset=offset,
            length=length,
            version_id=version_id,
            verify=verify,
        )


def release_buffer(error: BaseException) -> None:
    """Let go of the caller's buffer before ``error`` reaches the caller: the finished
    frames of its traceback hold views of it, and while one lives a ``BytesIO`` whose
    ``getbuffer()`` was sent cannot be closed (``BufferError`` would replace the error)."""
    drop_frame_locals(error)
