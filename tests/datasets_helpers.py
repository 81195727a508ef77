"""Shard builders shared by the dataset tests (in-memory WebDataset tars)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile


def sample_bytes(shard: int, index: int, size: int = 5000) -> bytes:
    """Deterministic, incompressible-looking payload for one sample."""
    seed = hashlib.sha256(f"{shard}/{index}".encode()).digest()
    n = size + (index * 37) % 2000
    return (seed * (n // len(seed) + 1))[:n]


def make_tar(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def shard_members(shard: int, samples: int, size: int = 5000) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for i in range(samples):
        key = f"s{shard:03d}/{i:06d}"
        out.append((f"{key}.jpg", sample_bytes(shard, i, size)))
        out.append((f"{key}.cls", str(i % 10).encode()))
        out.append((f"{key}.json", json.dumps({"shard": shard, "i": i}).encode()))
    return out


def make_shard(shard: int, samples: int, size: int = 5000) -> bytes:
    return make_tar(shard_members(shard, samples, size))


def expected_samples(n_shards: int, samples: int, size: int = 5000) -> dict[str, bytes]:
    """``__key__`` -> jpg bytes for every sample of every shard."""
    return {
        f"s{s:03d}/{i:06d}": sample_bytes(s, i, size)
        for s in range(n_shards)
        for i in range(samples)
    }
