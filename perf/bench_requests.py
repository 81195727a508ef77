"""Client CPU per small request: sequential 4 KiB GET, HEAD, PUT and download to a file,
and GETs/s on 16 threads.

Each client sends ``--objects`` requests of each kind, one after another, to the same
server; ``time.process_time()`` (this process, all threads) around each batch gives the
client's CPU per request, the median of ``--runs`` interleaved runs after a warm-up. Then
16 threads GET the same objects (each thread its own share) and the wall time gives
GETs/s. A download writes the object to a file of its own name in a scratch directory:
``Client.download`` (the file fsynced and renamed into place when it returns), boto3's
``download_file``, minio-py's ``fget_object``, obstore's ``get`` written to a file (the
last three leave the bytes in the page cache). Clients: objsdk, boto3 (at its defaults,
CRC32 on PUT), minio-py and obstore (its synchronous API) when installed
(``pip install -e '.[perf]'`` in the clone).

Target (issue 27): objsdk at most 0.25 ms of client CPU per GET, HEAD and PUT; with 16
threads, GETs/s at least minio-py's and 0.7x obstore's.

    $ .venv/bin/python perf/bench_requests.py --runs 5
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from common import Server, server

BUCKET = "bench-requests"
SCRATCH = os.path.join(tempfile.gettempdir(), f"objsdk-bench-requests-{os.getpid()}")
BODY = os.urandom(4096)
THREADS = 16
KINDS = ("GET", "HEAD", "PUT", "FILE")

Ops = dict[str, Callable[[str], Any]]


def objsdk_ops(srv: Server) -> Ops:
    client = srv.client
    return {
        "GET": lambda key: client.get_object(BUCKET, key),
        "HEAD": lambda key: client.head_object(BUCKET, key),
        "PUT": lambda key: client.put_object(BUCKET, key, BODY),
        "FILE": lambda key: client.download(BUCKET, key, local(key)),
    }


def local(key: str) -> str:
    """The file a download of ``key`` writes."""
    return os.path.join(SCRATCH, key.replace("/", "_"))


def boto3_ops(srv: Server) -> Ops:
    s3 = srv.boto3()
    return {
        "GET": lambda key: s3.get_object(Bucket=BUCKET, Key=key)["Body"].read(),
        "HEAD": lambda key: s3.head_object(Bucket=BUCKET, Key=key),
        "PUT": lambda key: s3.put_object(Bucket=BUCKET, Key=key, Body=BODY),
        "FILE": lambda key: s3.download_file(BUCKET, key, local(key)),
    }


def minio_ops(srv: Server) -> Ops:
    import io

    import minio

    url = urlsplit(srv.endpoint)
    mc = minio.Minio(
        url.netloc, srv.access_key, srv.secret_key, secure=url.scheme == "https", region="us-east-1"
    )

    def get(key: str) -> bytes:
        resp = mc.get_object(BUCKET, key)
        try:
            return bytes(resp.read())
        finally:
            resp.close()
            resp.release_conn()

    return {
        "GET": get,
        "HEAD": lambda key: mc.stat_object(BUCKET, key),
        "PUT": lambda key: mc.put_object(BUCKET, key, io.BytesIO(BODY), len(BODY)),
        "FILE": lambda key: mc.fget_object(BUCKET, key, local(key)),
    }


def obstore_ops(srv: Server) -> Ops:
    import obstore
    from obstore.store import S3Store

    store = S3Store(
        BUCKET,
        endpoint=srv.endpoint,
        access_key_id=srv.access_key,
        secret_access_key=srv.secret_key,
        region="us-east-1",
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
    )
    return {
        "GET": lambda key: obstore.get(store, key).bytes(),
        "HEAD": lambda key: obstore.head(store, key),
        "PUT": lambda key: obstore.put(store, key, BODY),
        "FILE": lambda key: to_file(obstore.get(store, key).bytes(), local(key)),
    }


def to_file(data: Any, path: str) -> None:
    with open(path, "wb") as f:
        f.write(data)


CLIENTS: dict[str, tuple[str | None, Callable[[Server], Ops]]] = {
    "objsdk": (None, objsdk_ops),
    "boto3": ("boto3", boto3_ops),
    "minio-py": ("minio", minio_ops),
    "obstore": ("obstore", obstore_ops),
}


def sequential(op: Callable[[str], Any], keys: list[str]) -> float:
    """Client CPU milliseconds per request over ``keys``."""
    c0 = time.process_time()
    for key in keys:
        op(key)
    return (time.process_time() - c0) / len(keys) * 1000


def threaded_gets(op: Callable[[str], Any], keys: list[str]) -> float:
    """GETs per second with THREADS threads sharing ``keys``."""
    shares = [keys[i::THREADS] for i in range(THREADS)]
    with ThreadPoolExecutor(THREADS) as pool:
        t0 = time.perf_counter()
        list(pool.map(lambda share: [op(k) for k in share], shares))
        return len(keys) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--objects", type=int, default=400)
    ap.add_argument("--clients", nargs="*", default=list(CLIENTS))
    args = ap.parse_args()
    keys = [f"small/{i:05d}" for i in range(args.objects)]
    os.makedirs(SCRATCH)
    try:
        measure(args, keys)
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)


def measure(args: argparse.Namespace, keys: list[str]) -> None:
    with server() as srv:
        srv.scratch_bucket(BUCKET)
        for key in keys:
            srv.client.put_object(BUCKET, key, BODY)
        clients: dict[str, Ops] = {}
        for name in args.clients:
            module, make = CLIENTS[name]
            if module is not None and importlib.util.find_spec(module) is None:
                print(f"{name}: not installed, skipped (pip install -e '.[perf]')")
                continue
            clients[name] = make(srv)
        names = list(clients)
        cpu: dict[tuple[str, str], list[float]] = {}
        rate: dict[str, list[float]] = {n: [] for n in names}
        for run in range(args.runs + 1):  # the first round warms up and is not counted
            order = names[run % len(names) :] + names[: run % len(names)]
            for name in order:
                for kind in KINDS:
                    ms = sequential(clients[name][kind], keys)
                    if run:
                        cpu.setdefault((name, kind), []).append(ms)
                gets = threaded_gets(clients[name]["GET"], keys)
                if run:
                    rate[name].append(gets)
    print(f"\n{args.objects} objects of 4 KiB, median of {args.runs} interleaved runs\n")
    print(
        f"| client CPU ms per request | GET | HEAD | PUT | download to a file "
        f"| {THREADS} threads, GETs/s |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in names:
        row = " | ".join(f"{statistics.median(cpu[(name, k)]):.2f}" for k in KINDS)
        print(f"| {name} | {row} | {statistics.median(rate[name]):,.0f} |")


if __name__ == "__main__":
    main()
