"""Every S3 checksum algorithm, verified on every full pass, against MinIO.

Objects are written by boto3 with each algorithm S3 offers as a full-object checksum
(CRC32, CRC32C, CRC64NVME, SHA1, SHA256). Each whole read (``open().read()`` and
``readinto``, ``download`` to a path and to a buffer, ``get_into``, ``get_object``)
must report the algorithm it verified with, and raise IntegrityError when one byte of
a GET body is flipped on the way (by a small proxy in front of MinIO).
"""

from __future__ import annotations

import http.client
import io
import os
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from rawserver import RawServer, Request, http_response
from s3_helpers import boto3_client, drain

import objsdk
from objsdk import Client, LocalMinio
from objsdk._core.ranges import parse_content_range

pytestmark = pytest.mark.integration

MiB = 1 << 20
SIZE = 3 * MiB + 4321
DATA = os.urandom(SIZE)
FLIP_AT = SIZE // 2
BUCKET = "every-algorithm"
ALGORITHMS = ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"]


@pytest.fixture(scope="module")
def s3(local_minio: LocalMinio) -> Any:
    pytest.importorskip("boto3")
    return boto3_client(local_minio)


@pytest.fixture(scope="module")
def stored(client: Client, s3: Any) -> Iterator[None]:
    """One object per algorithm, ``put_object`` by boto3 with that checksum."""
    client.create_bucket(BUCKET)
    for algorithm in ALGORITHMS:
        s3.put_object(Bucket=BUCKET, Key=algorithm, Body=DATA, ChecksumAlgorithm=algorithm)
    yield
    client.delete_objects(BUCKET, [e.key for e in client.list_objects(BUCKET)])
    client.delete_bucket(BUCKET)


def flipping_proxy(upstream: str, at: int) -> Callable[[Request, socket.socket], None]:
    """Forwards each request as it came (its signature stays valid) and flips the bit 0
    of object byte ``at`` in every GET body that carries it."""
    host, _, port = upstream.removeprefix("http://").partition(":")

    def handler(request: Request, conn: socket.socket) -> None:
        up = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            up.putrequest(request.method, request.path, skip_host=True, skip_accept_encoding=True)
            for name, value in request.headers.items():
                up.putheader(name, value)
            up.endheaders()
            resp = up.getresponse()
            body = bytearray(resp.read())
            headers = {
                k: v
                for k, v in resp.getheaders()
                if k.lower() not in ("content-length", "transfer-encoding", "connection")
            }
        finally:
            up.close()
        if request.method == "HEAD":
            head = {**headers, "Content-Length": resp.getheader("Content-Length") or "0"}
            conn.sendall(http_response(resp.status, head))
            return
        first = 0
        if resp.status == 206:
            cr = parse_content_range(resp.getheader("Content-Range"))
            assert cr is not None
            first = cr.first
        if resp.status in (200, 206) and first <= at < first + len(body):
            body[at - first] ^= 1
        conn.sendall(http_response(resp.status, headers, bytes(body)))

    return handler


@pytest.fixture
def flipped(local_minio: LocalMinio, stored: None) -> Iterator[Client]:
    """A client whose GET bodies have object byte FLIP_AT flipped."""
    with (
        RawServer(flipping_proxy(local_minio.endpoint, FLIP_AT)) as proxy,
        Client(proxy.url, local_minio.access_key, local_minio.secret_key, retries=0) as c,
    ):
        yield c


def read_whole(c: Client, key: str) -> tuple[bytes, str | None]:
    with c.open(BUCKET, key) as f:
        data = f.read()
        return data, f.stats.verified


def readinto_whole(c: Client, key: str) -> tuple[bytes, str | None]:
    out = io.BytesIO()
    buf = bytearray(MiB)
    with c.open(BUCKET, key) as f:
        while n := f.readinto(buf):
            out.write(buf[:n])
        return out.getvalue(), f.stats.verified


def download_to_path(c: Client, key: str, tmp_path: Any) -> tuple[bytes, str | None]:
    dest = tmp_path / key
    result = c.download(BUCKET, key, dest, parallel=3, part_size=MiB)
    return dest.read_bytes(), result.verified


def download_to_fifo(c: Client, key: str) -> tuple[bytes, str | None]:
    """Into a named pipe: written in order, verified as the bytes pass."""
    fifo = _tmp() / "pipe"
    os.mkfifo(fifo)
    reader, got = drain(fifo)
    try:
        verified = c.download(BUCKET, key, fifo, parallel=3, part_size=MiB).verified
    finally:
        reader.join(10)
    return bytes(got), verified


