"""ShardDataset under DistributedDataParallel-style jobs on gloo: ranks started by
torchrun and by mp.spawn (no RANK/WORLD_SIZE in the environment), DataLoader workers in
each rank, an all_reduce per step with a short timeout (a rank that runs out of samples
early leaves the others waiting: the job fails instead of passing)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter

import pytest
from conftest import N_SHARDS, PER_SHARD, all_keys, fill

from objsdk.datasets import build_index

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")

SCRIPT = r"""
import json, os, sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader

from objsdk import Client
from objsdk.datasets import ShardDataset


def run(rank, world, args):
    endpoint, access, secret, spec, out, workers, context, port = args
    if port:  # mp.spawn: the rank is given, nothing is in the environment
        assert "RANK" not in os.environ and "WORLD_SIZE" not in os.environ
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
            timeout=timedelta(seconds=20),
        )
    else:  # torchrun: RANK, WORLD_SIZE, MASTER_ADDR... in the environment
        dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank, world = dist.get_rank(), dist.get_world_size()
    ds = ShardDataset(Client(endpoint, access, secret), spec, seed=2)
    workers = int(workers)
    dl = DataLoader(
        ds, batch_size=None, num_workers=workers,
        multiprocessing_context=context if workers else None,
    )
    keys = []
    for epoch in range(2):
        ds.set_epoch(epoch)
        got = []
        for sample in dl:
            got.append(sample["__key__"])
            step = torch.ones(1)
            dist.all_reduce(step)  # every rank takes every step, or this waits
            assert step.item() == world
        keys.append(got)
    dist.barrier()
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"world": world, "epochs": keys}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    mode, world, *args = sys.argv[1:]
    if mode == "spawn":
        mp.spawn(run, args=(int(world), args), nprocs=int(world), join=True)
    else:
        run(None, None, args)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_job(tmp_path, local_minio, spec, *, mode, world, workers, context):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    args = [
        local_minio.endpoint,
        local_minio.access_key,
        local_minio.secret_key,
        spec,
        str(tmp_path),
        str(workers),
        context,
    ]
    if mode == "spawn":
        cmd = [sys.executable, str(script), "spawn", str(world), *args, str(free_port())]
    else:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={world}",
            str(script),
            "torchrun",
            str(world),
            *args,
            "",
        ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    assert all(r["world"] == world for r in ranks)
    return [r["epochs"] for r in ranks]


def test_mp_spawn_ranks_with_spawn_workers_split_the_data_instead_of_each_reading_all(
    tmp_path, local_minio, shards
):
    ranks = run_job(
        tmp_path, local_minio, shards, mode="spawn", world=2, workers=2, context="spawn"
    )
    for epoch in range(2):
        per_rank = [set(r[epoch]) for r in ranks]
        assert not per_rank[0] & per_rank[1]
        assert sorted(per_rank[0] | per_rank[1]) == all_keys(N_SHARDS, PER_SHARD)


UNEVEN = [40] * 6 + [23]


@pytest.fixture(scope="module")
def uneven(client) -> str:
    """Seven shards, the last one short (6 x 40 + 23), indexed."""
    name = "ddp-" + os.urandom(4).hex()
    client.create_bucket(name)
    spec = fill(client, name, "u/", UNEVEN)
    build_index(client, spec)
    yield spec
    client.delete_objects(name, [e.key for e in client.list_objects(name)])
    client.delete_bucket(name)


@pytest.mark.parametrize(
    ("mode", "world", "workers", "context"),
    [("torchrun", 2, 2, "fork"), ("spawn", 3, 2, "forkserver"), ("torchrun", 3, 0, "")],
)
def test_uneven_shards_give_every_rank_the_same_steps_and_every_sample(
    tmp_path, local_minio, uneven, mode, world, workers, context
):
    ranks = run_job(
        tmp_path, local_minio, uneven, mode=mode, world=world, workers=workers, context=context
    )
    total = sum(UNEVEN)
    for epoch in range(2):
        counts = [len(r[epoch]) for r in ranks]
        assert counts == [-(-total // world)] * world
        seen = Counter(k for r in ranks for k in r[epoch])
        assert sorted(seen) == all_keys(len(UNEVEN), UNEVEN)
        assert sum(seen.values()) - total <= world - 1
    assert ranks[0][0] != ranks[0][1]  # epochs differ
