"""Clients sent to worker processes (DataLoader workers, Dask and Ray tasks): the pickle
carries where the credentials come from, never a secret key, session token or
authorization token; the worker fetches (and refreshes) its own."""

from __future__ import annotations

import multiprocessing
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from credential_helpers import SOURCES, MachineFactory, all_secrets, machine_factory
from datasets_helpers import make_shard

from objsdk import Client, Credentials
from objsdk.datasets import ShardDataset
from objsdk.testing import LocalMinio
from objsdk.testing.temporary_credentials import TemporaryCredentials

pytestmark = pytest.mark.minio_only


@pytest.fixture
def keys(local_minio: LocalMinio) -> TemporaryCredentials:
    return TemporaryCredentials.of(local_minio, lifetime=900)


@pytest.fixture
def machines(
    tmp_path: Path, local_minio: LocalMinio, keys: TemporaryCredentials
) -> Iterator[MachineFactory]:
    yield from machine_factory(tmp_path, local_minio, keys)


def _read_in_worker(job: tuple[bytes, str, str]) -> tuple[bytes, str]:
    """In a spawned process: unpickle the client, read the object, and say which access
    key signed."""
    data, bucket, key = job
    client: Client = pickle.loads(data)
    got = client.get_object(bucket, key)
    used = client.credentials
    assert used is not None
    return got, used.access_key


@pytest.mark.parametrize("kind", SOURCES)
def test_a_pickled_client_carries_its_source_and_the_worker_fetches_its_own_credentials(
    kind: str,
    machines: MachineFactory,
    keys: TemporaryCredentials,
    local_minio: LocalMinio,
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with local_minio.client() as root:
        root.put_object(bucket, "k", b"for the worker")
    machine = machines(kind)
    if kind == "container":  # the token in the environment, not in a file
        path = machine.env.pop("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
        machine.env["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = Path(path).read_text().strip()
    machine.apply(monkeypatch)
    with Client.from_env() as client:
        assert client.get_object(bucket, "k") == b"for the worker"
        mine = client.credentials
        data = pickle.dumps(client)
    for secret in all_secrets(machine, keys):
        assert secret.encode() not in data
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        got, theirs = pool.map(_read_in_worker, [(data, bucket, "k")])[0]
    assert got == b"for the worker"
    assert mine is not None
    if kind == "credential_process":  # the program prints the same set each time
        assert theirs == mine.access_key
    else:
        assert theirs != mine.access_key  # fetched in the worker
        assert theirs in {c.access_key for c in keys.issued}


def _not_picklable() -> Credentials:
    return Credentials("AK", "SK")


def test_a_client_whose_credentials_function_cannot_be_pickled_says_which() -> None:
    def local_function() -> Credentials:
        return Credentials("AK", "SK")

    with (
        Client("http://s3.test", credentials=local_function) as client,
        pytest.raises(pickle.PicklingError, match="local_function"),
    ):
        pickle.dumps(client)
    with Client("http://s3.test", credentials=_not_picklable) as client:
        clone = pickle.loads(pickle.dumps(client))
        assert clone.credentials == Credentials("AK", "SK")


def _iterate(dataset: ShardDataset, results: Any) -> None:
    used = dataset.client.credentials
    results.put(([sample["__key__"] for sample in dataset], used.access_key if used else None))


def test_a_dataset_spawned_into_a_worker_hands_over_the_role_not_a_snapshot(
    machines: MachineFactory,
    keys: TemporaryCredentials,
    local_minio: LocalMinio,
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with local_minio.client() as root:
        root.put_object(bucket, "shard-0.tar", make_shard(0, 5, size=100))
    machine = machines("web_identity")
    machine.apply(monkeypatch)
    with Client.from_env() as client:
        dataset = ShardDataset(client, f"{bucket}/shard-0.tar")
        mine = client.credentials
        context = multiprocessing.get_context("spawn")
        results = context.Queue()
        worker = context.Process(target=_iterate, args=(dataset, results))
        worker.start()
        samples, theirs = results.get(timeout=60)
        worker.join(30)
    assert worker.exitcode == 0
    assert len(samples) == 5
    assert mine is not None
    assert theirs != mine.access_key  # the worker assumed the role itself
    assert theirs in {c.access_key for c in keys.issued}
