"""tests/torch/ runs under real torch, in its own venv (``make test-torch``); the main
venv has no torch, so there these files are not collected.

Shards for the tests: small (1 KiB samples) so that what is measured is the split,
not the bytes."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest
from datasets_helpers import make_tar

from objsdk import Client


def _have_torch() -> bool:
    # Not find_spec("torch"): pytest puts tests/ on sys.path, where this folder is a
    # namespace package named torch.
    try:
        return importlib.util.find_spec("torch.utils.data") is not None
    except ImportError:
        return False


if not _have_torch():
    collect_ignore_glob = ["test_*.py"]

N_SHARDS = 8
PER_SHARD = 20


def shard_bytes(shard: int, samples: int) -> bytes:
    members = []
    for i in range(samples):
        key = f"s{shard:03d}/{i:06d}"
        members.append((f"{key}.bin", os.urandom(1024)))
        members.append((f"{key}.cls", str(i % 10).encode()))
    return make_tar(members)


def all_keys(n_shards: int = N_SHARDS, per_shard: int | list[int] = PER_SHARD) -> list[str]:
    counts = per_shard if isinstance(per_shard, list) else [per_shard] * n_shards
    return sorted(f"s{s:03d}/{i:06d}" for s, n in enumerate(counts) for i in range(n))


def fill(client: Client, bucket: str, prefix: str, counts: list[int]) -> str:
    """Shards with ``counts[i]`` samples each under ``bucket/prefix``; returns the spec."""
    for s, n in enumerate(counts):
        client.put_object(bucket, f"{prefix}shard-{s:03d}.tar", shard_bytes(s, n))
    return f"{bucket}/{prefix}shard-{{000..{len(counts) - 1:03d}}}.tar"


@pytest.fixture(scope="module")
def shards(client: Client) -> Iterator[str]:
    """8 shards x 20 samples; yields the brace spec."""
    name = "torch-" + os.urandom(4).hex()
    client.create_bucket(name)
    yield fill(client, name, "train/", [PER_SHARD] * N_SHARDS)
    client.delete_objects(name, [e.key for e in client.list_objects(name)])
    client.delete_bucket(name)
