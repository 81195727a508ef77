"""The zero-copy micro-benchmarks of the seeds, as tables (no object store involved).

* slicing: a 20 MiB slice of 64 MiB of ``bytes`` (a copy) vs of a ``memoryview`` of
  them (no copy), 50 slices per run (Effective Python, item 74);
* receive: ``sock.recv(1 MiB)`` whose bytes are then stored into a buffer vs
  ``sock.recv_into`` a ``memoryview`` slice of that buffer, over a loopback TCP
  connection fed by a sender thread (item 74, and the EuroPython zero-copy talk);
* send: a file sent over loopback TCP with ``f.read(1 MiB)`` + ``sock.sendall`` vs
  ``socket.sendfile`` (the Kafka-style file transfer post), to a receiver thread.

The sockets are opened by the benchmark on 127.0.0.1. Both ends run in this process,
so the CPU column includes the other end's work, alike in both variants.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from objsdk.bench.context import Context
from objsdk.bench.output import size_label
from objsdk.bench.runner import Case, Group, MiB
from objsdk.bench.target import random_file

NAME = "zerocopy"
PROFILE = "local"
SLICE = 20 * MiB
BUFFER = 64 * MiB


def slicing_cases(repeat: int) -> list[Case]:
    data = os.urandom(BUFFER)
    view = memoryview(data)
    offset = 7 * MiB

    def with_bytes() -> int:
        n = 0
        for _ in range(repeat):
            chunk = data[offset : offset + SLICE]
            n += len(chunk)
        return n

    def with_memoryview() -> int:
        n = 0
        for _ in range(repeat):
            chunk = view[offset : offset + SLICE]
            n += chunk.nbytes
        return n

    nbytes = repeat * SLICE
    return [
        Case("python", "bytes[a:b] (copies)", with_bytes, nbytes),
        Case("python", "memoryview[a:b] (no copy)", with_memoryview, nbytes),
    ]


def _listener() -> socket.socket:
    server = socket.create_server(("127.0.0.1", 0))
    server.listen(4)
    return server


def _send_block(port: int, total: int) -> threading.Thread:
    """A thread that connects to ``port`` and sends ``total`` bytes."""
    block = memoryview(os.urandom(MiB))

    def send() -> None:
        with socket.create_connection(("127.0.0.1", port)) as s:
            left = total
            while left:
                n = min(left, len(block))
                s.sendall(block[:n])
                left -= n

    t = threading.Thread(target=send, daemon=True)
    t.start()
    return t


def receive_cases(total: int) -> tuple[list[Case], Callable[[], None]]:
    server = _listener()
    port = server.getsockname()[1]
    cache = bytearray(BUFFER)
    view = memoryview(cache)

    def with_recv() -> int:
        sender = _send_block(port, total)
        conn, _ = server.accept()
        n = 0
        with conn:
            while chunk := conn.recv(MiB):
                pos = n % BUFFER
                k = min(len(chunk), BUFFER - pos)
                cache[pos : pos + k] = chunk[:k]
                n += len(chunk)
        sender.join()
        return n

    def with_recv_into() -> int:
        sender = _send_block(port, total)
        conn, _ = server.accept()
        n = 0
        with conn:
            while True:
                pos = n % BUFFER
                k = conn.recv_into(view[pos : pos + min(MiB, BUFFER - pos)])
                if not k:
                    break
                n += k
        sender.join()
        return n

    cases = [
        Case("python", "recv(1 MiB) + store", with_recv, total),
        Case("python", "recv_into(memoryview)", with_recv_into, total),
    ]
    return cases, server.close


def send_cases(path: Path, total: int) -> tuple[list[Case], Callable[[], None]]:
    server = _listener()
    port = server.getsockname()[1]
    scratch = memoryview(bytearray(MiB))

    def receiver(result: list[int]) -> threading.Thread:
        def run() -> None:
            conn, _ = server.accept()
            n = 0
            with conn:
                while k := conn.recv_into(scratch):
                    n += k
            result.append(n)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def transfer(send: Callable[[socket.socket], None]) -> int:
        got: list[int] = []
        t = receiver(got)
        with socket.create_connection(("127.0.0.1", port)) as s:
            send(s)
        t.join()
        return got[0] if got else 0

    def read_sendall(s: socket.socket) -> None:
        with path.open("rb") as f:
            while chunk := f.read(MiB):
                s.sendall(chunk)

    def sendfile(s: socket.socket) -> None:
        with path.open("rb") as f:
            s.sendfile(f)

    cases = [
        Case("python", "f.read(1 MiB) + sendall", lambda: transfer(read_sendall), total),
        Case("python", "socket.sendfile", lambda: transfer(sendfile), total),
    ]
    return cases, server.close


def groups(ctx: Context) -> Iterator[Group]:
    total = min(ctx.options.sizes)
    repeat = 10 if ctx.options.quick else 50
    yield Group(
        NAME,
        PROFILE,
        f"Slicing {size_label(SLICE)} out of {size_label(BUFFER)}, {repeat} times",
        slicing_cases(repeat),
        "python: bytes[a:b] (copies)",
    )
    cases, close = receive_cases(total)
    try:
        yield Group(
            NAME,
            PROFILE,
            f"Receiving {size_label(total)} over loopback TCP",
            cases,
            "python: recv(1 MiB) + store",
            size=total,
        )
    finally:
        close()
    path = random_file(ctx.work / "sendfile.bin", total)
    cases, close = send_cases(path, total)
    try:
        yield Group(
            NAME,
            PROFILE,
            f"Sending a {size_label(total)} file over loopback TCP",
            cases,
            "python: f.read(1 MiB) + sendall",
            size=total,
        )
    finally:
        close()
        path.unlink()
