"""objsdk.shm against a real MinIO: loading into shared memory, sharing across processes,
the block's lifecycle, and sweeping blocks left by killed creators."""

from __future__ import annotations

import io
import os
import pickle
import signal
import subprocess
import sys
import time
from multiprocessing import shared_memory
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

from objsdk import Client, ObjsdkError  # noqa: E402
from objsdk.errors import InvalidArgument  # noqa: E402
from objsdk.shm import SharedArray, load_shared, sweep  # noqa: E402

pytestmark = pytest.mark.integration

SHM = Path("/dev/shm")


def npy_bytes(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def exists(name: str) -> bool:
    return (SHM / name).exists()


@pytest.fixture
def matrix(client: Client, bucket: str) -> tuple[str, object]:
    a = np.arange(300 * 100, dtype=np.float64).reshape(300, 100)
    client.put_object(bucket, "m.npy", npy_bytes(a))
    return "m.npy", a


def test_npy_object_loads_as_the_same_array(client, bucket, matrix):
    key, a = matrix
    with load_shared(client, bucket, key) as shared:
        assert shared.array.shape == (300, 100)
        assert shared.array.dtype == np.float64
        assert np.array_equal(shared.array, a)
        assert shared.owner


def test_fortran_order_and_other_dtypes_are_kept(client, bucket):
    a = np.asfortranarray(np.arange(24, dtype=np.int16).reshape(4, 6))
    client.put_object(bucket, "f.npy", npy_bytes(a))
    with load_shared(client, bucket, "f.npy") as shared:
        assert shared.array.flags.f_contiguous
        assert np.array_equal(shared.array, a)


def test_raw_bytes_load_with_dtype_and_shape(client, bucket):
    a = np.arange(1000, dtype="<u4")
    client.put_object(bucket, "raw.bin", a.tobytes())
    with load_shared(client, bucket, "raw.bin", dtype="<u4", shape=(10, 100)) as shared:
        assert np.array_equal(shared.array, a.reshape(10, 100))
    with load_shared(client, bucket, "raw.bin", dtype="<u4") as flat:
        assert flat.array.shape == (1000,)


def test_raw_bytes_of_the_wrong_size_are_refused_naming_the_key(client, bucket):
    client.put_object(bucket, "raw.bin", b"x" * 10)
    with pytest.raises(InvalidArgument, match=r"'raw.bin'.*10"):
        load_shared(client, bucket, "raw.bin", dtype="<f8")


def test_non_npy_object_without_dtype_is_refused(client, bucket):
    client.put_object(bucket, "x.txt", b"hello, not an array" * 10)
    with pytest.raises(InvalidArgument, match=r"'x.txt'.*not a .npy"):
        load_shared(client, bucket, "x.txt")


def test_large_object_arrives_intact_in_parallel_parts(client, bucket):
    a = np.random.default_rng(0).random(3 << 20)  # 24 MiB: two download parts
    client.put_object(bucket, "big.npy", npy_bytes(a))
    with load_shared(client, bucket, "big.npy", parallel=4) as shared:
        assert np.array_equal(shared.array, a)


def test_pickling_passes_the_name_not_the_data(client, bucket, matrix):
    key, a = matrix
    with load_shared(client, bucket, key) as shared:
        data = pickle.dumps(shared)
        assert len(data) < 300
        other = pickle.loads(data)
        assert not other.owner
        assert np.array_equal(other.array, a)
        other.close()
        assert exists(shared.name)  # an attacher never unlinks


ATTACH_AND_WRITE = """
import sys
from objsdk.shm import SharedArray
shared = SharedArray.attach(sys.argv[1])
print(float(shared.array.sum()))
shared.array[0, 0] = -1.0
shared.close()
"""


def test_two_processes_see_the_same_memory_and_writes(client, bucket, matrix):
    key, a = matrix
    with load_shared(client, bucket, key) as shared:
        out = subprocess.run(
            [sys.executable, "-c", ATTACH_AND_WRITE, shared.name],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        assert float(out.stdout) == float(a.sum())
        assert shared.array[0, 0] == -1.0  # the child's write, seen here without copying
        assert exists(shared.name)  # the attacher's exit did not unlink it
    assert not exists(shared.name)


def test_views_outlive_close_but_the_name_is_gone(client, bucket, matrix):
    key, a = matrix
    shared = load_shared(client, bucket, key)
    view = shared.array
    shared.close()
    assert not exists(shared.name)
    assert np.array_equal(view, a)


def test_attaching_an_unknown_name_is_refused():
    with pytest.raises(InvalidArgument, match="objsdk_nothing_here"):
        SharedArray.attach("objsdk_nothing_here")


CREATOR = """
import sys, time
from objsdk import Client
from objsdk.shm import load_shared
endpoint, access, secret, bucket, key, mode = sys.argv[1:7]
shared = load_shared(Client(endpoint, access, secret), bucket, key)
print(shared.name, flush=True)
if mode == "raise":
    raise RuntimeError("boom")
if mode == "sleep":
    time.sleep(120)
"""


def creator(s3_server, bucket: str, key: str, mode: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            CREATOR,
            s3_server.endpoint,
            s3_server.access_key,
            s3_server.secret_key,
            bucket,
            key,
            mode,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


@pytest.mark.parametrize("mode", ["exit", "raise"])
def test_no_block_is_left_when_the_creator_exits_normally_or_by_exception(
    s3_server, bucket, matrix, mode
):
    proc = creator(s3_server, bucket, matrix[0], mode)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == (0 if mode == "exit" else 1)
    assert out.strip().startswith("objsdk_")
    assert not exists(out.strip())
    assert "leaked" not in err


def wait_gone(name: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not exists(name):
            return True
        time.sleep(0.1)
    return False


def test_block_of_a_sigkilled_creator_is_unlinked_by_the_resource_tracker(
    s3_server, bucket, matrix
):
    proc = creator(s3_server, bucket, matrix[0], "sleep")
    name = proc.stdout.readline().strip()
    assert exists(name)
    proc.kill()
    proc.communicate(timeout=30)
    assert wait_gone(name, 20)


def test_sweep_removes_blocks_of_dead_creators_only(s3_server, bucket, matrix, shm_sweep_alone):
    # A job killed as a whole (creator and its resource tracker): its block stays.
    dead = creator(s3_server, bucket, matrix[0], "sleep", start_new_session=True)
    dead_name = dead.stdout.readline().strip()
    # Another job, still running, and a block objsdk did not name.
    alive = creator(s3_server, bucket, matrix[0], "sleep")
    alive_name = alive.stdout.readline().strip()
    foreign = shared_memory.SharedMemory(create=True, size=4096)
    try:
        os.killpg(dead.pid, signal.SIGKILL)
        dead.communicate(timeout=30)
        time.sleep(0.5)
        assert exists(dead_name)
        assert dead_name in sweep(dry_run=True)
        assert exists(dead_name)  # a dry run only reports
        removed = sweep()
        assert dead_name in removed
        assert alive_name not in removed
        assert not exists(dead_name)
        assert exists(alive_name)
        assert exists(foreign.name.lstrip("/"))
    finally:
        foreign.close()
        foreign.unlink()
        alive.kill()
        alive.communicate(timeout=30)
    assert wait_gone(alive_name, 20)


def test_import_objsdk_does_not_import_numpy_or_shm():
    code = "import sys, objsdk; print('objsdk.shm' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_progress_reports_the_whole_object(client, bucket, matrix):
    key, _ = matrix
    calls: list[tuple[int, int]] = []
    with load_shared(client, bucket, key, progress=lambda done, total: calls.append((done, total))):
        pass
    size = client.head_object(bucket, key).size
    assert calls[-1] == (size, size)


def test_a_download_that_fails_leaves_no_block_and_raises_its_own_error(client, bucket):
    a = np.arange(3 << 20, dtype=np.float64)  # 24 MiB: two download parts
    client.put_object(bucket, "big.npy", npy_bytes(a))
    before = set(os.listdir(SHM))

    def delete_it(done: int, total: int) -> None:
        client.delete_object(bucket, "big.npy")  # the second part's GET finds it gone

    with pytest.raises(ObjsdkError, match=r"big\.npy") as info:
        load_shared(client, bucket, "big.npy", parallel=1, progress=delete_it)
    assert not isinstance(info.value, InvalidArgument)
    assert {n for n in os.listdir(SHM) if n.startswith("objsdk_")} <= before
