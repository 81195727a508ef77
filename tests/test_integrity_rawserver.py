"""Verification whatever the framing, and composite checksums, against a raw server.

A GET answer without Content-Length (close-delimited, or chunked) is measured against
the object's size from HEAD and verified like any other; a multipart object's checksum
whose type nobody states is taken as composite, never checked against the body.
"""

from __future__ import annotations

import base64
import contextlib
import random
import socket
import zlib
from collections.abc import Callable, Iterator

import pytest
from rawserver import (
    RawServer,
    Reply,
    Request,
    S3Object,
    chunked_body,
    http_response,
    object_reply,
)

import objsdk
from objsdk._core.checksums import crc32c_b64

BUCKET = "bkt"
KEY = "dir/obj.bin"
SIZE = 1 << 20
DATA = random.Random(20251125).randbytes(SIZE)
CUT = 300 * 1024

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


def crc32c_object(data: bytes = DATA, stored: bytes = DATA) -> S3Object:
    """``data`` served, with the CRC32C of ``stored`` as the stored checksum."""
    return S3Object(data, headers={"x-amz-checksum-crc32c": crc32c_b64(stored)})


def head_reply(request: Request, obj: S3Object) -> bytes:
    """What HEAD answers: the GET's status line and headers (checksums if asked)."""
    return object_reply(request, obj).head


