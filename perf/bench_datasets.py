"""Iterating WebDataset tar shards: ShardDataset vs local tarfile vs the webdataset package.

``--shards`` shards of ``--samples`` samples (a ``.bin`` of ``--sample-kib`` KiB plus a
``.cls``; 20 x 500 x 100 KiB is about 1 GB) are read in one process, in order, as samples:
  local tarfile in /dev/shm   the same shards from local files in memory, with tarfile
  webdataset (pipe:curl)      ``webdataset.WebDataset`` over ``pipe:curl`` presigned URLs
  objsdk ShardDataset         ``ShardDataset(client, shards, shuffle_shards=False)`` with
                              the default ``readahead=None`` (the client's adaptive
                              read-ahead), and fixed at ``readahead=0`` (one stream per
                              shard) and ``readahead=6`` (6 parallel parts)

With torch installed (``make bench-datasets`` runs it so: perf/datasets_venv.py), the
same shards again through ``torch.utils.data.DataLoader`` with ``--loader-workers``
workers (default 2), samples/s with the CPU of the workers counted: ShardDataset at its
defaults, ``readahead=0`` and ``readahead=6``; ``webdataset.WebDataset`` over ``pipe:curl``
and over the shards' files in /dev/shm (the loader's own ceiling: no network at all); and
AWS's ``s3torchconnector`` ``S3IterableDataset`` with webdataset's tar expander, if it is
installed (it takes a custom endpoint). The loader's ceiling where the server shares the
machine's cores is measured too: webdataset over the files in /dev/shm while
perf/paced_read.py, a process beside it, reads the same bytes from the server at the
rate ShardDataset's last run read them (the server's and the receiving's work, without
a loader).

Then the network profile: a Toxiproxy in front of MinIO adds ``--latency-ms`` to every
response and caps every connection at ``--bandwidth-mbs`` MB/s (toxics are per connection,
as a remote store's per-stream limits are); ``--net-shards`` shards of the same set are read
through it by webdataset and by ShardDataset at its defaults and at fixed levels
(``FIXED_LEVELS``: 6 and the adaptive cap, 16); the defaults are judged against the
fastest fixed level of the run.

    python perf/bench_datasets.py [--shards 20] [--samples 500] [--sample-kib 100]
        [--runs 5] [--net-shards 4] [--latency-ms 25] [--bandwidth-mbs 25] [--json out.json]
        [--loader-workers 2] [--quick]

``--quick``: 4 shards x 40 samples of 16 KiB, one run, 2 network shards: checks that the
script runs, measures nothing.
"""

from __future__ import annotations

import os
import resource
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import (
    Result,
    interleave,
    parser,
    report,
    server,
    verdict,
    write_json,
)

from objsdk import Client
from objsdk.datasets import ShardDataset

BUCKET = "objsdk-perf"
LOCAL_LOADER = "webdataset (/dev/shm files)"
LOADED_LOADER = "webdataset (/dev/shm + server)"
SHM = "/dev/shm" if os.path.isdir("/dev/shm") else None
# Fixed read-ahead levels the network profile measures beside the defaults.
FIXED_LEVELS = (6, 16)


def build_shards(directory: Path, shards: int, samples: int, sample_size: int) -> list[Path]:
    """Shards of random samples (no two payloads alike) under ``directory``."""
    block = os.urandom(sample_size + 4096)
    paths = []
    for s in range(shards):
        path = directory / f"shard-{s:06d}.tar"
        with path.open("wb") as f, tarfile.open(fileobj=f, mode="w") as tar:
            for i in range(samples):
                key = f"{s:06d}{i:06d}"
                start = (s * samples + i) % 4096
                for name, data in (
                    (f"{key}.bin", block[start : start + sample_size]),
                    (f"{key}.cls", str(i % 1000).encode()),
                ):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, _Bytes(data))
        paths.append(path)
    return paths


