"""ObjectFile against a real MinIO: file semantics, laziness, pinning, tarfile, pickling."""

from __future__ import annotations

import array
import hashlib
import io
import mmap
import multiprocessing
import os
import pickle
import random
import tarfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import objsdk
from objsdk import Client
from objsdk._core.s3xml import http_date
from objsdk._io.range_reader import RangeReader

pytestmark = pytest.mark.integration

SIZES = [0, 1, 100, 4095, 65_543, (1 << 20) + 3, (3 << 20) + 1]


class Sources(dict[int, bytes]):
    """Source bytes by size; short repr so failing examples stay readable."""

    def __repr__(self) -> str:
        return f"<sources of sizes {sorted(self)}>"


@pytest.fixture(scope="module")
def objects(client: Client) -> dict[int, bytes]:
    """Objects of several sizes under 'obj/<size>' in one module-wide bucket."""
    client.create_bucket("objectfile")
    data = Sources()
    for size in SIZES:
        data[size] = os.urandom(size)
        client.put_object("objectfile", f"obj/{size}", data[size])
    yield data
    client.delete_objects("objectfile", [e.key for e in client.list_objects("objectfile")])
    client.delete_bucket("objectfile")


BIG = SIZES[-1]

# One operation of the model test: (name, argument).
ops = st.one_of(
    st.tuples(st.just("read"), st.one_of(st.just(-1), st.integers(0, 2 << 20))),
    st.tuples(st.just("read1"), st.one_of(st.just(-1), st.integers(0, 2 << 20))),
    st.tuples(st.just("readinto"), st.integers(0, 2 << 20)),
    st.tuples(st.just("readinto1"), st.integers(0, 70_000)),
    st.tuples(st.just("readline"), st.one_of(st.just(-1), st.integers(0, 5000))),
    st.tuples(st.just("next"), st.integers(1, 50)),
    st.tuples(st.just("seek0"), st.integers(0, 4 << 20)),
    st.tuples(st.just("seek1"), st.integers(-(2 << 20), 2 << 20)),
    st.tuples(st.just("seek2"), st.integers(-(4 << 20), 1000)),
    st.tuples(st.just("tell"), st.just(0)),
)


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    size=st.sampled_from(SIZES),
    chunk_size=st.sampled_from([1, 7, 4096, 1 << 20]),
    program=st.lists(ops, max_size=12),
)
def test_any_sequence_of_operations_matches_bytesio(client, objects, size, chunk_size, program):
    data = objects[size]
    model = io.BytesIO(data)
    if chunk_size == 1:
        program = [(op, arg if op.startswith("seek") else min(arg, 3000)) for op, arg in program]
    with client.open("objectfile", f"obj/{size}", chunk_size=chunk_size) as f:
        for op, arg in program:
            if op in ("read", "readline"):
                assert getattr(f, op)(arg) == getattr(model, op)(arg), (op, arg)
            elif op == "next":  # `arg` lines, as a for loop takes them
                for _ in range(arg):
                    assert next(f, None) == next(model, None)
            elif op == "readinto":
                mine, theirs = bytearray(arg), bytearray(arg)
                assert f.readinto(mine) == model.readinto(theirs)
                assert mine == theirs
            elif op in ("read1", "readinto1"):
                # May return less than asked, never more, and never skip bytes.
                start = model.tell()
                if op == "read1":
                    got = f.read1(arg)
                else:
                    buf = bytearray(arg)
                    got = bytes(buf[: f.readinto1(buf)])
                limit = len(data) - start if arg < 0 else arg
                if arg >= 0:
                    assert len(got) <= limit
                assert got == data[start : start + len(got)]
                if start < len(data) and arg != 0:
                    assert got, "read1/readinto1 returned nothing before the end"
                model.seek(start + len(got))
            elif op.startswith("seek"):
                whence = int(op[-1])
                try:
                    expected = model.seek(arg, whence)
                except ValueError:
                    with pytest.raises(ValueError, match="negative seek"):
                        f.seek(arg, whence)
                    continue
                assert f.seek(arg, whence) == expected
            assert f.tell() == model.tell()
        assert f.read() == model.read()


