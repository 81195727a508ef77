"""The :class:`~objsdk.Client` methods that see and remove incomplete multipart uploads:
started, neither completed nor aborted, their parts stored and billed until they are (an
upload of a file kept to resume is one of them)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from types import EllipsisType
from typing import overload

from objsdk import errors
from objsdk._core.addressing import check_bucket, check_key
from objsdk._transfer.multipart_calls import uploads_under
from objsdk._transfer.upload_records import abort_uploads
from objsdk._transport.base import Transport
from objsdk.models import MultipartUpload

__all__ = ["IncompleteUploadsAPI"]


class IncompleteUploadsAPI:
    """The :class:`~objsdk.Client` methods for incomplete multipart uploads."""

    _transport: Transport

    def list_multipart_uploads(
        self, bucket: str, prefix: str = "", *, exact: bool = False
    ) -> Iterator[MultipartUpload]:
        """The multipart uploads under ``prefix`` started and neither completed nor
        aborted (ListMultipartUploads), lazily: their parts are stored, and billed, until
        they are. An upload of a file that stopped and is kept to resume is one of them.
        ``prefix`` is a prefix: ``"k"`` also lists the uploads of ``k2`` and ``k/part``;
        ``exact=True`` takes it as one whole key, and lists that key's uploads only."""
        check_bucket(bucket)
        if exact:
            check_key(prefix)
        return uploads_under(self._transport, bucket, prefix, exact=exact)

    @overload
    def abort_multipart_uploads(
        self,
        bucket: str,
        prefix: str = "",
        *,
        older_than: timedelta | None,
        dry_run: bool = False,
        exact: bool = False,
    ) -> list[MultipartUpload]: ...

    @overload
    def abort_multipart_uploads(
        self,
        bucket: str,
        prefix: str,
        *,
        upload_id: str,
        older_than: timedelta | None = None,
        dry_run: bool = False,
    ) -> list[MultipartUpload]: ...

    def abort_multipart_uploads(
        self,
        bucket: str,
        prefix: str = "",
        *,
        older_than: timedelta | EllipsisType | None = ...,
        dry_run: bool = False,
        exact: bool = False,
        upload_id: str | None = None,
    ) -> list[MultipartUpload]:
        """Abort the multipart uploads under ``prefix`` initiated more than
        ``older_than`` ago, as the server's clock tells (``None``: every one, another
        writer's live upload too: say so explicitly), and forget this machine's records
        of them; return those aborted (``dry_run``: those that would be).

        ``prefix`` is a prefix, as in :meth:`list_multipart_uploads` (``"k"`` also
        names the uploads of ``k2`` and ``k/part``); ``exact=True`` takes it as one whole
        key. ``upload_id`` names one upload of the key ``prefix``, as
        AbortMultipartUpload does, and only it is aborted (at any age, unless
        ``older_than`` is given): that is how to discard one kept upload,
        ``abort_multipart_uploads(kept.bucket, kept.key, upload_id=kept.upload_id)``.
        An upload not in progress is not returned: ``[]``."""
        check_bucket(bucket)
        if exact or upload_id is not None:
            check_key(prefix)
        if upload_id is not None and (not isinstance(upload_id, str) or not upload_id):
            raise errors.InvalidArgument(f"upload_id must be a non-empty str, got {upload_id!r}")
        if isinstance(older_than, EllipsisType):
            if upload_id is None:
                raise errors.InvalidArgument(
                    "abort_multipart_uploads needs older_than (None: every upload under "
                    "the prefix, another writer's live one too) unless upload_id names one"
                )
            older_than = None
        return abort_uploads(
            self._transport,
            bucket,
            prefix,
            older_than=older_than,
            dry_run=dry_run,
            exact=exact,
            upload_id=upload_id,
        )
