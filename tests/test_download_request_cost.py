"""An adaptive download from a server whose every ranged answer is slow to start (moto's
reads the whole object for each range) reads the rest through one request instead of
climbing to parallel parts that each pay that wait."""

from __future__ import annotations

import contextlib
import random
import socket
import time
from collections.abc import Iterator

import pytest
from rawserver import RawServer, Request, S3Object, object_reply

import objsdk

MiB = 1 << 20
DATA = random.Random(11).randbytes(8 * MiB)


@pytest.fixture
def slow_to_answer() -> Iterator[tuple[RawServer, objsdk.Client]]:
    obj = S3Object(DATA)

    def handler(request: Request, conn: socket.socket) -> None:
        reply = object_reply(request, obj)
        if request.method == "HEAD":
            conn.sendall(reply.head)
            return
        time.sleep(0.2)  # the server's cost of a request, whatever its range
        reply.send(conn)

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(RawServer(handler))
        client = stack.enter_context(objsdk.Client(server.url, "AKID", "SECRET", retries=0))
        yield server, client


def test_a_first_request_slow_to_answer_takes_the_rest_in_one_request(slow_to_answer, tmp_path):
    server, client = slow_to_answer
    result = client.download("bkt", "obj", tmp_path / "out", part_size=MiB)
    assert (tmp_path / "out").read_bytes() == DATA
    gets = [r.headers.get("Range") for r in server.requests if r.method == "GET"]
    # Before: a request for 1, 1, 2 and 4 parts while one stream was measured, and one
    # per part once parts ran in parallel, each waiting its 0.2 s.
    assert gets == [f"bytes=0-{MiB - 1}", f"bytes={MiB}-{len(DATA) - 1}"]
    assert result.parallel == 1
