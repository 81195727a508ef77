"""A listing entry's field that is not what S3 sends stops the listing with an
XMLParseError naming the operation, the bucket, the prefix and the field, never a
wrong number or a raw ValueError.

S3 sends an entry's ``Size`` as a byte count (a Long, S3 API reference, ListObjectsV2
and ListObjectVersions: ``Object``/``ObjectVersion``), and its dates in ISO 8601. A
negative size read as 0, or a size such as ``²`` (a digit to ``str.isdigit()``, not to
``int()``) raised as a ValueError, would hand the caller a wrong listing or an error
that names nothing. Through the client, against a raw HTTP server that answers every
listing with one entry whose field holds the value given.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit
from xml.sax.saxutils import escape

import pytest
from rawserver import RawServer, Reply, Request

import objsdk
from objsdk._transfer.multipart_calls import list_multipart_uploads
from objsdk.errors import XMLParseError

BUCKET, PREFIX = "bkt", "p/"
DATE = "2024-01-01T00:00:00.000Z"


def _entry(kind: str, size: str, date: str) -> bytes:
    """One page of a ``kind`` listing under PREFIX, its one entry of ``size`` and
    ``date`` (the last modification, or an upload's start)."""
    size, date = escape(size), escape(date)
    if kind == "objects":
        root = "ListBucketResult"
        entry = (
            f"<Contents><Key>p/a</Key><LastModified>{date}</LastModified>"
            f"<Size>{size}</Size></Contents>"
        )
    elif kind == "versions":
        root = "ListVersionsResult"
        entry = (
            "<Version><Key>p/a</Key><VersionId>v1</VersionId><IsLatest>true</IsLatest>"
            f"<LastModified>{date}</LastModified><Size>{size}</Size></Version>"
        )
    else:
        root = "ListMultipartUploadsResult"
        entry = (
            f"<Upload><Key>p/a</Key><UploadId>u1</UploadId><Initiated>{date}</Initiated></Upload>"
        )
    return f"<{root}><IsTruncated>false</IsTruncated>{entry}</{root}>".encode()


Walk = Callable[[objsdk.Client], list[Any]]

WALKS: dict[str, tuple[str, Walk]] = {
    "objects": ("list_objects", lambda c: list(c.list_objects(BUCKET, PREFIX))),
    "versions": ("list_object_versions", lambda c: list(c.list_object_versions(BUCKET, PREFIX))),
    "uploads": (
        "list_multipart_uploads",
        lambda c: list(list_multipart_uploads(c.transport, BUCKET, PREFIX)),
    ),
}


@pytest.fixture
def listing() -> Iterator[Callable[[str, str, str], list[Any]]]:
    """``listing(kind, size, date)``: the entries the client lists from a server whose
    every ``kind`` page is :func:`_entry` of ``size`` and ``date``."""
    servers: list[RawServer] = []

    def walk(kind: str, size: str, date: str) -> list[Any]:
        def answer(request: Request, conn: socket.socket) -> None:
            query = dict(parse_qsl(urlsplit(request.path).query, keep_blank_values=True))
            assert query.get("prefix") == PREFIX
            Reply(200, {"Content-Type": "application/xml"}, _entry(kind, size, date)).send(conn)

        server = RawServer(answer).__enter__()
        servers.append(server)
        with objsdk.Client(server.url, "AKID", "SECRET", retries=0, timeout=(2, 2)) as client:
            return WALKS[kind][1](client)

    yield walk
    for server in servers:
        server.__exit__(None, None, None)


NOT_SIZES = {
    "negative": "-5",
    "superscript": "\u00b2",  # str.isdigit() takes it, int() refuses it
    "arabic-indic": "\u0665",  # int() takes it: not an ASCII digit either
    "fraction": "1.5",
    "signed": "+5",
    "past-a-long": str(2**63),  # S3's Size is a Long
    "past-int-digits": "9" * 5000,  # int() refuses more than 4300 digits
}


@pytest.mark.parametrize("kind", ["objects", "versions"])
@pytest.mark.parametrize("size", list(NOT_SIZES.values()), ids=list(NOT_SIZES))
def test_a_size_that_is_not_a_byte_count_stops_the_listing_naming_bucket_and_field(
    listing, kind: str, size: str
) -> None:
    with pytest.raises(XMLParseError) as info:
        listing(kind, size, DATE)
    err = info.value
    assert (err.operation, err.bucket) == (WALKS[kind][0], BUCKET)
    assert f"Size {size[:40]!r} is not a byte count" in str(err)
    assert f"bucket {BUCKET!r}" in str(err)
    assert f"prefix {PREFIX!r}" in str(err)
    assert len(str(err)) < 300  # the value is cut, not repeated whole


@pytest.mark.parametrize("kind", ["objects", "versions", "uploads"])
def test_a_date_that_is_not_a_date_stops_the_listing_naming_bucket_and_field(
    listing, kind: str
) -> None:
    field = "Initiated" if kind == "uploads" else "LastModified"
    with pytest.raises(XMLParseError) as info:
        listing(kind, "1", "soon")
    err = info.value
    assert (err.operation, err.bucket) == (WALKS[kind][0], BUCKET)
    assert f"{field} 'soon' is not an ISO 8601 date" in str(err)


@pytest.mark.parametrize("kind", ["objects", "versions"])
@pytest.mark.parametrize("size", ["0", "7", " 7 ", str(2**63 - 1)])
def test_a_byte_count_is_listed_as_it_is(listing, kind: str, size: str) -> None:
    (entry,) = listing(kind, size, DATE)
    assert entry.size == int(size)
