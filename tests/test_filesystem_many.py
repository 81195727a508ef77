"""ObjsdkFileSystem's ``get`` and ``put`` of many files: fsspec's path rules, the files
transferred at once, small objects made durable as a batch."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fsspec.callbacks import Callback

from objsdk import Client
from objsdk.filesystem import ObjsdkFileSystem, many, transfers

pytestmark = pytest.mark.integration


@pytest.fixture
def fs(s3_server: Any) -> ObjsdkFileSystem:
    return ObjsdkFileSystem(
        endpoint_url=s3_server.endpoint,
        key=s3_server.access_key,
        secret=s3_server.secret_key,
        skip_instance_cache=True,
    )


class MostAtOnce:
    """Wraps a method: how many calls ran at the same time, at most. Calls wait (5 s at
    most) until ``expect`` run together, so a busy machine cannot make a call end before
    the others start; if fewer ever run at once, ``most`` says how many did."""

    def __init__(self, method: Any, expect: int = many.FILES_AT_ONCE) -> None:
        self.method = method
        self.expect = expect
        self.running = self.most = 0
        self.met = False
        self.cond = threading.Condition()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.cond:
            self.running += 1
            self.most = max(self.most, self.running)
            self.met = self.met or self.running >= self.expect
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.met, timeout=5)
        try:
            return self.method(*args, **kwargs)
        finally:
            with self.cond:
                self.running -= 1


def tree(root: Path, count: int) -> dict[str, bytes]:
    files = {f"d{i % 3}/f{i}": os.urandom(100 + i) for i in range(count)}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def test_get_of_a_tree_fetches_its_files_at_once_and_leaves_no_temporary_file(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path, monkeypatch: Any
) -> None:
    files = {f"tree/d{i % 3}/f{i}": os.urandom(100 + i) for i in range(24)}
    for key, data in files.items():
        client.put_object(bucket, key, data)
    spy = MostAtOnce(fs.client.get_object)
    monkeypatch.setattr(fs.client, "get_object", spy)
    fs.get(f"{bucket}/tree/", str(tmp_path / "out") + "/", recursive=True)
    got = {
        str(p.relative_to(tmp_path / "out")): p.read_bytes()
        for p in (tmp_path / "out").rglob("*")
        if p.is_file()
    }
    assert got == {k.removeprefix("tree/"): v for k, v in files.items()}
    assert spy.most == many.FILES_AT_ONCE


def test_batch_size_sets_how_many_files_are_in_flight(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path, monkeypatch: Any
) -> None:
    for i in range(12):
        client.put_object(bucket, f"t/{i}", b"x")
    spy = MostAtOnce(fs.client.get_object, expect=3)
    monkeypatch.setattr(fs.client, "get_object", spy)
    fs.get(f"{bucket}/t", str(tmp_path / "out"), recursive=True, batch_size=3)
    assert spy.most == 3
    assert sorted(os.listdir(tmp_path / "out")) == sorted(str(i) for i in range(12))


def test_objects_larger_than_a_small_one_are_downloaded_and_land_beside_the_small_ones(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(many, "SMALL_OBJECT", 1000)
    small, large = b"s" * 10, os.urandom(5000)
    client.put_object(bucket, "mix/small", small)
    client.put_object(bucket, "mix/sub/large", large)
    downloads = MostAtOnce(fs.client.download, expect=1)
    monkeypatch.setattr(fs.client, "download", downloads)
    fs.get(f"{bucket}/mix", str(tmp_path / "out"), recursive=True)
    assert (tmp_path / "out" / "small").read_bytes() == small
    assert (tmp_path / "out" / "sub" / "large").read_bytes() == large
    assert downloads.most == 1  # the large one only


def test_a_directory_at_a_files_name_fails_that_file_as_fsspec_does(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path
) -> None:
    client.put_object(bucket, "p/a", b"1")
    client.put_object(bucket, "p/b", b"2")
    (tmp_path / "out" / "a").mkdir(parents=True)
    with pytest.raises(IsADirectoryError) as caught:
        fs.get(f"{bucket}/p/", str(tmp_path / "out") + "/", recursive=True)
    assert caught.value.filename == str(tmp_path / "out" / "a")
    assert [p.name for p in (tmp_path / "out").iterdir() if p.name.startswith(".")] == []


def test_a_missing_object_stops_the_get_with_file_not_found(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path
) -> None:
    client.put_object(bucket, "here", b"1")
    with pytest.raises(FileNotFoundError, match="gone"):
        fs.get([f"{bucket}/here", f"{bucket}/gone"], [str(tmp_path / "h"), str(tmp_path / "g")])
    assert not (tmp_path / "g").exists()


def test_the_callback_counts_the_files_done(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path
) -> None:
    for i in range(5):
        client.put_object(bucket, f"c/{i}", b"x")

    class Counting(Callback):  # type: ignore[misc]
        pass

    counted = Counting()
    fs.get(f"{bucket}/c", str(tmp_path / "out"), recursive=True, callback=counted)
    # As fsspec counts them: the five files and the folder they land in.
    assert (counted.size, counted.value) == (6, 6)


def test_put_of_a_tree_sends_its_files_at_once(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path, monkeypatch: Any
) -> None:
    files = tree(tmp_path / "src", 20)
    spy = MostAtOnce(fs.client.upload)
    monkeypatch.setattr(fs.client, "upload", spy)
    fs.put(str(tmp_path / "src"), f"{bucket}/up", recursive=True)
    assert {o.key: client.get_object(bucket, o.key) for o in client.list_objects(bucket)} == {
        f"up/{rel}": data for rel, data in files.items()
    }
    assert spy.most == many.FILES_AT_ONCE


def test_put_of_one_file_keeps_the_adaptive_upload(
    fs: ObjsdkFileSystem, bucket: str, tmp_path: Path, monkeypatch: Any
) -> None:
    (tmp_path / "one").write_bytes(b"1")
    seen: list[Any] = []
    upload = fs.client.upload
    monkeypatch.setattr(
        fs.client, "upload", lambda *a, **kw: (seen.append(kw.get("parallel")), upload(*a, **kw))
    )
    fs.put(str(tmp_path / "one"), f"{bucket}/one")
    assert seen == [None]


def test_copy_of_a_tree_copies_its_objects_at_once(
    fs: ObjsdkFileSystem,
    client: Client,
    bucket: str,
    monkeypatch: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for i in range(20):
        client.put_object(bucket, f"from/d{i % 2}/{i}", str(i).encode())
    spy = MostAtOnce(fs.client.copy_object)
    monkeypatch.setattr(fs.client, "copy_object", spy)
    with caplog.at_level(logging.DEBUG, logger="objsdk"):
        fs.copy(f"{bucket}/from/", f"{bucket}/to/", recursive=True)
    assert {
        o.key: client.get_object(bucket, o.key) for o in client.list_objects(bucket, prefix="to/")
    } == {f"to/d{i % 2}/{i}": str(i).encode() for i in range(20)}
    assert spy.most == many.FILES_AT_ONCE
    # The listing said what each object is: one CopyObject each, no HEAD before or after.
    sent = [r.getMessage() for r in caplog.records if " -> " in r.getMessage()]
    assert sorted(m.split()[0] for m in sent if "/from/" in m or "/to/" in m) == ["PUT"] * 20


def test_copy_of_an_object_larger_than_one_copy_object_takes_goes_in_parts(
    fs: ObjsdkFileSystem, client: Client, bucket: str, monkeypatch: Any
) -> None:
    client.put_object(bucket, "big", b"b" * 5000)
    client.put_object(bucket, "dir/big", b"d" * 5000)
    monkeypatch.setattr(transfers, "MAX_SINGLE_COPY", 1000)
    copies: list[tuple[Any, ...]] = []
    copy = fs.client.copy
    monkeypatch.setattr(fs.client, "copy", lambda *a, **kw: (copies.append(a), copy(*a, **kw)))
    fs.cp_file(f"{bucket}/big", f"{bucket}/big2")
    fs.copy(f"{bucket}/dir", f"{bucket}/dir2", recursive=True)
    assert copies == [(bucket, "big", bucket, "big2"), (bucket, "dir/big", bucket, "dir2/big")]
    assert client.get_object(bucket, "big2") == b"b" * 5000
    assert client.get_object(bucket, "dir2/big") == b"d" * 5000


def test_copy_of_a_missing_source_raises_unless_recursive_skips_it(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    client.put_object(bucket, "here", b"1")
    with pytest.raises(FileNotFoundError):
        fs.copy([f"{bucket}/here", f"{bucket}/gone"], [f"{bucket}/h2", f"{bucket}/g2"])
    fs.copy(
        [f"{bucket}/here", f"{bucket}/gone"], [f"{bucket}/h3", f"{bucket}/g3"], on_error="ignore"
    )
    assert client.get_object(bucket, "h3") == b"1"
    assert not fs.exists(f"{bucket}/g3")


def test_mv_of_a_tree_moves_every_object(fs: ObjsdkFileSystem, client: Client, bucket: str) -> None:
    for i in range(5):
        client.put_object(bucket, f"a/{i}", b"x")
    fs.mv(f"{bucket}/a", f"{bucket}/b", recursive=True)
    assert sorted(o.key for o in client.list_objects(bucket)) == [f"b/{i}" for i in range(5)]


def test_a_failure_stops_the_downloads_under_way_at_their_next_progress_report(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(many, "SMALL_OBJECT", 0)  # every object through Client.download
    client.put_object(bucket, "large", os.urandom(8 << 20))
    download = fs.client.download
    ended: list[str] = []

    def slow(*args: Any, progress: Any = None, **kwargs: Any) -> Any:
        def report(done: int, total: Any) -> None:
            time.sleep(0.05)  # a slow link: the missing object fails meanwhile
            progress(done, total)

        try:
            return download(*args, progress=report, **kwargs)
        except BaseException as e:
            ended.append(type(e).__name__)
            raise

    monkeypatch.setattr(fs.client, "download", slow)
    with pytest.raises(FileNotFoundError, match="missing"):
        fs.get(
            [f"{bucket}/large", f"{bucket}/missing"],
            [str(tmp_path / "large"), str(tmp_path / "missing")],
        )
    assert sorted(ended) == ["Cancelled", "NoSuchKey"]  # the large one stopped
    assert not (tmp_path / "large").exists()


def test_cat_of_many_files_fetches_them_at_once_in_the_listings_order(
    fs: ObjsdkFileSystem, client: Client, bucket: str, monkeypatch: Any
) -> None:
    # fsspec's own cat fetches one file after another; s3fs's gathers them.
    for i in range(20):
        client.put_object(bucket, f"c/{i:02}", str(i).encode())
    spy = MostAtOnce(fs.cat_file)
    monkeypatch.setattr(fs, "cat_file", spy)
    got = fs.cat(f"{bucket}/c", recursive=True)
    assert list(got) == [f"{bucket}/c/{i:02}" for i in range(20)]
    assert list(got.values()) == [str(i).encode() for i in range(20)]
    assert spy.most == many.FILES_AT_ONCE
    assert fs.cat(f"{bucket}/c/0*", batch_size=2) == {
        f"{bucket}/c/0{i}": b"%d" % i for i in range(10)
    }
    assert fs.cat(f"{bucket}/c/07") == b"7"  # one path as given: its bytes
    client.put_object(bucket, "c/sub/x", b"x")
    # The folders a recursive cat finds hold no bytes: left out, not failed on.
    assert list(fs.cat(f"{bucket}/c", recursive=True))[-1] == f"{bucket}/c/sub/x"


def test_cat_of_many_files_raises_omits_or_returns_a_failure_as_fsspec_says(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    client.put_object(bucket, "here", b"1")
    paths = [f"{bucket}/here", f"{bucket}/gone"]
    with pytest.raises(FileNotFoundError, match="gone"):
        fs.cat(paths)
    assert fs.cat(paths, on_error="omit") == {f"{bucket}/here": b"1"}
    returned = fs.cat(paths, on_error="return")
    assert returned[f"{bucket}/here"] == b"1"
    assert isinstance(returned[f"{bucket}/gone"], FileNotFoundError)


def test_pipe_of_many_files_stores_them_at_once(
    fs: ObjsdkFileSystem, client: Client, bucket: str, monkeypatch: Any
) -> None:
    spy = MostAtOnce(fs.pipe_file)
    monkeypatch.setattr(fs, "pipe_file", spy)
    stored = fs.pipe({f"objsdk://{bucket}/p/{i}": str(i).encode() for i in range(20)})
    assert spy.most == many.FILES_AT_ONCE
    assert [set(s) for s in stored] == [{"ETag", "VersionId"}] * 20  # as s3fs: per file
    assert {o.key: client.get_object(bucket, o.key) for o in client.list_objects(bucket)} == {
        f"p/{i}": str(i).encode() for i in range(20)
    }
    fs.pipe(f"{bucket}/one", b"1")
    assert client.get_object(bucket, "one") == b"1"
    with pytest.raises(ValueError, match="str or dict"):
        fs.pipe([f"{bucket}/x"], b"1")
