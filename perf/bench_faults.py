"""Reading through repeated connection cuts: the price of resuming.

A 1 GiB object is read with ``ObjectFile.read(1 MiB)`` through two Toxiproxy proxies
in front of the server: the baseline's ``limit_data`` toxic never fires (Toxiproxy moves
data through a slower path whenever a proxy has a toxic, so both variants pay that),
the other's cuts every connection after 64 MiB (about 16 resumes per read). Each faulty
read is checked byte for byte (SHA-256) against the fault-free one.

    python perf/bench_faults.py [--size-mib 1024] [--cut-mib 64] [--runs 5]
"""

from __future__ import annotations

import hashlib
import logging
from urllib.parse import urlsplit

from common import MiB, interleave, parser, report, server, upload_random, write_json

from objsdk import Client
from objsdk.testing.toxiproxy import Toxiproxy

BUCKET = "objsdk-perf"


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--cut-mib", type=int, default=64)
    args = p.parse_args()
    size = args.size_mib * MiB
    key = f"seq-{args.size_mib}m"
    logging.getLogger("objsdk").setLevel(logging.ERROR)  # resumes are expected here
    with server() as srv, Toxiproxy() as toxiproxy:
        srv.scratch_bucket(BUCKET)
        upload_random(srv.client, BUCKET, key, size)
        upstream = urlsplit(srv.endpoint).netloc
        clean = toxiproxy.create_proxy("clean", upstream)
        clean.add_toxic("limit_data", bytes=1 << 62)  # same data path, never cuts
        cut = toxiproxy.create_proxy("cut", upstream)
        cut.add_toxic("limit_data", bytes=args.cut_mib * MiB)
        via_clean = Client(clean.endpoint, srv.access_key, srv.secret_key)
        via_cut = Client(cut.endpoint, srv.access_key, srv.secret_key)
        digests: dict[str, set[str]] = {"clean": set(), "cut": set()}
        resumes: list[int] = []

        def read_all(client: Client, name: str) -> int:
            digest = hashlib.sha256()
            n = 0
            with client.open(BUCKET, key, max_resume=3) as f:
                while chunk := f.read(MiB):
                    digest.update(chunk)
                    n += len(chunk)
                if name == "cut":
                    resumes.append(f.stats.resumes)
            digests[name].add(digest.hexdigest())
            return n

        results = interleave(
            {
                "no faults (same proxy path)": lambda: read_all(via_clean, "clean"),
                f"cut every {args.cut_mib} MiB": lambda: read_all(via_cut, "cut"),
            },
            args.runs,
        )
        assert len(digests["clean"]) == 1, "fault-free reads disagree"
        assert digests["cut"] == digests["clean"], "a read through cuts differs"
        print(f"byte-identical under cuts: yes; resumes per read: {sorted(set(resumes))}")
        section = report(
            f"Sequential read of {args.size_mib} MiB with the connection cut every "
            f"{args.cut_mib} MiB",
            results,
            "no faults (same proxy path)",
            targets={f"cut every {args.cut_mib} MiB": ("no faults (same proxy path)", 0.7)},
        )
        section["resumes_per_read"] = sorted(set(resumes))
        write_json(args.json, [section])


if __name__ == "__main__":
    main()
