"""How many parts a large file moves in on the command line: a run of one file adapts to
the network as ``Client.download`` and ``Client.upload`` do at their defaults; a run of
several gives each 4 (one adaptive climb per file would gain by taking bandwidth from
the others); ``--parallel N`` sets it for both. ``extract`` reads ahead as ``Client.open``
does at its default unless ``--readahead N`` is given."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import cli_env  # noqa: F401 - a fixture

from objsdk import Client
from objsdk.cli import main

pytestmark = pytest.mark.integration

SIZE = 9 << 20  # above the size that comes down in one GET


@pytest.fixture
def parallel_seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """The ``parallel`` each download and upload was called with ("default": none given)."""
    seen: dict[str, list[Any]] = {"download": [], "upload": []}
    for name in seen:
        real = getattr(Client, name)

        def spy(self: Client, *args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            seen[_name].append(kw.get("parallel", "default"))
            return _real(self, *args, **kw)

        monkeypatch.setattr(Client, name, spy)
    return seen


def files(folder: Path, count: int) -> Path:
    folder.mkdir()
    for i in range(count):
        (folder / f"f{i}.bin").write_bytes(os.urandom(SIZE))
    return folder


@pytest.mark.usefixtures("cli_env")
def test_one_file_adapts_as_the_library_does(
    bucket: str, tmp_path: Path, parallel_seen: dict[str, list[Any]]
) -> None:
    src = files(tmp_path / "src", 1)
    assert main(["cp", "-q", str(src / "f0.bin"), f"s3://{bucket}/one.bin"]) == 0
    assert main(["cp", "-q", f"s3://{bucket}/one.bin", str(tmp_path / "back.bin")]) == 0
    assert (tmp_path / "back.bin").read_bytes() == (src / "f0.bin").read_bytes()
    assert parallel_seen == {"upload": ["default"], "download": [None]}


@pytest.mark.usefixtures("cli_env")
def test_several_files_take_four_parts_each(
    bucket: str, tmp_path: Path, parallel_seen: dict[str, list[Any]]
) -> None:
    src = files(tmp_path / "src", 2)
    assert main(["cp", "-q", "-r", str(src), f"s3://{bucket}/many/"]) == 0
    assert main(["cp", "-q", "-r", f"s3://{bucket}/many/", str(tmp_path / "back")]) == 0
    assert parallel_seen == {"upload": [4, 4], "download": [4, 4]}


@pytest.mark.usefixtures("cli_env")
def test_parallel_sets_the_parts_of_one_file_and_of_many(
    bucket: str, tmp_path: Path, parallel_seen: dict[str, list[Any]]
) -> None:
    src = files(tmp_path / "src", 2)
    assert main(["cp", "-q", "--parallel", "3", str(src / "f0.bin"), f"s3://{bucket}/x"]) == 0
    assert main(["cp", "-q", "-r", "--parallel", "5", str(src), f"s3://{bucket}/m/"]) == 0
    assert main(["cp", "-q", "--parallel", "2", f"s3://{bucket}/x", str(tmp_path / "x")]) == 0
    assert parallel_seen == {"upload": [3, 5, 5], "download": [2]}


@pytest.mark.usefixtures("cli_env")
def test_extract_reads_ahead_as_client_open_does_unless_told(
    client: Client, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        member = tarfile.TarInfo("a.txt")
        member.size = 5
        tar.addfile(member, io.BytesIO(b"hello"))
    client.put_object(bucket, "a.tar", archive.getvalue())
    readahead_seen: list[Any] = []
    real_open = Client.open

    def spy(self: Client, *args: Any, **kw: Any) -> Any:
        readahead_seen.append(kw.get("readahead", "default"))
        return real_open(self, *args, **kw)

    monkeypatch.setattr(Client, "open", spy)
    assert main(["extract", "-q", f"s3://{bucket}/a.tar", str(tmp_path / "one")]) == 0
    assert (
        main(["extract", "-q", "--readahead", "3", f"s3://{bucket}/a.tar", str(tmp_path / "two")])
        == 0
    )
    assert (tmp_path / "one" / "a.txt").read_bytes() == b"hello"
    assert readahead_seen == [None, 3]