def test_opening_sends_nothing(client, objects):
    with client.open("objectfile", "obj/100") as f:
        assert f.stats.requests == 0


def test_a_missing_key_fails_on_first_read_naming_it(client, objects):
    f = client.open("objectfile", "nope/missing")
    with pytest.raises(objsdk.NoSuchKey, match="nope/missing"):
        f.read(1)
    f.close()


def test_a_sequential_pass_is_one_request(client, objects):
    with client.open("objectfile", f"obj/{BIG}") as f:
        out = bytearray()
        while chunk := f.read(4096):
            out += chunk
        assert bytes(out) == objects[BIG]
        assert f.stats.requests == 1
        assert f.stats.bytes_delivered == BIG
        assert f.stats.resumes == 0


def test_attributes_describe_the_object(client, objects):
    with client.open("objectfile", f"obj/{BIG}") as f:
        f.read(1)
        head = client.head_object("objectfile", f"obj/{BIG}")
        assert f.size == BIG
        assert f.etag == head.etag
        assert f.readable()
        assert f.seekable()
        assert not f.writable()


def test_size_before_reading_asks_with_head(client, objects):
    with client.open("objectfile", "obj/4095") as f:
        assert f.size == 4095
        assert f.stats.requests == 1
        assert f.read() == objects[4095]


def test_forward_seek_within_the_buffer_is_free(client, objects):
    with client.open("objectfile", f"obj/{BIG}", chunk_size=64 * 1024) as f:
        f.read(10)
        f.seek(30_000, io.SEEK_CUR)
        assert f.read(10) == objects[BIG][30_010:30_020]
        assert f.stats.requests == 1
        assert f.stats.bytes_discarded == 0


def test_short_forward_seek_past_the_buffer_reads_through(client, objects):
    with client.open("objectfile", f"obj/{BIG}", chunk_size=4096) as f:
        f.read(10)
        f.seek(100_000)
        assert f.read(10) == objects[BIG][100_000:100_010]
        assert f.stats.requests == 1
        assert f.stats.bytes_discarded == 100_000 - 4096


def test_backward_seek_reopens_at_the_offset(client, objects):
    with client.open("objectfile", f"obj/{BIG}") as f:
        f.read(2 << 20)
        f.seek(5)
        assert f.read(5) == objects[BIG][5:10]
        assert f.stats.requests == 2
        assert f.stats.bytes_discarded == 0


def test_seek_past_the_end_reads_nothing(client, objects):
    with client.open("objectfile", "obj/100") as f:
        assert f.seek(1000) == 1000
        assert f.read() == b""
        assert f.read(10) == b""
        assert f.tell() == 1000


def test_negative_absolute_seek_is_a_value_error(client, objects):
    with client.open("objectfile", "obj/100") as f, pytest.raises(ValueError, match="negative"):
        f.seek(-1)


def test_seek_from_the_end(client, objects):
    with client.open("objectfile", "obj/4095") as f:
        assert f.seek(-95, io.SEEK_END) == 4000
        assert f.read() == objects[4095][4000:]


def test_empty_object_reads_empty(client, objects):
    with client.open("objectfile", "obj/0") as f:
        assert f.read() == b""
        assert f.read(10) == b""
        assert f.readinto(bytearray(10)) == 0
        assert f.readline() == b""


def test_closed_file_raises_value_error(client, objects):
    f = client.open("objectfile", "obj/100")
    f.read(1)
    f.close()
    assert f.closed
    for call in (f.read, f.tell, f.readline, lambda: f.seek(0), lambda: f.readinto(bytearray(1))):
        with pytest.raises(ValueError, match="closed file"):
            call()


def test_readinto_fills_mmap_and_array_buffers(client, objects):
    data = objects[BIG]
    with client.open("objectfile", f"obj/{BIG}") as f:
        with mmap.mmap(-1, 1 << 20) as m:
            assert f.readinto(m) == 1 << 20
            assert m[:] == data[: 1 << 20]
        arr = array.array("I", bytes(16384))  # 4096 items of 4 bytes
        assert f.readinto(arr) == 16384
        assert arr.tobytes() == data[1 << 20 : (1 << 20) + 16384]