def download_to_buffer(c: Client, key: str) -> tuple[bytes, str | None]:
    buf = bytearray(SIZE)
    verified = c.download(BUCKET, key, buf, parallel=3, part_size=MiB).verified
    return bytes(buf), verified


def get_into_parts(c: Client, key: str) -> bytes:
    buf = bytearray(SIZE)
    assert c.get_into(BUCKET, key, buf, parallel=3, part_size=MiB) == SIZE
    return bytes(buf)


def get_into_one_get(c: Client, key: str) -> bytes:
    buf = bytearray(SIZE + 10)
    assert c.get_into(BUCKET, key, buf) == SIZE
    return bytes(buf[:SIZE])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_full_pass_is_verified_with_the_stored_algorithm(client, stored, algorithm, tmp_path):
    want = algorithm.lower()
    assert read_whole(client, algorithm) == (DATA, want)
    assert readinto_whole(client, algorithm) == (DATA, want)
    assert download_to_path(client, algorithm, tmp_path) == (DATA, want)
    assert download_to_fifo(client, algorithm) == (DATA, want)
    assert download_to_buffer(client, algorithm) == (DATA, want)
    assert get_into_parts(client, algorithm) == DATA
    assert get_into_one_get(client, algorithm) == DATA
    assert client.get_object(BUCKET, algorithm) == DATA


@pytest.mark.parametrize(
    "read",
    [
        pytest.param(read_whole, id="open-read"),
        pytest.param(readinto_whole, id="open-readinto"),
        pytest.param(lambda c, k: download_to_path(c, k, _tmp()), id="download-path"),
        pytest.param(download_to_buffer, id="download-buffer"),
        pytest.param(download_to_fifo, id="download-fifo"),
        pytest.param(get_into_parts, id="get_into-parts"),
        pytest.param(get_into_one_get, id="get_into-one-get"),
        pytest.param(lambda c, k: c.get_object(BUCKET, k), id="get_object"),
    ],
)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_one_flipped_byte_in_a_get_body_raises_integrity_error(flipped, algorithm, read):
    with pytest.raises(objsdk.IntegrityError, match=algorithm.lower()):
        read(flipped, algorithm)


def _tmp() -> Any:
    import pathlib
    import tempfile

    return pathlib.Path(tempfile.mkdtemp(prefix="objsdk-flip-"))


def test_a_download_that_fails_verification_leaves_no_file(flipped, tmp_path):
    dest = tmp_path / "x.bin"
    with pytest.raises(objsdk.IntegrityError):
        flipped.download(BUCKET, "CRC32", dest, parallel=2, part_size=MiB)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "SHA1", "SHA256"])
def test_composite_checksums_of_boto3_multipart_uploads_are_checked_part_by_part(
    client, s3, bucket, tmp_path, algorithm
):
    from boto3.s3.transfer import TransferConfig

    data = os.urandom(12 * MiB + 7)
    config = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    extra = {"ChecksumAlgorithm": algorithm}
    s3.upload_fileobj(io.BytesIO(data), bucket, "mp", ExtraArgs=extra, Config=config)
    info = client.head_object(bucket, "mp")
    assert info.checksum_type == "COMPOSITE"
    # Parts of another size than the upload's: the CRCs are cut at its part boundaries.
    result = client.download(bucket, "mp", tmp_path / "mp", part_size=3 * MiB, parallel=2)
    assert (tmp_path / "mp").read_bytes() == data
    assert result.verified == algorithm.lower()
    buf = bytearray(len(data))
    assert client.download(bucket, "mp", buf).verified == algorithm.lower()
    assert buf == data
    # A stream has no part boundaries to cut at: it says why it is not verified.
    with client.open(bucket, "mp") as f:
        assert f.read() == data
        assert "composite" in (f.stats.unverified_reason or "")


def test_one_flipped_byte_fails_a_download_checked_part_by_part(
    client, s3, bucket, local_minio, tmp_path
):
    from boto3.s3.transfer import TransferConfig

    data = os.urandom(12 * MiB)
    config = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    s3.upload_fileobj(io.BytesIO(data), bucket, "mp", Config=config)  # boto3's default: CRC32
    with (
        RawServer(flipping_proxy(local_minio.endpoint, 7 * MiB)) as proxy,
        Client(proxy.url, local_minio.access_key, local_minio.secret_key, retries=0) as c,
    ):
        with pytest.raises(objsdk.IntegrityError, match="crc32 mismatch"):
            c.download(bucket, "mp", tmp_path / "mp")
        with pytest.raises(objsdk.IntegrityError, match="crc32 mismatch"):
            c.get_into(bucket, "mp", bytearray(len(data)), part_size=4 * MiB)
    assert os.listdir(tmp_path) == []
