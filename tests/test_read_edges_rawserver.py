"""Read paths at their edges, against a raw-socket server: a 416 inside the pinned size,
a 206 that starts or ends elsewhere than asked (``get_object`` and what goes through it),
a seek just past the end of the open stream, and a pickled reader pinned without an ETag.
"""

from __future__ import annotations

import contextlib
import pickle
import random
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rawserver import RawServer, Reply, Request, S3Object, http_response, object_reply

import objsdk
from objsdk._core.checksums import crc32c_b64
from objsdk._transport.http import HTTPTransport

BUCKET, KEY = "bkt", "dir/obj.bin"
SIZE = 600 * 1024
DATA = random.Random(25).randbytes(SIZE)
SHORTER = random.Random(26).randbytes(SIZE // 4)

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


def answer(request: Request, conn: socket.socket, reply: Reply) -> None:
    if request.method == "HEAD":
        conn.sendall(reply.head)
    else:
        reply.send(conn)


# -- a 416 inside the pinned size (issue 24, item 4) ---------------------------------------


def replaced_by_a_shorter_object_ignoring_if_match(request: Request, conn: socket.socket) -> None:
    """The first GET gets DATA; then the object is SHORTER, and If-Match is ignored; a
    416 says no size and no ETag, as MinIO's does."""
    if request.index == 0:
        answer(request, conn, object_reply(request, S3Object(DATA)))
        return
    reply = object_reply(request, S3Object(SHORTER, etag='"v2"'), honour_if_match=False)
    if reply.status == 416:
        reply = Reply(416, {"Content-Type": "application/xml"}, reply.body)
    answer(request, conn, reply)


def test_a_416_inside_the_pinned_size_means_the_object_changed_at_once(serve: Serve) -> None:
    server, client = serve(replaced_by_a_shorter_object_ignoring_if_match)
    with client.open(BUCKET, KEY, readahead=0, chunk_size=1024) as f:
        assert f.read(10) == DATA[:10]
        f.seek(SIZE // 2)  # far: a new request, answered 416 by the shorter object
        start = time.monotonic()
        with pytest.raises(objsdk.ObjectChangedError, match="416") as info:
            f.read(10)
        assert time.monotonic() - start < 1.0
        assert f.stats.resumes == 0
    assert info.value.offset == SIZE // 2
    assert [r.method for r in server.requests] == ["GET", "GET"]


def test_a_416_at_the_pinned_end_is_still_the_end(serve: Serve) -> None:
    def handler(request: Request, conn: socket.socket) -> None:
        reply = object_reply(request, S3Object(DATA))
        if reply.status == 416:
            reply = Reply(416, {"Content-Type": "application/xml"}, reply.body)
        answer(request, conn, reply)

    _, client = serve(handler)
    with client.open(BUCKET, KEY, readahead=0) as f:
        assert f.size == SIZE
        f.seek(SIZE)
        assert f.read() == b""


# -- Content-Range of ranged get_object (issue 25, item 10) -------------------------------


def misplaced_range(first: int, last: int, *, total: int = SIZE) -> Handler:
    """Every ranged GET is answered 206 with bytes first..last, whatever was asked."""

    def handler(request: Request, conn: socket.socket) -> None:
        if request.method == "HEAD" or request.headers.get("Range") is None:
            answer(request, conn, object_reply(request, S3Object(DATA)))
            return
        headers = {"ETag": S3Object(DATA).etag, "Content-Range": f"bytes {first}-{last}/{total}"}
        Reply(206, headers, DATA[first : last + 1]).send(conn)

    return handler


def test_get_object_refuses_a_206_that_starts_elsewhere(serve: Serve) -> None:
    _, client = serve(misplaced_range(0, 99))
    with pytest.raises(objsdk.ProtocolError, match="from 100") as info:
        client.get_object(BUCKET, KEY, offset=100, length=100)
    assert (info.value.bucket, info.value.key) == (BUCKET, KEY)


def test_get_object_refuses_a_206_that_ends_elsewhere(serve: Serve) -> None:
    _, client = serve(misplaced_range(100, 149))
    with pytest.raises(objsdk.ProtocolError, match="ends at 149"):
        client.get_object(BUCKET, KEY, offset=100, length=100)


def test_get_object_refuses_a_206_without_content_range(serve: Serve) -> None:
    def handler(request: Request, conn: socket.socket) -> None:
        Reply(206, {"ETag": '"x"'}, DATA[100:200]).send(conn)

    _, client = serve(handler)
    with pytest.raises(objsdk.ProtocolError, match="Content-Range"):
        client.get_object(BUCKET, KEY, offset=100, length=100)


def test_get_object_to_the_end_refuses_a_206_that_stops_early(serve: Serve) -> None:
    _, client = serve(misplaced_range(100, 199))
    with pytest.raises(objsdk.ProtocolError, match="ends at 199"):
        client.get_object(BUCKET, KEY, offset=100)


def test_get_object_takes_a_correct_206_and_a_range_past_the_end(serve: Serve) -> None:
    _, client = serve(lambda r, c: answer(r, c, object_reply(r, S3Object(DATA))))
    assert client.get_object(BUCKET, KEY, offset=100, length=100) == DATA[100:200]
    assert client.get_object(BUCKET, KEY, offset=SIZE - 10, length=100) == DATA[-10:]
    assert client.get_object(BUCKET, KEY, offset=SIZE - 10) == DATA[-10:]


def test_get_object_slices_a_200_that_ignored_range(serve: Serve) -> None:
    def handler(request: Request, conn: socket.socket) -> None:
        Reply(200, {"ETag": '"x"'}, DATA).send(conn)

    _, client = serve(handler)
    assert client.get_object(BUCKET, KEY, offset=100, length=100) == DATA[100:200]


def test_cat_file_and_cat_ranges_refuse_a_misplaced_206(serve: Serve) -> None:
    pytest.importorskip("fsspec")
    from objsdk.filesystem import ObjsdkFileSystem

    server, _ = serve(misplaced_range(0, 99))
    fs = ObjsdkFileSystem(
        endpoint_url=server.url, key="AKID", secret="SECRET", skip_instance_cache=True
    )
    with pytest.raises(objsdk.ProtocolError, match="from 100"):
        fs.cat_file(f"{BUCKET}/{KEY}", start=100, end=200)
    (returned,) = fs.cat_ranges([f"{BUCKET}/{KEY}"], [100], [200])
    assert isinstance(returned, objsdk.ProtocolError)
    with pytest.raises(objsdk.ProtocolError, match="from 100"):
        fs.cat_ranges([f"{BUCKET}/{KEY}"], [100], [200], on_error="raise")


# -- a seek just past the end (issue 25, item 12) ------------------------------------------


def test_a_seek_just_past_the_end_reads_empty_without_a_resume(serve: Serve) -> None:
    server, client = serve(lambda r, c: answer(r, c, object_reply(r, S3Object(DATA))))
    with client.open(BUCKET, KEY, readahead=0, max_resume=0, chunk_size=100) as f:
        f.seek(SIZE - 1000)
        assert f.read(10) == DATA[-1000:-990]
        f.seek(SIZE + 100)  # within 256 KiB of the open stream, which is at SIZE - 900
        assert f.read() == b""
        assert f.read(10) == b""
        assert f.tell() == SIZE + 100
        assert f.stats.resumes == 0
    assert len(server.requests) == 1


def test_a_seek_to_the_very_end_reads_empty_without_a_resume(serve: Serve) -> None:
    _, client = serve(lambda r, c: answer(r, c, object_reply(r, S3Object(DATA))))
    with client.open(BUCKET, KEY, readahead=0, max_resume=0, chunk_size=100) as f:
        f.seek(SIZE - 1000)
        assert f.read(10) == DATA[-1000:-990]
        f.seek(SIZE)
        assert f.read(10) == b""
        f.seek(SIZE - 5)
        assert f.read() == DATA[-5:]
        assert f.stats.resumes == 0


# -- pickles pinned by Last-Modified (issue 25, "Also") ------------------------------------


def test_a_pickled_reader_keeps_the_last_modified_pin(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server without ETags: the copy must resume with If-Unmodified-Since too."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKID")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "SECRET")

    def handler(request: Request, conn: socket.socket) -> None:
        reply = object_reply(request, S3Object(DATA))
        reply.headers.pop("ETag", None)
        answer(request, conn, reply)

    server, client = serve(handler)
    with client.open(BUCKET, KEY, readahead=0) as f:
        assert f.read(10) == DATA[:10]
        copy = pickle.loads(pickle.dumps(f))
    with copy:
        assert copy.read(10) == DATA[10:20]
    last = server.requests[-1]
    assert last.headers.get("Range") == "bytes=10-"
    assert last.headers.get("If-Unmodified-Since") == "Mon, 01 Jan 2024 00:00:00 GMT"


# -- get_object without a range: the answer is the whole object ------------------------------


def partial_answer(content_range: str, body: bytes) -> Handler:
    """Every GET, asked for a range or not, is answered 206 with ``content_range`` and
    ``body`` (Content-Length: its length); a HEAD gets the object's true size."""

    def handler(request: Request, conn: socket.socket) -> None:
        if request.method == "HEAD":
            answer(request, conn, object_reply(request, S3Object(DATA)))
            return
        Reply(206, {"ETag": S3Object(DATA).etag, "Content-Range": content_range}, body).send(conn)

    return handler


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize(
    ("content_range", "body", "match"),
    [
        (f"bytes 0-99/{SIZE}", DATA[:100], "ends at 99"),
        (f"bytes 100-{SIZE - 1}/{SIZE}", DATA[100:], "from 100"),
        ("bytes 0-99/*", DATA[:100], "size"),
        (f"bytes 0-{SIZE - 1}/{SIZE}", DATA + DATA[:50], "Content-Length"),
    ],
    ids=["first-bytes-only", "starts-late", "size-unknown", "body-longer-than-range"],
)
def test_get_object_of_the_whole_object_refuses_a_206_for_other_bytes(
    serve: Serve, content_range: str, body: bytes, match: str, verify: bool
) -> None:
    """A GET without Range answered 206 must hold the whole object, as Content-Range
    proves, and its body exactly those bytes: anything else is a ProtocolError naming
    the object, never a short or padded object returned as if whole."""
    _, client = serve(partial_answer(content_range, body))
    with pytest.raises(objsdk.ProtocolError, match=match) as info:
        client.get_object(BUCKET, KEY, verify=verify)
    assert (info.value.bucket, info.value.key) == (BUCKET, KEY)


def test_get_object_of_the_whole_object_takes_a_206_that_holds_it_all(serve: Serve) -> None:
    _, client = serve(partial_answer(f"bytes 0-{SIZE - 1}/{SIZE}", DATA))
    assert client.get_object(BUCKET, KEY) == DATA


# -- framing values that are not numbers, on every read path --------------------------------


def read_whole(client: objsdk.Client, tmp_path: Path) -> object:
    return client.get_object(BUCKET, KEY)


def read_range(client: objsdk.Client, tmp_path: Path) -> object:
    return client.get_object(BUCKET, KEY, offset=100, length=100)


def read_file(client: objsdk.Client, tmp_path: Path) -> object:
    with client.open(BUCKET, KEY, readahead=0) as f:
        return f.read()


def read_file_ahead(client: objsdk.Client, tmp_path: Path) -> object:
    with client.open(BUCKET, KEY, readahead=2, part_size=128 * 1024) as f:
        return f.read()


def read_into(client: objsdk.Client, tmp_path: Path) -> object:
    return client.get_into(BUCKET, KEY, bytearray(SIZE))


def read_to_path(client: objsdk.Client, tmp_path: Path) -> object:
    try:
        return client.download(BUCKET, KEY, tmp_path / "out")
    finally:
        assert not (tmp_path / "out").exists()


READ_PATHS = [read_whole, read_range, read_file, read_file_ahead, read_into, read_to_path]
STREAMED_READ_PATHS = [read_file, read_file_ahead, read_into, read_to_path]


def misframed(name: str, value: Callable[[int, int], str]) -> Handler:
    """Every GET is answered with the object's right bytes (those asked for, as a 206 when
    a range was asked, else as a 200, a CRC32C with it), but with its ``name`` header set
    to ``value(first, last)`` and the connection closed after the body; HEADs are true."""
    obj = S3Object(DATA, headers={"x-amz-checksum-crc32c": crc32c_b64(DATA)})

    def handler(request: Request, conn: socket.socket) -> None:
        reply = object_reply(request, obj)
        if request.method == "HEAD":
            answer(request, conn, reply)
            return
        first = request.range_start or 0
        last = first + len(reply.body) - 1
        reply.headers[name] = value(first, last)
        if name == "Content-Range":
            reply.status = 206
        conn.sendall(reply.to_bytes())
        conn.close()  # where the body ends is the connection's end, whatever was said

    return handler


MISFRAMINGS = {
    "length-negative": ("Content-Length", lambda first, last: "-5"),
    "length-signed": ("Content-Length", lambda first, last: "+5"),
    "length-not-a-number": ("Content-Length", lambda first, last: "5 bytes"),
    "range-total-negative": ("Content-Range", lambda first, last: f"bytes {first}-{last}/-{SIZE}"),
    "range-not-numbers": ("Content-Range", lambda first, last: f"bytes {first}-{last}/{SIZE}.0"),
    # More digits than int() converts (sys.get_int_max_str_digits(): 4300).
    "length-past-int-digits": ("Content-Length", lambda first, last: "9" * 5000),
    "range-total-past-int-digits": (
        "Content-Range",
        lambda first, last: f"bytes {first}-{last}/{'9' * 5000}",
    ),
    "range-first-past-int-digits": (
        "Content-Range",
        lambda first, last: f"bytes {'0' * 5000}{first}-{last}/{SIZE}",
    ),
}


@pytest.mark.parametrize("read", READ_PATHS)
@pytest.mark.parametrize("framing", list(MISFRAMINGS))
def test_a_content_length_or_range_that_is_not_a_number_is_a_protocol_error_on_every_read_path(
    serve: Serve, tmp_path: Path, framing: str, read: Callable[[objsdk.Client, Path], object]
) -> None:
    """RFC 9110 §8.6 and §14.4: Content-Length is digits, Content-Range's positions and
    total are digits. Anything else (a sign, a word, a fraction) is a ProtocolError
    naming the object (not a ResumeLimitError: the same server would say it again), never
    a short, empty or negative-sized object."""
    _, client = serve(misframed(*MISFRAMINGS[framing]))
    with pytest.raises(objsdk.ProtocolError) as info:
        read(client, tmp_path)
    assert (info.value.bucket, info.value.key) == (BUCKET, KEY)


@pytest.mark.parametrize("wire", [True, False], ids=["wire", "requests"])
@pytest.mark.parametrize("length", ["-5", "+5", "²", "9" * 5000], ids=["-5", "+5", "²", "9x5000"])
def test_get_object_of_a_whole_object_whose_content_length_is_not_a_number_is_a_protocol_error(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, wire: bool, length: str
) -> None:
    """A 200 to a GET without Range says what it holds only by its Content-Length: one
    that is not digits is a ProtocolError naming the object, on either of the transport's
    paths, never the bytes that came taken for the object."""
    monkeypatch.setattr(HTTPTransport, "wire_requests", wire)

    def handler(request: Request, conn: socket.socket) -> None:
        conn.sendall(http_response(200, {"ETag": '"e"', "Content-Length": length}) + DATA[:5])
        conn.close()

    _, client = serve(handler)
    with pytest.raises(objsdk.ProtocolError) as info:
        client.get_object(BUCKET, KEY, verify=False)
    assert (info.value.bucket, info.value.key) == (BUCKET, KEY)


def unsatisfiable(total: str) -> Handler:
    """Every GET is answered 416 with ``Content-Range: bytes */<total>``; HEADs are true."""

    def handler(request: Request, conn: socket.socket) -> None:
        if request.method == "HEAD":
            answer(request, conn, object_reply(request, S3Object(DATA)))
            return
        headers = {"Content-Type": "application/xml", "Content-Range": f"bytes */{total}"}
        Reply(416, headers, b"<Error><Code>InvalidRange</Code></Error>").send(conn)

    return handler


@pytest.mark.parametrize("read", STREAMED_READ_PATHS)
@pytest.mark.parametrize(
    "total", ["-5", "+0", "0x10", "9" * 5000], ids=["-5", "+0", "0x10", "9x5000"]
)
def test_a_416_whose_size_is_not_a_number_is_a_protocol_error_not_the_end(
    serve: Serve, tmp_path: Path, total: str, read: Callable[[objsdk.Client, Path], object]
) -> None:
    """A 416 says where the object ends only with ``bytes */<digits>``: ``bytes */-5`` is
    no end of the object, and reading from byte 0 must not return b"" for it."""
    _, client = serve(unsatisfiable(total))
    with pytest.raises(objsdk.ProtocolError) as info:
        read(client, tmp_path)
    assert (info.value.bucket, info.value.key) == (BUCKET, KEY)


@pytest.mark.parametrize("wire", [True, False], ids=["wire", "requests"])
@pytest.mark.parametrize("length", ["-5", "+5", "²", "9" * 5000], ids=["-5", "+5", "²", "9x5000"])
def test_head_object_with_a_content_length_that_is_not_a_number_is_a_protocol_error(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, wire: bool, length: str
) -> None:
    """The size every reader plans with comes from HEAD: a Content-Length that is not
    digits is a ProtocolError naming the object, on either of the transport's paths."""
    monkeypatch.setattr(HTTPTransport, "wire_requests", wire)

    def handler(request: Request, conn: socket.socket) -> None:
        conn.sendall(http_response(200, {"ETag": '"e"', "Content-Length": length}))

    _, client = serve(handler)
    with pytest.raises(objsdk.ProtocolError) as info:
        client.head_object(BUCKET, KEY)
    assert (info.value.bucket, info.value.key) == (BUCKET, KEY)
    with pytest.raises(objsdk.ProtocolError), client.open(BUCKET, KEY) as f:
        f.size  # noqa: B018