def test_readinto_on_a_large_buffer_does_not_allocate_a_copy(client, objects):
    import tracemalloc

    buf = bytearray(BIG)
    with client.open("objectfile", f"obj/{BIG}") as f:
        f.read(1)  # open the stream first
        f.seek(0)
        tracemalloc.start()
        try:
            n = f.readinto(buf)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert n == BIG
    assert buf == objects[BIG]
    assert peak < 256 * 1024, f"readinto allocated {peak} bytes"


def test_lines_iterate_like_a_file(client, bucket):
    text = b"".join(f"line {i}\n".encode() for i in range(10_000)) + b"no newline at end"
    client.put_object(bucket, "lines.txt", text)
    with client.open(bucket, "lines.txt", chunk_size=1000) as f:
        assert list(f) == io.BytesIO(text).readlines()


LINES = b"".join(b"%d,row %d\n" % (i, i) for i in range(20_000))


@pytest.mark.parametrize(
    "options",
    [{}, {"chunk_size": 1000}, {"chunk_size": 7}, {"readahead": 3, "part_size": 64 * 1024}],
    ids=["default", "chunks", "tiny-chunks", "read-ahead-parts"],
)
def test_lines_iterate_like_a_file_however_the_bytes_arrive(client, bucket, options):
    text = LINES + b"a\rb\r\n\rc\n\n" + LINES + b"last, no newline"
    client.put_object(bucket, "lines.txt", text)
    with client.open(bucket, "lines.txt", **options) as f:
        got = list(f)
        assert f.tell() == len(text)
        assert f.stats.bytes_delivered == len(text)
    # Only b"\n" ends a line of a binary file: a b"\r" stays inside its line.
    assert got == io.BytesIO(text).readlines()
    assert b"a\rb\r\n" in got


def test_reads_between_lines_take_up_where_the_last_line_ended(client, bucket):
    client.put_object(bucket, "lines.txt", LINES)
    model = io.BytesIO(LINES)
    with client.open(bucket, "lines.txt", chunk_size=4096) as f:
        for i in range(3000):
            assert next(f) == next(model)
            assert f.tell() == model.tell()
            if i % 97 == 0:
                assert f.read(i % 13) == model.read(i % 13)
            if i % 211 == 0:
                back = max(0, model.tell() - 500)
                assert f.seek(back) == model.seek(back)
            if i % 389 == 0:
                assert f.readline() == model.readline()
        assert f.read() == model.read()


def test_the_file_is_its_own_iterator_so_a_loop_resumes_after_a_seek(client, bucket):
    client.put_object(bucket, "lines.txt", LINES)
    with client.open(bucket, "lines.txt") as f:
        lines = iter(f)
        assert lines is f
        assert len(list(lines)) == 20_000
        f.seek(0)
        assert next(lines) == b"0,row 0\n"


@pytest.mark.parametrize(
    "options",
    [{"chunk_size": 7}, {"chunk_size": 4096}, {"readahead": 3, "part_size": 64 * 1024}],
    ids=["tiny-chunks", "chunks", "read-ahead-parts"],
)
def test_lines_reads_and_seeks_in_any_order_match_bytesio(client, bucket, options):
    rnd = random.Random(7)
    text = b"".join(
        b"x" * rnd.randrange(200) + rnd.choice([b"\n", b"\r\n", b"\r", b""]) for _ in range(20_000)
    )
    client.put_object(bucket, "mixed.txt", text)
    for _ in range(15):
        model = io.BytesIO(text)
        with client.open(bucket, "mixed.txt", **options) as f:
            for _ in range(rnd.randrange(1, 40)):
                op = rnd.randrange(5)
                if op == 0:
                    for _ in range(rnd.randrange(1, 300)):
                        assert next(f, None) == next(model, None)
                elif op == 1:
                    k = rnd.randrange(50_000)
                    assert f.read(k) == model.read(k)
                elif op == 2:
                    assert f.readline() == model.readline()
                elif op == 3:
                    where = rnd.randrange(len(text) + 10)
                    assert f.seek(where) == model.seek(where)
                else:
                    mine = bytearray(rnd.randrange(5000))
                    theirs = bytearray(len(mine))
                    assert f.readinto(mine) == model.readinto(theirs)
                    assert mine == theirs
                assert f.tell() == model.tell()
            assert f.read() == model.read()


