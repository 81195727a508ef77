"""ObjectWriter against a real MinIO: round trips, tar streams, aborts, faults, memory.

Every object written is read back with ``client.open(...).read()``, which verifies the
stored CRC32C on the way, and compared by SHA-256. Parts are 5 MiB (S3's minimum) to
keep the tests fast.
"""

from __future__ import annotations

import array
import base64
import gc
import hashlib
import io
import os
import random
import tarfile
import threading
import tracemalloc
import zipfile
from collections.abc import Iterator

import crc32c
import pytest

import objsdk
import objsdk._transfer.multipart
from objsdk import Client
from objsdk._transfer.multipart_calls import list_multipart_uploads
from objsdk._transfer.writer import ObjectWriter

pytestmark = pytest.mark.integration

MiB = 1 << 20
PART = 5 * MiB


def b64crc(data: bytes) -> str:
    return base64.b64encode(crc32c.crc32c(data).to_bytes(4, "big")).decode()


def read_back(client: Client, bucket: str, key: str) -> bytes:
    with client.open(bucket, key) as f:  # verifies the stored CRC32C at the end
        return f.read()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def assert_nothing_stored(client: Client, bucket: str, key: str) -> None:
    assert list(list_multipart_uploads(client.transport, bucket)) == []
    with pytest.raises(objsdk.NoSuchKey):
        client.head_object(bucket, key)


def as_buffer(chunk: bytes, kind: str) -> bytes | bytearray | memoryview | array.array[int]:
    if kind == "bytearray":
        return bytearray(chunk)
    if kind == "memoryview":
        return memoryview(chunk)
    if kind == "array" and len(chunk) % 4 == 0:
        return array.array("I", chunk)  # 4-byte items: written as len(chunk) bytes
    return chunk


# -- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "size",
    [0, 1, 1000, PART, PART + 1],
    ids=["empty", "1B", "small", "one-part", "part+1"],
)
def test_an_object_written_in_one_call_reads_back_identical(client, bucket, size, s3_features):
    data = os.urandom(size)
    with ObjectWriter(client, bucket, "obj", part_size=PART) as w:
        assert w.write(data) == size
    assert sha(read_back(client, bucket, "obj")) == sha(data)
    info = client.head_object(bucket, "obj")
    assert info.size == size
    if s3_features.stores_put_checksum or "-" in (info.etag or ""):
        assert info.checksums["crc32c"] == b64crc(data)
    else:  # moto keeps no checksum sent with a single PUT
        assert "crc32c" not in info.checksums


def test_random_writes_of_mixed_buffer_types_read_back_identical(client, bucket):
    rng = random.Random(20240601)
    data = os.urandom(int(3.5 * PART))
    kinds = ["bytes", "bytearray", "memoryview", "array"]
    with ObjectWriter(client, bucket, "mixed", part_size=PART) as w:
        pos = 0
        while pos < len(data):
            n = rng.choice([1, rng.randrange(1, 4096), rng.randrange(1, 3 * PART)])
            chunk = data[pos : pos + n]
            assert w.write(as_buffer(chunk, rng.choice(kinds))) == len(chunk)
            pos += len(chunk)
        assert w.tell() == len(data)
    assert sha(read_back(client, bucket, "mixed")) == sha(data)


def test_a_multipart_object_stores_a_full_object_crc32c(client, bucket):
    data = os.urandom(2 * PART + 99)
    with ObjectWriter(client, bucket, "mp", part_size=PART) as w:
        w.write(data)
    info = client.head_object(bucket, "mp")
    assert info.checksums["crc32c"] == b64crc(data)
    assert info.checksum_type == "FULL_OBJECT"
    assert w.info is not None
    assert w.info.etag == info.etag
    assert w.info.checksums["crc32c"] == b64crc(data)


