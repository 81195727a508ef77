"""Downloads to a filesystem that is full, or fills up on the way.

A small tmpfs stands for the full disk (``mount -t tmpfs -o size=2m``; the tests skip,
saying why, where mounting is not allowed). Whatever the point at which the space runs
out (before the resume record, in the middle of the bytes):

* the call fails with :class:`objsdk.LocalWriteError` (an ``OSError`` with the errno, and
  an ``ObjsdkError``) naming the bucket, the key and the destination, not a bare
  ``OSError`` from a write deep inside;
* nothing is left under the final name;
* once space is freed, the same call completes with the object's bytes.

The same holds for the command line: ``objsdk cp`` of one object says so in one line
naming the object and the file (exit 1, no traceback) and the rerun completes; on the
small-object path (listed objects up to 8 MiB, ``cp -r``) each failed file is reported
by name and no temporary file is left.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest
from cli_helpers import COMMAND, env

import objsdk
from objsdk import Client
from objsdk._transfer.holes import punch_hole

__all__ = ["env"]  # fixture, used by name

pytestmark = pytest.mark.integration

MiB = 1 << 20


class SmallDisk:
    """A tmpfs mounted at ``path``, of a size that can be changed while mounted."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def resize(self, size: str) -> None:
        subprocess.run(
            ["mount", "-o", f"remount,size={size}", str(self.path)],
            check=True,
            capture_output=True,
        )

    def fill(self) -> Path:
        """Take every free byte with one file; return it (delete it to free the space)."""
        filler = self.path / "filler"
        with open(filler, "wb", buffering=0) as f, pytest.raises(OSError, match="No space left"):
            _write_until_full(f)
        return filler

    def names(self) -> list[str]:
        return sorted(os.listdir(self.path))


