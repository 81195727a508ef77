"""ObjectFile against a raw-socket server that breaks responses on purpose.

Each test runs a correct S3-like server (``rawserver.object_reply``) with one injected
fault, reads the object to the end and checks the bytes, the requests the reader sent,
its stats and its errors. No MinIO needed.
"""

from __future__ import annotations

import array
import contextlib
import itertools
import logging
import mmap
import random
import socket
import time
from collections.abc import Callable, Iterator

import pytest
from rawserver import (
    RawServer,
    Reply,
    Request,
    S3Object,
    chunked_body,
    hang,
    http_response,
    object_reply,
    reset,
    send_truncated,
)

import objsdk
from objsdk._core.checksums import crc32c_b64

BUCKET = "bkt"
KEY = "dir/obj-1.bin"
SIZE = 300 * 1024
DATA = random.Random(20240601).randbytes(SIZE)
OTHER = random.Random(20240602).randbytes(SIZE)  # a second version of the same size
CUT = 100_000  # where faults strike, in object bytes
KIB64 = 64 * 1024

Handler = Callable[[Request, socket.socket], None]
Serve = Callable[[Handler], tuple[RawServer, objsdk.Client]]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(handler)`` starts a RawServer and a client for it; both are closed after
    the test (the client first, then the server, which re-raises handler errors)."""
    with contextlib.ExitStack() as stack:

        def start(handler: Handler) -> tuple[RawServer, objsdk.Client]:
            server = stack.enter_context(RawServer(handler))
            client = objsdk.Client(server.url, "AKID", "SECRET", retries=0, timeout=(2, 1))
            return server, stack.enter_context(client)

        yield start


def read_in_pieces(f: objsdk.ObjectFile, into: bytearray, n: int = 8192) -> None:
    """Read to EOF in ``n``-byte pieces, appending each to ``into`` as it is delivered
    (so a test can see what was delivered before an exception)."""
    while piece := f.read(n):
        into += piece


def assert_prefix(delivered: bytes | bytearray, source: bytes, limit: int) -> None:
    """``delivered`` is the start of ``source`` and does not reach past ``limit``.

    (The caller may have been handed fewer bytes than the reader received before the
    fault.)"""
    assert len(delivered) <= limit
    assert bytes(delivered) == source[: len(delivered)]


def fault_on_first(
    obj: S3Object, fault: Callable[[socket.socket, Reply], None]
) -> Callable[[Request, socket.socket], None]:
    """A correct server for ``obj`` whose first answer goes through ``fault``."""

    def handler(request: Request, conn: socket.socket) -> None:
        reply = object_reply(request, obj)
        if request.index == 0:
            fault(conn, reply)
        elif request.method == "HEAD":
            conn.sendall(reply.head)
        else:
            reply.send(conn)

    return handler


def correct(obj: S3Object) -> Callable[[Request, socket.socket], None]:
    """A server for ``obj`` without faults."""
    return fault_on_first(obj, lambda conn, reply: reply.send(conn))


def truncate_at(keep: int) -> Callable[[socket.socket, Reply], None]:
    return lambda conn, reply: send_truncated(conn, reply, keep)


# -- the first request -----------------------------------------------------------------


def test_first_get_is_lazy_unranged_uncompressed_and_asks_for_the_stored_checksum(serve):
    server, client = serve(correct(S3Object(DATA)))
    with client.open(BUCKET, KEY) as f:
        assert server.requests == []
        assert f.read() == DATA
        assert f.stats.requests == 1
        assert f.stats.resumes == 0
    (request,) = server.requests
    assert (request.method, request.path) == ("GET", f"/{BUCKET}/{KEY}")
    assert "Range" not in request.headers
    assert "If-Match" not in request.headers
    assert request.headers["Accept-Encoding"] == "identity"
    assert request.headers["x-amz-checksum-mode"] == "ENABLED"


# -- broken bodies are resumed -----------------------------------------------------------


def test_truncated_content_length_body_resumes_at_the_exact_offset_with_if_match(serve):
    obj = S3Object(DATA)
    server, client = serve(fault_on_first(obj, truncate_at(CUT)))
    with client.open(BUCKET, KEY, max_resume=2) as f:
        assert f.read() == DATA
        stats = f.stats
    assert (stats.requests, stats.resumes) == (2, 1)
    assert stats.bytes_delivered == SIZE
    assert stats.bytes_discarded == 0
    first, second = server.requests
    assert second.headers["Range"] == f"bytes={CUT}-"
    assert second.headers["If-Match"] == obj.etag
    assert second.headers["Accept-Encoding"] == "identity"
    assert "x-amz-checksum-mode" not in second.headers
    assert "Range" not in first.headers


def test_malformed_chunked_encoding_midway_resumes_with_identical_bytes(serve):
    obj = S3Object(DATA)
    good = 3 * 32 * 1024  # bytes framed correctly before the bad chunk-size line

    def fault(conn: socket.socket, reply: Reply) -> None:
        head = {k: v for k, v in reply.headers.items() if k != "Content-Length"}
        head["Transfer-Encoding"] = "chunked"
        framed = chunked_body(reply.body[:good], 32 * 1024)[: -len(b"0\r\n\r\n")]
        conn.sendall(
            http_response(reply.status, head)
            + framed
            + b"zz-not-hex\r\n"
            + reply.body[good : good + 1000]
        )
        conn.close()

    server, client = serve(fault_on_first(obj, fault))
    with client.open(BUCKET, KEY, max_resume=2, chunk_size=KIB64) as f:
        assert f.read() == DATA
        assert f.stats.resumes == 1
    # A chunked answer does not say where the object ends: HEAD does.
    assert [r.method for r in server.requests] == ["GET", "HEAD", "GET"]
    _, _, second = server.requests
    # The resume starts at the first byte the reader did not take (how much of the
    # well-framed prefix http.client had handed over when it hit the bad line).
    assert 0 < (second.range_start or 0) <= good
    assert second.headers["If-Match"] == obj.etag


def test_connection_reset_mid_body_resumes_with_identical_bytes(serve):
    obj = S3Object(DATA)

    def fault(conn: socket.socket, reply: Reply) -> None:
        conn.sendall(reply.head + reply.body[:CUT])
        time.sleep(0.2)  # let the client take the head and some body before the RST
        reset(conn)

    server, client = serve(fault_on_first(obj, fault))
    with client.open(BUCKET, KEY, max_resume=2, chunk_size=KIB64) as f:
        assert f.read() == DATA
        assert f.stats.resumes == 1
    _, second = server.requests
    assert 0 < (second.range_start or 0) <= CUT
    assert second.headers["If-Match"] == obj.etag


def test_stalled_body_times_out_and_resumes_with_identical_bytes(serve):
    obj = S3Object(DATA)

    def fault(conn: socket.socket, reply: Reply) -> None:
        conn.sendall(reply.head + reply.body[:CUT])
        hang(conn)

    server, client = serve(fault_on_first(obj, fault))
    started = time.monotonic()
    with client.open(BUCKET, KEY, max_resume=2, chunk_size=KIB64) as f:
        assert f.read() == DATA
        assert f.stats.resumes == 1
    assert time.monotonic() - started < 5  # one 1 s read timeout, not a hang
    _, second = server.requests
    assert 0 < (second.range_start or 0) <= CUT
    assert second.headers["If-Match"] == obj.etag


def test_full_200_answer_to_a_resume_is_accepted_and_the_leading_bytes_discarded(serve):
    obj = S3Object(DATA)

    def handler(request: Request, conn: socket.socket) -> None:
        if request.index == 0:
            send_truncated(conn, object_reply(request, obj), CUT)
        else:  # a server that ignores Range
            Reply(200, {"ETag": obj.etag}, DATA).send(conn)

    server, client = serve(handler)
    with client.open(BUCKET, KEY, max_resume=2) as f:
        assert f.read() == DATA
        stats = f.stats
    assert stats.bytes_discarded == CUT
    assert (stats.requests, stats.resumes, stats.bytes_delivered) == (2, 1, SIZE)
    assert server.requests[1].headers["Range"] == f"bytes={CUT}-"


# -- answers that must not be trusted ----------------------------------------------------


@pytest.mark.parametrize("shift", [-4096, 4096], ids=["overlapping", "skipping"])
def test_206_starting_at_the_wrong_offset_is_never_delivered(serve, shift):
    obj = S3Object(DATA)
    max_resume = 2

    def handler(request: Request, conn: socket.socket) -> None:
        if request.index == 0:
            send_truncated(conn, object_reply(request, obj), CUT)
            return
        first = (request.range_start or 0) + shift
        Reply(
            206,
            {"ETag": obj.etag, "Content-Range": f"bytes {first}-{SIZE - 1}/{SIZE}"},
            DATA[first:],
        ).send(conn)

    server, client = serve(handler)
    delivered = bytearray()
    with (
        client.open(BUCKET, KEY, max_resume=max_resume) as f,
        pytest.raises(objsdk.ResumeLimitError) as info,
    ):
        read_in_pieces(f, delivered)
    stats = f.stats
    assert_prefix(delivered, DATA, CUT)
    assert info.value.offset == CUT
    # The truncation plus max_resume bad answers: max_resume + 1 failures in a row.
    assert len(server.requests) == stats.requests == max_resume + 1
    assert stats.resumes == max_resume
    assert all(r.headers["Range"] == f"bytes={CUT}-" for r in server.requests[1:])


def test_206_with_another_total_size_raises_object_changed(serve):
    obj = S3Object(DATA)

    def handler(request: Request, conn: socket.socket) -> None:
        if request.index == 0:
            send_truncated(conn, object_reply(request, obj), CUT)
            return
        grown = DATA + b"appended"
        Reply(
            206,
            {"ETag": obj.etag, "Content-Range": f"bytes {CUT}-{len(grown) - 1}/{len(grown)}"},
            grown[CUT:],
        ).send(conn)

    server, client = serve(handler)
    delivered = bytearray()
    with (
        client.open(BUCKET, KEY, max_resume=2) as f,
        pytest.raises(objsdk.ObjectChangedError) as info,
    ):
        read_in_pieces(f, delivered)
    assert_prefix(delivered, DATA, CUT)
    assert info.value.offset == CUT
    assert len(server.requests) == 2


def test_412_on_resume_raises_object_changed_naming_bucket_key_and_offset(serve):
    v1, v2 = S3Object(DATA, etag='"v1"'), S3Object(OTHER, etag='"v2"')

    def handler(request: Request, conn: socket.socket) -> None:
        if request.index == 0:
            send_truncated(conn, object_reply(request, v1), CUT)
        else:  # overwritten meanwhile: If-Match "v1" fails
            object_reply(request, v2).send(conn)

    server, client = serve(handler)
    delivered = bytearray()
    with (
        client.open(BUCKET, KEY, max_resume=2) as f,
        pytest.raises(objsdk.ObjectChangedError) as info,
    ):
        read_in_pieces(f, delivered)
    err = info.value
    assert_prefix(delivered, DATA, CUT)
    assert (err.bucket, err.key, err.offset) == (BUCKET, KEY, CUT)
    assert repr(BUCKET) in str(err)
    assert repr(KEY) in str(err)
    assert f"offset {CUT}" in str(err)
    assert server.requests[1].headers["If-Match"] == '"v1"'
    assert len(server.requests) == 2  # a changed object is not retried


def test_different_etag_on_resume_raises_object_changed_when_server_ignores_if_match(serve):
    v1, v2 = S3Object(DATA, etag='"v1"'), S3Object(OTHER, etag='"v2"')

    def handler(request: Request, conn: socket.socket) -> None:
        if request.index == 0:
            send_truncated(conn, object_reply(request, v1), CUT)
        else:
            object_reply(request, v2, honour_if_match=False).send(conn)

    server, client = serve(handler)
    delivered = bytearray()
    with (
        client.open(BUCKET, KEY, max_resume=2) as f,
        pytest.raises(objsdk.ObjectChangedError) as info,
    ):
        read_in_pieces(f, delivered)
    assert_prefix(delivered, DATA, CUT)
    assert info.value.offset == CUT
    assert '"v2"' in str(info.value)
    assert len(server.requests) == 2


# -- the resume budget -------------------------------------------------------------------


def test_resume_budget_resets_on_progress_so_many_cuts_still_finish(serve):
    data = random.Random(7).randbytes(1 << 20)
    obj = S3Object(data)

    def handler(request: Request, conn: socket.socket) -> None:
        send_truncated(conn, object_reply(request, obj), KIB64)  # every answer cut short

    server, client = serve(handler)
    with client.open(BUCKET, KEY, max_resume=2) as f:
        assert f.read() == data
        stats = f.stats
    cuts = len(data) // KIB64  # 16 answers of 64 KiB each
    assert (stats.requests, stats.resumes) == (cuts, cuts - 1)
    assert [r.range_start or 0 for r in server.requests] == [i * KIB64 for i in range(cuts)]


def test_resume_limit_error_chains_the_last_failure_and_names_bucket_key_offset(serve):
    obj = S3Object(DATA)

    def handler(request: Request, conn: socket.socket) -> None:
        reply = object_reply(request, obj)
        if request.index == 0:
            send_truncated(conn, reply, CUT)
        elif request.index == 1:
            send_truncated(conn, reply, 0)  # a 206 head, then nothing
        else:  # the last straw: a 206 that starts somewhere else
            reply.headers["Content-Range"] = f"bytes 0-{SIZE - 1}/{SIZE}"
            reply.body = DATA
            reply.send(conn)

    server, client = serve(handler)
    with (
        client.open(BUCKET, KEY, max_resume=2) as f,
        pytest.raises(objsdk.ResumeLimitError) as info,
    ):
        f.read()
    err = info.value
    assert isinstance(err.__cause__, objsdk.ProtocolError)
    assert "Content-Range" in str(err.__cause__)  # the last failure, not an earlier one
    assert (err.bucket, err.key, err.offset) == (BUCKET, KEY, CUT)
    assert repr(BUCKET) in str(err)
    assert repr(KEY) in str(err)
    assert f"offset {CUT}" in str(err)
    assert len(server.requests) == 3


@pytest.mark.parametrize("method", ["read", "readinto"])
def test_reading_again_after_resume_limit_error_continues_at_tell_without_losing_bytes(
    serve, method
):
    def consume(f: objsdk.ObjectFile, delivered: bytearray) -> None:
        if method == "read":
            read_in_pieces(f, delivered)
        else:  # one call whose bytes come from two network reads, the second failing
            f.readinto(bytearray(SIZE))

    obj = S3Object(DATA)
    broken = True  # the server fails every resume until the test says otherwise

    def handler(request: Request, conn: socket.socket) -> None:
        reply = object_reply(request, obj)
        if request.index == 0:
            send_truncated(conn, reply, CUT)
        elif broken:
            send_truncated(conn, reply, 0)
        else:
            reply.send(conn)

    _, client = serve(handler)
    delivered = bytearray()
    with client.open(BUCKET, KEY, max_resume=0) as f:
        with pytest.raises(objsdk.ResumeLimitError):
            consume(f, delivered)
        pos = f.tell()
        assert pos == len(delivered)
        broken = False  # the server recovers; the caller tries again
        rest = f.read()
        assert f.tell() == SIZE
    assert rest == DATA[pos:]


# -- integrity -----------------------------------------------------------------------------


def test_wrong_stored_checksum_raises_integrity_error_on_the_read_reaching_eof(serve):
    obj = S3Object(DATA, headers={"x-amz-checksum-crc32c": crc32c_b64(OTHER)})
    _, client = serve(correct(obj))
    delivered = bytearray()
    with (
        client.open(BUCKET, KEY, chunk_size=KIB64) as f,
        pytest.raises(objsdk.IntegrityError) as info,
    ):
        read_in_pieces(f, delivered, KIB64)
    # Every 64 KiB piece before the last was delivered; the last one was withheld.
    assert bytes(delivered) == DATA[: SIZE // KIB64 * KIB64]
    assert (info.value.bucket, info.value.key, info.value.offset) == (BUCKET, KEY, SIZE)
    assert crc32c_b64(OTHER) in str(info.value)


def test_correct_stored_checksum_reads_without_error(serve):
    obj = S3Object(DATA, headers={"x-amz-checksum-crc32c": crc32c_b64(DATA)})
    server, client = serve(correct(obj))
    with client.open(BUCKET, KEY, chunk_size=KIB64) as f:
        assert f.read() == DATA
    assert len(server.requests) == 1


@pytest.mark.parametrize("stored", ["right", "wrong"])
def test_checksum_verification_spans_a_206_resume(serve, stored):
    checksum = crc32c_b64(DATA if stored == "right" else OTHER)
    obj = S3Object(DATA, headers={"x-amz-checksum-crc32c": checksum})
    _, client = serve(fault_on_first(obj, truncate_at(CUT)))
    with client.open(BUCKET, KEY, max_resume=2) as f:
        if stored == "right":
            assert f.read() == DATA
        else:
            with pytest.raises(objsdk.IntegrityError):
                f.read()
        assert f.stats.resumes == 1


def test_checksum_verification_spans_a_resume_answered_with_a_full_200(serve):
    # The resume asks for a range, so it does not ask for the checksum (S3 sends it only
    # with x-amz-checksum-mode); a server that ignores Range answers 200 without it. The
    # pass is still whole from byte 0 and the first answer carried the stored checksum.
    obj = S3Object(DATA, headers={"x-amz-checksum-crc32c": crc32c_b64(OTHER)})

    def handler(request: Request, conn: socket.socket) -> None:
        if request.index == 0:
            send_truncated(conn, object_reply(request, obj), CUT)
        else:
            Reply(200, {"ETag": obj.etag}, DATA).send(conn)

    _, client = serve(handler)
    with client.open(BUCKET, KEY, max_resume=2) as f:
        with pytest.raises(objsdk.IntegrityError):
            f.read()
        assert f.stats.bytes_discarded == CUT


def test_a_read_with_a_seek_gap_is_not_verified_and_does_not_raise(serve):
    data = random.Random(11).randbytes(640 * 1024)
    obj = S3Object(data, headers={"x-amz-checksum-crc32c": crc32c_b64(OTHER)})
    server, client = serve(correct(obj))
    far = 500 * 1024  # beyond the read-through distance: a new ranged GET
    with client.open(BUCKET, KEY, chunk_size=KIB64) as f:
        assert f.read(1000) == data[:1000]
        f.seek(far)
        assert f.read() == data[far:]
    assert server.requests[1].headers["Range"] == f"bytes={far}-"


# -- random access ---------------------------------------------------------------------------


def test_reads_after_far_seeks_ask_for_what_they_read_on_one_connection(serve):
    # Parquet through fsspec: seek to a column chunk, read it, seek to the next. An
    # open-ended GET dropped after its chunk took its connection down with it: a new
    # handshake per seek. A GET for the bytes wanted is read whole, and its connection
    # serves the next one; a read smaller than 64 KiB asks for 64 KiB, and what is left
    # of that is read off at the next seek rather than lose the connection.
    data = random.Random(5).randbytes(4 << 20)
    server, client = serve(correct(S3Object(data)))
    offsets = random.Random(6).sample(range(0, len(data) - 300_000, 4096), 8)
    with client.open(BUCKET, KEY) as f:
        for off in offsets:
            f.seek(off)
            assert f.read(200_000) == data[off : off + 200_000]
        for off in offsets:
            f.seek(off)
            assert f.read(100) == data[off : off + 100]
    assert [r.headers["Range"] for r in server.requests] == [
        *(f"bytes={o}-{o + 200_000 - 1}" for o in offsets),
        *(f"bytes={o}-{o + 65536 - 1}" for o in offsets),
    ]
    assert server.connections == 1


def test_reading_on_after_a_far_seek_grows_the_window_then_streams_to_the_end(serve):
    data = random.Random(7).randbytes(20 << 20)
    server, client = serve(correct(S3Object(data)))
    far = 1 << 20
    with client.open(BUCKET, KEY, readahead=0) as f:
        f.seek(far)
        got = bytearray()
        while chunk := f.read(64 * 1024):
            got += chunk
    assert bytes(got) == data[far:]
    sizes = [64 << 10, 256 << 10, 1 << 20, 4 << 20]
    starts = [far + sum(sizes[:i]) for i in range(len(sizes) + 1)]
    assert [r.headers["Range"] for r in server.requests] == [
        *(f"bytes={a}-{b - 1}" for a, b in itertools.pairwise(starts)),
        f"bytes={starts[-1]}-",  # past these windows in sequence: one stream again
    ]
    assert server.connections == 1


# -- logging ---------------------------------------------------------------------------------


def test_each_resume_logs_one_warning_with_bucket_key_and_offset(serve, caplog):
    obj = S3Object(DATA)
    second_cut = 50_000  # body bytes of the second answer before it too is cut

    def handler(request: Request, conn: socket.socket) -> None:
        reply = object_reply(request, obj)
        if request.index == 0:
            send_truncated(conn, reply, CUT)
        elif request.index == 1:
            send_truncated(conn, reply, second_cut)
        else:
            reply.send(conn)

    server, client = serve(handler)
    caplog.set_level(logging.WARNING, logger="objsdk")
    with client.open(BUCKET, KEY, max_resume=2) as f:
        assert f.read() == DATA
        resumes = f.stats.resumes
    warnings = [r for r in caplog.records if r.name == "objsdk" and r.levelno >= logging.WARNING]
    assert resumes == 2
    assert len(warnings) == resumes
    for record, offset in zip(warnings, [CUT, CUT + second_cut], strict=True):
        message = record.getMessage()
        assert record.levelno == logging.WARNING
        assert repr(BUCKET) in message
        assert repr(KEY) in message
        assert f"offset {offset} " in message
    assert [r.range_start for r in server.requests[1:]] == [CUT, CUT + second_cut]


# -- edges ---------------------------------------------------------------------------------


def test_zero_byte_object_reads_empty_with_one_request(serve):
    server, client = serve(correct(S3Object(b"")))
    with client.open(BUCKET, KEY) as f:
        assert f.read() == b""
        assert f.read(10) == b""
        assert f.stats.requests == 1
    assert len(server.requests) == 1


def _bytearray(n: int) -> bytearray:
    return bytearray(n)


def _memoryview(n: int) -> memoryview:
    return memoryview(bytearray(n))


def _mmap(n: int) -> mmap.mmap:
    return mmap.mmap(-1, n)


def _array(n: int) -> array.array[int]:
    return array.array("B", bytes(n))


@pytest.mark.parametrize(
    "make",
    [_bytearray, _memoryview, _mmap, _array],
    ids=["bytearray", "memoryview", "mmap", "array"],
)
def test_readinto_across_a_truncation_fills_any_writable_buffer_identically(serve, make):
    server, client = serve(fault_on_first(S3Object(DATA), truncate_at(CUT)))
    buf = make(SIZE)
    try:
        with client.open(BUCKET, KEY, max_resume=2) as f:
            assert f.readinto(buf) == SIZE
            assert f.readinto(bytearray(10)) == 0
            assert f.stats.resumes == 1
        with memoryview(buf) as view:
            assert view.tobytes() == DATA
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()
    assert server.requests[1].headers["Range"] == f"bytes={CUT}-"


def test_seek_past_eof_of_known_size_reads_empty_without_a_request(serve):
    server, client = serve(correct(S3Object(DATA)))
    with client.open(BUCKET, KEY) as f:
        assert f.read() == DATA
        assert f.seek(SIZE + 1000) == SIZE + 1000
        assert f.read() == b""
        assert f.read(10) == b""
        assert f.tell() == SIZE + 1000
        assert f.stats.requests == 1
    assert len(server.requests) == 1


def test_seek_past_eof_of_unknown_size_reads_empty_after_one_416(serve):
    server, client = serve(correct(S3Object(DATA)))
    with client.open(BUCKET, KEY) as f:
        f.seek(SIZE + 1000)
        assert f.read() == b""
        assert f.read(10) == b""
        assert f.stats.requests == 1
    (request,) = server.requests
    assert request.headers["Range"] == f"bytes={SIZE + 1000}-"


def test_close_does_not_wait_out_the_backoff_of_parts_that_keep_breaking(serve):
    # Parts after the first break at once, every time: each worker sleeps a growing
    # backoff between resumes. close() cancels them, and must not wait for those sleeps.
    part = KIB64

    def handler(request: Request, conn: socket.socket) -> None:
        if request.range_start not in (None, 0):
            reset(conn)
            return
        object_reply(request, S3Object(DATA)).send(conn)

    server, client = serve(handler)
    f = client.open(BUCKET, KEY, readahead=2, part_size=part)
    assert f.read(part) == DATA[:part]
    deadline = time.monotonic() + 10
    while sum(r.range_start == part for r in server.requests) < 5:  # backoff now ~1.6 s
        assert time.monotonic() < deadline, "the part never resumed"
        time.sleep(0.01)
    started = time.monotonic()
    f.close()
    assert time.monotonic() - started < 1.0
