"""ObjectWriter against an in-memory S3 behind `responses` (no server).

The fake speaks just enough of the multipart API to check request shapes, buffer
management, concurrency, and what is completed or aborted. Behaviour against a real
server is in test_writer_minio.py.
"""

from __future__ import annotations

import array
import base64
import hashlib
import io
import mmap
import os
import pickle
import random
import re
import threading
import time
import tracemalloc
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import crc32c
import pytest
import requests
import responses

import objsdk
from objsdk import Client
from objsdk._transfer.writer import ObjectWriter
from objsdk._transport.http import HTTPTransport

EP = "http://s3.test:9000"
MiB = 1 << 20
PART = 5 * MiB


def b64crc(data: bytes) -> str:
    return base64.b64encode(crc32c.crc32c(data).to_bytes(4, "big")).decode()


def error_body(code: str) -> bytes:
    return f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()


class FakeS3:
    """An in-memory bucket ``b`` speaking PUT object and the multipart calls.

    ``gate`` (if set) holds every part upload until it is set; ``fail_part`` makes that
    part number answer 403 AccessDenied; ``throttle_aborts`` answers that many aborts
    429 TooManyRequests (None: all of them). Part bodies are recorded as copies (the
    writer reuses its buffers), and the buffers they were sent from are kept, so their
    identities can be counted.
    """

    def __init__(self, rsps: responses.RequestsMock) -> None:
        self.lock = threading.Lock()
        self.log: list[tuple[str, str]] = []  # (operation, detail), in arrival order
        self.objects: dict[str, bytes] = {}
        self.object_headers: dict[str, dict[str, str]] = {}
        self.uploads: dict[str, dict[int, bytes]] = {}
        self.create_headers: dict[str, str] = {}
        self.part_headers: dict[int, dict[str, str]] = {}
        self.complete_headers: dict[str, str] = {}
        self.complete_body = b""
        self.part_buffers: list[object] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.parts_started = threading.Semaphore(0)
        self.gate: threading.Event | None = None
        self.fail_part: int | None = None
        self.fail_create = False
        self.fail_complete = False
        self.throttle_aborts: int | None = 0
        url = re.compile(rf"{re.escape(EP)}/b/.*")
        for method in (responses.PUT, responses.POST, responses.DELETE):
            rsps.add_callback(method, url, callback=self.handle)

    def handle(self, req: requests.PreparedRequest) -> tuple[int, dict[str, str], bytes]:
        assert req.url is not None
        parts = urlsplit(req.url)
        key = parts.path.split("/", 2)[2]
        query = parse_qs(parts.query, keep_blank_values=True)
        headers = dict(req.headers)
        if req.method == "POST" and "uploads" in query:
            return self.create(key, headers)
        if req.method == "PUT" and "partNumber" in query:
            return self.part(int(query["partNumber"][0]), query["uploadId"][0], req, headers)
        if req.method == "POST" and "uploadId" in query:
            return self.complete(key, query["uploadId"][0], req, headers)
        if req.method == "DELETE" and "uploadId" in query:
            with self.lock:
                self.log.append(("abort", query["uploadId"][0]))
                if self.throttle_aborts is None or self.throttle_aborts > 0:
                    if self.throttle_aborts is not None:
                        self.throttle_aborts -= 1
                    return 429, {}, error_body("TooManyRequests")
                self.uploads.pop(query["uploadId"][0], None)
            return 204, {}, b""
        if req.method == "PUT":
            body = bytes(req.body or b"")  # type: ignore[arg-type]
            with self.lock:
                self.log.append(("put", key))
                self.objects[key] = body
                self.object_headers[key] = headers
            assert headers["x-amz-checksum-crc32c"] == b64crc(body)
            return 200, {"ETag": '"put-etag"'}, b""
        raise AssertionError(f"unexpected {req.method} {req.url}")

    def create(self, key: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            self.log.append(("create", key))
            if self.fail_create:
                return 404, {}, error_body("NoSuchBucket")
            upload_id = f"up{len(self.uploads) + 1}"
            self.uploads[upload_id] = {}
            self.create_headers = headers
        body = (
            "<InitiateMultipartUploadResult><Bucket>b</Bucket>"
            f"<Key>{key}</Key><UploadId>{upload_id}</UploadId></InitiateMultipartUploadResult>"
        )
        return 200, {}, body.encode()

    def part(
        self, number: int, upload_id: str, req: requests.PreparedRequest, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            self.log.append(("part", str(number)))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.parts_started.release()
        try:
            if self.gate is not None:
                assert self.gate.wait(10), "test gate never opened"
            body = req.body
            assert isinstance(body, memoryview)
            data = bytes(body)
            with self.lock:
                self.part_buffers.append(body.obj)
                self.part_headers[number] = headers
                if number == self.fail_part:
                    return 403, {}, error_body("AccessDenied")
                if upload_id not in self.uploads:
                    return 404, {}, error_body("NoSuchUpload")
                self.uploads[upload_id][number] = data
            assert headers["x-amz-checksum-crc32c"] == b64crc(data)
            return 200, {"ETag": f'"etag-{number}"', "x-amz-checksum-crc32c": b64crc(data)}, b""
        finally:
            with self.lock:
                self.in_flight -= 1

    def complete(
        self, key: str, upload_id: str, req: requests.PreparedRequest, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        body = bytes(req.body or b"")  # type: ignore[arg-type]
        with self.lock:
            self.log.append(("complete", upload_id))
            self.complete_headers = headers
            self.complete_body = body
            if self.fail_complete:
                return 400, {}, error_body("InvalidPart")
            parts = self.uploads.pop(upload_id)
        numbers = [int(e.text or "") for e in ET.fromstring(body).iter("PartNumber")]
        data = b"".join(parts[n] for n in numbers)
        if headers["x-amz-checksum-crc32c"] != b64crc(data):
            return 400, {}, error_body("XAmzContentChecksumMismatch")
        self.objects[key] = data
        result = (
            "<CompleteMultipartUploadResult><ETag>&quot;done-etag&quot;</ETag>"
            f"<ChecksumCRC32C>{b64crc(data)}</ChecksumCRC32C>"
            "<ChecksumType>FULL_OBJECT</ChecksumType></CompleteMultipartUploadResult>"
        )
        return 200, {}, result.encode()

    def ops(self) -> list[str]:
        return [op for op, _ in self.log]


@pytest.fixture
def client() -> Iterator[Client]:
    # No retries: an injected error is the answer, not something to wait out.
    with Client(EP, "AKID", "SECRET", retries=0) as c:
        yield c


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeS3]:
    # Every request through requests' adapter, where responses answers it.
    monkeypatch.setattr(HTTPTransport, "wire_requests", False)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield FakeS3(rsps)


def writer(client: Client, key: str = "k", **kw: object) -> ObjectWriter:
    kw.setdefault("part_size", PART)
    return ObjectWriter(client, "b", key, **kw)  # type: ignore[arg-type]


# -- the file interface ------------------------------------------------------------------


def test_writer_is_writable_and_neither_readable_nor_seekable(client, s3):
    with writer(client) as w:
        assert w.writable()
        assert not w.readable()
        assert not w.seekable()


def test_reading_or_seeking_raises_unsupported_operation(client, s3):
    with writer(client) as w:
        with pytest.raises(io.UnsupportedOperation):
            w.read(1)
        with pytest.raises(io.UnsupportedOperation):
            w.seek(0)


def test_write_accepts_any_bytes_like_and_returns_its_length_in_bytes(client, s3, tmp_path):
    path = tmp_path / "m"
    path.write_bytes(b"mapped!")
    ints = array.array("i", [1, 2, 3])
    with (
        path.open("rb") as f,
        mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm,
        writer(client) as w,
    ):
        assert w.write(b"ab") == 2
        assert w.write(bytearray(b"cd")) == 2
        assert w.write(memoryview(b"xxefxx")[2:4]) == 2
        assert w.write(ints) == ints.itemsize * 3
        assert w.write(mm) == 7
        assert w.tell() == 13 + ints.itemsize * 3
    assert s3.objects["k"] == b"abcdef" + ints.tobytes() + b"mapped!"


def test_the_writer_keeps_no_hold_on_the_callers_buffer(client, s3, tmp_path):
    path = tmp_path / "m"
    path.write_bytes(b"mapped")
    grow = bytearray(b"grow")
    with writer(client) as w, path.open("rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        w.write(mm)
        mm.close()  # BufferError if a view of it were still alive
        w.write(grow)
        grow.extend(b"n")  # likewise: a bytearray with live views cannot resize
    assert s3.objects["k"] == b"mappedgrow"


def test_write_of_a_str_raises_type_error_and_the_writer_stays_usable(client, s3):
    with writer(client) as w:
        with pytest.raises(TypeError, match=r"not str \(bucket 'b', key 'k'\)"):
            w.write("text")  # type: ignore[arg-type]
        w.write(b"bytes")
    assert s3.objects["k"] == b"bytes"


def test_an_empty_write_returns_zero_and_sends_nothing(client, s3):
    w = writer(client)
    assert w.write(b"") == 0
    assert s3.log == []
    w.abort()


def test_tell_counts_bytes_written(client, s3):
    with writer(client) as w:
        w.write(b"x" * 10)
        w.write(bytes(PART))
        assert w.tell() == PART + 10


def test_flush_sends_nothing(client, s3):
    w = writer(client)
    w.write(b"abc")
    w.flush()
    assert s3.log == []
    w.close()


def test_write_after_close_raises_value_error(client, s3):
    w = writer(client)
    w.close()
    assert w.closed
    with pytest.raises(ValueError, match="closed file"):
        w.write(b"x")


def test_tell_and_flush_after_close_raise_value_error(client, s3):
    w = writer(client)
    w.close()
    with pytest.raises(ValueError, match="closed file"):
        w.tell()
    with pytest.raises(ValueError, match="closed file"):
        w.flush()


def test_closing_twice_stores_the_object_once(client, s3):
    w = writer(client)
    w.write(b"once")
    w.close()
    w.close()
    assert s3.ops() == ["put"]


def test_entering_a_closed_writer_raises_value_error(client, s3):
    w = writer(client)
    w.close()
    with pytest.raises(ValueError, match="closed file"), w:
        pass


def test_a_writer_cannot_be_pickled(client, s3):
    with writer(client) as w, pytest.raises(TypeError, match="cannot pickle"):
        pickle.dumps(w)


# -- single PUT ----------------------------------------------------------------------------


def test_an_object_smaller_than_a_part_is_one_put_with_type_metadata_and_crc32c(client, s3):
    with writer(client, content_type="text/plain", metadata={"Owner": "me"}) as w:
        w.write(b"hello ")
        w.write(b"world")
    assert s3.ops() == ["put"]
    assert s3.objects["k"] == b"hello world"
    sent = s3.object_headers["k"]
    assert sent["Content-Type"] == "text/plain"
    assert sent["x-amz-meta-owner"] == "me"
    assert sent["x-amz-checksum-crc32c"] == b64crc(b"hello world")


def test_an_empty_writer_stores_a_zero_byte_object(client, s3):
    with writer(client):
        pass
    assert s3.ops() == ["put"]
    assert s3.objects["k"] == b""


def test_one_byte_less_than_a_part_is_still_one_put(client, s3):
    with writer(client) as w:
        w.write(bytes(PART - 1))
    assert s3.ops() == ["put"]


def test_info_after_a_put_reports_size_and_etag(client, s3):
    w = writer(client)
    assert w.info is None
    w.write(b"abc")
    w.close()
    assert w.info is not None
    assert w.info.size == 3
    assert w.info.etag == '"put-etag"'


# -- multipart -----------------------------------------------------------------------------


def test_exactly_one_part_is_a_one_part_multipart_upload(client, s3):
    data = os.urandom(PART)
    with writer(client) as w:
        w.write(data)
    assert s3.ops() == ["create", "part", "complete"]
    assert s3.objects["k"] == data


def test_create_asks_for_a_full_object_crc32c_with_type_and_metadata(client, s3):
    with writer(client, content_type="application/x-tar", metadata={"a": "1"}) as w:
        w.write(bytes(PART + 1))
    sent = s3.create_headers
    assert sent["x-amz-checksum-algorithm"] == "CRC32C"
    assert sent["x-amz-checksum-type"] == "FULL_OBJECT"
    assert sent["Content-Type"] == "application/x-tar"
    assert sent["x-amz-meta-a"] == "1"


def test_each_part_carries_the_crc32c_of_its_own_bytes(client, s3):
    data = os.urandom(2 * PART + 7)
    with writer(client) as w:
        w.write(data)
    for number, start in ((1, 0), (2, PART), (3, 2 * PART)):
        expected = b64crc(data[start : start + PART])
        assert s3.part_headers[number]["x-amz-checksum-crc32c"] == expected


def test_complete_sends_the_full_object_crc32c_and_every_part_in_order(client, s3):
    data = os.urandom(3 * PART + 1)
    with writer(client, parallel=3) as w:
        w.write(data)
    assert s3.complete_headers["x-amz-checksum-crc32c"] == b64crc(data)
    assert s3.complete_headers["x-amz-checksum-type"] == "FULL_OBJECT"
    root = ET.fromstring(s3.complete_body)
    assert [int(e.text or "") for e in root.iter("PartNumber")] == [1, 2, 3, 4]
    assert [e.text for e in root.iter("ETag")] == [f'"etag-{n}"' for n in (1, 2, 3, 4)]
    assert [e.text for e in root.iter("ChecksumCRC32C")] == [
        b64crc(data[i : i + PART]) for i in range(0, len(data), PART)
    ]


def test_the_last_part_is_short_and_all_others_are_full(client, s3):
    data = os.urandom(2 * PART + 123)
    with writer(client) as w:
        w.write(data)
    assert s3.objects["k"] == data
    sizes = [s3.part_headers[n]["Content-Length"] for n in sorted(s3.part_headers)]
    assert sizes == [str(PART), str(PART), "123"]


def test_no_empty_last_part_is_sent_when_the_data_ends_on_a_part_boundary(client, s3):
    with writer(client) as w:
        w.write(bytes(2 * PART))
    assert s3.ops() == ["create", "part", "part", "complete"]


def test_parts_are_sent_from_part_sized_bytearrays_without_a_copy(client, s3):
    with writer(client) as w:
        w.write(bytes(PART + 1))
    assert all(type(b) is bytearray and len(b) == PART for b in s3.part_buffers)


def test_random_write_sizes_reassemble_exactly(client, s3):
    rng = random.Random(7)
    data = os.urandom(int(3.5 * PART))
    view = memoryview(data)
    with writer(client) as w:
        pos = 0
        while pos < len(data):
            n = rng.choice([1, 2, 511, 4096, rng.randrange(1, 3 * PART)])
            pos += w.write(view[pos : pos + n])
    assert s3.objects["k"] == data


def test_info_after_a_multipart_upload_reports_etag_size_and_checksum(client, s3):
    data = os.urandom(PART + 5)
    with writer(client) as w:
        w.write(data)
    assert w.info is not None
    assert w.info.etag == '"done-etag"'
    assert w.info.size == len(data)
    assert w.info.checksums == {"crc32c": b64crc(data)}
    assert w.info.checksum_type == "FULL_OBJECT"


# -- memory and concurrency ----------------------------------------------------------------


@pytest.mark.parametrize("parallel", [1, 2, 3])
def test_at_most_parallel_plus_one_part_buffers_exist(client, s3, parallel):
    with writer(client, parallel=parallel) as w:
        for _ in range(12):
            w.write(bytes(PART))
    assert len(s3.part_buffers) == 12
    assert len({id(b) for b in s3.part_buffers}) <= parallel + 1


def open_gate_once_started(s3: FakeS3, n: int) -> threading.Thread:
    """Hold part uploads until ``n`` of them have started, then let all through."""
    gate = s3.gate = threading.Event()

    def run() -> None:
        for _ in range(n):
            s3.parts_started.acquire(timeout=10)
        gate.set()

    t = threading.Thread(target=run)
    t.start()
    return t


@pytest.mark.parametrize("parallel", [1, 2, 4])
def test_at_most_parallel_parts_are_in_flight(client, s3, parallel):
    opener = open_gate_once_started(s3, parallel)
    with writer(client, parallel=parallel) as w:
        for _ in range(3 * parallel):
            w.write(bytes(PART))
    opener.join()
    assert s3.max_in_flight == parallel


def test_the_writer_blocks_while_every_buffer_is_in_flight(client, s3):
    s3.gate = threading.Event()
    w = writer(client, parallel=2)
    for _ in range(3):  # two parts uploading, one waiting in the pool
        w.write(bytes(PART))
    for _ in range(2):
        assert s3.parts_started.acquire(timeout=5)
    assert w.write(b"x") == 1  # a small write only gathers with others: no buffer yet
    more = b"y" * (64 * 1024)  # with it, the gathered bytes need a part buffer
    blocked = threading.Thread(target=w.write, args=(more,))
    blocked.start()
    blocked.join(0.3)
    assert blocked.is_alive()  # the fourth buffer would exceed parallel + 1
    s3.gate.set()
    blocked.join(5)
    assert not blocked.is_alive()
    w.close()
    assert s3.objects["k"] == bytes(3 * PART) + b"x" + more


def test_a_write_is_copied_once_straight_into_the_part_buffer(client, s3):
    source = memoryview(os.urandom(4 * MiB))
    w = writer(client)
    tracemalloc.start()
    try:
        w.write(source)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert PART <= peak < PART + MiB  # the part buffer, and no temporary of 4 MiB
    w.abort()


def test_close_leaves_no_pool_thread_running(client, s3):
    before = set(threading.enumerate())
    with writer(client, parallel=3) as w:
        w.write(bytes(4 * PART))
    assert set(threading.enumerate()) <= before


# -- failures, abort -----------------------------------------------------------------------


def keep_writing(w: ObjectWriter) -> None:
    """Write whole parts until a failure surfaces: with parallel=2 it must by the fourth,
    whose buffer can only come from a finished (here: failed) first part."""
    for _ in range(4):
        w.write(bytes(PART))
    raise AssertionError("no failure surfaced")


def test_a_failed_part_is_raised_by_the_next_write_after_the_upload_is_aborted(client, s3):
    s3.fail_part = 1
    w = writer(client)
    w.write(bytes(PART))
    assert s3.parts_started.acquire(timeout=5)
    with pytest.raises(objsdk.AccessDenied, match=r"upload_part\(1\)"):
        keep_writing(w)
    assert s3.ops()[-1] == "abort"
    assert "complete" not in s3.ops()
    w.abort()


def write_until_it_raises(w: ObjectWriter, data: bytes, *, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        w.write(data)
        time.sleep(0.001)


def test_small_writes_gather_and_a_failed_part_still_stops_the_next_one(client, s3):
    s3.fail_part = 1
    s3.gate = threading.Event()  # the part fails only after the write that sent it
    w = writer(client)
    rows = [b"%d,row\n" % i for i in range(200_000)]  # ~2 MiB in writes of ~10 bytes
    assert sum(w.write(row) for row in rows) == w.tell() == sum(map(len, rows))
    w.write(bytes(PART))  # the first part, which fails
    assert s3.parts_started.acquire(timeout=5)
    s3.gate.set()
    with pytest.raises(objsdk.AccessDenied):  # by a small write, once the part has failed
        write_until_it_raises(w, b"x", seconds=5)
    assert "complete" not in s3.ops()
    w.abort()


def test_small_writes_reach_the_object_in_order(client, s3):
    rows = [b"%d,row\n" % i for i in range(300_000)]
    with writer(client) as w:
        for i, row in enumerate(rows):
            # bytes gather; anything else (and every 1000th row) goes straight on
            w.write(row if i % 1000 else bytearray(row))
    assert s3.objects["k"] == b"".join(rows)


def test_a_failed_part_is_raised_by_close_and_nothing_is_completed(client, s3):
    s3.fail_part = 2
    s3.gate = threading.Event()  # no part finishes before close()
    w = writer(client)
    w.write(bytes(3 * PART))
    s3.gate.set()
    with pytest.raises(objsdk.AccessDenied):
        w.close()
    assert w.closed
    assert "complete" not in s3.ops()
    assert s3.ops()[-1] == "abort"
    assert s3.uploads == {}
    assert "k" not in s3.objects


def test_after_a_failure_every_write_and_close_raise_it_again(client, s3):
    s3.fail_part = 1
    w = writer(client)
    w.write(bytes(PART))
    with pytest.raises(objsdk.AccessDenied):
        keep_writing(w)
    with pytest.raises(objsdk.AccessDenied):
        w.write(b"more")
    with pytest.raises(objsdk.AccessDenied):
        w.close()
    assert s3.ops().count("abort") == 1


def test_the_failure_raised_is_the_part_uploads_own_error(client, s3):
    s3.fail_part = 1
    w = writer(client)
    w.write(bytes(PART))
    with pytest.raises(objsdk.AccessDenied) as info:
        w.close()
    assert info.value.code == "AccessDenied"
    assert info.value.operation == "upload_part(1)"
    assert info.value.key == "k"


def test_parts_in_flight_finish_before_the_abort_is_sent(client, s3):
    # S3 may keep a part that lands after its upload was aborted (AbortMultipartUpload).
    s3.gate = threading.Event()
    w = writer(client, parallel=2)
    w.write(bytes(2 * PART))
    for _ in range(2):
        assert s3.parts_started.acquire(timeout=5)
    threading.Timer(0.2, s3.gate.set).start()
    w.abort()
    assert s3.ops() == ["create", "part", "part", "abort"]


def test_a_failed_create_is_raised_and_no_part_is_sent(client, s3):
    s3.fail_create = True
    w = writer(client)
    with pytest.raises(objsdk.NoSuchBucket):
        w.write(bytes(PART))
    with pytest.raises(objsdk.NoSuchBucket):
        w.close()
    assert s3.ops() == ["create"]


def test_a_failed_complete_aborts_the_upload(client, s3):
    s3.fail_complete = True
    w = writer(client)
    w.write(bytes(PART + 1))
    with pytest.raises(objsdk.S3Error, match="InvalidPart"):
        w.close()
    assert s3.ops()[-2:] == ["complete", "abort"]


def write_then_fail(w: ObjectWriter, data: bytes) -> None:
    """A producer that dies inside its ``with`` block."""
    with w:
        w.write(data)
        raise KeyError("producer died")


def abandon(w: ObjectWriter, data: bytes) -> None:
    """Write, then drop the only reference to the writer without closing it."""
    w.write(data)


def test_an_exception_inside_with_aborts_the_upload_and_propagates(client, s3):
    w = writer(client)
    with pytest.raises(KeyError, match="producer died"):
        write_then_fail(w, bytes(2 * PART + 1))
    assert w.closed
    assert "complete" not in s3.ops()
    assert s3.ops()[-1] == "abort"
    assert s3.uploads == {}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Sleeps take no time but move a monotonic clock that starts at 0."""
    now = [0.0]
    monkeypatch.setattr("time.sleep", lambda s: now.__setitem__(0, now[0] + s))
    monkeypatch.setattr("time.monotonic", lambda: now[0])
    return now


def test_an_exception_inside_with_aborts_the_upload_even_while_aborts_are_throttled(
    client, s3, clock
):
    s3.throttle_aborts = 4  # the client makes no retries of its own: the abort goes on
    w = writer(client)
    with pytest.raises(KeyError, match="producer died"):
        write_then_fail(w, bytes(2 * PART + 1))
    assert s3.ops().count("abort") == 5
    assert s3.uploads == {}
    assert clock[0] < 60


def test_an_abort_still_throttled_at_its_deadline_raises_an_error_naming_the_upload(
    client, s3, clock
):
    s3.throttle_aborts = None
    w = writer(client)
    w.write(bytes(PART + 1))
    with pytest.raises(objsdk.SlowDown, match=r"abort_multipart_upload\(up1\)") as info:
        w.abort()
    assert info.value.code == "TooManyRequests"
    assert 60 <= clock[0] < 70
    assert w.closed
    assert s3.uploads.keys() == {"up1"}


def test_a_with_block_whose_abort_fails_raises_the_blocks_exception_naming_the_upload(
    client, s3, clock, caplog
):
    s3.throttle_aborts = None
    with pytest.raises(KeyError, match="producer died") as info:
        write_then_fail(writer(client), bytes(PART + 1))
    assert any("up1" in r.getMessage() for r in caplog.records)
    if hasattr(info.value, "add_note"):  # Python 3.11 and later
        assert any("up1" in note for note in info.value.__notes__)


def test_an_exception_inside_with_before_a_part_filled_sends_nothing(client, s3):
    with pytest.raises(KeyError, match="producer died"):
        write_then_fail(writer(client), b"partial")
    assert s3.log == []


def test_abort_discards_the_upload_and_closes(client, s3):
    w = writer(client)
    w.write(bytes(PART + 1))
    w.abort()
    assert w.closed
    assert s3.ops() == ["create", "part", "abort"]
    w.abort()  # again: nothing to do
    assert s3.ops().count("abort") == 1


def test_abort_after_close_does_nothing(client, s3):
    w = writer(client)
    w.write(b"kept")
    w.close()
    w.abort()
    assert s3.ops() == ["put"]
    assert s3.objects["k"] == b"kept"


def test_a_garbage_collected_unclosed_writer_is_aborted_never_completed(client, s3):
    with pytest.warns(ResourceWarning, match="unclosed"):
        abandon(writer(client), bytes(PART + 1))
    assert s3.ops() == ["create", "part", "abort"]


def test_collecting_a_writer_waits_for_its_parts_in_flight_before_aborting(client, s3):
    opener = open_gate_once_started(s3, 2)
    with pytest.warns(ResourceWarning, match="unclosed"):
        abandon(writer(client, parallel=2), bytes(2 * PART))
    opener.join()
    assert s3.ops() == ["create", "part", "part", "abort"]


def test_a_garbage_collected_small_writer_stores_nothing(client, s3):
    with pytest.warns(ResourceWarning, match="unclosed"):
        abandon(writer(client), b"half an object")
    assert s3.log == []


# -- progress --------------------------------------------------------------------------


def test_progress_reports_bytes_as_parts_finish_and_the_total_once_known(client, s3):
    seen: list[tuple[int, int | None]] = []
    data = bytes(2 * PART + 10)
    with writer(client, parallel=1, progress=lambda n, t: seen.append((n, t))) as w:
        w.write(data)
    assert [n for n, _ in seen] == [PART, 2 * PART, 2 * PART + 10]
    assert seen[-1][1] == len(data)
    assert all(t in (None, len(data)) for _, t in seen)


def test_progress_of_a_single_put_reports_it_whole(client, s3):
    seen: list[tuple[int, int | None]] = []
    with writer(client, progress=lambda n, t: seen.append((n, t))) as w:
        w.write(b"abc")
    assert seen == [(3, 3)]


def test_a_progress_callback_that_raises_fails_the_upload(client, s3):
    def explode(n: int, total: int | None) -> None:
        raise RuntimeError("progress bar broke")

    s3.gate = threading.Event()  # the part finishes after the writes
    w = writer(client, progress=explode)
    w.write(bytes(PART + 1))
    s3.gate.set()
    with pytest.raises(RuntimeError, match="progress bar broke"):
        w.close()
    assert "complete" not in s3.ops()
    assert s3.ops()[-1] == "abort"


# -- arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize("part_size", [PART - 1, (5 << 30) + 1, 0, 5.5 * MiB, True])
def test_a_part_size_outside_s3_limits_is_refused(client, s3, part_size):
    with pytest.raises(objsdk.InvalidArgument, match="part_size"):
        writer(client, part_size=part_size)


@pytest.mark.parametrize("parallel", [0, -1, 1.5, None])
def test_parallel_below_one_or_not_an_int_is_refused(client, s3, parallel):
    with pytest.raises(objsdk.InvalidArgument, match="parallel"):
        writer(client, parallel=parallel)


def test_bad_metadata_is_refused_before_anything_is_sent(client, s3):
    with pytest.raises(objsdk.InvalidArgument, match="metadata"):
        writer(client, metadata={"bad key": "v"})
    assert s3.log == []


def test_a_bad_key_is_refused(client, s3):
    with pytest.raises(objsdk.InvalidArgument):
        writer(client, key="")


def test_a_write_beyond_ten_thousand_parts_is_refused_and_the_writer_stays_usable(
    client, s3, tmp_path
):
    # A sparse file mapped read-only: 10,000 parts and a byte of address space, no memory.
    path = tmp_path / "sparse"
    with path.open("wb") as f:
        f.truncate(10_000 * PART + 1)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        w = writer(client)
        with pytest.raises(objsdk.InvalidArgument, match="10000 parts"):
            w.write(mm)
        assert w.tell() == 0
        w.write(b"fits")
        w.close()
    assert s3.objects["k"] == b"fits"


def test_the_full_object_checksum_covers_every_byte_in_order(client, s3):
    # What the server checks at completion; the fake refuses a mismatch like S3 does.
    chunks = [os.urandom(n) for n in (1, PART - 1, 3, PART * 2, 17)]
    with writer(client) as w:
        for c in chunks:
            w.write(c)
    whole = b"".join(chunks)
    assert s3.objects["k"] == whole
    assert hashlib.sha256(s3.objects["k"]).digest() == hashlib.sha256(whole).digest()
    assert s3.complete_headers["x-amz-checksum-crc32c"] == b64crc(whole)
