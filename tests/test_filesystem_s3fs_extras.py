"""What s3fs code reads and calls beyond fsspec: s3fs's keys in info()/ls()/find(),
append mode, blockcache::, extended attributes, tags, presigned URLs and versions.
Through fsspec and pandas, against MinIO."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pandas as pd
import pytest

from objsdk import Client
from objsdk.filesystem import ObjsdkFileSystem

pytestmark = pytest.mark.integration


@pytest.fixture
def options(local_minio: Any) -> dict[str, Any]:
    return {
        "endpoint_url": local_minio.endpoint,
        "key": local_minio.access_key,
        "secret": local_minio.secret_key,
    }


@pytest.fixture
def fs(options: dict[str, Any]) -> ObjsdkFileSystem:
    return ObjsdkFileSystem(**options, skip_instance_cache=True)


@pytest.fixture
def vfs(options: dict[str, Any]) -> ObjsdkFileSystem:
    return ObjsdkFileSystem(**options, version_aware=True, skip_instance_cache=True)


@pytest.fixture
def versioned(client: Client, bucket: str) -> Iterator[str]:
    client.set_bucket_versioning(bucket, True)
    yield bucket
    for v in list(client.list_object_versions(bucket)):
        client.delete_object(bucket, v.key, version_id=v.version_id)


# -- s3fs's keys alongside fsspec's ------------------------------------------------------

S3FS_FILE_KEYS = {"Key", "Size", "StorageClass", "ETag", "LastModified", "name", "size", "type"}


def test_info_ls_and_find_offer_s3fs_keys(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    client.put_object(bucket, "d/a.csv", b"12345", content_type="text/csv")
    info = fs.info(f"{bucket}/d/a.csv")
    assert S3FS_FILE_KEYS | {"VersionId", "ContentType"} <= set(info)
    assert (info["Key"], info["Size"], info["StorageClass"]) == (f"{bucket}/d/a.csv", 5, "STANDARD")
    assert info["ContentType"] == "text/csv"
    assert info["LastModified"] == info["mtime"]
    [listed] = fs.ls(f"{bucket}/d", detail=True)
    assert set(listed) >= S3FS_FILE_KEYS
    assert (listed["Key"], listed["Size"], listed["ETag"]) == (info["Key"], 5, info["ETag"])
    [found] = fs.find(bucket, detail=True).values()
    assert set(found) >= S3FS_FILE_KEYS
    [directory] = fs.ls(bucket, detail=True)
    assert (directory["Key"], directory["StorageClass"], directory["type"]) == (
        f"{bucket}/d",
        "DIRECTORY",
        "directory",
    )
    buckets = {e["Key"]: e for e in fs.ls("", detail=True)}
    assert buckets[bucket]["StorageClass"] == "BUCKET"


def test_info_of_a_versioned_object_names_its_version(
    vfs: ObjsdkFileSystem, client: Client, versioned: str
) -> None:
    version = client.put_object(versioned, "k", b"x").version_id
    assert vfs.info(f"{versioned}/k")["VersionId"] == version


# -- append ------------------------------------------------------------------------------


def test_append_mode_stores_the_old_bytes_then_the_new(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    with fs.open(f"{bucket}/log.txt", "ab") as f:  # nothing there yet: a new object
        f.write(b"one\n")
    with fs.open(f"{bucket}/log.txt", "a") as f:
        f.write("two\n")
    assert fs.cat(f"{bucket}/log.txt") == b"one\ntwo\n"


def test_an_append_that_fails_leaves_the_object_as_it_was(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    client.put_object(bucket, "log.txt", b"kept\n")

    def fail() -> None:
        with fs.open(f"{bucket}/log.txt", "ab") as f:
            f.write(b"lost\n")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fail()
    assert fs.cat(f"{bucket}/log.txt") == b"kept\n"


# -- blockcache ----------------------------------------------------------------------


# fsspec's MMapCache opens its cache file and leaves it to the garbage collector
# (fsspec/caching.py, MMapCache._makefile): its ResourceWarning is fsspec's, not objsdk's.
@pytest.mark.filterwarnings("ignore:unclosed file <_io.BufferedRandom:ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_blockcache_reads_through_the_local_cache(
    options: dict[str, Any], client: Client, bucket: str, tmp_path: Path
) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    client.put_object(bucket, "big.bin", data)
    url = f"blockcache::objsdk://{bucket}/big.bin"
    cache = {"cache_storage": str(tmp_path), "check_files": False}
    blocks = {**options, "default_block_size": 1 << 16}
    with fsspec.open(url, "rb", objsdk=blocks, blockcache=cache) as f:
        f.seek(100_000)
        assert f.read(1000) == data[100_000:101_000]
        assert f.readline() == data[101_000 : data.index(b"\n", 101_000) + 1]
        buf = bytearray(10)
        f.seek(5)
        assert f.readinto(buf) == 10
        assert bytes(buf) == data[5:15]
    assert any(tmp_path.iterdir())  # blocks landed in the cache
    with fsspec.open(url, "rb", objsdk=blocks, blockcache=cache) as f:
        assert f.read() == data


# -- extended attributes, tags, URLs ---------------------------------------------------


def test_getxattr_setxattr_and_metadata(fs: ObjsdkFileSystem, client: Client, bucket: str) -> None:
    client.put_object(
        bucket, "m", b"data", content_type="text/plain", metadata={"owner": "ana", "tmp": "1"}
    )
    assert fs.metadata(f"{bucket}/m") == {"owner": "ana", "tmp": "1"}
    assert fs.getxattr(f"{bucket}/m", "owner") == "ana"
    fs.setxattr(f"{bucket}/m", owner="bo", tmp=None, copy_kwargs={"CacheControl": "no-store"})
    info = client.head_object(bucket, "m")
    assert info.metadata == {"owner": "bo"}
    assert (info.content_type, info.cache_control) == ("text/plain", "no-store")
    assert fs.cat(f"{bucket}/m") == b"data"


def test_get_tags_and_put_tags_overwrite_or_merge(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    client.put_object(bucket, "t", b"x")
    fs.put_tags(f"{bucket}/t", {"a": "1", "b": "2"})
    fs.put_tags(f"{bucket}/t", {"b": "3"}, mode="m")
    assert fs.get_tags(f"{bucket}/t") == {"a": "1", "b": "3"}
    fs.put_tags(f"{bucket}/t", {"c": "4"})
    assert fs.get_tags(f"{bucket}/t") == {"c": "4"}


def test_url_is_a_presigned_url_that_serves_the_object(
    fs: ObjsdkFileSystem, client: Client, bucket: str, options: dict[str, Any]
) -> None:
    client.put_object(bucket, "u", b"shared")
    url = fs.url(f"{bucket}/u", expires=60)
    assert "X-Amz-Signature=" in url
    assert options["secret"] not in url
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as answer:
        assert answer.read() == b"shared"
    with pytest.raises(ValueError, match="client_method"):
        fs.url(f"{bucket}/u", client_method="list_objects")


# -- versions ------------------------------------------------------------------------


def test_bucket_versioning_through_the_filesystem(fs: ObjsdkFileSystem, bucket: str) -> None:
    assert not fs.is_bucket_versioned(bucket)
    fs.make_bucket_versioned(bucket)
    assert fs.is_bucket_versioned(bucket)
    fs.make_bucket_versioned(bucket, False)
    assert not fs.is_bucket_versioned(bucket)


def test_version_aware_paths_read_list_and_delete_versions(
    vfs: ObjsdkFileSystem, options: dict[str, Any], client: Client, versioned: str, tmp_path
) -> None:
    pd.DataFrame({"x": [1]}).to_csv(
        f"objsdk://{versioned}/t.csv", index=False, storage_options=options
    )
    pd.DataFrame({"x": [2]}).to_csv(
        f"objsdk://{versioned}/t.csv", index=False, storage_options=options
    )
    history = vfs.object_version_info(f"{versioned}/t.csv")
    assert [v["IsLatest"] for v in history] == [True, False]
    old = history[1]["VersionId"]
    url = f"objsdk://{versioned}/t.csv?versionId={old}"
    # The URL alone makes the filesystem version aware, as in s3fs.
    assert pd.read_csv(url, storage_options=options)["x"].tolist() == [1]
    with fsspec.open(url, "rb", **options) as f:
        assert f.read() == b"x\n1\n"
    assert vfs.cat_file(f"{versioned}/t.csv?versionId={old}") == b"x\n1\n"
    vfs.get_file(f"{versioned}/t.csv?versionId={old}", tmp_path / "old.csv")
    assert (tmp_path / "old.csv").read_bytes() == b"x\n1\n"
    # fsspec would read the "?" as a glob and find nothing (s3fs does): one version.
    vfs.get(f"{versioned}/t.csv?versionId={old}", str(tmp_path / "old-too.csv"))
    assert (tmp_path / "old-too.csv").read_bytes() == b"x\n1\n"
    (tmp_path / "into").mkdir()
    vfs.get(f"{versioned}/t.csv?versionId={old}", str(tmp_path / "into"))
    assert (tmp_path / "into" / "t.csv").read_bytes() == b"x\n1\n"
    listed = vfs.ls(versioned, detail=True, versions=True)
    assert sorted(e["VersionId"] for e in listed) == sorted(v["VersionId"] for v in history)
    vfs.cp_file(f"{versioned}/t.csv?versionId={old}", f"{versioned}/restored.csv")
    assert vfs.cat_file(f"{versioned}/restored.csv") == b"x\n1\n"
    vfs.copy(f"{versioned}/t.csv?versionId={old}", f"{versioned}/copied/")
    assert vfs.cat_file(f"{versioned}/copied/t.csv") == b"x\n1\n"
    assert vfs.cat(f"{versioned}/t.csv?versionId={old}") == b"x\n1\n"
    assert vfs.rm(f"{versioned}/t.csv?versionId={old}") == [f"{versioned}/t.csv?versionId={old}"]
    assert [v["IsLatest"] for v in vfs.object_version_info(f"{versioned}/t.csv")] == [True]
    with pytest.raises(ValueError, match="version_aware"):
        ObjsdkFileSystem(**options, skip_instance_cache=True).object_version_info(
            f"{versioned}/t.csv"
        )


def test_a_reader_is_an_object_file_with_fsspec_attributes(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    client.put_object(bucket, "r", b"abc")
    with fs.open(f"{bucket}/r") as f:
        assert (f.path, f.fs, f.cache) == (f"{bucket}/r", fs, None)
        assert f.blocksize > 0
        assert f._fetch_range(1, 3) == b"bc"
        assert f.tell() == 0
        assert f.readable()


# -- s3fs's answers where fsspec leaves the choice ---------------------------------------


def test_s3fs_shaped_answers(fs: ObjsdkFileSystem, client: Client, bucket: str) -> None:
    assert fs.pipe_file(f"{bucket}/d/a.json", b"{}") == {
        "ETag": client.head_object(bucket, "d/a.json").etag,
        "VersionId": None,
    }
    assert fs.ls(f"{bucket}/d") == [f"{bucket}/d/a.json"]  # names, as s3fs's ls
    assert fs.info(f"{bucket}/d/a.json")["ContentType"] == "application/json"  # guessed
    with fs.open(f"{bucket}/d/b.csv", "wb") as w:
        w.write(b"x")
    assert client.head_object(bucket, "d/b.csv").content_type == "text/csv"
    assert w.version_id is None
    assert w.blocksize == w.part_size
    with pytest.raises(IsADirectoryError):
        fs.modified(f"{bucket}/d")
    with pytest.raises(ValueError, match="truncate"):
        fs.touch(f"{bucket}/d/a.json", truncate=False)
    with pytest.raises(FileNotFoundError):
        fs.mkdir("no-such-bucket-for-mkdir/a/b", create_parents=False)
    assert fs.rm(f"{bucket}/d", recursive=True) == [f"{bucket}/d/a.json", f"{bucket}/d/b.csv"]


def test_find_with_a_prefix_lists_only_names_starting_with_it(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    for name in ("p/test_1", "p/test_10", "p/test_2", "p/other", "p2"):
        client.put_object(bucket, name, b"x")
    assert fs.find(f"{bucket}/p", prefix="test_1") == [f"{bucket}/p/test_1", f"{bucket}/p/test_10"]
    assert fs.find(bucket, prefix="p") == [
        f"{bucket}/p/other",
        f"{bucket}/p/test_1",
        f"{bucket}/p/test_10",
        f"{bucket}/p/test_2",
        f"{bucket}/p2",
    ]


def test_a_leading_slash_names_the_same_objects_as_in_s3fs(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    client.put_object(bucket, "d/k", b"abc")
    assert fs.cat(f"/{bucket}/d/k") == b"abc"
    assert fs.info(f"/{bucket}/d/k")["name"] == f"{bucket}/d/k"
    assert fs.ls(f"/{bucket}/d") == [f"{bucket}/d/k"]
    assert fs.find(f"/{bucket}") == [f"{bucket}/d/k"]
    fs.pipe(f"/{bucket}/new", b"x")
    assert client.get_object(bucket, "new") == b"x"


def test_a_write_into_a_missing_bucket_is_file_not_found(fs: ObjsdkFileSystem) -> None:
    def write() -> None:
        with fs.open("no-such-bucket-for-writes/k", "wb") as f:
            f.write(b"x")

    with pytest.raises(FileNotFoundError, match="NoSuchBucket"):
        write()


def test_a_versioned_write_and_read_name_their_version(
    vfs: ObjsdkFileSystem, client: Client, versioned: str
) -> None:
    with vfs.open(f"{versioned}/k", "wb") as w:
        w.write(b"v1")
    assert w.version_id == client.head_object(versioned, "k").version_id
    with vfs.open(f"{versioned}/k") as f:
        assert f.version_id == w.version_id


def test_recursive_rm_removes_directory_marker_objects(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    client.put_object(bucket, "logs/", b"")  # an "empty directory" made by other tools
    client.put_object(bucket, "data/", b"")
    client.put_object(bucket, "data/x", b"1")
    fs.rm(f"{bucket}/logs", recursive=True)
    fs.rm(f"{bucket}/data", recursive=True)
    assert list(client.list_objects(bucket)) == []


def test_put_and_pipe_take_what_a_write_stores_in_boto3_names(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path
) -> None:
    src = tmp_path / "style.json"
    src.write_text("{}")
    fs.put(str(src), f"{bucket}/style.json", ContentType="text/css")
    fs.pipe_file(f"{bucket}/p.bin", b"x", Metadata={"k": "v"})
    assert client.head_object(bucket, "style.json").content_type == "text/css"
    assert client.head_object(bucket, "p.bin").metadata == {"k": "v"}
    fs.pipe_file(f"{bucket}/acl", b"x", ACL="bucket-owner-full-control")
    assert fs.cat(f"{bucket}/acl") == b"x"
    with pytest.raises(ValueError, match="RequestPayer"):
        fs.pipe_file(f"{bucket}/q", b"x", RequestPayer="requester")


def test_put_and_pipe_take_s3fs_part_size_and_concurrency(
    fs: ObjsdkFileSystem, bucket: str
) -> None:
    seen: list[dict[str, Any]] = []
    real = fs.client.upload

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(*args, **kwargs)

    fs.client.upload = spy  # type: ignore[method-assign]
    fs.pipe_file(f"{bucket}/k", b"x", chunksize=6 << 20, max_concurrency=3)
    assert (seen[0]["part_size"], seen[0]["parallel"]) == (6 << 20, 3)


def test_an_open_file_has_s3fs_files_details_loc_full_name_and_url(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    client.put_object(bucket, "d.txt", b"hello")
    with fs.open(f"{bucket}/d.txt") as f:
        assert f.details == fs.info(f"{bucket}/d.txt") == f.info()
        assert (f.details["size"], f.details["type"]) == (5, "file")
        assert f.loc == 0
        f.read(2)
        assert f.loc == 2
        assert f.full_name == f"objsdk://{bucket}/d.txt"
        with urllib.request.urlopen(f.url(expires=60)) as got:  # presigned
            assert got.read() == b"hello"
    with fs.open(f"{bucket}/w.txt", "wb") as w:
        w.write(b"abc")
        assert (w.loc, w.full_name) == (3, f"objsdk://{bucket}/w.txt")