def _write_until_full(f: BinaryIO) -> None:
    while True:
        f.write(b"\0" * (64 << 10))


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    path = tmp_path / "disk"
    path.mkdir()
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
    except FileNotFoundError:
        pytest.skip("no mount command: cannot make a small filesystem to fill")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root): {mounted.stderr.strip()}")
    try:
        yield SmallDisk(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def assert_names_the_download(err: BaseException, bucket: str, key: str, dest: Path) -> None:
    assert isinstance(err, objsdk.LocalWriteError)
    assert isinstance(err, objsdk.ObjsdkError)
    assert isinstance(err, OSError)
    assert err.errno == errno.ENOSPC
    message = str(err)
    assert f"s3://{bucket}/{key}" in message, message
    assert str(dest) in message, message
    assert "No space left on device" in message


def test_a_download_that_fills_the_disk_is_a_named_error_and_resumes_once_space_is_freed(
    client: Client, bucket: str, disk: SmallDisk
) -> None:
    data = os.urandom(5 * MiB)  # more than the 2 MiB disk holds
    client.put_object(bucket, "big.bin", data)
    dest = disk.path / "big.bin"
    with pytest.raises(objsdk.ObjsdkError) as caught:
        client.download(bucket, "big.bin", dest, parallel=1, part_size=MiB)
    assert_names_the_download(caught.value, bucket, "big.bin", dest)
    assert not dest.exists()  # nothing under the final name
    disk.resize("16m")
    result = client.download(bucket, "big.bin", dest, parallel=1, part_size=MiB)
    assert result.parts_reused >= 1  # the part that fitted was kept
    assert hashlib.sha256(dest.read_bytes()).digest() == hashlib.sha256(data).digest()
    assert disk.names() == ["big.bin"]  # no temp file or record left


def test_a_download_to_a_disk_already_full_is_a_named_error_and_works_once_space_is_freed(
    client: Client, bucket: str, disk: SmallDisk
) -> None:
    data = os.urandom(MiB)
    client.put_object(bucket, "k", data)
    filler = disk.fill()
    dest = disk.path / "k"
    with pytest.raises(objsdk.ObjsdkError) as caught:
        client.download(bucket, "k", dest, part_size=MiB)
    assert_names_the_download(caught.value, bucket, "k", dest)
    assert not dest.exists()
    filler.unlink()
    client.download(bucket, "k", dest, part_size=MiB)
    assert dest.read_bytes() == data
    assert disk.names() == ["k"]


def test_cli_cp_of_one_object_to_a_full_disk_names_it_and_the_rerun_completes(
    env: dict[str, str], client: Client, bucket: str, disk: SmallDisk
) -> None:
    data = os.urandom(3 * MiB)  # more than the disk holds
    client.put_object(bucket, "one.bin", data)
    dest = disk.path / "one.bin"
    argv = [*COMMAND, "cp", f"s3://{bucket}/one.bin", str(dest), "--part-size", "1MiB"]
    failed = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert failed.returncode == 1, failed.stderr
    assert "Traceback" not in failed.stderr
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1, failed.stderr
    assert f"s3://{bucket}/one.bin" in lines[0], lines[0]
    assert str(dest) in lines[0], lines[0]
    assert "No space left on device" in lines[0], lines[0]
    # Nothing under the final name; the hidden temp file and record stay to resume.
    assert all(name.startswith(".one.bin.objsdk-") for name in disk.names()), disk.names()
    disk.resize("16m")
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 0, again.stderr
    assert dest.read_bytes() == data
    assert disk.names() == ["one.bin"]


def test_cli_small_object_downloads_to_a_full_disk_name_each_file_and_leave_no_partial_file(
    env: dict[str, str], client: Client, bucket: str, disk: SmallDisk
) -> None:
    # Listed objects up to 8 MiB take the small-object path (objsdk/_transfer/smallfile.py):
    # one GET into memory, a temporary file, a batched rename.
    objects = {f"p/{i}.bin": os.urandom(768 << 10) for i in range(4)}  # 3 MiB in all
    for key, data in objects.items():
        client.put_object(bucket, key, data)
    argv = [*COMMAND, "--json", "cp", "-r", f"s3://{bucket}/p/", str(disk.path), "--jobs", "1"]
    failed = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert failed.returncode == 1, failed.stderr
    assert "Traceback" not in failed.stderr
    records = [json.loads(line) for line in failed.stderr.splitlines()]
    errors = [r for r in records if r.get("code") not in (None, "Failed")]
    assert errors, failed.stderr
    for record in errors:
        assert record["code"] == "LocalWriteError", record
        assert record["bucket"] == bucket, record
        assert record["key"] in objects, record
        assert record["path"] == str(disk.path / record["key"].removeprefix("p/")), record
        assert "No space left on device" in record["message"], record
    for name in disk.names():  # what has a final name is whole; no temporary file left
        assert not name.startswith("."), disk.names()
        assert (disk.path / name).read_bytes() == objects[f"p/{name}"]
    disk.resize("16m")
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 0, again.stderr
    for key, data in objects.items():
        assert (disk.path / key.removeprefix("p/")).read_bytes() == data


# A file larger than the process may write (RLIMIT_FSIZE, SIGXFSZ ignored as a shell's
# ulimit -f leaves it) fails its write with EFBIG: the same path as a full disk.
_FSIZE_LIMITED_DOWNLOAD = """
import json, resource, signal, sys
import objsdk
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.RLIM_INFINITY))
bucket, key, dest = sys.argv[1:]
with objsdk.Client.from_env() as client:
    try:
        client.download(bucket, key, dest, part_size=1 << 20)
    except objsdk.LocalWriteError as e:
        print(json.dumps({"errno": e.errno, "message": str(e)}))
        sys.exit(3)
"""


def test_a_download_past_the_file_size_limit_is_a_named_error_with_efbig(
    env: dict[str, str], client: Client, bucket: str, tmp_path: Path
) -> None:
    data = os.urandom(3 * MiB)
    client.put_object(bucket, "big.bin", data)
    dest = tmp_path / "big.bin"
    proc = subprocess.run(
        [sys.executable, "-c", _FSIZE_LIMITED_DOWNLOAD, bucket, "big.bin", str(dest)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    error = json.loads(proc.stdout)
    assert error["errno"] == errno.EFBIG
    assert f"s3://{bucket}/big.bin" in error["message"]
    assert str(dest) in error["message"]
    assert not dest.exists()
    client.download(bucket, "big.bin", dest, part_size=MiB)  # no limit here
    assert dest.read_bytes() == data


def test_a_local_write_error_keeps_its_errno_file_bucket_and_key_through_a_pickle() -> None:
    # Errors cross process boundaries (DataLoader workers, multiprocessing pools).
    import pickle

    err = objsdk.LocalWriteError(
        errno.ENOSPC, "No space left on device", "/d/x", bucket="b", key="k"
    )
    back = pickle.loads(pickle.dumps(err))
    assert isinstance(back, objsdk.LocalWriteError)
    assert isinstance(back, OSError)
    assert (back.errno, back.strerror, back.filename) == (errno.ENOSPC, err.strerror, "/d/x")
    assert (back.bucket, back.key) == ("b", "k")
    assert str(back) == str(err) == "cannot write s3://b/k to /d/x: No space left on device"


def test_a_destination_that_is_a_directory_stays_python_s_is_a_directory_error(
    client: Client, bucket: str, tmp_path: Path
) -> None:
    # A fault of the path, not of the disk: Python's own error, as docs/errors.md says.
    client.put_object(bucket, "k", b"data")
    (tmp_path / "k").mkdir()
    with pytest.raises(IsADirectoryError):
        client.download(bucket, "k", tmp_path / "k")
    assert (tmp_path / "k").is_dir()


def test_a_punched_hole_frees_the_blocks_and_keeps_the_size(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * (2 * MiB))
    with open(path, "r+b") as f:
        os.fsync(f.fileno())
        before = os.fstat(f.fileno()).st_blocks
        if not punch_hole(f.fileno(), 0, MiB):
            pytest.skip("this filesystem cannot punch holes")
        after = os.fstat(f.fileno())
    assert after.st_size == 2 * MiB
    assert after.st_blocks <= before - MiB // 512 + 8  # st_blocks counts 512-byte units
    assert path.read_bytes() == bytes(MiB) + b"x" * MiB
