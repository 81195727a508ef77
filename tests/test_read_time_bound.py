"""One read against a server that accepts and never answers ends within the documented
bound: each GET is sent once by the transport, and only the reader's policy retries."""

from __future__ import annotations

import socket
import time

import pytest
from rawserver import RawServer, Request, hang

import objsdk


def never_answers(request: Request, conn: socket.socket) -> None:
    hang(conn)


def test_a_silent_server_costs_max_resume_plus_one_timeouts_not_more():
    with (
        RawServer(never_answers) as server,
        objsdk.Client(server.url, "AKID", "SECRET", retries=5, timeout=(1, 0.5)) as client,
        client.open("bkt", "key", max_resume=2) as f,
    ):
        started = time.monotonic()
        with pytest.raises(objsdk.ResumeLimitError, match="Timeout"):
            f.read(10)
        elapsed = time.monotonic() - started
    # 3 attempts of a 0.5 s read timeout, plus backoff (0, 0.4, ...): not 3 x 3 attempts.
    assert len(server.requests) == 3
    assert elapsed < 3 * 0.5 + 1.5