@pytest.mark.parametrize("chunk_size", [1, 3, 1024, 1 << 20])
@pytest.mark.parametrize("keepends", [False, True])
def test_iter_lines_and_iter_chunks_yield_what_botocore_streaming_body_does(
    client, bucket, chunk_size, keepends
):
    response = pytest.importorskip("botocore.response")
    text = b"a\r\nb\rc\n\n\r\r\nd" + LINES[:5000] + b"\r" + b"e" * 3000 + b"\r\n" + b"tail\r"
    client.put_object(bucket, "lines.txt", text)

    def body() -> object:
        return response.StreamingBody(io.BytesIO(text), len(text))

    with client.open(bucket, "lines.txt") as f:
        assert list(f.iter_lines(chunk_size, keepends)) == list(
            body().iter_lines(chunk_size, keepends)
        )
    with client.open(bucket, "lines.txt") as f:
        assert list(f.iter_chunks(chunk_size)) == list(body().iter_chunks(chunk_size))
        assert f.tell() == len(text)


def test_iter_lines_starts_at_the_position_and_refuses_a_chunk_size_below_one(client, bucket):
    client.put_object(bucket, "lines.txt", LINES)
    with client.open(bucket, "lines.txt") as f:
        f.seek(LINES.index(b"5,row 5"))
        assert next(f.iter_lines()) == b"5,row 5"
        with pytest.raises(objsdk.InvalidArgument, match="chunk_size"):
            next(f.iter_chunks(0))


def test_iterating_short_lines_holds_a_bounded_number_of_them(client, bucket):
    import tracemalloc

    client.put_object(bucket, "short.txt", b"a\n" * (1 << 18))
    with client.open(bucket, "short.txt") as f:
        tracemalloc.start()
        try:
            count = sum(1 for _ in f)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert count == 1 << 18
    # Its 512 KiB of 2-byte lines as one list of bytes objects would take ~9 MiB.
    assert peak < 4 << 20, f"iteration held {peak} bytes"


def test_iteration_after_close_raises_like_a_file(client, bucket):
    client.put_object(bucket, "lines.txt", LINES)
    f = client.open(bucket, "lines.txt")
    assert next(f) == b"0,row 0\n"
    f.close()
    with pytest.raises(ValueError, match="closed file"):
        next(f)


def test_threads_iterating_one_file_share_its_lines_without_loss_or_repeat(client, bucket):
    client.put_object(bucket, "lines.txt", LINES)
    seen: list[list[bytes]] = [[], [], [], []]
    with client.open(bucket, "lines.txt", chunk_size=8192) as f:

        def take(out: list[bytes]) -> None:
            out.extend(f)

        threads = [threading.Thread(target=take, args=(out,)) for out in seen]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    every = [line for out in seen for line in out]
    assert sorted(every) == sorted(io.BytesIO(LINES).readlines())
    for out in seen:  # each thread's lines in file order
        assert out == sorted(out, key=lambda line: int(line.split(b",")[0]))


def test_peek_does_not_consume(client, objects):
    with client.open("objectfile", "obj/4095") as f:
        assert objects[4095].startswith(f.peek(10))
        assert f.tell() == 0
        assert f.read(4) == objects[4095][:4]


def test_overwritten_object_is_detected_on_reopen(client, bucket):
    old, new = os.urandom(3 << 20), os.urandom(3 << 20)
    client.put_object(bucket, "changing", old)
    with client.open(bucket, "changing") as f:
        first = f.read(1 << 20)
        client.put_object(bucket, "changing", new)
        f.seek(2 << 20)  # forces a new request, pinned with If-Match
        with pytest.raises(objsdk.ObjectChangedError, match="changing") as info:
            f.read(10)
    assert first == old[: 1 << 20]
    assert info.value.offset == 2 << 20