@pytest.mark.parametrize("size", [10, PART + 1], ids=["single-put", "multipart"])
def test_content_type_and_metadata_are_stored(client, bucket, size):
    with ObjectWriter(
        client,
        bucket,
        "typed",
        part_size=PART,
        content_type="application/x-tar",
        metadata={"Origin": "writer"},
    ) as w:
        w.write(bytes(size))
    info = client.head_object(bucket, "typed")
    assert info.content_type == "application/x-tar"
    assert info.metadata == {"origin": "writer"}


def test_progress_ends_at_the_object_size(client, bucket):
    seen: list[tuple[int, int | None]] = []
    data = os.urandom(3 * PART + 5)
    with ObjectWriter(
        client, bucket, "p", part_size=PART, progress=lambda n, t: seen.append((n, t))
    ) as w:
        w.write(data)
    assert len(seen) == 4
    assert seen[-1] == (len(data), len(data))
    assert [n for n, _ in seen] == sorted(n for n, _ in seen)


# -- archives streamed through the writer --------------------------------------------------

MEMBER_SIZES = [0, 1, 511, 512, 513, MiB + 3, 7 * MiB + 1, 12 * MiB]


def test_a_tar_streamed_into_the_writer_extracts_through_object_file(client, bucket):
    members = {f"dir/m{i:02d}-{n}.bin": os.urandom(n) for i, n in enumerate(MEMBER_SIZES)}
    with (
        ObjectWriter(client, bucket, "a.tar", part_size=PART) as w,
        tarfile.open(fileobj=w, mode="w|") as tar,
    ):
        for name, body in members.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(body)
            tar.addfile(ti, io.BytesIO(body))
    got = {}
    with client.open(bucket, "a.tar") as f, tarfile.open(fileobj=f, mode="r|*") as tar:
        for ti in tar:
            extracted = tar.extractfile(ti)
            assert extracted is not None
            got[ti.name] = extracted.read()
    assert got.keys() == members.keys()
    for name, body in members.items():
        assert sha(got[name]) == sha(body), name


def test_a_zip_written_to_the_unseekable_writer_reads_back(client, bucket):
    # zipfile sees seekable() False and writes data descriptors instead of seeking back.
    members = {f"m{n}": os.urandom(n) for n in (0, 100, 6 * MiB)}
    with (
        ObjectWriter(client, bucket, "a.zip", part_size=PART) as w,
        zipfile.ZipFile(w, "w") as zf,
    ):
        for name, body in members.items():
            zf.writestr(name, body)
    with client.open(bucket, "a.zip") as f, zipfile.ZipFile(f) as zf:
        assert zf.testzip() is None
        assert {n: zf.read(n) for n in zf.namelist()} == members


# -- aborts --------------------------------------------------------------------------------


def write_then_fail(w: ObjectWriter, data: bytes) -> None:
    """A producer that dies inside its ``with`` block."""
    with w:
        w.write(data)
        raise RuntimeError("producer died")


def test_an_exception_inside_with_leaves_no_upload_and_no_object(client, bucket):
    w = ObjectWriter(client, bucket, "half", part_size=PART)
    with pytest.raises(RuntimeError, match="producer died"):
        write_then_fail(w, os.urandom(2 * PART + 1))
    assert_nothing_stored(client, bucket, "half")


def test_an_exception_before_a_part_filled_leaves_no_object(client, bucket):
    w = ObjectWriter(client, bucket, "tiny", part_size=PART)
    with pytest.raises(RuntimeError, match="producer died"):
        write_then_fail(w, b"abc")
    assert_nothing_stored(client, bucket, "tiny")


def test_an_aborted_overwrite_leaves_the_existing_object_as_it_was(client, bucket):
    client.put_object(bucket, "k", b"old")
    w = ObjectWriter(client, bucket, "k", part_size=PART)
    w.write(os.urandom(2 * PART))
    w.abort()
    assert read_back(client, bucket, "k") == b"old"
    assert list(list_multipart_uploads(client.transport, bucket)) == []


