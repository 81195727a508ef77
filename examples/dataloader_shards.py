"""A dataloader loop over WebDataset tar shards in a bucket, with 2 workers.

Starts a throw-away local MinIO, writes 12 shards of 40 samples each (``.jpg``-like bytes,
a ``.cls`` label and a ``.json``), then reads them with :class:`objsdk.datasets.ShardDataset`:

* with torch installed: ``torch.utils.data.DataLoader(ds, num_workers=2)``;
* without torch: two plain worker processes that each take their share with
  ``set_worker``, exactly as DataLoader workers would.

Then it stops after 100 samples of the next epoch, saves ``state_dict()``, and resumes in a
new dataset from where it stopped.

    python examples/dataloader_shards.py
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import tarfile
from collections import Counter
from typing import Any

from objsdk import Client, LocalMinio
from objsdk.datasets import ShardDataset, default_decoders

SHARDS, PER_SHARD = 12, 40


def make_shard(shard: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i in range(PER_SHARD):
            key = f"{shard:04d}{i:04d}"
            for suffix, data in (
                ("jpg", os.urandom(20_000)),
                ("cls", str(i % 10).encode()),
                ("json", json.dumps({"shard": shard, "index": i}).encode()),
            ):
                info = tarfile.TarInfo(f"{key}.{suffix}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def worker(ds: ShardDataset, index: int, out: Any) -> None:
    ds.set_worker(index, 2)  # what torch's get_worker_info() tells a DataLoader worker
    out.put([(s["__key__"], s["cls"]) for s in ds])


def one_epoch(ds: ShardDataset) -> list[tuple[str, int]]:
    try:
        from torch.utils.data import DataLoader
    except ImportError:
        ctx = multiprocessing.get_context("spawn")
        out = ctx.Queue()
        procs = [ctx.Process(target=worker, args=(ds, w, out)) for w in range(2)]
        for p in procs:
            p.start()
        samples = out.get(timeout=300) + out.get(timeout=300)
        for p in procs:
            p.join()
        return samples
    loader = DataLoader(ds, batch_size=None, num_workers=2)
    return [(s["__key__"], s["cls"]) for s in loader]


def main() -> None:
    with LocalMinio() as minio:
        # Workers get the dataset pickled, its Client without the secret key (the
        # default): they find the keys in the environment, as a deployment provides them.
        os.environ["AWS_ACCESS_KEY_ID"] = minio.access_key
        os.environ["AWS_SECRET_ACCESS_KEY"] = minio.secret_key
        client: Client = minio.client()
        client.create_bucket("train")
        for s in range(SHARDS):
            client.put_object("train", f"shards/shard-{s:06d}.tar", make_shard(s))

        ds = ShardDataset(
            client,
            "train/shards/shard-{000000..000011}.tar",
            shuffle_buffer=64,
            seed=42,
            decode=default_decoders(),
        )
        for epoch in range(2):
            ds.set_epoch(epoch)
            samples = one_epoch(ds)
            labels = Counter(label for _, label in samples)
            print(
                f"epoch {epoch}: {len(samples)} samples, first {samples[0][0]}, "
                f"labels {dict(labels)}"
            )
            assert len({k for k, _ in samples}) == SHARDS * PER_SHARD

        # Mid-epoch resume (single process here; each DataLoader worker saves its own slot).
        ds.set_epoch(2)
        it = iter(ds)
        seen = [next(it)["__key__"] for _ in range(100)]
        state = ds.state_dict()
        it.close()
        slot = state["slots"]["0/0"]
        print(f"stopped after 100 samples: shard #{slot['pos']} at byte {slot['offset']}")
        again = ShardDataset(
            client,
            "train/shards/shard-{000000..000011}.tar",
            shuffle_buffer=64,
            seed=42,
            decode=default_decoders(),
        )
        again.load_state_dict(json.loads(json.dumps(state)))  # survives a JSON round trip
        rest = [s["__key__"] for s in again]
        assert len(set(seen) | set(rest)) == SHARDS * PER_SHARD
        print(f"resumed: {len(rest)} more samples, none repeated")


if __name__ == "__main__":
    main()
