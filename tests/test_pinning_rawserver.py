"""Servers that make version pinning hard: no ETag, a weak ETag, and one that ignores
Range. Reads, read-ahead and downloads must never splice two versions, must not turn a
weak ETag into false ObjectChangedErrors, and must not pay O(N²) for ignored ranges."""

from __future__ import annotations

import contextlib
import random
import socket
from collections.abc import Callable, Iterator

import pytest
from rawserver import RawServer, Reply, Request, S3Object, object_reply, send_truncated

import objsdk

BUCKET, KEY = "bkt", "dir/obj.bin"
SIZE = 600 * 1024
DATA = random.Random(7).randbytes(SIZE)
CUT = 100_000
PART = 64 * 1024

Handler = Callable[[Request, socket.socket], None]
Serve = Callable[[Handler], tuple[RawServer, objsdk.Client]]


@pytest.fixture
def serve() -> Iterator[Serve]:
    with contextlib.ExitStack() as stack:

        def start(handler: Handler) -> tuple[RawServer, objsdk.Client]:
            server = stack.enter_context(RawServer(handler))
            client = objsdk.Client(server.url, "AKID", "SECRET", retries=0, timeout=(2, 2))
            return server, stack.enter_context(client)

        yield start


def reply_without(request: Request, obj: S3Object, *drop: str, **replace: str) -> Reply:
    reply = object_reply(request, obj, honour_if_match=False)
    headers = {k: v for k, v in reply.headers.items() if k not in drop}
    headers.update({k.replace("_", "-"): v for k, v in replace.items()})
    return Reply(reply.status, headers, reply.body)


def answer(request: Request, conn: socket.socket, reply: Reply) -> None:
    """Send ``reply``; to a HEAD, only its status line and headers."""
    if request.method == "HEAD":
        conn.sendall(reply.head)
    else:
        reply.send(conn)


def cut_first(make: Callable[[Request], Reply]) -> Handler:
    def handler(request: Request, conn: socket.socket) -> None:
        reply = make(request)
        if request.index == 0 and request.method == "GET":
            send_truncated(conn, reply, CUT)
        else:
            answer(request, conn, reply)

    return handler


def test_a_weak_etag_is_pinned_by_last_modified_and_resumes(serve):
    obj = S3Object(DATA, etag='W/"abc"')
    server, client = serve(cut_first(lambda r: reply_without(r, obj)))
    with client.open(BUCKET, KEY, max_resume=2) as f:
        assert f.read() == DATA
        assert f.stats.resumes == 1
    resumed = server.requests[1]
    assert "If-Match" not in resumed.headers  # a weak ETag never matches If-Match
    assert resumed.headers["If-Unmodified-Since"] == "Mon, 01 Jan 2024 00:00:00 GMT"


def test_a_head_answer_given_to_open_pins_the_first_get_and_replaces_its_own_head(serve):
    obj = S3Object(DATA, etag='W/"abc"')
    server, client = serve(lambda r, conn: answer(r, conn, reply_without(r, obj)))
    head = client.head_object(BUCKET, KEY)
    with client.open(BUCKET, KEY, pin=head, readahead=0) as f:
        assert f.size == SIZE
        assert f.read() == DATA
    assert [r.method for r in server.requests] == ["HEAD", "GET"]  # the caller's HEAD only
    first = server.requests[1]
    assert "If-Match" not in first.headers  # a weak ETag never matches If-Match
    assert first.headers["If-Unmodified-Since"] == "Mon, 01 Jan 2024 00:00:00 GMT"


def test_no_etag_is_pinned_by_last_modified_and_resumes(serve):
    obj = S3Object(DATA)
    server, client = serve(cut_first(lambda r: reply_without(r, obj, "ETag")))
    with client.open(BUCKET, KEY, max_resume=2) as f:
        assert f.read() == DATA
    assert server.requests[1].headers["If-Unmodified-Since"]


def test_a_resume_that_finds_another_last_modified_is_object_changed(serve):
    obj = S3Object(DATA)

    def make(request: Request) -> Reply:
        later = "Tue, 02 Jan 2024 00:00:00 GMT" if request.index else None
        extra = {"Last_Modified": later} if later else {}
        return reply_without(request, obj, "ETag", **extra)

    _, client = serve(cut_first(make))
    with client.open(BUCKET, KEY, max_resume=2) as f, pytest.raises(objsdk.ObjectChangedError):
        f.read()


def test_nothing_to_pin_refuses_to_resume_with_a_clear_error(serve):
    obj = S3Object(DATA)
    _, client = serve(cut_first(lambda r: reply_without(r, obj, "ETag", "Last-Modified")))
    with (
        client.open(BUCKET, KEY, max_resume=2) as f,
        pytest.raises(objsdk.ReadError, match="neither an ETag nor Last-Modified"),
    ):
        f.read()


def test_nothing_to_pin_downloads_through_one_request(serve, tmp_path):
    obj = S3Object(DATA)
    server, client = serve(
        lambda r, conn: answer(r, conn, reply_without(r, obj, "ETag", "Last-Modified"))
    )
    client.download(BUCKET, KEY, tmp_path / "out", part_size=PART, parallel=4)
    assert (tmp_path / "out").read_bytes() == DATA
    assert [r.method for r in server.requests] == ["HEAD", "GET"]


def ignore_range(obj: S3Object) -> Handler:
    def handler(request: Request, conn: socket.socket) -> None:
        headers = {"ETag": obj.etag, "Last-Modified": "Mon, 01 Jan 2024 00:00:00 GMT"}
        answer(request, conn, Reply(200, headers, DATA))

    return handler


def test_a_download_from_a_server_that_ignores_range_falls_back_to_one_stream(serve, tmp_path):
    server, client = serve(ignore_range(S3Object(DATA)))
    client.download(BUCKET, KEY, tmp_path / "out", part_size=PART, parallel=4)
    assert (tmp_path / "out").read_bytes() == DATA
    gets = [r for r in server.requests if r.method == "GET"]
    # At most one window per worker notices, then one stream: not one per part.
    assert len(gets) <= 4 + 1 < SIZE // PART


def test_get_into_from_a_server_that_ignores_range_is_byte_identical(serve):
    _, client = serve(ignore_range(S3Object(DATA)))
    buf = bytearray(SIZE)
    assert client.get_into(BUCKET, KEY, buf, part_size=PART, parallel=4) == SIZE
    assert buf == DATA


def test_read_ahead_from_a_server_that_ignores_range_falls_back_to_one_stream(serve):
    server, client = serve(ignore_range(S3Object(DATA)))
    with client.open(BUCKET, KEY, readahead=3, part_size=PART) as f:
        got = b"".join(iter(lambda: f.read(PART), b""))
    assert got == DATA
    gets = [r for r in server.requests if r.method == "GET"]
    assert len(gets) < SIZE // PART
