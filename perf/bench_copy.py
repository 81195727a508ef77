"""Copies of one object on the server: objsdk's routes, streaming, and the aws CLI.

  one CopyObject          ``Client.copy`` at its defaults (up to 5 GiB: one request);
                          the copy keeps the source's full-object CRC32C (baseline)
  parts, server-copied    ``Client.copy(multipart_threshold=0)``: 256 MiB parts the
                          server copies (UploadPartCopy), 8 at a time; no checksum kept
  streamed via client     ``open()`` into ``open_write()``: every byte down and up
                          again through this machine
  aws s3 cp               ``aws s3 cp s3://... s3://...`` (multipart copy of 8 MiB
                          parts), when the aws CLI is on PATH

Client CPU is this process's user+sys seconds, plus the aws CLI's.

    python perf/bench_copy.py [--size-mib 1024] [--runs 5] [--json out.json] [--quick]
"""

from __future__ import annotations

import os
import shutil
import subprocess

from common import MiB, interleave, parser, report, server, upload_random, write_json

BUCKET = "objsdk-perf-copy"


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--quick", action="store_true", help="16 MiB, 1 run: checks it runs")
    args = p.parse_args()
    if args.quick:
        args.size_mib, args.runs = 16, 1
    size = args.size_mib * MiB
    with server() as srv:
        client = srv.client
        srv.scratch_bucket(BUCKET)
        upload_random(client, BUCKET, "source", size)

        def one_copy() -> int:
            client.copy(BUCKET, "source", BUCKET, "one-copy")
            return size

        def parts() -> int:
            client.copy(BUCKET, "source", BUCKET, "parts", multipart_threshold=0)
            return size

        def streamed() -> int:
            buf = bytearray(8 * MiB)
            with client.open(BUCKET, "source") as r, client.open_write(BUCKET, "streamed") as w:
                while n := r.readinto(buf):
                    w.write(memoryview(buf)[:n])
            return size

        variants = {
            "one CopyObject": one_copy,
            "parts, server-copied": parts,
            "streamed via client": streamed,
        }
        aws = shutil.which("aws")
        if aws is not None:
            env = {**os.environ, **srv.env(), "AWS_DEFAULT_REGION": "us-east-1"}
            src, dst = f"s3://{BUCKET}/source", f"s3://{BUCKET}/aws"

            def aws_cp() -> int:
                cmd = [aws, "s3", "cp", "--quiet", "--endpoint-url", srv.endpoint, src, dst]
                subprocess.run(cmd, env=env, check=True)
                return size

            variants["aws s3 cp"] = aws_cp
        results = interleave(variants, args.runs, warmup=not args.quick)
        title = f"copy of {args.size_mib} MiB on the server"
        write_json(args.json, [report(title, results, "one CopyObject")])


if __name__ == "__main__":
    main()