def unframed(reply: Reply, body: bytes) -> bytes:
    """``reply``'s status and headers with no Content-Length: the body ends when the
    connection closes (RFC 9112 §6.3, item 8)."""
    lines = [f"HTTP/1.1 {reply.status} OK", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in reply.headers.items() if k.lower() != "content-length"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def chunked(reply: Reply) -> bytes:
    lines = [f"HTTP/1.1 {reply.status} OK", "Transfer-Encoding: chunked"]
    lines += [f"{k}: {v}" for k, v in reply.headers.items() if k.lower() != "content-length"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + chunked_body(reply.body, 65536)


def first_get_close_delimited_and_cut(obj: S3Object) -> Handler:
    """The first GET gets a 200 with no Content-Length, cut at CUT; everything else is
    answered correctly."""
    gets = 0

    def handler(request: Request, conn: socket.socket) -> None:
        nonlocal gets
        if request.method == "HEAD":
            conn.sendall(head_reply(request, obj))
            return
        gets += 1
        reply = object_reply(request, obj)
        if gets == 1:
            conn.sendall(unframed(reply, reply.body[:CUT]))
            conn.close()
        else:
            reply.send(conn)

    return handler


def every_get_chunked(obj: S3Object) -> Handler:
    def handler(request: Request, conn: socket.socket) -> None:
        if request.method == "HEAD":
            conn.sendall(head_reply(request, obj))
        else:
            conn.sendall(chunked(object_reply(request, obj)))

    return handler


# -- item: a cut close-delimited answer is a break, not the end of the object ---------------


def test_a_close_delimited_answer_cut_short_is_resumed_to_the_end(serve):
    _server, client = serve(first_get_close_delimited_and_cut(crc32c_object()))
    with client.open(BUCKET, KEY, readahead=0) as f:
        assert f.read() == DATA
        assert f.stats.resumes == 1
        assert f.stats.verified == "crc32c"


def test_a_close_delimited_answer_cut_short_is_an_error_when_no_resume_is_allowed(serve):
    _server, client = serve(first_get_close_delimited_and_cut(crc32c_object()))
    with (
        client.open(BUCKET, KEY, readahead=0, max_resume=0) as f,
        pytest.raises(objsdk.ResumeLimitError),
    ):
        f.read()


def test_get_object_refuses_a_close_delimited_answer_cut_short(serve):
    _server, client = serve(first_get_close_delimited_and_cut(S3Object(DATA)))
    with pytest.raises(objsdk.ReadError, match=f"ended after {CUT} of {SIZE} bytes"):
        client.get_object(BUCKET, KEY)


# -- item: a chunked answer is verified like any other ------------------------------------


def test_a_chunked_answer_that_does_not_match_the_stored_crc32c_fails_open_read(serve):
    wrong = bytes([DATA[0] ^ 1]) + DATA[1:]
    _server, client = serve(every_get_chunked(crc32c_object(wrong)))
    with client.open(BUCKET, KEY, readahead=0) as f, pytest.raises(objsdk.IntegrityError):
        f.read()


def test_a_chunked_answer_that_matches_is_verified(serve):
    _server, client = serve(every_get_chunked(crc32c_object()))
    with client.open(BUCKET, KEY, readahead=0) as f:
        assert f.read() == DATA
        assert f.stats.verified == "crc32c"


def test_get_object_verifies_a_chunked_answer(serve):
    wrong = DATA[:-1] + bytes([DATA[-1] ^ 1])
    _server, client = serve(every_get_chunked(crc32c_object(wrong)))
    with pytest.raises(objsdk.IntegrityError):
        client.get_object(BUCKET, KEY)


# -- item: a composite checksum is never mistaken for a full-object one -------------------


def moto_like_composite() -> S3Object:
    """A multipart object as boto3 upload_fileobj(ChecksumAlgorithm="CRC32") leaves it
    on a server that states no x-amz-checksum-type and drops the "-<parts>": a bare
    CRC32 that is not the CRC32 of the body."""
    composite = base64.b64encode(zlib.crc32(b"part checksums").to_bytes(4, "big")).decode()
    return S3Object(
        DATA,
        etag='"0123456789abcdef0123456789abcdef-3"',
        headers={"x-amz-checksum-crc32": composite},
    )


def serve_correctly(obj: S3Object) -> Handler:
    def handler(request: Request, conn: socket.socket) -> None:
        if request.method == "HEAD":
            conn.sendall(head_reply(request, obj))
        else:
            object_reply(request, obj).send(conn)

    return handler


def test_download_of_a_multipart_object_with_an_untyped_crc32_is_not_checked_against_it(
    serve, tmp_path
):
    _server, client = serve(serve_correctly(moto_like_composite()))
    dest = tmp_path / "obj.bin"
    result = client.download(BUCKET, KEY, dest, part_size=256 * 1024, parallel=2)
    assert dest.read_bytes() == DATA
    assert result.verified is None
    assert "composite" in (result.unverified_reason or "")


def test_every_whole_read_of_a_multipart_object_with_an_untyped_crc32_succeeds(serve):
    _server, client = serve(serve_correctly(moto_like_composite()))
    buf = bytearray(SIZE)
    assert client.download(BUCKET, KEY, buf, part_size=256 * 1024, parallel=2).verified is None
    assert client.get_into(BUCKET, KEY, buf, part_size=256 * 1024, parallel=2) == SIZE
    assert client.get_into(BUCKET, KEY, bytearray(SIZE), parallel=1) == SIZE
    assert client.get_object(BUCKET, KEY) == DATA
    with client.open(BUCKET, KEY) as f:
        assert f.read() == DATA
        assert f.stats.verified is None
        assert "composite" in (f.stats.unverified_reason or "")


def test_download_with_verify_false_skips_the_check_and_says_so(serve, tmp_path):
    wrong = bytes([DATA[0] ^ 1]) + DATA[1:]
    _server, client = serve(serve_correctly(crc32c_object(wrong)))
    with pytest.raises(objsdk.IntegrityError):
        client.download(BUCKET, KEY, tmp_path / "a.bin")
    result = client.download(BUCKET, KEY, tmp_path / "b.bin", verify=False)
    assert (result.verified, result.unverified_reason) == (None, "verify=False")
    assert (tmp_path / "b.bin").read_bytes() == wrong
    assert client.get_into(BUCKET, KEY, bytearray(SIZE), verify=False) == SIZE
    assert client.get_object(BUCKET, KEY, verify=False) == wrong


PART = 400 * 1024  # the upload's parts: 400 KiB, 400 KiB, 248 KiB


def composite_crc32(data: bytes) -> str:
    """What S3 stores for a multipart upload with CRC32: the CRC32 of the parts' CRC32s."""
    parts = [data[i : i + PART] for i in range(0, len(data), PART)]
    joined = b"".join(zlib.crc32(p).to_bytes(4, "big") for p in parts)
    return base64.b64encode(zlib.crc32(joined).to_bytes(4, "big")).decode()


def moto_with_parts(stored: str) -> Handler:
    """A multipart object of 3 parts whose bare CRC32 states no type, on a server that
    answers ``HEAD ?partNumber=1`` with the first part's size and the parts' count."""
    obj = S3Object(
        DATA, etag='"0123456789abcdef0123456789abcdef-3"', headers={"x-amz-checksum-crc32": stored}
    )

    def handler(request: Request, conn: socket.socket) -> None:
        if request.method == "HEAD" and "partNumber=1" in request.path:
            headers = {"ETag": obj.etag, "Content-Length": str(PART), "x-amz-mp-parts-count": "3"}
            conn.sendall(http_response(206, headers))
        elif request.method == "HEAD":
            conn.sendall(head_reply(request, obj))
        else:
            object_reply(request, obj).send(conn)

    return handler


def test_an_untyped_composite_crc32_is_checked_part_by_part_where_the_parts_are_known(
    serve, tmp_path
):
    _server, client = serve(moto_with_parts(composite_crc32(DATA)))
    result = client.download(BUCKET, KEY, tmp_path / "a", part_size=256 * 1024, parallel=2)
    assert result.verified == "crc32"
    assert (tmp_path / "a").read_bytes() == DATA


def test_an_untyped_bare_crc32_that_is_the_full_objects_is_checked_as_such(serve):
    full = base64.b64encode(zlib.crc32(DATA).to_bytes(4, "big")).decode()
    _server, client = serve(moto_with_parts(full))
    assert client.download(BUCKET, KEY, bytearray(SIZE), part_size=256 * 1024).verified == "crc32"


def test_an_untyped_crc32_that_is_neither_composite_nor_full_fails(serve, tmp_path):
    wrong = composite_crc32(bytes([DATA[0] ^ 1]) + DATA[1:])
    _server, client = serve(moto_with_parts(wrong))
    with pytest.raises(objsdk.IntegrityError, match="crc32 mismatch"):
        client.download(BUCKET, KEY, tmp_path / "a", part_size=256 * 1024)
    assert not (tmp_path / "a").exists()


PAST_INT_DIGITS = "9" * 5000  # more digits than int() converts (4300)


@pytest.mark.parametrize("where", ["etag", "checksum", "parts-count"])
def test_a_parts_count_of_more_digits_than_int_converts_is_no_count(serve, tmp_path, where):
    """A count that says nothing (here: 5000 digits) is left out, as one that is not
    digits is: the parts are counted from what else says it, and the download is
    verified, never a raw ValueError."""
    # Each time one other place says 3: the checksum's or the ETag's suffix.
    counts = {
        "etag": {"etag": PAST_INT_DIGITS, "checksum": "3", "parts-count": ""},
        "checksum": {"etag": "3", "checksum": PAST_INT_DIGITS, "parts-count": ""},
        "parts-count": {"etag": "3", "checksum": "", "parts-count": PAST_INT_DIGITS},
    }[where]
    stored = composite_crc32(DATA) + (f"-{counts['checksum']}" if counts["checksum"] else "")
    obj = S3Object(
        DATA,
        etag=f'"0123456789abcdef0123456789abcdef-{counts["etag"]}"',
        headers={"x-amz-checksum-crc32": stored},
    )

    def handler(request: Request, conn: socket.socket) -> None:
        if request.method == "HEAD" and "partNumber=1" in request.path:
            headers = {"ETag": obj.etag, "Content-Length": str(PART)}
            if counts["parts-count"]:
                headers["x-amz-mp-parts-count"] = counts["parts-count"]
            conn.sendall(http_response(206, headers))
        elif request.method == "HEAD":
            conn.sendall(head_reply(request, obj))
        else:
            object_reply(request, obj).send(conn)

    _server, client = serve(handler)
    result = client.download(BUCKET, KEY, tmp_path / "a", part_size=256 * 1024, parallel=2)
    assert result.verified == "crc32"
    assert (tmp_path / "a").read_bytes() == DATA
