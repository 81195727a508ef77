"""ObjectFile reading through real network faults (Toxiproxy) and a MinIO restart.

Every case reads a 72 MiB object to the end and compares its SHA-256 with the source.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import threading
import time
from collections.abc import Iterator

import pytest

import objsdk
from objsdk import Client, ObjectFile

pytestmark = [pytest.mark.integration, pytest.mark.faults]

SIZE = (72 << 20) + 123
BUCKET = "faults"


@pytest.fixture(scope="module")
def source(client: Client) -> Iterator[bytes]:
    data = os.urandom(SIZE)
    client.create_bucket(BUCKET)
    client.put_object(BUCKET, "big.bin", data)
    yield data
    client.delete_objects(BUCKET, [e.key for e in client.list_objects(BUCKET)])
    client.delete_bucket(BUCKET)


@pytest.fixture
def proxied(local_minio, minio_proxy) -> Iterator[Client]:
    """A client that reaches MinIO through the test's proxy; 2 s read timeout."""
    with Client(
        minio_proxy.endpoint, local_minio.access_key, local_minio.secret_key, timeout=(2, 2)
    ) as c:
        yield c


def sha_of_rest(f: ObjectFile, block: int = 1 << 20) -> str:
    """Read to the end with read(block); SHA-256 of what came out."""
    digest = hashlib.sha256()
    while chunk := f.read(block):
        digest.update(chunk)
    return digest.hexdigest()


