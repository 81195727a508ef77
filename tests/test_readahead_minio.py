"""Read-ahead: parallel parts behind ObjectFile, against MinIO and Toxiproxy."""

from __future__ import annotations

import faulthandler
import gc
import hashlib
import io
import os
import random
import threading
import time
import tracemalloc
from collections.abc import Iterator

import pytest

import objsdk
from objsdk import Client

pytestmark = pytest.mark.integration

MiB = 1 << 20
BUCKET = "readahead"
PART = 4 * MiB


@pytest.fixture(scope="module")
def big(client: Client) -> Iterator[bytes]:
    """A 256 MiB object stored with a CRC32C (put_object of bytes sends one)."""
    data = os.urandom(256 * MiB + 4321)
    client.create_bucket(BUCKET)
    # A multipart upload: every service keeps its CRC32C (moto none from a single PUT).
    client.upload(BUCKET, "big.bin", data)
    yield data
    client.delete_objects(BUCKET, [e.key for e in client.list_objects(BUCKET)])
    client.delete_bucket(BUCKET)


def readahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("objsdk-readahead")]


def eventually_no_threads(timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while readahead_threads():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def sha(data: bytes | bytearray) -> str:
    return hashlib.sha256(data).hexdigest()


def test_sequential_read_with_readahead_is_byte_identical_and_verified(client, big):
    digest = hashlib.sha256()
    with client.open(BUCKET, "big.bin", readahead=3, part_size=PART) as f:
        while chunk := f.read(10240):
            digest.update(chunk)
        assert f._verifier.hashed == len(big)  # the stored CRC32C was checked across all parts
        assert f.stats.requests > len(big) // PART  # parts were fetched in parallel
    assert digest.hexdigest() == sha(big)


def test_readinto_with_readahead_fills_the_callers_buffer(client, big):
    buf = bytearray(3 * MiB + 17)
    digest = hashlib.sha256()
    with client.open(BUCKET, "big.bin", readahead=2, part_size=PART) as f:
        while n := f.readinto(buf):
            digest.update(memoryview(buf)[:n])
    assert digest.hexdigest() == sha(big)


def test_read_all_with_readahead(client, big):
    with client.open(BUCKET, "big.bin", readahead=4, part_size=PART) as f:
        assert sha(f.read()) == sha(big)


def test_readahead_survives_repeated_cuts_on_every_connection(local_minio, minio_proxy, big):
    minio_proxy.add_toxic("limit_data", bytes=3 * MiB)  # every part connection is cut
    with (
        Client(minio_proxy.endpoint, local_minio.access_key, local_minio.secret_key) as flaky,
        flaky.open(BUCKET, "big.bin", readahead=3, part_size=PART) as f,
    ):
        digest = hashlib.sha256()
        while chunk := f.read(MiB):
            digest.update(chunk)
        assert f.stats.resumes > 0
    assert digest.hexdigest() == sha(big)


def read_parts(f: objsdk.ObjectFile, out: bytearray, count: int) -> None:
    for _ in range(count):
        out += f.read(PART)


def test_an_overwrite_during_readahead_raises_object_changed(client, bucket):
    old = os.urandom(40 * MiB)
    client.put_object(bucket, "changing", old)
    delivered = bytearray()
    with client.open(bucket, "changing", readahead=2, part_size=PART) as f:
        delivered += f.read(6 * MiB)
        f.seek(20 * MiB)  # drops the parts in flight; the next ones are fetched anew
        client.put_object(bucket, "changing", os.urandom(40 * MiB))
        with pytest.raises(objsdk.ObjectChangedError, match="changing"):
            read_parts(f, delivered, 10)
    assert bytes(delivered) == old[: len(delivered)]


def test_random_small_reads_after_a_seek_do_not_storm(client, big):
    rnd = random.Random(7)
    with client.open(BUCKET, "big.bin", readahead=4, part_size=PART) as f:
        f.read(100)
        for _ in range(40):
            offset = rnd.randrange(len(big) - 1000)
            f.seek(offset)
            assert f.read(100) == big[offset : offset + 100]
        requests = f.stats.requests
    # One GET per random read (plus the first), no parts fetched for them.
    assert requests <= 42
    assert f.stats.bytes_wasted <= 4 * PART  # at most the parts of the very first read


def test_sequential_reading_after_a_seek_turns_readahead_back_on(client, big):
    with client.open(BUCKET, "big.bin", readahead=3, part_size=PART) as f:
        f.seek(100 * MiB)
        got = b"".join(f.read(MiB) for _ in range(64))
        assert sha(got) == sha(big[100 * MiB : 164 * MiB])
        assert isinstance(f._source.parts, objsdk._io.readahead.PartStream)


def test_seek_cancels_parts_and_counts_what_was_wasted(client, big):
    with client.open(BUCKET, "big.bin", readahead=3, part_size=PART) as f:
        f.read(10 * MiB)
        f.seek(200 * MiB)
        assert f.read(10) == big[200 * MiB : 200 * MiB + 10]
    # The parts fetched ahead of the seek were never delivered: bounded and counted.
    assert 0 < f.stats.bytes_wasted <= 4 * PART


def test_memory_is_bounded_by_the_parts(client, big):
    tracemalloc.start()
    try:
        with client.open(BUCKET, "big.bin", readahead=3, part_size=PART) as f:
            buf = bytearray(MiB)
            while f.readinto(buf):
                pass
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 4 * PART + 4 * MiB, f"peak {peak / MiB:.1f} MiB"


def test_close_stops_the_threads(client, big):
    with client.open(BUCKET, "big.bin", readahead=3, part_size=PART) as f:
        f.read(MiB)
        assert readahead_threads()
    assert eventually_no_threads()


def test_an_exception_in_the_caller_stops_the_threads(client, big):
    def work() -> None:
        with client.open(BUCKET, "big.bin", readahead=3) as f:
            f.read(MiB)
            raise RuntimeError("caller failed")

    with pytest.raises(RuntimeError, match="caller failed"):
        work()
    assert eventually_no_threads()


def test_garbage_collection_stops_the_threads(client, big):
    f = client.open(BUCKET, "big.bin", readahead=3, part_size=PART)
    f.read(MiB)
    del f
    gc.collect()
    assert eventually_no_threads()


def test_close_is_prompt_even_when_a_part_is_stalled(local_minio, minio_proxy, big):
    with Client(
        minio_proxy.endpoint, local_minio.access_key, local_minio.secret_key, timeout=(5, 60)
    ) as c:
        f = c.open(BUCKET, "big.bin", readahead=2, part_size=PART)
        f.read(MiB)
        minio_proxy.add_toxic("timeout", timeout=0)  # everything in flight stalls
        time.sleep(0.3)
        started = time.monotonic()
        faulthandler.dump_traceback_later(5)  # where close() waits, should it ever be slow
        try:
            f.close()
        finally:
            faulthandler.cancel_dump_traceback_later()
        assert time.monotonic() - started < 5
    assert eventually_no_threads()


def test_readline_across_parts_with_readahead(client, bucket):
    text = b"".join(f"line {i} ".encode() * (i % 50) + b"\n" for i in range(60_000))
    client.put_object(bucket, "lines", text)
    with client.open(bucket, "lines", readahead=2, part_size=5 * MiB, chunk_size=4096) as f:
        assert list(f) == io.BytesIO(text).readlines()


def test_an_adaptive_level_holds_once_the_last_part_is_handed_out(client, bucket, monkeypatch):
    # Nothing is left to start: a level judged later would be judged on parts it did not
    # start. It holds where it is, so a dataset can carry it to the next shard at once
    # (it waited for the shard's end: on a 25 MB/s link, a shard's time).
    from objsdk._core.adaptive import Adaptive
    from objsdk._io.shared_level import SharedLevel

    def at_four(cls, parallel, **_):  # a climb that has stepped to four parts
        return None if parallel is not None else cls(Adaptive(start=4), begin=False)

    monkeypatch.setattr(SharedLevel, "unless", classmethod(at_four))
    data = os.urandom(3 * PART)
    client.put_object(bucket, "k", data)
    with client.open(bucket, "k", part_size=PART) as f:
        assert f.read(1) == data[:1]
        assert f.readahead_settled == 4
        assert f.read() == data[1:]
    with client.open(bucket, "k", part_size=PART // 4) as f:  # 12 parts: 4 in flight
        assert f.read(1) == data[:1]
        assert f.readahead_settled is None
        assert f.read(PART) == data[1 : PART + 1]  # 4 parts read, 8 handed out
        assert f.readahead_settled is None
        assert f.read(PART) == data[PART + 1 : 2 * PART + 1]  # all 12 handed out
        assert f.readahead_settled == 4
        assert f.read() == data[2 * PART + 1 :]


def test_while_the_level_judges_the_stream_a_buffered_fill_is_a_slice(client, bucket):
    # The level sees a fill's bytes once it is whole: fills of a slice (256 KiB), not of
    # chunk_size (1 MiB: 43 ms at 25 MB/s, three windows' worth of a slow link's time).
    client.put_object(bucket, "k", os.urandom(8 * MiB))
    with client.open(bucket, "k") as f:  # adaptive, judging one stream
        assert len(f.read(100)) == 100
        assert len(f._tail) == 256 * 1024
    with client.open(bucket, "k", readahead=0) as f:  # no level: chunk_size
        assert len(f.read(100)) == 100
        assert len(f._tail) == f.chunk_size == MiB


def test_a_wait_for_the_level_ends_when_the_file_closes(client, bucket):
    client.put_object(bucket, "k", os.urandom(MiB))
    f = client.open(bucket, "k")
    f.read(100)  # adaptive, one stream judged: not settled yet
    got: list[int | None] = []
    waiter = threading.Thread(target=lambda: got.append(f.wait_readahead_settled()))
    waiter.start()
    time.sleep(0.05)
    f.close()
    waiter.join(5)
    assert got == [None]