def test_a_writer_dropped_without_close_is_aborted_and_stores_nothing(client, bucket):
    def abandon() -> None:  # the writer's last reference goes when this returns
        ObjectWriter(client, bucket, "dropped", part_size=PART).write(os.urandom(PART + 1))

    with pytest.warns(ResourceWarning, match="unclosed"):
        abandon()
    assert_nothing_stored(client, bucket, "dropped")


# -- failures ------------------------------------------------------------------------------


def uploaded_event() -> tuple[threading.Event, objsdk._transfer.writer.Progress]:
    event = threading.Event()
    return event, lambda n, total: event.set()


def test_a_bucket_deleted_mid_upload_surfaces_as_the_part_error(client, fresh_bucket_name):
    client.create_bucket(fresh_bucket_name)
    first_part, progress = uploaded_event()
    w = ObjectWriter(client, fresh_bucket_name, "k", part_size=PART, progress=progress)
    w.write(os.urandom(PART))
    assert first_part.wait(10)
    client.delete_bucket(fresh_bucket_name)  # MinIO allows it: uploads are not objects
    w.write(os.urandom(PART))
    with pytest.raises(objsdk.NoSuchBucket, match=r"upload_part\(2\)"):
        w.close()
    assert not client.bucket_exists(fresh_bucket_name)


SILENT_CORRUPTION = (
    "a service that checks no checksum (moto) refuses neither the part nor the Complete: "
    "the change is caught after Complete instead (IntegrityError, the object deleted; see "
    "test_a_part_changed_in_flight_is_never_left_stored_as_if_it_were_the_bytes_written)"
)


def test_a_part_changed_in_flight_is_refused_by_its_crc32c_and_the_upload_aborted(
    client, bucket, monkeypatch, s3_features, request
):
    if not s3_features.checks_checksums:
        request.applymarker(pytest.mark.xfail(strict=True, reason=SILENT_CORRUPTION))
    real = objsdk._transfer.multipart.upload_part

    def corrupting(client, bucket, key, upload_id, part, body, **kw):
        if part.number == 2:
            body[100] ^= 0x01  # after the part's CRC32C was computed
        return real(client, bucket, key, upload_id, part, body, **kw)

    monkeypatch.setattr(objsdk._transfer.multipart, "upload_part", corrupting)
    # The part's refusal is raised by the next write() or close(), whichever comes
    # after it: on a busy machine that may be the write of the third part.
    with (
        pytest.raises(objsdk.S3Error, match=r"upload_part\(2\)") as info,
        ObjectWriter(client, bucket, "k", part_size=PART) as w,
    ):
        w.write(os.urandom(3 * PART))
    assert "Checksum" in info.value.code or info.value.code == "BadDigest"
    assert_nothing_stored(client, bucket, "k")


@pytest.mark.parametrize("after_its_crc32c", [True, False])
def test_a_part_changed_in_flight_is_never_left_stored_as_if_it_were_the_bytes_written(
    client, bucket, monkeypatch, s3_features, after_its_crc32c
):
    """On any service: a service that checks checksums refuses the part or the Complete;
    one that checks none stores it, and objsdk compares the CRC32C the service reports
    for the object with its own, deletes the object and raises IntegrityError."""
    real = objsdk._transfer.multipart.upload_part

    def corrupting(client, bucket, key, upload_id, part, body, **kw):
        if part.number == 2:
            body[100] ^= 0x01
            if not after_its_crc32c:
                kw["checksum_crc32c"] = b64crc(bytes(body))
        return real(client, bucket, key, upload_id, part, body, **kw)

    monkeypatch.setattr(objsdk._transfer.multipart, "upload_part", corrupting)
    expected = objsdk.S3Error if s3_features.checks_checksums else objsdk.IntegrityError
    # Raised by the next write() or close() after the refusal (see above).
    with pytest.raises(expected) as info, ObjectWriter(client, bucket, "k", part_size=PART) as w:
        w.write(os.urandom(3 * PART))
    if expected is objsdk.IntegrityError:
        assert (info.value.bucket, info.value.key) == (bucket, "k")
        assert "CRC32C" in str(info.value)
    assert_nothing_stored(client, bucket, "k")