def sha_of_rest_readinto(f: ObjectFile, block: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    buf = bytearray(block)
    view = memoryview(buf)
    while n := f.readinto(buf):
        digest.update(view[:n])
    return digest.hexdigest()


def test_connection_cut_every_8_mib_still_reads_every_byte(proxied, minio_proxy, source):
    minio_proxy.add_toxic("limit_data", bytes=8 << 20)
    with proxied.open(BUCKET, "big.bin", readahead=0) as f:  # the stream's own resumes
        assert sha_of_rest(f) == hashlib.sha256(source).hexdigest()
        assert f.stats.resumes >= 8
        assert f.stats.bytes_delivered == SIZE
        assert f.stats.bytes_discarded == 0


def test_cuts_with_readinto_land_every_byte_in_the_callers_buffer(proxied, minio_proxy, source):
    minio_proxy.add_toxic("limit_data", bytes=8 << 20)
    with proxied.open(BUCKET, "big.bin", readahead=0) as f:  # the stream's own resumes
        assert sha_of_rest_readinto(f) == hashlib.sha256(source).hexdigest()
        assert f.stats.resumes >= 8


def inject_during_read(proxy, toxic: str, *, after: float, lasting: float, **attributes):
    """Add ``toxic`` from another thread ``after`` seconds from now, remove it
    ``lasting`` seconds later.

    Toxiproxy rebuilds a live link to add a toxic, which needs the link to drain: the
    reader must keep reading meanwhile, so the fault cannot be injected from its thread.
    """

    def run() -> None:
        time.sleep(after)
        name = proxy.add_toxic(toxic, **attributes)
        time.sleep(lasting)
        proxy.remove_toxic(name)

    thread = threading.Thread(target=run, name=f"inject-{toxic}")
    thread.start()
    return thread


def test_connection_reset_by_peer_is_resumed(proxied, minio_proxy, source):
    minio_proxy.add_toxic("bandwidth", rate=40_000)  # ~40 MB/s: the read lasts ~2 s
    # One stream, so that the read lasts (parallel parts would be done before the reset;
    # they are cut and resumed in test_readahead_minio.py).
    with proxied.open(BUCKET, "big.bin", readahead=0) as f:
        # reset_peer resets the live connection and every new one until removed.
        injector = inject_during_read(minio_proxy, "reset_peer", after=0.5, lasting=0.6, timeout=0)
        try:
            digest = sha_of_rest(f, block=4 << 20)
        finally:
            injector.join()
        assert f.stats.resumes >= 1
    assert digest == hashlib.sha256(source).hexdigest()


def test_a_stall_becomes_a_read_timeout_and_is_resumed(proxied, minio_proxy, source):
    minio_proxy.add_toxic("bandwidth", rate=40_000)
    # A 3 s stall against a 2 s read timeout: several attempts time out before it ends.
    # One stream, which the stall must catch (parallel parts could be done before it).
    with proxied.open(BUCKET, "big.bin", max_resume=10, readahead=0) as f:
        head = f.read(4 << 20)
        # Large reads switch to direct socket reads; the timeout must survive that.
        stream = f._reader._stream
        assert stream is not None
        assert stream.resp._direct is not None
        injector = inject_during_read(minio_proxy, "timeout", after=0.3, lasting=3.0, timeout=0)
        try:
            rest = sha_of_rest(f, block=4 << 20)
        finally:
            injector.join()
        assert f.stats.resumes >= 1
    assert head == source[: 4 << 20]
    assert rest == hashlib.sha256(source[4 << 20 :]).hexdigest()


def test_a_server_restart_mid_read_is_resumed(local_minio, source):
    # One stream (readahead=0): parts read ahead may all have landed before the restart.
    with local_minio.client() as c, c.open(BUCKET, "big.bin", max_resume=10, readahead=0) as f:
        head = f.read(16 << 20)
        local_minio.restart()
        rest = sha_of_rest(f)
        assert f.stats.resumes >= 1
    assert head == source[: 16 << 20]
    assert rest == hashlib.sha256(source[16 << 20 :]).hexdigest()


def test_a_server_restart_mid_read_with_default_read_ahead_is_byte_identical(local_minio, source):
    with local_minio.client() as c, c.open(BUCKET, "big.bin", max_resume=10) as f:
        head = f.read(16 << 20)
        local_minio.restart()
        rest = sha_of_rest(f)
    assert head == source[: 16 << 20]
    assert rest == hashlib.sha256(source[16 << 20 :]).hexdigest()


@pytest.mark.parametrize("readahead", [0, 4], ids=["one stream", "parts"])
def test_a_server_that_never_comes_back_ends_in_resume_limit_error(
    local_minio, minio_proxy, source, readahead
):
    with (
        Client(
            minio_proxy.endpoint,
            local_minio.access_key,
            local_minio.secret_key,
            timeout=(1, 1),
            retries=0,
        ) as c,
        c.open(BUCKET, "big.bin", max_resume=2, readahead=readahead) as f,
    ):
        head = f.read(1 << 20)
        minio_proxy.disable()
        with pytest.raises(objsdk.ResumeLimitError, match=r"big\.bin") as info:
            f.read()
    assert head == source[: 1 << 20]
    assert isinstance(info.value.__cause__, objsdk.TransportError)
    if readahead == 0:
        assert f.stats.resumes == 2
    else:
        # Every stream that failed resumed exactly twice, the part whose failure the
        # caller sees among them (its resumes were once left out of the stats).
        assert f.stats.resumes >= 2
        assert f.stats.resumes % 2 == 0


def read_into(f: ObjectFile, out: bytearray) -> None:
    while chunk := f.read(1 << 20):
        out += chunk


def test_overwrite_mid_read_raises_and_delivers_no_byte_of_the_new_version(
    client, proxied, minio_proxy, source
):
    old = source[: 40 << 20]
    client.put_object(BUCKET, "changing.bin", old)
    delivered = bytearray()
    with proxied.open(BUCKET, "changing.bin") as f:
        delivered += f.read(10 << 20)
        # The connection drops (MinIO finishes serving, so it can take the write),
        # the object is replaced, then the network comes back.
        minio_proxy.disable()
        client.put_object(BUCKET, "changing.bin", os.urandom(len(old)))
        minio_proxy.enable()
        with pytest.raises(objsdk.ObjectChangedError, match=r"changing\.bin") as info:
            read_into(f, delivered)
    assert bytes(delivered) == old[: len(delivered)]
    assert info.value.offset is not None
    assert len(delivered) <= info.value.offset


def make_tar(n: int = 40) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i in range(n):
            data = os.urandom((2 << 20) + 1000 * i)
            info = tarfile.TarInfo(f"shard/{i:03d}.bin")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.parametrize("mode", ["r|*", "r:"])
@pytest.mark.usefixtures("source")  # its bucket
def test_tarfile_extracts_identically_under_repeated_cuts(
    client, proxied, minio_proxy, tmp_path, mode
):
    blob = make_tar()
    client.put_object(BUCKET, "shards.tar", blob)
    minio_proxy.add_toxic("limit_data", bytes=8 << 20)
    with proxied.open(BUCKET, "shards.tar") as f, tarfile.open(fileobj=f, mode=mode) as tar:
        tar.extractall(tmp_path, filter="data")
        resumes = f.stats.resumes
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        for member in tar.getmembers():
            expected = tar.extractfile(member).read()  # type: ignore[union-attr]
            assert (tmp_path / member.name).read_bytes() == expected, member.name
    assert resumes >= 5