def test_deleted_object_is_detected_on_reopen(client, bucket):
    client.put_object(bucket, "vanishing", os.urandom(3 << 20))
    with client.open(bucket, "vanishing") as f:
        f.read(10)
        client.delete_object(bucket, "vanishing")
        f.seek(2 << 20)
        with pytest.raises(objsdk.ObjectChangedError, match="deleted"):
            f.read(10)


def test_a_stored_checksum_is_verified_on_a_full_pass(client, objects, s3_features):
    head = client.head_object("objectfile", f"obj/{BIG}")
    if not s3_features.stores_put_checksum:
        # moto keeps no checksum from a single PUT: the object is read unchecked.
        assert "crc32c" not in head.checksums
        with client.open("objectfile", f"obj/{BIG}") as f:
            assert f.read() == objects[BIG]
            assert f._verifier.hashed == 0
        return
    assert "crc32c" in head.checksums
    with client.open("objectfile", f"obj/{BIG}") as f:
        f.read(10)
        assert f._verifier.checksum is not None  # verification is under way
        assert hashlib.sha256(f.read()).digest() == hashlib.sha256(objects[BIG][10:]).digest()
        assert f._verifier.checksum is None  # and completed without an IntegrityError


def test_pickled_file_resumes_at_the_same_position(client, objects):
    with client.open("objectfile", f"obj/{BIG}") as f:
        f.read(12345)
        clone = pickle.loads(pickle.dumps(f))
    with clone:
        assert clone.tell() == 12345
        assert clone.stats.requests == 0  # lazy: reopens on first read
        assert clone.read(100) == objects[BIG][12345:12445]
        assert clone.etag == client.head_object("objectfile", f"obj/{BIG}").etag


def test_pickled_file_refuses_a_replaced_object(client, bucket):
    client.put_object(bucket, "pinned", b"version one")
    with client.open(bucket, "pinned") as f:
        f.read(3)
        blob = pickle.dumps(f)
    client.put_object(bucket, "pinned", b"version two")
    with pickle.loads(blob) as clone, pytest.raises(objsdk.ObjectChangedError):
        clone.read()


class PickledBeforeVersionPin:
    """An ObjectFile's pickle as earlier releases wrote it: the version id in the state,
    the pin as the tuple (ETag, size, Last-Modified)."""

    def __init__(self, client: Client, f: objsdk.ObjectFile, last_modified: str) -> None:
        state = {"chunk_size": f.chunk_size, "max_resume": f.max_resume}
        state.update(version_id=f.version_id, verify=f.verify, readahead=f.readahead)
        self.args = (client, f.bucket, f.key, {**state, "part_size": f.part_size})
        self.rest = ((f.etag, f.size, last_modified), f.tell(), False)

    def __reduce__(self) -> tuple[object, ...]:
        from objsdk._io.objectfile import _restore

        return (_restore, (*self.args, *self.rest))


def test_a_pickle_from_before_the_version_pin_reopens_pinned(client, bucket):
    client.put_object(bucket, "old-pickle", b"version one")
    with client.open(bucket, "old-pickle") as f:
        f.read(3)
        date = http_date(client.head_object(bucket, "old-pickle").last_modified)
        blob = pickle.dumps(PickledBeforeVersionPin(client, f, date))
    with pickle.loads(blob) as clone:
        assert (clone.tell(), clone.etag) == (3, f.etag)
        assert clone.read() == b"sion one"
    client.put_object(bucket, "old-pickle", b"version two")
    with pickle.loads(blob) as clone, pytest.raises(objsdk.ObjectChangedError):
        clone.read()


def test_a_file_opened_with_the_head_answer_knows_its_size_without_a_request(client, objects):
    head = client.head_object("objectfile", f"obj/{BIG}")
    with client.open("objectfile", f"obj/{BIG}", pin=head, readahead=0) as f:
        assert (f.size, f.etag, f.stats.requests) == (BIG, head.etag, 0)
        assert f.read() == objects[BIG]
        assert f.stats.requests == 1


