"""``objsdk._transfer.upload.upload`` against a fake S3 on `responses` (no server).

Which route each kind of source takes, what goes on the wire (checksums, part bodies
as views of the caller's memory or of an mmap), and that every failure aborts the
multipart upload. Real-server round trips are in test_upload_minio.py; the raw-socket
PUT itself in test_sendfile.py.
"""

from __future__ import annotations

import array
import hashlib
import io
import mmap
import os
import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import crc32c
import pytest
import responses
from hypothesis import given
from hypothesis import strategies as st

import objsdk
from objsdk._core.checksums import crc32c_b64, crc32c_combine
from objsdk._core.parts import (
    Part,
    adaptive_upload_part_size,
    covers,
    plan_upload_probed,
    replan_smaller,
)
from objsdk._transfer import multipart as multipart_module
from objsdk._transfer import sources as sources_module
from objsdk._transfer.sources import SMALL_FILE_PUT, FileSource
from objsdk._transfer.upload import upload
from objsdk._transport.http import HTTPTransport
from objsdk.errors import SourceChangedError
from objsdk.models import UploadInfo

EP = "http://s3.test:9000"
AK, SK = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
BUCKET, KEY = "bkt", "dir/obj"
MiB = 1 << 20
PART = 5 * MiB


def pattern(n: int, seed: int = 0) -> bytes:
    """``n`` reproducible bytes, different at every offset of a part."""
    block = bytes((i * 7 + seed) % 251 for i in range(251))
    return (block * (n // 251 + 1))[:n]


class Pipe(io.RawIOBase):
    """A non-seekable stream over ``data`` that returns short reads, like a pipe."""

    def __init__(self, data: bytes, chunk: int = 1 << 18) -> None:
        self._data = data
        self._chunk = chunk
        self.pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        n = min(len(buf), self._chunk, len(self._data) - self.pos)
        buf[:n] = self._data[self.pos : self.pos + n]
        self.pos += n
        return n


# -- a fake S3 ----------------------------------------------------------------------------


class FakeS3:
    """PutObject and the multipart calls for one endpoint, checking checksums as S3 does.

    ``objects`` holds what was stored, ``requests`` every request as (method, key,
    query, headers, body). ``fault(method, query, attempt)`` may return a status to
    answer instead (``attempt`` counts requests with the same method and query).
    """

    def __init__(self, rsps: responses.RequestsMock, endpoint: str = EP) -> None:
        self.objects: dict[str, bytes] = {}
        self.uploads: dict[str, dict[int, bytes]] = {}
        self.aborted: list[str] = []
        self.requests: list[tuple[str, str, dict[str, str], dict[str, str], Any]] = []
        self.fault: Callable[[str, dict[str, str], int], int | None] = lambda m, q, n: None
        #: Whether answers repeat the checksums stored (moto and s3rver do not on a PUT).
        self.echo_checksums = True
        self._attempts: dict[tuple[str, str], int] = {}
        url = re.compile(re.escape(endpoint) + r"/.*")
        for method in (responses.PUT, responses.POST, responses.DELETE):
            rsps.add_callback(method, url, callback=self._handle)

    def calls(self, method: str, what: str | None = None) -> list[Any]:
        """Requests of ``method`` whose query has ``what`` (or has no query if None)."""
        return [r for r in self.requests if r[0] == method and (what in r[2] if what else not r[2])]

    def _handle(self, request: Any) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(request.url)
        key = unquote(parts.path.split("/", 2)[2])
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.requests.append((request.method, key, query, headers, request.body))
        attempt_key = (request.method, parts.query)
        attempt = self._attempts[attempt_key] = self._attempts.get(attempt_key, 0) + 1
        status = self.fault(request.method, query, attempt)
        if status is not None:
            code = "InternalError" if status >= 500 else "InvalidRequest"
            return status, {}, error_xml("TooManyRequests" if status == 429 else code)
        body = bytes(request.body or b"")
        if request.method == "PUT":
            if headers.get("x-amz-checksum-crc32c", crc32c_b64(body)) != crc32c_b64(body):
                return 400, {}, error_xml("BadDigest")
            etag = f'"{len(body):x}-{crc32c.crc32c(body):x}"'
            if "uploadId" in query:
                self.uploads[query["uploadId"]][int(query["partNumber"])] = body
            else:
                self.objects[key] = body
            echo = {"x-amz-checksum-crc32c": crc32c_b64(body)} if self.echo_checksums else {}
            return 200, {"ETag": etag, **echo}, b""
        if request.method == "DELETE":
            self.aborted.append(query["uploadId"])
            self.uploads.pop(query["uploadId"], None)
            return 204, {}, b""
        if "uploads" in query:
            upload_id = f"U{len(self.uploads) + len(self.aborted) + 1}"
            self.uploads[upload_id] = {}
            return 200, {}, f"<R><UploadId>{upload_id}</UploadId></R>".encode()
        stored = self.uploads.pop(query["uploadId"])
        numbers = [int(e.text or 0) for e in ET.fromstring(body).iter("PartNumber")]
        data = b"".join(stored[n] for n in numbers)
        if headers.get("x-amz-checksum-crc32c") != crc32c_b64(data):
            return 400, {}, error_xml("XAmzContentChecksumMismatch")
        self.objects[key] = data
        fields = (
            f"<ChecksumCRC32C>{crc32c_b64(data)}</ChecksumCRC32C>"
            "<ChecksumType>FULL_OBJECT</ChecksumType>"
            if self.echo_checksums
            else ""
        )
        return 200, {}, f'<R><ETag>"final-{len(numbers)}"</ETag>{fields}</R>'.encode()


def error_xml(code: str) -> bytes:
    return f"<Error><Code>{code}</Code><Message>{code}</Message></Error>".encode()


@pytest.fixture
def rsps(monkeypatch: pytest.MonkeyPatch) -> Iterator[responses.RequestsMock]:
    # Every request through requests' adapter, where responses answers it.
    monkeypatch.setattr(HTTPTransport, "wire_requests", False)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as r:
        yield r


@pytest.fixture
def s3(rsps: responses.RequestsMock) -> FakeS3:
    return FakeS3(rsps)


@pytest.fixture
def client() -> Iterator[objsdk.Client]:
    with objsdk.Client(EP, AK, SK, retries=2) as c:
        yield c


@pytest.fixture
def no_sendfile(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Records any ``socket.sendfile`` call (none is expected: responses has no socket)."""
    calls: list[object] = []
    monkeypatch.setattr(socket.socket, "sendfile", lambda *a, **k: calls.append(a))
    return calls


@pytest.fixture
def over_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The transport cannot sendfile (as over TLS): file parts go through buffers."""
    monkeypatch.setattr(HTTPTransport, "direct_file_bodies", property(lambda self: False))


@pytest.fixture
def file_sends(client: objsdk.Client, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """``send_file`` answered by the fake S3: it reads the file where sendfile(2) would
    (at the offset given, not the file's position) and sends that through requests.
    Returns every call as (offset, count)."""
    calls: list[tuple[int, int]] = []

    def send_file(bucket, key, file, *, offset, count, headers, progress=None, **kw):  # type: ignore[no-untyped-def]
        calls.append((offset, count))
        kw.setdefault("operation", "upload")
        body = os.pread(file.fileno(), count, offset)
        resp = client.transport.request(
            "PUT", bucket=bucket, key=key, headers=headers, body=body, **kw
        )
        return resp.headers

    monkeypatch.setattr(client.transport, "send_file", send_file)
    return calls


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "src.bin"
    path.write_bytes(data)
    return path


# -- CRC32C combination ----------------------------------------------------------------------


@given(st.binary(max_size=300), st.binary(max_size=300))
def test_combined_crc_of_two_pieces_is_the_crc_of_both(a, b):
    assert crc32c_combine(crc32c.crc32c(a), crc32c.crc32c(b), len(b)) == crc32c.crc32c(a + b)


@pytest.mark.parametrize("length", [2**28, 2**29, 2**30 + 12_345])
def test_combined_crc_of_a_range_of_half_a_gib_and_more_is_its_crc(length):
    # A single stream reads the rest of a large object as one range: combining it once
    # must give what hashing it front to back gives.
    head = b"head of the object"
    zeros = bytes(64 * MiB)
    whole = crc32c.crc32c(head)
    tail = 0
    left = length
    while left:
        n = min(left, len(zeros))
        with memoryview(zeros)[:n] as chunk:
            whole = crc32c.crc32c(chunk, whole)
            tail = crc32c.crc32c(chunk, tail)
        left -= n
    assert crc32c_combine(crc32c.crc32c(head), tail, length) == whole


def test_combined_crc_over_parts_of_a_large_buffer_is_its_crc():
    data = pattern(3 * MiB + 17)
    crc = 0
    for i in range(0, len(data), MiB):
        piece = data[i : i + MiB]
        crc = crc32c_combine(crc, crc32c.crc32c(piece), len(piece))
    assert crc == crc32c.crc32c(data)


# -- argument checks -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"parallel": 0}, "parallel"),
        ({"parallel": True}, "parallel"),
        ({"multipart_threshold": -1}, "multipart_threshold"),
        ({"part_size": MiB}, "part_size"),
        ({"part_size": 6 << 30}, "part_size"),
        ({"metadata": {"k": "é"}}, "metadata"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_sent(client, s3, kwargs, message):
    with pytest.raises(objsdk.InvalidArgument, match=message):
        upload(client.transport, BUCKET, KEY, b"x", **kwargs)
    assert s3.requests == []


@pytest.mark.parametrize(
    ("bucket", "key"), [("bad/bucket", KEY), (BUCKET, ""), (BUCKET, "é" * 600)]
)
def test_bad_bucket_or_key_is_refused_before_the_source_is_opened(client, s3, bucket, key):
    with pytest.raises(objsdk.InvalidArgument):
        upload(client.transport, bucket, key, "/nonexistent/file")
    assert s3.requests == []


def test_a_missing_source_path_is_file_not_found_and_nothing_is_sent(client, s3, tmp_path):
    missing = tmp_path / "no" / "such" / "file"
    with pytest.raises(FileNotFoundError) as info:
        client.upload(BUCKET, KEY, missing)
    assert info.value.filename == str(missing)
    assert s3.requests == []


# -- routes ------------------------------------------------------------------------------------


def test_a_file_over_http_goes_to_sendfile_with_its_crc32c(client, tmp_path, monkeypatch):
    data = pattern(SMALL_FILE_PUT + 1000)
    seen: dict[str, Any] = {}

    def fake_send_file(bucket, key, f, *, offset, count, headers, progress, operation="upload"):
        seen.update(offset=offset, count=count, headers=headers, name=f.name)
        progress(count)
        return {"ETag": '"e"', "x-amz-checksum-crc32c": headers["x-amz-checksum-crc32c"]}

    monkeypatch.setattr(client.transport, "send_file", fake_send_file)
    info = upload(client.transport, BUCKET, KEY, write(tmp_path, data), content_type="text/plain")
    assert (seen["offset"], seen["count"]) == (0, len(data))
    assert seen["headers"]["x-amz-checksum-crc32c"] == crc32c_b64(data)
    assert seen["headers"]["Content-Type"] == "text/plain"
    assert (info.size, info.etag, info.checksum_type) == (len(data), '"e"', "FULL_OBJECT")
    assert info.checksums == {"crc32c": crc32c_b64(data)}


@pytest.mark.parametrize("size", [0, 1000, SMALL_FILE_PUT])
def test_a_small_file_is_one_put_from_memory(client, s3, no_sendfile, tmp_path, size):
    data = pattern(size)
    info = upload(client.transport, BUCKET, KEY, write(tmp_path, data), content_type="text/plain")
    ((method, key, query, headers, _),) = s3.requests
    assert (method, key, query) == ("PUT", KEY, {})
    assert headers["x-amz-content-sha256"] == hashlib.sha256(data).hexdigest()
    assert headers["x-amz-checksum-crc32c"] == crc32c_b64(data)
    assert s3.objects[KEY] == data
    assert info.size == size
    assert no_sendfile == []


def test_a_small_file_that_shrank_since_it_was_opened_is_refused(client, tmp_path):
    path = write(tmp_path, pattern(1000))
    with open(path, "rb") as f:
        source = FileSource(f, 2000, 0, (2000, 0))
        with pytest.raises(SourceChangedError, match="1000 bytes early"):
            source.put(None, None)  # type: ignore[arg-type]


def test_bytes_take_one_put_object_with_signed_payload_and_crc32c(client, s3, no_sendfile):
    data = pattern(1000)
    info = upload(client.transport, BUCKET, KEY, data)
    ((method, key, query, headers, _),) = s3.requests
    assert (method, key, query) == ("PUT", KEY, {})
    assert headers["x-amz-content-sha256"] != "UNSIGNED-PAYLOAD"
    assert headers["x-amz-checksum-crc32c"] == crc32c_b64(data)
    assert s3.objects[KEY] == data
    assert info.checksums["crc32c"] == crc32c_b64(data)
    assert no_sendfile == []


def test_bytesio_is_sent_from_its_buffer_without_sendfile(client, s3, no_sendfile):
    data = pattern(1000)
    source = io.BytesIO(data)
    source.seek(100)
    upload(client.transport, BUCKET, KEY, source)
    assert s3.objects[KEY] == data[100:]
    assert len(s3.requests) == 1
    assert no_sendfile == []
    assert source.tell() == len(data)


def test_typed_buffer_is_uploaded_as_its_bytes(client, s3):
    numbers = array.array("I", range(1000))
    upload(client.transport, BUCKET, KEY, memoryview(numbers))
    assert s3.objects[KEY] == numbers.tobytes()


def test_non_contiguous_buffer_is_refused(client, s3):
    with pytest.raises(objsdk.InvalidArgument, match="contiguous"):
        upload(client.transport, BUCKET, KEY, memoryview(b"abcdef")[::2])
    assert s3.requests == []


def test_file_over_https_is_streamed_with_its_crc32c_and_unsigned_payload(rsps, tmp_path):
    s3 = FakeS3(rsps, "https://s3.test")
    data = pattern(SMALL_FILE_PUT + 3000)  # above what goes from memory
    with objsdk.Client("https://s3.test", AK, SK) as c, write(tmp_path, data).open("rb") as f:
        f.seek(1000)
        info = upload(c.transport, BUCKET, KEY, f)
        assert f.tell() == len(data)
    ((_, _, _, headers, _),) = s3.requests
    assert headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
    assert headers["content-length"] == str(len(data) - 1000)
    assert headers["x-amz-checksum-crc32c"] == crc32c_b64(data[1000:])
    assert s3.objects[KEY] == data[1000:]
    assert info.size == len(data) - 1000


def test_seekable_stream_that_is_not_a_file_is_checksummed_then_streamed(client, s3):
    data = pattern(3000)
    stream = io.BufferedReader(io.BytesIO(data))  # seekable, no fileno, no getbuffer
    info = upload(client.transport, BUCKET, KEY, stream)
    ((_, _, _, headers, _),) = s3.requests
    assert headers["x-amz-checksum-crc32c"] == crc32c_b64(data)
    assert s3.objects[KEY] == data
    assert info.checksums["crc32c"] == crc32c_b64(data)


def test_stream_that_ends_within_one_part_takes_one_put(client, s3):
    data = pattern(PART - 1)
    upload(client.transport, BUCKET, KEY, Pipe(data), part_size=PART)
    assert [r[0] for r in s3.requests] == ["PUT"]
    assert s3.objects[KEY] == data


def test_empty_source_is_one_put_even_when_the_threshold_is_zero(client, s3):
    upload(client.transport, BUCKET, KEY, b"", multipart_threshold=0)
    assert [(r[0], r[2]) for r in s3.requests] == [("PUT", {})]
    assert s3.objects[KEY] == b""


def test_source_over_5_gib_is_multipart_whatever_the_threshold(client, s3, monkeypatch):
    monkeypatch.setattr(sources_module, "MAX_SINGLE_PUT", PART)
    upload(client.transport, BUCKET, KEY, pattern(PART + 1), multipart_threshold=1 << 40)
    assert s3.calls("POST", "uploads")


# -- multipart ---------------------------------------------------------------------------------


def test_multipart_request_shapes(client, s3):
    data = pattern(2 * PART + 123)
    info = upload(
        client.transport,
        BUCKET,
        KEY,
        data,
        part_size=PART,
        multipart_threshold=PART,
        content_type="application/x-tar",
        metadata={"Origin": "test"},
    )
    ((_, _, _, create, _),) = s3.calls("POST", "uploads")
    assert create["x-amz-checksum-algorithm"] == "CRC32C"
    assert create["x-amz-checksum-type"] == "FULL_OBJECT"
    assert create["content-type"] == "application/x-tar"
    assert create["x-amz-meta-origin"] == "test"
    parts = sorted(s3.calls("PUT", "partNumber"), key=lambda r: int(r[2]["partNumber"]))
    assert [int(p[2]["partNumber"]) for p in parts] == [1, 2, 3]
    for (_, _, query, headers, _), start in zip(parts, range(0, len(data), PART), strict=True):
        piece = data[start : start + PART]
        assert query["uploadId"] == "U1"
        assert headers["content-length"] == str(len(piece))
        assert headers["x-amz-checksum-crc32c"] == crc32c_b64(piece)
    ((_, _, _, complete, body),) = s3.calls("POST", "uploadId")
    assert complete["x-amz-checksum-crc32c"] == crc32c_b64(data)
    assert complete["x-amz-checksum-type"] == "FULL_OBJECT"
    doc = ET.fromstring(bytes(body))
    assert [e.text for e in doc.iter("PartNumber")] == ["1", "2", "3"]
    assert len([e.text for e in doc.iter("ChecksumCRC32C") if e.text]) == 3
    assert s3.objects[KEY] == data
    assert (info.size, info.etag) == (len(data), '"final-3"')
    assert (info.checksums["crc32c"], info.checksum_type) == (crc32c_b64(data), "FULL_OBJECT")


def test_one_put_tells_it_was_one_part_with_no_cut(client, s3):
    info = upload(client.transport, BUCKET, KEY, b"data")
    assert isinstance(info, UploadInfo)
    assert (info.parts, info.parallel, info.cuts) == (1, 1, 0)
    assert (info.bucket, info.key, info.size) == (BUCKET, KEY, 4)


def test_a_multipart_upload_tells_its_parts_and_the_parts_in_flight(client, s3):
    data = pattern(2 * PART + 1)
    info = upload(
        client.transport, BUCKET, KEY, data, part_size=PART, parallel=2, multipart_threshold=0
    )
    assert (info.parts, info.parallel, info.cuts) == (3, 2, 0)
    assert info.checksums["crc32c"] == crc32c_b64(data)


def test_an_adaptive_upload_tells_the_level_it_ended_at(client, s3):
    data = pattern(3 * 8 * MiB + 5)
    info = upload(client.transport, BUCKET, KEY, data, multipart_threshold=0)
    assert info.parts == len(s3.calls("PUT", "partNumber"))
    assert 1 <= info.parallel <= 16


def test_upload_info_keeps_every_field_of_the_object_info():
    fields = {
        "bucket": "b",
        "key": "k",
        "size": 3,
        "etag": '"e"',
        "content_type": "text/plain",
        "metadata": {"a": "1"},
        "version_id": "v",
        "checksums": {"crc32c": "x"},
        "checksum_type": "FULL_OBJECT",
    }
    info = UploadInfo.of(objsdk.ObjectInfo(**fields), parts=2, parallel=3, cuts=4)
    assert {name: getattr(info, name) for name in fields} == fields
    assert (info.parts, info.parallel, info.cuts) == (2, 3, 4)


def test_a_probed_plan_sends_a_small_last_part_first_and_shares_the_rest_evenly():
    parts = plan_upload_probed(40 * MiB + 3, 8 * MiB, MiB)
    assert (parts[0].start, parts[0].stop) == (39 * MiB + 3, 40 * MiB + 3)  # the last, first
    body = parts[1:]
    assert [p.index for p in body] == [0, 1, 2, 3]
    assert body[0].start == 0
    assert [p.start for p in body[1:]] == [p.stop for p in body[:-1]]
    assert body[-1].stop == parts[0].start
    share = (39 * MiB + 3) // 4  # 39 MiB + 3 in four parts of at least 8 MiB
    assert {p.length for p in body} == {share, share + 1}


def test_a_probed_plan_numbers_its_last_part_10000_leaving_room_below_it():
    parts = plan_upload_probed(40 * MiB + 3, 8 * MiB, MiB)
    assert parts[0].number == 10_000
    assert [p.number for p in parts[1:]] == [1, 2, 3, 4]


def test_parts_replanned_smaller_share_the_same_bytes_evenly_in_parts_of_at_least_5_mib():
    pending = [Part(2, 16 * MiB, 24 * MiB), Part(3, 24 * MiB, 32 * MiB + 7)]
    smaller = replan_smaller(pending)
    assert [p.index for p in smaller] == [2, 3, 4]  # numbered on from the first
    assert smaller[0].start == 16 * MiB
    assert [p.start for p in smaller[1:]] == [p.stop for p in smaller[:-1]]
    assert smaller[-1].stop == 32 * MiB + 7
    assert all(5 * MiB <= p.length <= 16 * MiB // 3 + 3 for p in smaller)


def test_more_parts_than_the_cap_replanned_smaller_are_whole_rounds_at_the_cap():
    smaller = replan_smaller([Part(0, 0, 255 * MiB)])  # 51 parts of 5 MiB would fit
    assert len(smaller) == 48  # three rounds of 16, not a fourth of three
    assert smaller[-1].stop == 255 * MiB
    assert all(p.length >= 5 * MiB for p in smaller)


def test_parts_that_would_not_split_into_more_are_left_as_they_are():
    pending = [Part(0, 0, 9 * MiB), Part(1, 9 * MiB, 18 * MiB)]  # 18 MiB: three of 6
    assert len(replan_smaller(pending)) == 3
    assert replan_smaller(pending[:1]) == pending[:1]  # 9 MiB holds one part of 5 MiB
    assert replan_smaller([]) == []


def test_parts_replanned_smaller_stay_below_the_last_parts_number():
    pending = [Part(9_990, 0, 100 * MiB)]
    smaller = replan_smaller(pending)
    assert [p.number for p in smaller] == list(range(9_991, 10_000))
    assert smaller[-1].stop == 100 * MiB


def test_parts_cover_an_object_when_in_number_order_they_hold_its_bytes_end_to_end():
    assert covers([Part(9_999, 10, 11), Part(0, 0, 5), Part(1, 5, 10)], 11)
    assert covers([Part(0, 0, 0)], 0)  # an empty object is one empty part
    assert not covers([Part(0, 0, 5), Part(2, 6, 11)], 11)  # a gap
    assert not covers([Part(0, 0, 6), Part(1, 5, 11)], 11)  # an overlap
    assert not covers([Part(1, 0, 5), Part(0, 5, 11)], 11)  # numbers out of byte order
    assert not covers([Part(0, 0, 5), Part(1, 5, 10)], 11)  # short
    assert not covers([], 0)


def test_an_adaptive_upload_of_256_mib_is_its_probe_and_one_round_of_parts_at_the_cap():
    parts = plan_upload_probed(256 * MiB, adaptive_upload_part_size(256 * MiB, MiB), MiB)
    assert len(parts) == 1 + 16  # not 15 parts of 17 MiB, which leave a connection idle
    assert covers(parts, 256 * MiB)


def test_adaptive_upload_parts_of_a_large_object_are_whole_rounds_of_16_mib_at_most():
    size = 1024 * MiB + 1  # the body, less the probe, is 1023 MiB
    parts = plan_upload_probed(size, adaptive_upload_part_size(size, MiB), MiB)[1:]
    assert len(parts) % 16 == 0
    assert max(p.length for p in parts) <= 16 * MiB


def test_adaptive_upload_parts_of_a_small_object_are_at_least_8_mib():
    parts = plan_upload_probed(100 * MiB, adaptive_upload_part_size(100 * MiB, MiB), MiB)
    assert len(parts) == 1 + 12
    assert min(p.length for p in parts[1:]) >= 8 * MiB


def test_adaptive_upload_parts_of_a_huge_object_stay_within_10000():
    size = 5 * 1024**4  # S3's largest object
    parts = plan_upload_probed(size, adaptive_upload_part_size(size, MiB), MiB)
    assert len(parts) <= 10_000
    assert covers(parts, size)


def test_adaptive_upload_parts_of_an_object_no_larger_than_the_probe_are_the_smallest():
    assert adaptive_upload_part_size(1, MiB) == 8 * MiB
    assert adaptive_upload_part_size(MiB, MiB) == 8 * MiB


def test_an_adaptive_multipart_upload_of_a_few_bytes_is_one_part(client, s3):
    info = upload(client.transport, BUCKET, KEY, b"tiny", multipart_threshold=0)
    assert s3.objects[KEY] == b"tiny"
    assert info.parts == 1


def test_a_probed_plan_of_an_object_too_small_for_a_probe_is_the_plain_plan():
    assert plan_upload_probed(8 * MiB + 10, 8 * MiB, MiB) == [
        Part(0, 0, 8 * MiB),
        Part(1, 8 * MiB, 8 * MiB + 10),
    ]


def test_an_adaptive_upload_of_a_file_sends_its_small_last_part_alone_first(
    client, s3, tmp_path, file_sends
):
    data = pattern(3 * 8 * MiB + 5)
    upload(client.transport, BUCKET, KEY, write(tmp_path, data), multipart_threshold=0)
    puts = s3.calls("PUT", "partNumber")
    first = puts[0]
    assert int(first[2]["partNumber"]) == 10_000
    assert sorted(int(p[2]["partNumber"]) for p in puts[1:]) == list(range(1, len(puts)))
    assert first[3]["content-length"] == str(MiB)
    assert all(int(p[3]["content-length"]) >= 8 * MiB for p in puts[1:])
    assert s3.objects[KEY] == data


def test_an_adaptive_upload_sizes_its_parts_by_the_object(client, s3):
    data = pattern(200 * MiB)
    info = upload(client.transport, BUCKET, KEY, data)
    lengths = [int(p[3]["content-length"]) for p in s3.calls("PUT", "partNumber")]
    assert lengths[0] == MiB
    assert len(lengths[1:]) == 16  # one round at the cap, of 12.4 MiB each
    assert info.parts == 17
    assert s3.objects[KEY] == data


def test_part_bodies_are_views_of_the_callers_buffer(client, s3):
    data = bytearray(pattern(2 * PART))
    upload(client.transport, BUCKET, KEY, data, part_size=PART, multipart_threshold=0)
    bodies = [r[4] for r in s3.calls("PUT", "partNumber")]
    assert all(isinstance(b, memoryview) and b.obj is data for b in bodies)


def upload_six_parts_two_at_a_time(client: objsdk.Client, tmp_path: Path) -> bytes:
    """Upload a file of five parts and one byte, two parts in flight; return its bytes."""
    data = pattern(5 * PART + 1)
    upload(
        client.transport,
        BUCKET,
        KEY,
        write(tmp_path, data),
        part_size=PART,
        parallel=2,
        multipart_threshold=0,
    )
    return data


def test_file_parts_over_http_are_sent_from_the_file_itself_with_no_part_buffer(
    client, s3, tmp_path, monkeypatch, file_sends
):
    def no_buffer(*a: object, **k: object) -> None:
        pytest.fail("a part buffer was made")

    monkeypatch.setattr(sources_module, "part_buffer", no_buffer)
    data = upload_six_parts_two_at_a_time(client, tmp_path)
    assert sorted(file_sends) == [(i * PART, PART) for i in range(5)] + [(5 * PART, 1)]
    assert s3.objects[KEY] == data
    parts = s3.calls("PUT", "partNumber")
    assert all(
        r[3]["x-amz-checksum-crc32c"]
        == crc32c_b64(data[(int(r[2]["partNumber"]) - 1) * PART :][:PART])
        for r in parts
    )


def test_file_part_changed_after_its_checksum_was_read_is_a_source_change(
    client, s3, tmp_path, monkeypatch
):
    # The CRC32C is read first, the bytes are sent after: a write in between reaches the
    # server as a checksum mismatch, which must be reported as the file's change.
    path = write(tmp_path, pattern(3 * PART))

    def send_file(bucket, key, file, *, offset, count, headers, **kw):  # type: ignore[no-untyped-def]
        with path.open("r+b") as f:
            f.seek(offset)
            f.write(b"changed")
        body = os.pread(file.fileno(), count, offset)
        return client.transport.request(
            "PUT", bucket=bucket, key=key, headers=headers, body=body, **kw
        ).headers

    monkeypatch.setattr(client.transport, "send_file", send_file)
    with pytest.raises(SourceChangedError):
        upload(client.transport, BUCKET, KEY, path, part_size=PART, multipart_threshold=0)
    assert KEY not in s3.objects
    assert s3.aborted


def test_file_parts_over_tls_are_read_into_at_most_parallel_plus_one_buffers_never_mapped(
    client, s3, tmp_path, monkeypatch, over_tls
):
    # A memory-mapped source dies with SIGBUS when truncated mid-upload; reads do not.
    # The part buffers are anonymous maps (no file behind them), which is allowed.
    buffer_type = mmap.mmap

    def anonymous_only(fileno: int, *a: object, **k: object) -> mmap.mmap:
        if fileno != -1:
            pytest.fail("the file was mapped")
        return buffer_type(fileno, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(mmap, "mmap", anonymous_only)
    owners: list[object] = []
    real = multipart_module.upload_part

    def spy(transport, bucket, key, upload_id, part, body, **kw):  # type: ignore[no-untyped-def]
        owners.append(body.obj)
        return real(transport, bucket, key, upload_id, part, body, **kw)

    monkeypatch.setattr(multipart_module, "upload_part", spy)
    data = upload_six_parts_two_at_a_time(client, tmp_path)
    assert len(owners) == 6
    assert all(type(o) is buffer_type for o in owners)
    assert len({id(o) for o in owners}) <= 3
    assert s3.objects[KEY] == data


@pytest.mark.parametrize("route", ["file_sends", "over_tls"])
def test_file_object_is_uploaded_from_its_position_at_an_unaligned_offset(
    client, s3, tmp_path, request, route
):
    request.getfixturevalue(route)
    data = pattern(2 * PART + 10)
    with write(tmp_path, data).open("rb") as f:
        f.seek(12345)
        info = upload(client.transport, BUCKET, KEY, f, part_size=PART, multipart_threshold=0)
        assert f.tell() == len(data)
    assert s3.objects[KEY] == data[12345:]
    assert info.size == len(data) - 12345


def test_stream_of_unknown_size_is_read_into_parts_in_order(client, s3):
    data = pattern(3 * PART + 5)
    info = upload(client.transport, BUCKET, KEY, Pipe(data), part_size=PART, parallel=2)
    assert s3.objects[KEY] == data
    assert len(s3.calls("PUT", "partNumber")) == 4
    assert info.size == len(data)


def test_stream_of_exactly_one_part_is_a_one_part_upload(client, s3):
    data = pattern(PART)
    upload(client.transport, BUCKET, KEY, Pipe(data), part_size=PART)
    assert len(s3.calls("PUT", "partNumber")) == 1
    assert s3.objects[KEY] == data


def test_stream_is_read_no_further_ahead_than_the_parts_in_flight(client, s3):
    data = pattern(4 * PART)
    pipe = Pipe(data)
    read_at_part: dict[int, int] = {}

    def note_position(method: str, query: dict[str, str], attempt: int) -> None:
        if "partNumber" in query:
            read_at_part[int(query["partNumber"])] = pipe.pos

    s3.fault = note_position
    upload(client.transport, BUCKET, KEY, pipe, part_size=PART, parallel=1)
    assert read_at_part == {1: PART, 2: 2 * PART, 3: 3 * PART, 4: 4 * PART}


def test_seekable_stream_over_the_threshold_is_read_into_planned_parts(client, s3):
    data = pattern(2 * PART + 3)
    upload(
        client.transport,
        BUCKET,
        KEY,
        io.BufferedReader(io.BytesIO(data)),
        part_size=PART,
        multipart_threshold=0,
    )
    assert len(s3.calls("PUT", "partNumber")) == 3
    assert s3.objects[KEY] == data


def test_stream_longer_than_the_part_limit_is_refused_and_aborted(client, s3, monkeypatch):
    monkeypatch.setattr(sources_module, "MAX_PARTS", 2)
    with pytest.raises(objsdk.InvalidArgument, match="part_size"):
        upload(client.transport, BUCKET, KEY, Pipe(pattern(3 * PART)), part_size=PART)
    assert s3.aborted == ["U1"]


def test_part_answered_500_is_retried_by_the_transport(client, s3):
    s3.fault = lambda method, query, n: 500 if query.get("partNumber") == "2" and n == 1 else None
    data = pattern(3 * PART)
    upload(client.transport, BUCKET, KEY, data, part_size=PART, multipart_threshold=0)
    assert s3.objects[KEY] == data
    assert len(s3.calls("PUT", "partNumber")) == 4


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Sleeps take no time but move a monotonic clock that starts at 0."""
    now = [0.0]
    monkeypatch.setattr("time.sleep", lambda s: now.__setitem__(0, now[0] + s))
    monkeypatch.setattr("time.monotonic", lambda: now[0])
    return now


def test_create_and_complete_answered_429_are_each_sent_again(client, s3, clock):
    s3.fault = lambda method, query, n: 429 if method == "POST" and n == 1 else None
    data = pattern(2 * PART)
    upload(client.transport, BUCKET, KEY, data, part_size=PART, multipart_threshold=0)
    assert s3.objects[KEY] == data
    assert len(s3.calls("POST", "uploads")) == 2
    assert len(s3.calls("POST", "uploadId")) == 2
    assert s3.uploads == {}


def _part_2_refused_and_abort(answer: Callable[[int], int | None]) -> Callable[..., int | None]:
    """A fault: part 2 refused for good (400), the n-th abort answered ``answer(n)``."""

    def fault(method: str, query: dict[str, str], n: int) -> int | None:
        if query.get("partNumber") == "2":
            return 400
        return answer(n) if method == "DELETE" else None

    return fault


def test_an_abort_throttled_past_the_clients_retries_is_sent_until_the_upload_is_gone(
    client, s3, clock
):
    s3.fault = _part_2_refused_and_abort(lambda n: 429 if n <= 5 else None)
    with pytest.raises(objsdk.S3Error, match="InvalidRequest"):
        upload(client.transport, BUCKET, KEY, Pipe(pattern(3 * PART)), part_size=PART, parallel=1)
    assert len(s3.calls("DELETE", "uploadId")) == 6  # 3 attempts (retries=2), 3 more
    assert s3.aborted == ["U1"]
    assert s3.uploads == {}
    assert clock[0] < 60


def test_an_abort_still_throttled_at_its_deadline_names_the_upload_left_on_the_error(
    client, s3, clock, caplog
):
    s3.fault = _part_2_refused_and_abort(lambda n: 429)
    with pytest.raises(objsdk.S3Error, match="InvalidRequest") as info:
        upload(client.transport, BUCKET, KEY, Pipe(pattern(3 * PART)), part_size=PART, parallel=1)
    assert 60 <= clock[0] < 70  # retried for a minute, then given up
    assert len(s3.calls("DELETE", "uploadId")) > 6
    assert s3.uploads.keys() == {"U1"}
    # The part's refusal is what failed the upload; the upload left is named with it.
    named = [r.getMessage() for r in caplog.records if "could not be aborted" in r.getMessage()]
    (message,) = named
    assert "U1" in message
    assert "TooManyRequests" in message
    assert f"`objsdk uploads abort s3://{BUCKET}/{KEY} --upload-id U1`" in message
    if hasattr(info.value, "add_note"):  # Python 3.11 and later
        assert any("U1" in note for note in info.value.__notes__)


def test_an_abort_refused_is_not_sent_again(client, s3, clock):
    s3.fault = _part_2_refused_and_abort(lambda n: 403)
    with pytest.raises(objsdk.S3Error, match="InvalidRequest"):
        upload(client.transport, BUCKET, KEY, Pipe(pattern(3 * PART)), part_size=PART, parallel=1)
    assert len(s3.calls("DELETE", "uploadId")) == 1


def test_progress_grows_per_part_and_ends_with_the_size(client, s3):
    calls: list[tuple[int, int]] = []
    data = pattern(3 * PART + 1)
    upload(
        client.transport,
        BUCKET,
        KEY,
        data,
        part_size=PART,
        multipart_threshold=0,
        progress=lambda d, t: calls.append((d, t)),
    )
    assert [t for _, t in calls] == [len(data)] * 4
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert calls[-1] == (len(data), len(data))


def test_progress_of_a_stream_has_total_none_until_the_end(client, s3):
    calls: list[tuple[int, int | None]] = []
    data = pattern(2 * PART + 1)
    upload(
        client.transport,
        BUCKET,
        KEY,
        Pipe(data),
        part_size=PART,
        progress=lambda d, t: calls.append((d, t)),
    )
    assert all(t is None for _, t in calls[:-1])
    assert calls[-1] == (len(data), len(data))


def test_progress_of_an_empty_upload_is_called_once(client, s3):
    calls: list[tuple[int, int]] = []
    upload(client.transport, BUCKET, KEY, b"", progress=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 0)]


# -- failures abort --------------------------------------------------------------------------


def test_failed_part_aborts_the_upload_and_raises_its_error(client, s3):
    s3.fault = lambda method, query, n: 400 if query.get("partNumber") == "2" else None
    with pytest.raises(objsdk.S3Error, match="InvalidRequest"):
        upload(
            client.transport, BUCKET, KEY, pattern(3 * PART), part_size=PART, multipart_threshold=0
        )
    assert s3.aborted == ["U1"]
    assert s3.calls("POST", "uploadId") == []
    assert s3.objects == {}


def test_failed_complete_aborts_the_upload(client, s3):
    s3.fault = lambda method, query, n: 400 if method == "POST" and "uploadId" in query else None
    with pytest.raises(objsdk.S3Error):
        upload(
            client.transport, BUCKET, KEY, pattern(2 * PART), part_size=PART, multipart_threshold=0
        )
    assert s3.aborted == ["U1"]


@pytest.mark.parametrize("error", [RuntimeError("from progress"), KeyboardInterrupt()])
def test_exception_from_progress_aborts_and_is_raised_unchanged(client, s3, error):
    def progress(done: int, total: int) -> None:
        raise error

    with pytest.raises(type(error)) as info:
        upload(
            client.transport,
            BUCKET,
            KEY,
            pattern(3 * PART),
            part_size=PART,
            multipart_threshold=0,
            progress=progress,
        )
    assert info.value is error
    assert s3.aborted == ["U1"]
    assert s3.objects == {}


def test_no_part_is_sent_after_the_abort(client, s3):
    def progress(done: int, total: int) -> None:
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        upload(
            client.transport,
            BUCKET,
            KEY,
            pattern(8 * PART),
            part_size=PART,
            multipart_threshold=0,
            parallel=2,
            progress=progress,
        )
    abort_at = next(i for i, r in enumerate(s3.requests) if r[0] == "DELETE")
    assert abort_at == len(s3.requests) - 1
    assert len(s3.calls("PUT", "partNumber")) < 8


def test_stream_that_ends_early_aborts_with_source_changed(client, s3):
    class Shrinking(io.BufferedReader):
        def seek(self, offset: int, whence: int = 0) -> int:
            pos = super().seek(offset, whence)
            return pos + 2 * PART if whence == os.SEEK_END else pos  # claims 2 parts more

    with pytest.raises(SourceChangedError):
        upload(
            client.transport,
            BUCKET,
            KEY,
            Shrinking(io.BytesIO(pattern(PART))),
            part_size=PART,
            multipart_threshold=0,
        )
    assert s3.aborted == ["U1"]


# -- what an upload reports: only the checksums the service confirmed ----------------------


@pytest.mark.parametrize(
    ("size", "threshold"), [(1000, 64 * MiB), (2 * PART + 1, 0)], ids=["put", "multipart"]
)
@pytest.mark.parametrize("source", ["bytes", "file"])
def test_an_upload_claims_no_checksum_the_service_did_not_confirm(
    client, s3, file_sends, tmp_path, size, threshold, source
):
    s3.echo_checksums = False
    data = pattern(size)
    src = data if source == "bytes" else write(tmp_path, data)
    info = upload(client.transport, BUCKET, KEY, src, part_size=PART, multipart_threshold=threshold)
    assert s3.objects[KEY] == data
    assert (info.checksums, info.checksum_type) == ({}, None)


def test_put_object_claims_no_checksum_the_service_did_not_confirm(client, s3):
    s3.echo_checksums = False
    info = client.put_object(BUCKET, KEY, b"data")
    assert (info.checksums, info.checksum_type) == ({}, None)


def test_put_object_reports_the_checksum_the_service_confirmed_as_an_upload_does(
    client, s3, tmp_path
):
    data = pattern(1000)
    from_bytes = client.put_object(BUCKET, KEY, data)
    with open(write(tmp_path, data), "rb") as f:
        from_file = client.put_object(BUCKET, KEY, f)
    for info in (from_bytes, from_file):
        assert (info.checksums, info.checksum_type) == ({"crc32c": crc32c_b64(data)}, "FULL_OBJECT")


@pytest.mark.parametrize("size", [1000, 2 * PART + 1], ids=["put", "multipart"])
def test_a_writer_claims_no_checksum_the_service_did_not_confirm(client, s3, size):
    s3.echo_checksums = False
    with client.open_write(BUCKET, KEY, part_size=PART, parallel=2) as w:
        w.write(pattern(size))
    assert s3.objects[KEY] == pattern(size)
    assert (w.info.checksums, w.info.checksum_type) == ({}, None)


@pytest.mark.parametrize("size", [1000, 2 * PART + 1], ids=["put", "multipart"])
def test_an_upload_reports_the_checksum_the_service_confirmed(client, s3, size):
    data = pattern(size)
    info = upload(client.transport, BUCKET, KEY, data, part_size=PART, multipart_threshold=PART)
    assert (info.checksums, info.checksum_type) == ({"crc32c": crc32c_b64(data)}, "FULL_OBJECT")