class _Bytes:
    """A minimal file over bytes for TarFile.addfile (no BytesIO copy)."""

    def __init__(self, data: bytes) -> None:
        self.view = memoryview(data)

    def read(self, n: int = -1) -> bytes:
        out, self.view = (self.view, self.view[:0]) if n < 0 else (self.view[:n], self.view[n:])
        return bytes(out)


def payload(sample: dict[str, Any]) -> int:
    return sum(len(v) for k, v in sample.items() if not k.startswith("__"))


def read_local(paths: list[Path]) -> tuple[int, int]:
    """Samples from local tar files with tarfile, grouped by key like WebDataset."""
    nbytes = count = 0
    for path in paths:
        with tarfile.open(path, mode="r|") as tar:
            key = None
            for m in tar:
                if not m.isreg():
                    continue
                base = m.name.partition(".")[0]
                f = tar.extractfile(m)
                assert f is not None
                data = f.read()
                if base != key:
                    key, count = base, count + 1
                nbytes += len(data)
    return nbytes, count


def read_webdataset(urls: list[str]) -> tuple[int, int]:
    import webdataset as wds

    nbytes = count = 0
    for sample in wds.WebDataset(urls, shardshuffle=False, empty_check=False):
        nbytes += payload(sample)
        count += 1
    return nbytes, count


#: variant name -> the read-ahead each shard's reader ended at, in its last run
LEVELS: dict[str, list[int]] = {}


def read_objsdk(client: Client, specs: list[str], name: str, **options: Any) -> tuple[int, int]:
    nbytes = count = 0
    ds = ShardDataset(client, specs, shuffle_shards=False, **options)
    for sample in ds:
        nbytes += payload(sample)
        count += 1
    LEVELS[name] = [r.stats.readahead for r in ds.reads]
    return nbytes, count


