"""One walk through a paginated listing, checked page by page so that it ends (pure).

S3 listings come in pages; a truncated page says where the next one starts: a
continuation token (ListObjectsV2), or markers (ListObjectVersions' key and version-id
markers, ListMultipartUploads' key and upload-id markers, ListObjects' marker,
ListParts' part-number marker). A server that sends a position a second time would
have the walk request the same pages forever and yield their entries again; boto3
stops such a walk with ``PaginationError`` for the same reason. :class:`Pagination`
stops it with a :class:`~objsdk.errors.ProtocolError` naming the operation, the bucket
and the repeated position; a page whose body cannot be read (:meth:`Pagination.parse`)
stops it with an :class:`~objsdk.errors.XMLParseError` naming the same. Every listing
of objsdk pages through one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NoReturn, TypeVar

from objsdk import errors

__all__ = ["MAX_EMPTY_PAGES", "Pagination"]

T = TypeVar("T")

#: How many truncated pages in a row may hold no entry before the walk is taken for a
#: loop. S3 may end a page early, even empty, when what it passed over fills the
#: page's budget: keys hidden by delete markers, keys outside a delimiter's level
#: already rolled into a common prefix, uploads it skips. Each empty page stands for up
#: to a thousand such entries, so a thousand in a row is a run of about a million
#: hidden entries, far past what a listing meets in practice; and a thousand requests
#: (well under a minute) is what a server that loops on fresh tokens costs before the
#: walk gives up.
MAX_EMPTY_PAGES = 1000


class Pagination:
    """The positions one walk of ``operation`` on ``bucket`` (under ``prefix``) has
    started pages from, and its run of empty pages."""

    def __init__(self, operation: str, bucket: str, prefix: str = "") -> None:
        self.operation = operation
        self.bucket = bucket
        self.prefix = prefix
        self._seen: set[tuple[tuple[str, str], ...]] = set()
        self._empty = 0

    def next_page(self, entries: int, position: Sequence[tuple[str, str]]) -> None:
        """A truncated page of ``entries`` entries (objects, common prefixes, versions,
        uploads...) says the next starts at ``position``: the query parameters that
        carry it, as ``[("continuation-token", t)]`` or ``[("key-marker", k),
        ("version-id-marker", v)]``.

        Raises :class:`~objsdk.errors.ProtocolError` if ``position`` is empty (a
        truncated page with nowhere to go on from), was already sent in this walk (a
        marker that did not advance, a token that came back), or if this is the
        :data:`MAX_EMPTY_PAGES`-th page in a row with no entry.
        """
        if not any(value for _, value in position):
            names = " or ".join(name for name, _ in position)
            self._fail(f"truncated listing without a {names}")
        key = tuple(position)
        if key in self._seen:
            where = ", ".join(f"{name} {value!r}" for name, value in position if value)
            self._fail(
                f"the server sent {where} a second time: the listing would go round "
                "forever, yielding the same entries again"
            )
        self._seen.add(key)
        self._empty = 0 if entries else self._empty + 1
        if self._empty >= MAX_EMPTY_PAGES:
            self._fail(
                f"{MAX_EMPTY_PAGES} empty pages in a row, each with a new position: "
                "the listing does not get anywhere"
            )

    def parse(self, parse: Callable[[bytes], T], body: bytes) -> T:
        """A page's ``body`` as ``parse`` reads it. The
        :class:`~objsdk.errors.XMLParseError` it raises (a body that is not XML, a
        field that is not what S3 sends, such as a negative ``Size``) names only the
        field: raised again naming the walk's operation, bucket and prefix too."""
        try:
            return parse(body)
        except errors.XMLParseError as e:
            raise errors.XMLParseError(
                f"{e}{self._under()}", operation=self.operation, bucket=self.bucket
            ) from e

    def _fail(self, message: str) -> NoReturn:
        raise errors.ProtocolError(
            f"{message}{self._under()}", operation=self.operation, bucket=self.bucket
        )

    def _under(self) -> str:
        return f" (prefix {self.prefix!r})" if self.prefix else ""
