"""Whole-object downloads to a file: parallel parts vs one stream vs boto3.

Variants (each writes the whole object to a new file in a temp dir under the system temp
directory, which is then deleted):
  ObjectFile, one stream          ``client.open().readinto(256 KiB buf)`` + ``write``: one GET
  ObjectFile, one stream + fsync  the same, then fsync, for durability like download()
  download(parallel=1)            ``Client.download``, one connection
  download(parallel=4)            four connections
  boto3 download_file             boto3's default TransferConfig (8 MiB parts, 10 threads)
  boto3 download_file + fsync     the same, then fsync, for durability like download()
  get_into(bytearray, parallel=4) the network alone: parts straight into memory, no file
  download() at its defaults      ``Client.download`` as users call it
  obstore stream to a file        ``obstore.get().stream(1 MiB)`` written to a file (obstore
                                  has no download to a path); skipped if not installed
  s5cmd cp                        ``s5cmd cp s3://... FILE``, a child process (its CPU is
                                  counted); skipped without s5cmd or a Go toolchain

download() records parts as done once a flush put them on disk (so a crash can resume)
and fsyncs the file before renaming it into place; the plain stream and boto3 leave the
bytes in the page cache, where a crash of the machine can lose them.

"client cpu s" is this process's CPU time, and s5cmd's. MinIO runs on the same machine and competes
for the same cores, so the numbers measure the client and the server together.

Between two timed runs, untimed: the file is deleted and ``sync`` waits for the disk to
be idle, so no run pays for the writeback of the one before it.

    python perf/bench_download.py [--size-mib 1024] [--runs 5] [--json out.json]

Targets: ``download(parallel=4)`` at least 1.4x one stream and 1.0x boto3's
``download_file``; ``download()`` at its defaults at least 1.0x boto3's
``download_file``, obstore and s5cmd.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from common import (
    MiB,
    interleave,
    parser,
    report,
    s5cmd_binary,
    server,
    upload_random,
    verdict,
    write_json,
)

from objsdk.bench.peers import PeerConfig, make_peer

BUCKET = "objsdk-perf"


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument(
        "--peers",
        default="obstore,s5cmd",
        help="other tools measured besides boto3 (comma-separated; default obstore,s5cmd)",
    )
    args = p.parse_args()
    size = args.size_mib * MiB
    key = f"seq-{args.size_mib}m"
    workdir = Path(tempfile.mkdtemp(prefix="objsdk-bench-download-"))
    try:
        with server() as srv:
            client = srv.client
            srv.scratch_bucket(BUCKET)
            upload_random(client, BUCKET, key, size)
            s3 = srv.boto3()
            dest = workdir / "out.bin"

            def done() -> int:
                return dest.stat().st_size

            def settle() -> None:
                dest.unlink(missing_ok=True)
                os.sync()

            def one_stream(fsync: bool) -> int:
                # 256 KiB: the buffer size download() itself found fastest for files.
                buf = bytearray(256 * 1024)
                view = memoryview(buf)
                with client.open(BUCKET, key) as f, dest.open("wb") as out:
                    while n := f.readinto(buf):
                        out.write(view[:n])
                    if fsync:
                        out.flush()
                        os.fsync(out.fileno())
                return done()

            def objsdk_download(parallel: int | None) -> int:
                client.download(BUCKET, key, dest, parallel=parallel)
                return done()

            def boto3_download(fsync: bool) -> int:
                s3.download_file(BUCKET, key, str(dest))
                if fsync:
                    fd = os.open(dest, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                return done()

            memory = bytearray(size)

            def into_memory() -> int:
                return client.get_into(BUCKET, key, memory, parallel=4, part_size=16 * MiB)

            variants: dict[str, Callable[[], int]] = {
                "ObjectFile, one stream": lambda: one_stream(False),
                "ObjectFile, one stream + fsync": lambda: one_stream(True),
                "download(parallel=1)": lambda: objsdk_download(1),
                "download(parallel=4)": lambda: objsdk_download(4),
                "download() at its defaults": lambda: objsdk_download(None),
                "boto3 download_file": lambda: boto3_download(False),
                "boto3 download_file + fsync": lambda: boto3_download(True),
                "get_into(bytearray, parallel=4)": into_memory,
            }
            peers = {name.strip() for name in args.peers.split(",") if name.strip()}
            if unknown := peers - {"obstore", "s5cmd"}:
                p.error(f"--peers: unknown {', '.join(sorted(unknown))} (obstore, s5cmd)")
            peer = (
                make_peer(
                    "obstore",
                    PeerConfig(srv.endpoint, srv.access_key, srv.secret_key, "us-east-1", BUCKET),
                )
                if "obstore" in peers
                else None
            )
            if isinstance(peer, str):
                print(peer)
            elif peer is not None and peer.download is not None:
                fetch = peer.download
                variants["obstore stream to a file"] = lambda: fetch(key, dest)
            s5cmd = s5cmd_binary() if "s5cmd" in peers else None
            if "s5cmd" in peers and s5cmd is None:
                print("s5cmd: skipped, no s5cmd and no Go toolchain to build it")
            elif s5cmd is not None:
                command = [s5cmd, "--endpoint-url", srv.endpoint, "cp", f"s3://{BUCKET}/{key}"]
                env = {**os.environ, **srv.env(), "AWS_REGION": "us-east-1"}

                def s5cmd_cp() -> int:
                    subprocess.run([*command, str(dest)], env=env, check=True, capture_output=True)
                    return done()

                variants["s5cmd cp"] = s5cmd_cp
            results = interleave(variants, args.runs, settle=settle)
            s3.close()
            for r in results.values():
                assert r.nbytes == size, (r.name, r.nbytes)
            section = report(
                f"Download of {args.size_mib} MiB to a file in {tempfile.gettempdir()}",
                results,
                "ObjectFile, one stream",
                targets={"download(parallel=4)": ("ObjectFile, one stream", 1.4)},
            )
            # report() takes one target per variant; this variant has a second one.
            verdicts = section["targets"]
            assert isinstance(verdicts, list)
            verdicts.append(verdict(results, "download(parallel=4)", "boto3 download_file", 1.0))
            for peer_name in ("boto3 download_file", "obstore stream to a file", "s5cmd cp"):
                if peer_name in results:
                    verdicts.append(verdict(results, "download() at its defaults", peer_name, 1.0))
            # Not a target, the like-for-like view: both end with the bytes on disk.
            ratio = (
                results["ObjectFile, one stream + fsync"].median
                / results["download(parallel=4)"].median
            )
            print(f"download(parallel=4) vs ObjectFile, one stream + fsync: {ratio:.2f}x")
            write_json(args.json, [section])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