def children_cpu() -> float:
    """CPU seconds of this process's finished children (DataLoader workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: variant name -> CPU seconds of its DataLoader workers, per run
WORKER_CPU: dict[str, list[float]] = {}


def in_loader(name: str, dataset: Any, workers: int) -> tuple[int, int]:
    """Samples of ``dataset`` through a DataLoader with ``workers`` workers."""
    from torch.utils.data import DataLoader

    nbytes = count = 0
    before = children_cpu()
    for sample in DataLoader(dataset, batch_size=None, num_workers=workers):
        nbytes += payload(sample)
        count += 1
    WORKER_CPU.setdefault(name, []).append(children_cpu() - before)
    return nbytes, count


def webdataset_loader(urls: list[str], workers: int, name: str) -> tuple[int, int]:
    import webdataset as wds

    ds = wds.WebDataset(urls, shardshuffle=False, empty_check=False, nodesplitter=None)
    return in_loader(name, ds, workers)


def s3torchconnector_dataset(endpoint: str, keys: list[str]) -> Any:
    """``S3IterableDataset`` over the shards, tar-expanded and grouped by webdataset (the
    way s3torchconnector's own examples read shards), or the reason it cannot run."""
    import webdataset as wds
    from s3torchconnector import S3ClientConfig, S3IterableDataset
    from webdataset.tariterators import group_by_keys, tar_file_expander

    uris = [f"s3://{BUCKET}/{k}" for k in keys]

    def as_stream(reader: Any) -> dict[str, Any]:
        return {"url": reader.key, "stream": reader}

    ds = S3IterableDataset.from_objects(
        uris,
        region="us-east-1",
        endpoint=endpoint,
        transform=as_stream,
        s3client_config=S3ClientConfig(force_path_style=True),
    )
    # The streams are open already: expand and group them (webdataset 1.0's
    # tarfile_to_samples would open each "url" again as a local path).
    return wds.DataPipeline(ds, lambda streams: group_by_keys(tar_file_expander(streams)))


class Pacer:
    """perf/paced_read.py in a child process: the server's work beside a loader."""

    def __init__(self, srv: Any, keys: list[str]) -> None:
        env = {**os.environ, **srv.env()}
        script = Path(__file__).with_name("paced_read.py")
        self.proc = subprocess.Popen(
            [sys.executable, str(script), BUCKET, *keys],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.cpu: list[float] = []  # the reading process's CPU seconds, per run

    def _say(self, line: str) -> str:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def alongside(
        self, fn: Callable[[], tuple[int, int]], rate: float, total: int
    ) -> tuple[int, int]:
        """``fn()`` while ``total`` bytes are read from the server at ``rate`` bytes/s."""
        if self._say(f"{rate} {total}") != "started":
            raise RuntimeError("perf/paced_read.py did not start")
        try:
            return fn()
        finally:
            self.cpu.append(float(self._say("stop").split()[1]))

    def close(self) -> None:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.proc.stdout.close()


def loader_section(
    client: Client, srv: Any, specs: list[str], keys: list[str], paths: list[Path], args: Any
) -> dict[str, object]:
    workers = args.loader_workers
    urls = curl_urls(client, keys)
    local = [str(p) for p in paths]
    total = sum(p.stat().st_size for p in paths)
    variants: dict[str, Callable[[], tuple[int, int]]] = {
        # The loader's own ceiling here: the same samples from files in memory, through
        # the same workers and the same hand-over to the main process.
        LOCAL_LOADER: lambda: webdataset_loader(local, workers, LOCAL_LOADER),
        "webdataset (pipe:curl)": lambda: webdataset_loader(
            urls, workers, "webdataset (pipe:curl)"
        ),
    }
    rate: list[float] = []  # bytes/s of the defaults' last run

    def defaults() -> tuple[int, int]:
        start = time.perf_counter()
        ds = ShardDataset(client, specs, shuffle_shards=False)
        done = in_loader("objsdk ShardDataset", ds, workers)
        rate[:] = [total / (time.perf_counter() - start)]
        return done

    variants["objsdk ShardDataset"] = defaults
    for name, options in (
        ("objsdk ShardDataset readahead=0", {"readahead": 0}),
        ("objsdk ShardDataset readahead=6", {"readahead": 6}),
    ):
        variants[name] = lambda o=options, n=name: in_loader(  # type: ignore[misc]
            n, ShardDataset(client, specs, shuffle_shards=False, **o), workers
        )
    # The loader's ceiling where the server shares its cores (the warm-up runs the
    # defaults first, so a rate is known).
    pacer = Pacer(srv, keys)
    variants[LOADED_LOADER] = lambda: pacer.alongside(
        lambda: webdataset_loader(local, workers, LOADED_LOADER), rate[0], total
    )
    try:
        os.environ.setdefault("AWS_ACCESS_KEY_ID", srv.access_key)
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", srv.secret_key)
        s3t = s3torchconnector_dataset(client.endpoint.url, keys)
        variants["s3torchconnector"] = lambda: in_loader("s3torchconnector", s3t, workers)
    except Exception as e:  # not installed, or refuses this endpoint: say so, go on
        print(f"s3torchconnector: not measured ({type(e).__name__}: {e})")
    try:
        results, counts = run(variants, args.runs)
    finally:
        pacer.close()
    section = report(
        f"DataLoader, {workers} workers, local MinIO",
        results,
        "webdataset (pipe:curl)",
        targets={"objsdk ShardDataset": ("webdataset (pipe:curl)", 1.5)},
    )
    more = [("objsdk ShardDataset readahead=0", 0.95)]
    if "s3torchconnector" in results:
        more.append(("s3torchconnector", 1.2))
    section["targets"] = [
        *section["targets"],  # type: ignore[misc]
        *(verdict(results, "objsdk ShardDataset", b, m) for b, m in more),
    ]
    section["samples_per_s"] = samples_line(results, counts)
    ceiling = results[LOADED_LOADER].median
    print(
        f"  the loader's ceiling with the server busy beside it: {ceiling:.3f} s, "
        f"{results['webdataset (pipe:curl)'].median / ceiling:.2f}x webdataset (pipe:curl); "
        f"objsdk ShardDataset {ceiling / results['objsdk ShardDataset'].median:.2f}x it "
        f"(the reading process beside it: {sorted(pacer.cpu)[len(pacer.cpu) // 2]:.3f} CPU s)"
    )
    section["loaded_ceiling_s"] = round(ceiling, 4)
    section["worker_cpu_s"] = {}
    for name, cpu in WORKER_CPU.items():
        median = sorted(cpu)[len(cpu) // 2]
        print(f"  {name:<32} worker cpu s {median:8.3f} (median of {len(cpu)}, warm-up included)")
        section["worker_cpu_s"][name] = round(median, 3)  # type: ignore[index]
    WORKER_CPU.clear()
    return section


def levels_line(section: dict[str, object]) -> None:
    """Print (and keep in ``section``) the read-ahead each ShardDataset variant's shards
    ended at, as ``{level: shards}``."""
    out = {}
    for name, levels in LEVELS.items():
        counts: dict[int, int] = {}
        for level in levels:
            counts[level] = counts.get(level, 0) + 1
        out[name] = dict(sorted(counts.items()))
        print(f"  {name:<32} read-ahead per shard (level: shards) {out[name]}")
    section["readahead_levels"] = out
    LEVELS.clear()


def curl_urls(client: Client, keys: list[str]) -> list[str]:
    return [
        "pipe:curl -s -f " + shlex.quote(client.presign("GET", BUCKET, k, expires=6 * 3600))
        for k in keys
    ]


def run(
    variants: dict[str, Callable[[], tuple[int, int]]], runs: int
) -> tuple[dict[str, Result], dict[str, int]]:
    counts: dict[str, int] = {}

    def counted(name: str, fn: Callable[[], tuple[int, int]]) -> Callable[[], int]:
        def go() -> int:
            nbytes, counts[name] = fn()
            return nbytes

        return go

    results = interleave({n: counted(n, fn) for n, fn in variants.items()}, runs)
    return results, counts


def samples_line(results: dict[str, Result], counts: dict[str, int]) -> dict[str, float]:
    rates = {n: counts[n] / r.median for n, r in results.items()}
    for n, rate in rates.items():
        print(f"  {n:<32} {rate:>9.0f} samples/s")
    return {n: round(v, 1) for n, v in rates.items()}


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--shards", type=int, default=20)
    p.add_argument("--samples", type=int, default=500)
    p.add_argument("--sample-kib", type=int, default=100)
    p.add_argument("--net-shards", type=int, default=4)
    p.add_argument("--latency-ms", type=int, default=25)
    p.add_argument("--bandwidth-mbs", type=int, default=25)
    p.add_argument("--skip-network", action="store_true")
    p.add_argument("--loader-workers", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="a tiny run: does the script work")
    args = p.parse_args()
    if args.quick:
        args.shards, args.samples, args.sample_kib, args.runs, args.net_shards = 4, 40, 16, 1, 2
    tmp = Path(tempfile.mkdtemp(prefix="objsdk-perf-shards-", dir=SHM))
    sections = []
    try:
        paths = build_shards(tmp, args.shards, args.samples, args.sample_kib * 1024)
        keys = [f"shards-{args.sample_kib}k/{p.name}" for p in paths]
        expected = args.shards * args.samples
        with server() as srv:
            client = srv.client
            srv.scratch_bucket(BUCKET)
            for path, key in zip(paths, keys, strict=True):
                client.upload(BUCKET, key, path)
            specs = [f"{BUCKET}/{k}" for k in keys]
            urls = curl_urls(client, keys)
            total_mb = sum(p.stat().st_size for p in paths) / 1e6
            print(f"{args.shards} shards, {expected} samples, {total_mb:.0f} MB")
            results, counts = run(
                {
                    "local tarfile in /dev/shm": lambda: read_local(paths),
                    "webdataset (pipe:curl)": lambda: read_webdataset(urls),
                    "objsdk ShardDataset": lambda: read_objsdk(
                        client, specs, "objsdk ShardDataset"
                    ),
                    "objsdk ShardDataset readahead=0": lambda: read_objsdk(
                        client, specs, "objsdk ShardDataset readahead=0", readahead=0
                    ),
                    "objsdk ShardDataset readahead=6": lambda: read_objsdk(
                        client, specs, "objsdk ShardDataset readahead=6", readahead=6
                    ),
                },
                args.runs,
            )
            assert all(c == expected for c in counts.values()), counts
            section = report(
                f"{args.shards} shards x {args.samples} samples of {args.sample_kib} KiB, "
                "local MinIO",
                results,
                "webdataset (pipe:curl)",
                targets={
                    "objsdk ShardDataset": ("webdataset (pipe:curl)", 1.2),
                },
            )
            local = results["local tarfile in /dev/shm"].median
            section["vs_local"] = {}
            for name in (
                "objsdk ShardDataset",
                "objsdk ShardDataset readahead=0",
                "objsdk ShardDataset readahead=6",
            ):
                vs_local = local / results[name].median
                print(
                    f"target: {name} >= 0.8x local tarfile in /dev/shm: "
                    f"{vs_local:.2f}x {'PASS' if vs_local >= 0.8 else 'MISS'}"
                )
                section["vs_local"][name] = round(vs_local, 3)
            section["samples_per_s"] = samples_line(results, counts)
            levels_line(section)
            sections.append(section)
            try:
                import torch  # noqa: F401
            except ImportError:
                print("\ntorch is not installed: no DataLoader section (docs/datasets.md)")
            else:
                sections.append(loader_section(client, srv, specs, keys, paths, args))
            if not args.skip_network:
                sections.append(network(srv, keys[: args.net_shards], args))
        write_json(args.json, sections)
    finally:
        shutil.rmtree(tmp)


def network(srv: Any, keys: list[str], args: Any) -> dict[str, object]:
    from objsdk.testing import Toxiproxy

    assert srv.minio is not None, "the network profile needs the local MinIO"
    with Toxiproxy() as toxiproxy:
        proxy = toxiproxy.create_proxy("minio-net", upstream=f"{srv.minio.host}:{srv.minio.port}")
        proxy.add_toxic("latency", latency=args.latency_ms)
        proxy.add_toxic("bandwidth", rate=args.bandwidth_mbs * 1000)
        with Client(proxy.endpoint, srv.access_key, srv.secret_key) as slow:
            specs = [f"{BUCKET}/{k}" for k in keys]
            urls = curl_urls(slow, keys)
            variants: dict[str, Callable[[], tuple[int, int]]] = {
                "webdataset (pipe:curl)": lambda: read_webdataset(urls),
                "objsdk ShardDataset": lambda: read_objsdk(slow, specs, "objsdk ShardDataset"),
            }
            for level in FIXED_LEVELS:
                name = f"objsdk ShardDataset readahead={level}"
                variants[name] = lambda name=name, level=level: read_objsdk(
                    slow, specs, name, readahead=level
                )
            results, counts = run(variants, args.runs)
        assert len(set(counts.values())) == 1, counts
        fixed = [f"objsdk ShardDataset readahead={level}" for level in FIXED_LEVELS]
        best = min(fixed, key=lambda name: results[name].median)
        section = report(
            f"network profile ({args.latency_ms} ms, {args.bandwidth_mbs} MB/s per connection), "
            f"{len(keys)} shards",
            results,
            "webdataset (pipe:curl)",
            targets={"objsdk ShardDataset": ("webdataset (pipe:curl)", 3.0)},
        )
        # The defaults against the best fixed level of this run (the 0.9x).
        section["targets"] = [
            *section["targets"],  # type: ignore[misc]
            verdict(results, "objsdk ShardDataset", best, 0.9),
        ]
        section["samples_per_s"] = samples_line(results, counts)
        levels_line(section)
        return section


if __name__ == "__main__":
    main()