def test_a_file_opened_with_a_stale_head_answer_refuses_the_new_version(client, bucket):
    client.put_object(bucket, "stale", b"version one")
    head = client.head_object(bucket, "stale")
    client.put_object(bucket, "stale", b"version two")
    with client.open(bucket, "stale", pin=head) as f:
        with pytest.raises(objsdk.ObjectChangedError, match="If-Match failed"):
            f.read(1)  # the first GET already carries If-Match
        assert f.stats.requests == 1


def test_the_head_answer_verifies_a_pass_read_ahead_in_parts(client, objects, s3_features):
    head = client.head_object("objectfile", f"obj/{BIG}")
    with client.open("objectfile", f"obj/{BIG}", pin=head, readahead=2, part_size=1 << 20) as f:
        assert f.read() == objects[BIG]
        assert f.stats.readahead == 2
        # Checked against the head answer's checksum (moto stores none of a single PUT).
        assert f.stats.verified == ("crc32c" if s3_features.stores_put_checksum else None)


def test_a_head_answer_for_another_object_is_refused_naming_it(client, objects):
    head = client.head_object("objectfile", "obj/100")
    with pytest.raises(objsdk.InvalidArgument, match=r"key 'obj/100'.*key 'obj/4095'"):
        client.open("objectfile", "obj/4095", pin=head)


def _read_rest_in_child(blob: bytes) -> str:
    with pickle.loads(blob) as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_pickled_file_is_read_in_another_process(client, objects):
    with client.open("objectfile", f"obj/{BIG}") as f:
        f.read(1000)
        blob = pickle.dumps(f)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        digest = pool.apply(_read_rest_in_child, (blob,))
    assert digest == hashlib.sha256(objects[BIG][1000:]).hexdigest()


def make_tar(root: Path) -> bytes:
    """A tar with members of awkward sizes, a directory and unicode names."""
    sizes = [0, 1, 511, 512, 513, 10_000, 1 << 20, (2 << 20) + 5]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("dir/")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        for i, size in enumerate(sizes):
            member = tarfile.TarInfo(f"dir/fïle-{i}-{size}.bin")
            member.size = size
            tar.addfile(member, io.BytesIO(os.urandom(size)))
    return buf.getvalue()


def extracted(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("mode", ["r|*", "r:"])
def test_tarfile_extracts_identically(client, bucket, tmp_path, mode):
    blob = make_tar(tmp_path)
    client.put_object(bucket, "archive.tar", blob)
    expected_dir, got_dir = tmp_path / "expected", tmp_path / "got"
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(expected_dir, filter="data")
    with client.open(bucket, "archive.tar") as f, tarfile.open(fileobj=f, mode=mode) as tar:
        tar.extractall(got_dir, filter="data")
    assert extracted(got_dir) == extracted(expected_dir)
    assert len(extracted(got_dir)) == 8


def read_all(reader: RangeReader) -> bytes:
    chunks = []
    while chunk := reader.read(1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_range_reader_window_reads_only_up_to_its_end(client, objects):
    data = objects[BIG]
    reader = RangeReader(client.transport, "objectfile", f"obj/{BIG}", end=300_000)
    reader.seek(100_000)
    assert read_all(reader) == data[100_000:300_000]
    assert reader.read(10) == b""
    assert reader.stats.requests == 1


def test_a_range_reader_window_past_the_object_end_stops_at_the_end(client, objects):
    reader = RangeReader(client.transport, "objectfile", "obj/4095", end=10_000)
    assert read_all(reader) == objects[4095]


@pytest.mark.parametrize("readahead", [0, None, 2], ids=["one stream", "adaptive", "parts"])
def test_a_reader_nobody_closes_goes_with_its_last_reference(
    client: Client, bucket: str, readahead: int | None
) -> None:
    # pyarrow leaves the files it reads through fsspec open: each must let go of its
    # connection when dropped, not at some later garbage collection.
    import gc
    import weakref

    client.put_object(bucket, "k", os.urandom(20 << 20))
    gc.disable()
    try:
        f = client.open(bucket, "k", readahead=readahead, part_size=1 << 20)
        f.read(2 << 20)  # a GET left in the middle of its body
        dropped = weakref.ref(f)
        del f
        assert dropped() is None
    finally:
        gc.enable()
