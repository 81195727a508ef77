"""Every paginated listing ends: a server whose continuation token or markers come back a
second time, or that sends empty truncated pages without end, stops the walk with a
ProtocolError naming the bucket, the operation and the repeated position, instead of
requesting the same pages forever and yielding their entries again.

The listings are ListObjectsV2 (continuation tokens), ListObjectVersions (key and
version-id markers), ListMultipartUploads (key and upload-id markers) and ListParts (a
part-number marker, walked when an upload of a file resumes), through the client, the
fsspec filesystem and the CLI, against a scripted raw HTTP server.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qsl, urlsplit
from xml.sax.saxutils import escape

import pytest
from rawserver import RawServer, Reply, Request

import objsdk
from objsdk._core.pagination import MAX_EMPTY_PAGES
from objsdk._transfer.multipart_calls import list_multipart_uploads, list_parts
from objsdk.filesystem import ObjsdkFileSystem

BUCKET = "bkt"
# Past this many listing requests the server ends the listing, so that a client that
# would go round forever fails its test instead of hanging it.
LIMIT = 2 * MAX_EMPTY_PAGES + 20

#: A page: its entries (keys) and where the next one starts (None: the last page).
Page = tuple[list[str], str | None]
#: The listing's pages: the n-th listing request (from 0) gets ``script(n)``.
Script = Callable[[int], Page]

KIND_OF = {
    "list-type": "objects",
    "versions": "versions",
    "uploads": "uploads",
    "uploadId": "parts",
}


def _xml(kind: str, keys: list[str], after: str | None) -> bytes:
    """A ``kind`` listing page of ``keys``, truncated with ``after`` as its token or
    markers if given."""
    more = f"<IsTruncated>{'true' if after is not None else 'false'}</IsTruncated>"
    after = escape(after or "")
    if kind == "objects":
        root = "ListBucketResult"
        entries = "".join(f"<Contents><Key>{k}</Key><Size>1</Size></Contents>" for k in keys)
        more += f"<NextContinuationToken>{after}</NextContinuationToken>" if after else ""
    elif kind == "versions":
        root = "ListVersionsResult"
        entries = "".join(
            f"<Version><Key>{k}</Key><VersionId>v-{k}</VersionId><IsLatest>true</IsLatest>"
            "<LastModified>2024-01-01T00:00:00.000Z</LastModified><Size>1</Size></Version>"
            for k in keys
        )
        if after:
            more += f"<NextKeyMarker>{after}</NextKeyMarker>"
            more += f"<NextVersionIdMarker>v-{after}</NextVersionIdMarker>"
    elif kind == "parts":
        root = "ListPartsResult"
        # A part's number is not what the walk checks: its ETag carries the "key".
        entries = "".join(
            f"<Part><PartNumber>{n}</PartNumber><Size>1</Size><ETag>{k}</ETag></Part>"
            for n, k in enumerate(keys, 1)
        )
        more += f"<NextPartNumberMarker>{after}</NextPartNumberMarker>" if after else ""
    else:
        root = "ListMultipartUploadsResult"
        entries = "".join(
            f"<Upload><Key>{k}</Key><UploadId>u-{k}</UploadId>"
            "<Initiated>2024-01-01T00:00:00.000Z</Initiated></Upload>"
            for k in keys
        )
        if after:
            more += f"<NextKeyMarker>{after}</NextKeyMarker>"
            more += f"<NextUploadIdMarker>u-{after}</NextUploadIdMarker>"
    return f"<{root}>{more}{entries}</{root}>".encode()


class Listing:
    """A raw server answering listings of BUCKET page by page from a script."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.sent: list[dict[str, str]] = []  # each listing request's query

    def __call__(self, request: Request, conn: socket.socket) -> None:
        query = dict(parse_qsl(urlsplit(request.path).query, keep_blank_values=True))
        kinds = [kind for name, kind in KIND_OF.items() if name in query]
        if request.method != "GET" or not kinds:
            Reply(501, {}).send(conn)
            return
        self.sent.append(query)
        n = len(self.sent) - 1
        keys, after = self.script(n) if n < LIMIT else ([], None)
        Reply(200, {"Content-Type": "application/xml"}, _xml(kinds[0], keys, after)).send(conn)


@pytest.fixture
def serve() -> Iterator[Callable[[Script], tuple[Listing, objsdk.Client]]]:
    with contextlib.ExitStack() as stack:

        def start(script: Script) -> tuple[Listing, objsdk.Client]:
            listing = Listing(script)
            server = stack.enter_context(RawServer(listing))
            client = objsdk.Client(server.url, "AKID", "SECRET", retries=0, timeout=(2, 2))
            return listing, stack.enter_context(client)

        yield start


Walk = Callable[[objsdk.Client], list[Any]]

