"""A map-style Dataset whose ``__getitem__`` reads an object with ``open().read()``, in
fork DataLoader workers that inherit the main process's warmed client: every item is its
own object's bytes, read in one request (a forked worker never reads on a connection it
inherited, where a sibling's answer would take the place of its own, or never come)."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator

import pytest
from torch.utils.data import DataLoader, Dataset

from objsdk import Client

ITEMS = 64
SIZE = 4 * 1024  # small: many requests a second, so a shared socket shows soon


def content(i: int) -> bytes:
    seed = hashlib.sha256(str(i).encode()).digest()
    return (seed * (SIZE // len(seed) + 1))[:SIZE]


class Objects(Dataset[tuple[int, bytes, int]]):
    def __init__(self, client: Client, bucket: str) -> None:
        self.client = client
        self.bucket = bucket

    def __len__(self) -> int:
        return ITEMS

    def __getitem__(self, i: int) -> tuple[int, bytes, int]:
        with self.client.open(self.bucket, f"item-{i}") as f:
            return i, f.read(), f.stats.requests


@pytest.fixture(scope="module")
def objects(client: Client) -> Iterator[str]:
    name = "fork-map-" + os.urandom(4).hex()
    client.create_bucket(name)
    for i in range(ITEMS):
        client.put_object(name, f"item-{i}", content(i))
    yield name
    client.delete_objects(name, [f"item-{i}" for i in range(ITEMS)])
    client.delete_bucket(name)


def test_fork_workers_over_a_map_style_dataset_each_read_their_own_objects(
    client: Client, objects: str
) -> None:
    with Client.from_config(client.config) as shared:
        ds = Objects(shared, objects)
        for i in range(4):  # warm the client the workers inherit, in both pools
            assert ds[i][1] == content(i)
        wrong = []
        epochs = 0
        stop = time.monotonic() + 8.0
        while epochs < 2 or time.monotonic() < stop:
            epochs += 1
            loader = DataLoader(
                ds,
                batch_size=None,
                shuffle=True,
                num_workers=2,
                multiprocessing_context="fork",
                prefetch_factor=8,
                timeout=120,
            )
            seen = []
            for i, data, requests in loader:
                seen.append(int(i))
                if bytes(data) != content(int(i)) or requests != 1:
                    wrong.append((int(i), int(requests)))
            assert sorted(seen) == list(range(ITEMS))
    assert wrong == []