def test_a_part_changed_before_its_checksum_is_caught_by_the_full_object_crc32c(
    client, bucket, monkeypatch, s3_features, request
):
    if not s3_features.checks_checksums:
        request.applymarker(pytest.mark.xfail(strict=True, reason=SILENT_CORRUPTION))
    real = objsdk._transfer.multipart.upload_part

    def corrupting(client, bucket, key, upload_id, part, body, **kw):
        if part.number == 2:
            body[100] ^= 0x01  # as if memory changed before the part's CRC32C
            kw["checksum_crc32c"] = b64crc(bytes(body))
        return real(client, bucket, key, upload_id, part, body, **kw)

    monkeypatch.setattr(objsdk._transfer.multipart, "upload_part", corrupting)
    w = ObjectWriter(client, bucket, "k", part_size=PART)
    w.write(os.urandom(3 * PART))
    with pytest.raises(objsdk.S3Error, match="complete_multipart_upload"):
        w.close()
    assert_nothing_stored(client, bucket, "k")


@pytest.fixture
def proxied(local_minio, minio_proxy) -> Iterator[Client]:
    """A client that reaches MinIO through the test's proxy, with 2 retries."""
    with Client(
        minio_proxy.endpoint,
        local_minio.access_key,
        local_minio.secret_key,
        timeout=(2, 2),
        retries=2,
    ) as c:
        yield c


@pytest.mark.faults
def test_a_part_failing_past_its_retries_surfaces_and_the_upload_is_aborted(
    client, proxied, minio_proxy, bucket
):
    first_part, progress = uploaded_event()
    w = ObjectWriter(proxied, bucket, "k", part_size=PART, progress=progress)
    w.write(os.urandom(PART))
    assert first_part.wait(10)
    # Every connection is cut after 1 MiB sent: each attempt at a 5 MiB part dies, while
    # small requests (the abort) still pass.
    minio_proxy.add_toxic("limit_data", stream="upstream", bytes=MiB)
    w.write(os.urandom(PART + 1))
    with pytest.raises(objsdk.TransportError, match=r"upload_part\(2\)"):
        w.close()
    assert_nothing_stored(client, bucket, "k")


# -- memory --------------------------------------------------------------------------------


def test_twenty_parts_never_hold_more_than_parallel_plus_one_part_buffers(client, bucket):
    parallel, parts = 2, 20
    block = os.urandom(PART)  # allocated before tracing: the source is not counted
    view = memoryview(block)
    rng = random.Random(5)
    gc.collect()
    tracemalloc.start()
    try:
        with ObjectWriter(client, bucket, "big", part_size=PART, parallel=parallel) as w:
            for _ in range(parts):
                pos = 0
                while pos < PART:
                    n = rng.randrange(1, 3 * MiB)
                    pos += w.write(view[pos : pos + n])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The buffers, plus well under a MiB of requests and bookkeeping: no write, part or
    # request is ever copied whole.
    assert peak < (parallel + 1) * PART + MiB, f"peak {peak / MiB:.1f} MiB"
    expected = hashlib.sha256()
    for _ in range(parts):
        expected.update(block)
    got = hashlib.sha256()
    with client.open(bucket, "big") as f:
        while chunk := f.read(4 * MiB):
            got.update(chunk)
    assert got.hexdigest() == expected.hexdigest()


@pytest.mark.integration
def test_client_open_write_streams_an_object(client, bucket):
    with client.open_write(bucket, "via-client.bin", part_size=5 << 20) as w:
        w.write(b"x" * (6 << 20))
    with client.open(bucket, "via-client.bin") as f:
        assert f.read() == b"x" * (6 << 20)