WALKS: dict[str, tuple[str, Walk]] = {
    "objects": ("list_objects", lambda c: list(c.list_objects(BUCKET, "p/"))),
    "objects-delimited": (
        "list_objects",
        lambda c: list(c.list_objects(BUCKET, "p/", delimiter="/")),
    ),
    "versions": ("list_object_versions", lambda c: list(c.list_object_versions(BUCKET, "p/"))),
    "uploads": (
        "list_multipart_uploads",
        lambda c: list(list_multipart_uploads(c.transport, BUCKET, "p/")),
    ),
    "parts": (
        "list_parts",
        lambda c: [SimpleNamespace(key=p.etag) for p in list_parts(c.transport, BUCKET, "k", "u")],
    ),
}


def _repeating(n: int) -> Page:
    return [f"p/{n}"], "T"  # every page says: go on from T


def _cycling(n: int) -> Page:
    return [f"p/{n}"], "AB"[n % 2]  # A, B, A...


@pytest.mark.parametrize("name", WALKS)
def test_a_token_or_marker_that_comes_back_stops_the_walk_naming_it(serve, name) -> None:
    operation, walk = WALKS[name]
    listing, client = serve(_repeating)
    with pytest.raises(objsdk.ProtocolError) as info:
        walk(client)
    err = info.value
    assert (err.bucket, err.operation) == (BUCKET, operation)
    assert "'T'" in str(err)
    assert len(listing.sent) == 2  # the first page, and the one T started


@pytest.mark.parametrize("name", WALKS)
def test_a_token_or_marker_seen_two_pages_earlier_stops_the_walk(serve, name) -> None:
    operation, walk = WALKS[name]
    listing, client = serve(_cycling)
    with pytest.raises(objsdk.ProtocolError, match="'A'") as info:
        walk(client)
    assert info.value.operation == operation
    assert len(listing.sent) == 3  # A, then B, then A again


def _empty_forever(n: int) -> Page:
    return [], f"T{n}"  # a fresh token each time, and never an entry


@pytest.mark.parametrize("name", ["objects", "versions", "uploads", "parts"])
def test_empty_truncated_pages_without_end_stop_the_walk(serve, name) -> None:
    operation, walk = WALKS[name]
    listing, client = serve(_empty_forever)
    with pytest.raises(objsdk.ProtocolError, match=f"{MAX_EMPTY_PAGES} empty pages") as info:
        walk(client)
    assert (info.value.bucket, info.value.operation) == (BUCKET, operation)
    assert len(listing.sent) == MAX_EMPTY_PAGES


def _a_few_empty_pages(n: int) -> Page:
    # S3 may end a page early, even with no entry, when keys it skips (delete markers,
    # say) fill it: a few empty truncated pages are a legal walk.
    pages: list[Page] = [(["p/a"], "t1"), ([], "t2"), ([], "t3"), (["p/b"], "t4"), ([], None)]
    return pages[n]


@pytest.mark.parametrize("name", WALKS)
def test_a_walk_through_a_few_empty_truncated_pages_completes(serve, name) -> None:
    _operation, walk = WALKS[name]
    listing, client = serve(_a_few_empty_pages)
    assert [e.key for e in walk(client)] == ["p/a", "p/b"]
    assert len(listing.sent) == 5


def _empty_pages_between_entries(n: int) -> Page:
    # The count of empty pages starts again after a page with entries.
    if n == 2 * MAX_EMPTY_PAGES - 2:
        return [], None
    return ([f"p/{n:06d}"] if n == MAX_EMPTY_PAGES - 1 else []), f"T{n}"


def test_the_empty_page_cap_counts_empty_pages_in_a_row(serve) -> None:
    listing, client = serve(_empty_pages_between_entries)
    assert [e.key for e in client.list_objects(BUCKET, "p/")] == [f"p/{MAX_EMPTY_PAGES - 1:06d}"]
    assert len(listing.sent) == 2 * MAX_EMPTY_PAGES - 1


@pytest.mark.parametrize("name", ["versions", "uploads", "parts"])
def test_a_truncated_page_without_markers_stops_the_walk(serve, name) -> None:
    operation, walk = WALKS[name]
    listing, client = serve(lambda n: (["p/a"], ""))
    with pytest.raises(objsdk.ProtocolError, match="truncated") as info:
        walk(client)
    assert info.value.operation == operation
    assert len(listing.sent) == 1


def test_the_filesystem_walk_stops_on_a_repeated_token(serve) -> None:
    listing, client = serve(_repeating)
    fs = ObjsdkFileSystem(
        endpoint_url=client.endpoint.url, key="AKID", secret="SECRET", skip_instance_cache=True
    )
    with pytest.raises(objsdk.ProtocolError, match="'T'"):
        fs.find(f"{BUCKET}/p")
    assert len(listing.sent) == 2


def test_the_cli_walk_stops_on_a_repeated_token(serve, monkeypatch, capsys, tmp_path) -> None:
    from objsdk.cli import main

    listing, client = serve(_repeating)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_ENDPOINT_URL", client.endpoint.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKID")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "SECRET")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    assert main(["ls", "--recursive", f"s3://{BUCKET}/p/"]) == 255
    err = capsys.readouterr().err
    assert "list_objects" in err
    assert "'T'" in err
    assert len(listing.sent) == 2
