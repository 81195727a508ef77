"""Lines and small reads of one object: ``for line in client.open(...)`` and the 10 KiB
reads ``tarfile`` makes, against what a user would otherwise write.

Lines (a JSON-lines object of ``--lines`` short lines, ~47 bytes each):
  boto3 Body.iter_lines()          ``get_object(...)["Body"].iter_lines()`` (the baseline)
  ObjectFile lines                 ``for line in client.open(...)``
  ObjectFile.iter_lines()          ``client.open(...).iter_lines()`` (botocore's semantics)
  BufferedReader(ObjectFile) lines the same through ``io.BufferedReader(f, 1 MiB)``
Writing the same lines, one write each:
  BytesIO, then put_object         gathered in memory and sent in one PUT (the baseline)
  ObjectWriter lines               ``w.write(line)`` on ``client.open_write(...)``
  BufferedWriter(ObjectWriter)     the same through ``io.BufferedWriter(w, 1 MiB)``
Small reads (the same object):
  ObjectFile.read(10 KiB)          ``f.read(10240)`` until the end, as tarfile reads a stream
  BufferedReader.read(10 KiB)      the same through ``io.BufferedReader(f, 1 MiB)``

Client CPU is ``time.process_time()`` around each run (one process, interleaved).

    python perf/bench_lines.py [--lines 1000000] [--runs 5] [--json out.json]
"""

from __future__ import annotations

import io

from common import MiB, interleave, parser, report, server, write_json

BUCKET = "objsdk-perf"
SMALL_READ = 10240  # tarfile's record size (tarfile.RECORDSIZE)


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--lines", type=int, default=1_000_000)
    args = p.parse_args()
    data = b"".join(b'{"id": %d, "name": "row-%d", "v": 1.5}\n' % (i, i) for i in range(args.lines))
    key = f"lines-{args.lines}.jsonl"
    with server() as srv:
        client = srv.client
        srv.scratch_bucket(BUCKET)
        client.put_object(BUCKET, key, data)
        s3 = srv.boto3()

        def boto3_lines() -> int:
            body = s3.get_object(Bucket=BUCKET, Key=key)["Body"]
            # iter_lines() drops the line ends: count them back for the byte total.
            return sum(len(line) + 1 for line in body.iter_lines())

        def objectfile_lines() -> int:
            with client.open(BUCKET, key) as f:
                return sum(len(line) for line in f)

        def objectfile_iter_lines() -> int:
            with client.open(BUCKET, key) as f:
                return sum(len(line) + 1 for line in f.iter_lines())

        def buffered_lines() -> int:
            with io.BufferedReader(client.open(BUCKET, key), MiB) as f:
                return sum(len(line) for line in f)

        rows = data.splitlines(keepends=True)

        def bytesio_then_put() -> int:
            buf = io.BytesIO()
            for row in rows:
                buf.write(row)
            return client.put_object(BUCKET, "written", buf.getbuffer()).size or 0

        def writer_lines(buffered: bool) -> int:
            w = client.open_write(BUCKET, "written")
            with io.BufferedWriter(w, MiB) if buffered else w as out:
                for row in rows:
                    out.write(row)
            return w.info.size if w.info and w.info.size is not None else 0

        def small_reads(buffered: bool) -> int:
            n = 0
            with client.open(BUCKET, key) as raw:
                f = io.BufferedReader(raw, MiB) if buffered else raw
                while chunk := f.read(SMALL_READ):
                    n += len(chunk)
            return n

        lines = interleave(
            {
                "boto3 Body.iter_lines()": boto3_lines,
                "ObjectFile lines": objectfile_lines,
                "ObjectFile.iter_lines()": objectfile_iter_lines,
                "BufferedReader(ObjectFile) lines": buffered_lines,
            },
            args.runs,
        )
        writes = interleave(
            {
                "BytesIO, then put_object": bytesio_then_put,
                "ObjectWriter lines": lambda: writer_lines(False),
                "BufferedWriter(ObjectWriter) lines": lambda: writer_lines(True),
            },
            args.runs,
        )
        reads = interleave(
            {
                "ObjectFile.read(10 KiB)": lambda: small_reads(False),
                "BufferedReader.read(10 KiB)": lambda: small_reads(True),
            },
            args.runs,
        )
        for r in [*lines.values(), *writes.values(), *reads.values()]:
            assert r.nbytes == len(data), (r.name, r.nbytes)
        mib = len(data) / MiB
        sections = [
            report(
                f"{args.lines} lines ({mib:.0f} MiB), one pass each",
                lines,
                "boto3 Body.iter_lines()",
                targets={
                    "ObjectFile lines": ("boto3 Body.iter_lines()", 1.0),
                    "ObjectFile.iter_lines()": ("boto3 Body.iter_lines()", 1.0),
                },
            ),
            report(
                f"{args.lines} lines ({mib:.0f} MiB) written one at a time",
                writes,
                "BytesIO, then put_object",
            ),
            report(
                f"{mib:.0f} MiB in reads of {SMALL_READ} bytes",
                reads,
                "BufferedReader.read(10 KiB)",
            ),
        ]
        for section, results in ((sections[0], lines), (sections[1], writes)):
            per_line = {r.name: round(r.cpu_median / args.lines * 1e6, 3) for r in results.values()}
            section["client_cpu_us_per_line"] = per_line
            print(f"client CPU per line (us), {section['title']}:", per_line)
        write_json(args.json, sections)


if __name__ == "__main__":
    main()
