"""A client, a reader or a writer used on both sides of ``os.fork()``.

A forked child starts with copies of its parent's sockets, locks and thread pools. What
must hold: neither process ever gets the other's bytes, a child never hangs on a thread
that exists only in its parent, and the parent goes on exactly as if nothing happened.
This is the map-style Dataset in fork DataLoader workers, and any ``multiprocessing``
fork pool that inherits a warmed client.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import pickle
import select
import signal
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from rawserver import RawServer, Request, S3Object, object_reply

import objsdk
from objsdk import Client
from objsdk._transfer.multipart_calls import list_multipart_uploads

pytestmark = pytest.mark.integration

T = TypeVar("T")


def fork(fn: Callable[[], T], *, timeout: float = 60.0) -> T:
    """Run ``fn`` in a forked child and return its result; its exception (as text)
    fails the test, and so does a child that has not answered within ``timeout``."""
    r, w = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12 warns of forking a process with threads: that is the point here.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            payload = pickle.dumps(("ok", fn()))
        except BaseException:
            payload = pickle.dumps(("error", traceback.format_exc()))
        with os.fdopen(w, "wb") as out:
            out.write(payload)
        os._exit(0)
    os.close(w)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([r], [], [], max(0.0, left))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                pytest.fail(f"the forked child did not finish within {timeout} s")
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    status, value = pickle.loads(b"".join(chunks))
    if status == "error":
        pytest.fail(f"in the forked child:\n{value}")
    result: T = value
    return result


def content(name: str, size: int) -> bytes:
    """Bytes that only the object ``name`` holds."""
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


# -- connections: a child never sends on its parent's ------------------------------------


@pytest.fixture
def raw_objects() -> Iterator[tuple[Client, dict[str, S3Object], list[tuple[str, int]]]]:
    """A raw server that serves two objects and records, per request, the client port
    of the connection it came on."""
    objects = {
        "/b/small": S3Object(content("small", 1000)),
        "/b/large": S3Object(content("large", 3 << 20)),
    }
    peers: list[tuple[str, int]] = []

    def handler(request: Request, conn: Any) -> None:
        peers.append((request.path, conn.getpeername()[1]))
        object_reply(request, objects[request.path]).send(conn)

    with (
        RawServer(handler) as server,
        Client(server.url, "AKID", "SECRET", retries=0, timeout=(2, 5)) as client,
    ):
        yield client, objects, peers


def test_a_forked_childs_first_request_opens_a_connection_of_its_own(
    raw_objects: tuple[Client, dict[str, S3Object], list[tuple[str, int]]],
) -> None:
    client, objects, peers = raw_objects
    # Warm both pools: answers read whole (the transport's own connections) and
    # streamed answers (requests' pool).
    assert client.get_object("b", "small") == objects["/b/small"].data
    with client.open("b", "large") as f:
        assert f.read() == objects["/b/large"].data
    parents = {port for _, port in peers}
    before = len(peers)

    def child() -> None:
        assert client.get_object("b", "small") == objects["/b/small"].data
        with client.open("b", "large") as f:
            assert f.read() == objects["/b/large"].data

    fork(child)
    children = {port for _, port in peers[before:]}
    assert len(peers) - before == 2
    assert not children & parents, "the child sent a request on its parent's connection"
    # The parent's own connections are still good: no shutdown reached them.
    assert client.get_object("b", "small") == objects["/b/small"].data
    with client.open("b", "large") as f:
        assert f.read() == objects["/b/large"].data
    assert {port for _, port in peers[before + 2 :]} <= parents


# -- many reads on both sides of a fork -----------------------------------------------


KEYS = 16
SIZE = 4 * 1024


@pytest.fixture(scope="module")
def fork_objects(client: Client) -> Iterator[tuple[str, dict[str, bytes]]]:
    name = "t-fork-" + os.urandom(4).hex()
    client.create_bucket(name)
    objects = {f"{side}/{i}": content(f"{side}/{i}", SIZE) for side in "pc" for i in range(KEYS)}
    for key, data in objects.items():
        client.put_object(name, key, data)
    yield name, objects
    client.delete_objects(name, list(objects))
    client.delete_bucket(name)


def read_for(
    client: Client, bucket: str, objects: dict[str, bytes], side: str, seconds: float
) -> tuple[int, list[str]]:
    """8 threads read ``side``'s objects with ``open().read()`` for ``seconds``; the reads
    done, and every one that returned another object's bytes or failed."""
    wrong: list[str] = []
    done = [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker(t: int) -> None:
        i = t
        while time.monotonic() < stop:
            key = f"{side}/{i % KEYS}"
            try:
                with client.open(bucket, key) as f:
                    data = f.read()
            except objsdk.ObjsdkError as e:  # a stream another process read from
                data = f"{type(e).__name__}: {e}".encode()
            with lock:
                done[0] += 1
                if data != objects[key]:
                    wrong.append(f"{key}: {data[:100]!r}, not its own")
            i += 1

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done[0], wrong


@pytest.mark.parametrize("run", [1, 2])
def test_a_warmed_client_forked_while_8_threads_a_side_read_never_returns_the_other_sides_object(
    client: Client, fork_objects: tuple[str, dict[str, bytes]], run: int
) -> None:
    bucket, objects = fork_objects
    with Client.from_config(client.config) as shared:
        read_for(shared, bucket, objects, "p", 0.5)  # warm: pooled connections in both paths
        result: dict[str, tuple[int, list[str]]] = {}
        parent = threading.Thread(
            target=lambda: result.update(p=read_for(shared, bucket, objects, "p", 8.0))
        )
        parent.start()
        time.sleep(0.2)  # the fork comes while the parent's threads are reading
        child_done, child_wrong = fork(lambda: read_for(shared, bucket, objects, "c", 8.0))
        parent.join()
    parent_done, parent_wrong = result["p"]
    assert parent_done > 100
    assert child_done > 100
    assert child_wrong == []
    assert parent_wrong == []


_pool_client: Client | None = None


def _pool_read(job: tuple[str, dict[str, bytes], int]) -> tuple[int, list[str]]:
    bucket, objects, worker = job
    assert _pool_client is not None
    return read_for(_pool_client, bucket, objects, "cp"[worker % 2], 3.0)


def test_sibling_workers_of_a_fork_pool_read_their_own_objects(
    client: Client, fork_objects: tuple[str, dict[str, bytes]]
) -> None:
    global _pool_client
    bucket, objects = fork_objects
    with Client.from_config(client.config) as shared:
        _pool_client = shared
        read_for(shared, bucket, objects, "p", 0.5)  # warm the client the workers inherit
        context = multiprocessing.get_context("fork")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            with context.Pool(4) as pool:
                results = pool.map(_pool_read, [(bucket, objects, w) for w in range(4)])
        _pool_client = None
    assert all(done > 100 for done, _ in results)
    assert [wrong for _, wrong in results] == [[], [], [], []]


# -- an ObjectFile open at the fork -----------------------------------------------------


def test_an_objectfile_in_mid_body_at_a_fork_reads_on_correctly_in_both_processes(
    client: Client, bucket: str
) -> None:
    data = content("mid-body", 8 << 20)
    client.put_object(bucket, "obj", data)
    f = client.open(bucket, "obj", readahead=0)
    assert f.read(1 << 20) == data[: 1 << 20]
    requests = f.stats.requests

    def child() -> tuple[str, int]:
        rest = f.read()
        return hashlib.sha256(rest).hexdigest(), f.stats.requests

    child_digest, child_requests = fork(child)
    rest = f.read()
    f.close()
    assert child_digest == hashlib.sha256(data[1 << 20 :]).hexdigest()
    assert child_requests == requests + 1  # its own connection, from its own position
    assert rest == data[1 << 20 :]
    assert f.stats.requests == requests  # the parent kept its stream
    assert f.stats.resumes == 0


def test_an_objectfile_reading_ahead_goes_on_in_a_forked_child(client: Client, bucket: str) -> None:
    data = content("read-ahead", 12 << 20)
    client.put_object(bucket, "obj", data)
    with client.open(bucket, "obj", readahead=4, part_size=1 << 20) as f:
        got = f.read(3 << 20)  # parts in flight on the parent's workers
        assert f.readahead == 4

        def child() -> str:
            return hashlib.sha256(f.read()).hexdigest()

        assert fork(child, timeout=60) == hashlib.sha256(data[3 << 20 :]).hexdigest()
        got += f.read()
    assert got == data


# -- an upload belongs to the process that started it -----------------------------------


def test_a_writer_inherited_by_a_forked_child_refuses_to_write_or_complete(
    client: Client, bucket: str
) -> None:
    data = content("writer", 12 << 20)
    with client.open_write(bucket, "obj", part_size=5 << 20) as w:
        w.write(data[: 6 << 20])  # one part on its way

        def child() -> list[str]:
            refusals = []
            for attempt in (lambda: w.write(b"x" * (1 << 20)), w.close):
                try:
                    attempt()
                except objsdk.InvalidArgument as e:
                    refusals.append(str(e))
            return refusals

        refusals = fork(child)
        w.write(data[6 << 20 :])
    assert len(refusals) == 2
    assert all("forked child" in message and "'obj'" in message for message in refusals)
    assert client.get_object(bucket, "obj") == data
    assert list(list_multipart_uploads(client.transport, bucket)) == []
