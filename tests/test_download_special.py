"""Downloads to a path that is not a regular file.

* A device or a FIFO (``/dev/null``, ``/dev/stdout``, a named pipe) receives the object's
  bytes in order, written into it: it is never replaced by a file (a temp file renamed
  over ``/dev/null`` would replace the device for every program on the machine).
  The bytes are still verified; a mismatch raises after they went out.
* A directory at the destination is refused before anything is fetched or written.
* An empty destination is refused.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from s3_helpers import drain
from user_env import without_aws

import objsdk
from objsdk import Client
from objsdk.testing import S3Features

pytestmark = pytest.mark.integration

MiB = 1 << 20
CLI = [sys.executable, "-m", "objsdk.cli"]


def hidden_files(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith("."))


@pytest.mark.parametrize("size", [0, 5, 3 * MiB + 7])
def test_a_fifo_receives_the_object_in_order_and_stays_a_fifo(
    client: Client, bucket: str, tmp_path: Path, size: int, s3_features: S3Features
) -> None:
    data = os.urandom(size)
    client.put_object(bucket, "k", data)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader, got = drain(fifo)
    result = client.download(bucket, "k", fifo)
    reader.join(10)
    assert bytes(got) == data
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert hidden_files(tmp_path) == []
    assert result.info.size == size
    assert result.bytes_fetched == size
    if size and s3_features.stores_put_checksum:
        assert result.verified == "crc32c"


def test_parts_in_flight_still_reach_a_fifo_in_order(
    client: Client, bucket: str, tmp_path: Path
) -> None:
    data = os.urandom(9 * MiB)
    client.put_object(bucket, "k", data)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader, got = drain(fifo)
    client.download(bucket, "k", fifo, parallel=4, part_size=MiB)
    reader.join(10)
    assert bytes(got) == data


def test_dev_null_takes_the_bytes_and_stays_the_null_device(
    client: Client, bucket: str, s3_features: S3Features
) -> None:
    client.put_object(bucket, "k", os.urandom(2 * MiB))
    result = client.download(bucket, "k", os.devnull)
    mode = os.lstat(os.devnull).st_mode
    assert stat.S_ISCHR(mode), "/dev/null was replaced"
    assert result.info.size == 2 * MiB
    assert result.verified == ("crc32c" if s3_features.stores_put_checksum else None)


def test_a_directory_at_the_destination_is_refused_before_anything_is_fetched(
    client: Client, bucket: str, tmp_path: Path
) -> None:
    client.put_object(bucket, "k", os.urandom(MiB))
    target = tmp_path / "d"
    target.mkdir()
    seen: list[int] = []
    with pytest.raises(IsADirectoryError, match=f"bucket '{bucket}', key 'k'") as info:
        client.download(bucket, "k", target, progress=lambda done, total: seen.append(done))
    assert info.value.filename == str(target)
    assert seen == []
    assert hidden_files(tmp_path) == []
    assert os.listdir(target) == []


def test_an_empty_destination_is_refused(client: Client, bucket: str, tmp_path: Path) -> None:
    client.put_object(bucket, "k", b"x")
    with pytest.raises(objsdk.InvalidArgument, match=f"dest.*bucket '{bucket}', key 'k'"):
        client.download(bucket, "k", "")


def test_cp_to_dev_null_and_to_a_fifo(
    client: Client, bucket: str, local_minio, tmp_path: Path
) -> None:
    data = os.urandom(3 * MiB)
    client.put_object(bucket, "k", data)
    env = {
        **without_aws(),
        "HOME": str(tmp_path),
        "AWS_ENDPOINT_URL": local_minio.endpoint,
        "AWS_ACCESS_KEY_ID": local_minio.access_key,
        "AWS_SECRET_ACCESS_KEY": local_minio.secret_key,
    }

    def cp(dest: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [*CLI, "cp", f"s3://{bucket}/k", dest], env=env, capture_output=True, timeout=60
        )

    before = os.stat(os.devnull)
    done = cp(os.devnull)
    assert done.returncode == 0, done.stderr.decode()
    after = os.stat(os.devnull)
    assert stat.S_ISCHR(after.st_mode), "/dev/null was replaced"
    # The object's date is a file's; a device keeps its own (and only root may set it).
    assert after.st_mtime_ns == before.st_mtime_ns
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader, got = drain(fifo)
    done = cp(str(fifo))
    reader.join(10)
    assert done.returncode == 0, done.stderr.decode()
    assert bytes(got) == data
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
