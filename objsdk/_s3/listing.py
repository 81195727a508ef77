"""Lazy listing of a bucket's keys (ListObjectsV2)."""

from __future__ import annotations

from collections.abc import Iterator

from objsdk import errors
from objsdk._core.addressing import check_bucket
from objsdk._core.pagination import Pagination
from objsdk._core.s3xml import parse_list_objects_v2
from objsdk._transport.base import Transport
from objsdk.models import ObjectSummary, Prefix

__all__ = ["ListingAPI", "list_objects"]


def list_objects(
    transport: Transport,
    bucket: str,
    prefix: str,
    delimiter: str | None,
    start_after: str | None,
    page_size: int,
) -> Iterator[ObjectSummary | Prefix]:
    """Keys under ``prefix``, page by page as the caller iterates, following
    continuation tokens; with a ``delimiter``, common prefixes come as :class:`Prefix`
    values in key order among the objects."""
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= 1000:
        raise errors.InvalidArgument(f"page_size must be 1..1000, got {page_size!r}")
    return _pages(transport, bucket, prefix, delimiter, start_after, page_size)


def _pages(
    transport: Transport,
    bucket: str,
    prefix: str,
    delimiter: str | None,
    start_after: str | None,
    page_size: int,
) -> Iterator[ObjectSummary | Prefix]:
    token: str | None = None
    walk = Pagination("list_objects", bucket, prefix)
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
        with errors.naming_prefix(prefix):
            resp = transport.request("GET", operation="list_objects", bucket=bucket, params=params)
        page = walk.parse(parse_list_objects_v2, resp.content)
        entries: list[ObjectSummary | Prefix] = [*page.objects, *page.prefixes]
        entries.sort(key=lambda e: e.key)
        yield from entries
        if not page.is_truncated:
            return
        token = page.next_token or ""
        walk.next_page(len(entries), [("continuation-token", token)])


class ListingAPI:
    """The :class:`~objsdk.Client` method for listing keys."""

    _transport: Transport

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
