"""ObjsdkFileSystem behaviours beyond fsspec's abstract suite, against MinIO."""

from __future__ import annotations

import errno
import importlib.metadata
import io
import logging
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import fsspec
import pytest

from objsdk import Client, ObjectFile
from objsdk.filesystem import ObjsdkFileSystem, many, register_s3_alias

pytestmark = pytest.mark.integration


@pytest.fixture
def options(s3_server: Any) -> dict[str, str]:
    return {
        "endpoint_url": s3_server.endpoint,
        "key": s3_server.access_key,
        "secret": s3_server.secret_key,
    }


@pytest.fixture
def fs(options: dict[str, str]) -> ObjsdkFileSystem:
    return ObjsdkFileSystem(**options, skip_instance_cache=True)


def test_entry_point_registers_objsdk_and_never_s3() -> None:
    ours = [
        ep.name
        for ep in importlib.metadata.entry_points(group="fsspec.specs")
        if ep.value.startswith("objsdk.")
    ]
    assert ours == ["objsdk"]
    assert fsspec.get_filesystem_class("objsdk") is ObjsdkFileSystem


def test_s3_alias_is_opt_in(monkeypatch: pytest.MonkeyPatch, options: dict[str, str]) -> None:
    registry = sys.modules["fsspec.registry"]
    for name in ("s3", "s3a"):  # restored (or removed) after the test
        monkeypatch.setitem(registry._registry, name, registry._registry.get(name))
    register_s3_alias()
    fs = fsspec.filesystem("s3", **options, skip_instance_cache=True)
    assert isinstance(fs, ObjsdkFileSystem)
    assert fs._strip_protocol("s3://bucket/key/") == "bucket/key"


def test_open_returns_the_resilient_object_file(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    data = os.urandom(100_000)
    client.put_object(bucket, "f.bin", data)
    with fs.open(f"objsdk://{bucket}/f.bin", "rb") as f:
        assert isinstance(f, ObjectFile)
        assert f.size == len(data)
        f.seek(-10, io.SEEK_END)
        assert f.read() == data[-10:]
        f.seek(5)
        buf = bytearray(7)
        assert f.readinto(buf) == 7
        assert bytes(buf) == data[5:12]
    assert f.closed


def test_reads_resume_through_a_connection_that_keeps_breaking(
    minio_proxy: Any, local_minio: Any, client: Client, bucket: str
) -> None:
    data = os.urandom(1 << 20)
    client.put_object(bucket, "r.bin", data)
    minio_proxy.add_toxic("limit_data", bytes=300_000)  # each connection dies after 300 kB
    fs = ObjsdkFileSystem(
        endpoint_url=minio_proxy.endpoint,
        key=local_minio.access_key,
        secret=local_minio.secret_key,
        skip_instance_cache=True,
    )
    client.head_object(bucket, "r.bin")
    with fs.open(f"{bucket}/r.bin") as f:
        assert f.read() == data
        assert f.stats.resumes >= 1


def test_open_of_a_missing_file_is_file_not_found(fs: ObjsdkFileSystem, bucket: str) -> None:
    with pytest.raises(FileNotFoundError):
        fs.open(f"{bucket}/missing")
    with pytest.raises(FileNotFoundError):
        fs.cat_file("no-such-bucket-x/k")
    with pytest.raises(FileNotFoundError):
        fs.pipe_file("no-such-bucket-x/k", b"data")


def test_a_failed_write_leaves_no_object(fs: ObjsdkFileSystem, bucket: str) -> None:
    def write_then_fail() -> None:
        with fs.open(f"{bucket}/w", "wb") as f:
            f.write(b"partial")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_then_fail()
    assert not fs.exists(f"{bucket}/w")


def test_text_mode_write_and_read(fs: ObjsdkFileSystem, bucket: str) -> None:
    with fs.open(f"{bucket}/t.txt", "w") as f:
        f.write("héllo\nworld\n")
    with fs.open(f"{bucket}/t.txt") as f:
        assert f.read() == b"h\xc3\xa9llo\nworld\n"
    with fs.open(f"{bucket}/t.txt", "r") as f:
        assert f.readlines() == ["héllo\n", "world\n"]


@pytest.mark.parametrize("mode", ["r+b", "rb+", "w+", "a+b", "x+", "rw", "wbx"])
def test_a_mode_that_updates_in_place_or_mixes_modes_is_refused_by_name(
    fs: ObjsdkFileSystem, client: Client, bucket: str, mode: str
) -> None:
    client.put_object(bucket, "kept", b"old")
    with pytest.raises(ValueError, match=r"mode .* is not supported for"):
        fs.open(f"{bucket}/kept", mode)
    assert client.get_object(bucket, "kept") == b"old"


def test_open_files_carry_fsspecs_path_fs_and_mode(fs: ObjsdkFileSystem, bucket: str) -> None:
    for mode in ("wb", "xb", "ab"):
        with fs.open(f"{bucket}/{mode}", mode) as w:
            assert (w.path, w.fs, w.mode) == (f"{bucket}/{mode}", fs, mode)
    with fs.open(f"{bucket}/wb", "rb") as r:
        assert (r.path, r.fs, r.mode) == (f"{bucket}/wb", fs, "rb")


def test_rmdir_removes_an_empty_folder_and_refuses_one_that_holds_objects(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    client.put_object(bucket, "full/a", b"1")
    client.put_object(bucket, "full/", b"")
    client.put_object(bucket, "empty/", b"")
    with pytest.raises(OSError, match="holds objects") as refused:
        fs.rmdir(f"{bucket}/full")
    assert refused.value.errno == errno.ENOTEMPTY
    assert sorted(o.key for o in client.list_objects(bucket)) == ["empty/", "full/", "full/a"]
    fs.rmdir(f"{bucket}/empty")
    fs.rmdir(f"{bucket}/nothing-here")  # a folder exists only through its keys
    assert sorted(o.key for o in client.list_objects(bucket)) == ["full/", "full/a"]


def test_cat_ranges_returns_each_range_and_errors_in_place(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    data = bytes(range(256)) * 100
    client.put_object(bucket, "c", data)
    paths = [f"{bucket}/c"] * 20 + [f"{bucket}/missing"]
    starts = [i * 1000 for i in range(20)] + [0]
    ends = [i * 1000 + 17 for i in range(20)] + [5]
    out = fs.cat_ranges(paths, starts, ends)
    assert out[:20] == [data[s:e] for s, e in zip(starts[:20], ends[:20], strict=True)]
    assert isinstance(out[20], FileNotFoundError)


def test_cat_file_with_negative_offsets(fs: ObjsdkFileSystem, client: Client, bucket: str) -> None:
    client.put_object(bucket, "n", b"0123456789")
    assert fs.cat_file(f"{bucket}/n", start=-3) == b"789"
    assert fs.cat_file(f"{bucket}/n", start=2, end=-2) == b"234567"
    assert fs.cat_file(f"{bucket}/n", start=20) == b""


def test_ls_info_find_glob(fs: ObjsdkFileSystem, client: Client, bucket: str) -> None:
    for key in ("a.csv", "d/b.csv", "d/e/c.txt"):
        client.put_object(bucket, key, b"x")
    assert fs.ls(bucket, detail=False) == [f"{bucket}/a.csv", f"{bucket}/d"]
    assert fs.info(f"{bucket}/d")["type"] == "directory"
    assert fs.info(f"{bucket}/a.csv")["size"] == 1
    assert fs.find(bucket) == [f"{bucket}/a.csv", f"{bucket}/d/b.csv", f"{bucket}/d/e/c.txt"]
    assert fs.glob(f"{bucket}/**/*.csv") == [f"{bucket}/a.csv", f"{bucket}/d/b.csv"]
    assert fs.isdir(bucket)
    assert fs.isfile(f"{bucket}/d/e/c.txt")
    with pytest.raises(FileNotFoundError):
        fs.info(f"{bucket}/nothing")


@pytest.mark.parametrize("version_aware", [False, True])
def test_every_name_find_gives_can_be_read_and_removed_question_marks_too(
    options: dict[str, str], client: Client, bucket: str, version_aware: bool
) -> None:
    # As in s3fs, only "?versionId=" starts a version: "q?.txt" is a key like any other.
    fs = ObjsdkFileSystem(**options, version_aware=version_aware, skip_instance_cache=True)
    keys = ["q?.txt", "a?b=c", "x?versionIdx", "plain"]
    for key in keys:
        client.put_object(bucket, key, key.encode())
    found = fs.find(bucket)
    assert found == sorted(f"{bucket}/{k}" for k in keys)
    for path in found:
        assert fs.cat_file(path) == path.partition("/")[2].encode()
        assert fs.info(path)["size"] == len(path) - len(bucket) - 1
        with fs.open(path) as f:
            assert f.read() == path.partition("/")[2].encode()
        fs.rm_file(path)
    assert fs.find(bucket) == []


def test_a_key_with_brackets_is_named_exactly_by_the_file_methods_or_an_escaped_glob(
    fs: ObjsdkFileSystem, bucket: str
) -> None:
    # fsspec's rm, cat and get read "[1]" as a glob (docs/fsspec.md), as s3fs does.
    fs.pipe({f"{bucket}/{k}": k.encode() for k in ["f[1]", "f1", "g[2]", "g2"]})
    assert fs.cat(f"{bucket}/f[1]") == {f"{bucket}/f1": b"f1"}
    assert fs.cat_file(f"{bucket}/f[1]") == b"f[1]"
    assert fs.rm(f"{bucket}/f[[]1]") == [f"{bucket}/f[1]"]
    fs.rm_file(f"{bucket}/g[2]")
    assert fs.find(bucket) == [f"{bucket}/f1", f"{bucket}/g2"]


def test_a_version_in_a_path_needs_a_version_aware_filesystem(
    fs: ObjsdkFileSystem, bucket: str
) -> None:
    assert fs.split_path(f"{bucket}/k?x=1") == (bucket, "k?x=1", None)
    with pytest.raises(ValueError, match="version_aware=True"):
        fs.split_path(f"{bucket}/k?versionId=v1")
    aware = ObjsdkFileSystem(**fs.storage_options, version_aware=True, skip_instance_cache=True)
    assert aware.split_path(f"objsdk://{bucket}/d/k?versionId=a+b.c") == (bucket, "d/k", "a+b.c")


def test_mkdir_creates_a_bucket_and_rm_recursive_removes_it(
    fs: ObjsdkFileSystem,
    client: Client,
    fresh_bucket_name: str,
    s3_features: Any,
    request: pytest.FixtureRequest,
) -> None:
    if not s3_features.refuses_own_bucket:
        request.applymarker(
            pytest.mark.xfail(
                strict=True,
                reason="mkdir of an existing bucket raises FileExistsError only where "
                "CreateBucket refuses the owner's own bucket (not AWS us-east-1, moto)",
            )
        )
    fs.mkdir(fresh_bucket_name)
    assert client.bucket_exists(fresh_bucket_name)
    with pytest.raises(FileExistsError):
        fs.mkdir(fresh_bucket_name)
    fs.pipe({f"{fresh_bucket_name}/a": b"1", f"{fresh_bucket_name}/b/c": b"2"})
    fs.rm(fresh_bucket_name, recursive=True)
    assert not client.bucket_exists(fresh_bucket_name)


def test_rm_recursive_removes_the_whole_tree_folder_markers_too(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    # Folder markers ("a/sub/", as consoles and s3fs's mkdir-like tools make them) are
    # objects: a tree with one left behind still exists.
    for key in ("mk/", "mk/a", "mk/sub/", "mk/sub/deeper/", "mk-sibling"):
        client.put_object(bucket, key, b"")
    deleted = fs.rm(f"{bucket}/mk", recursive=True)
    assert sorted(deleted) == [
        f"{bucket}/{k}" for k in ("mk/", "mk/a", "mk/sub/", "mk/sub/deeper/")
    ]
    assert [o.key for o in client.list_objects(bucket)] == ["mk-sibling"]
    assert not fs.exists(f"{bucket}/mk")
    with pytest.raises(FileNotFoundError):
        fs.rm(f"{bucket}/nothing-here", recursive=True)


def test_rm_recursive_deletes_the_keys_listed_and_invents_none(
    fs: ObjsdkFileSystem, client: Client, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In a versioned bucket AWS writes a delete marker for each key deleted, there or
    # not: a "dir/" marker never stored must not be asked to go.
    client.put_object(bucket, "a/b/c", b"1")
    client.put_object(bucket, "a/d", b"2")
    asked: list[str] = []
    delete_objects = client.delete_objects

    def recorded(b: str, keys: Any) -> Any:
        keys = list(keys)
        asked.extend(keys)
        return delete_objects(b, keys)

    monkeypatch.setattr(fs.client, "delete_objects", recorded)
    fs.rm(f"{bucket}/a", recursive=True)
    assert sorted(asked) == ["a/b/c", "a/d"]
    assert list(client.list_objects(bucket)) == []


def test_copy_and_mv_recursive_keep_empty_folders(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    for key in ("fc/", "fc/a", "fc/empty/"):
        client.put_object(bucket, key, b"" if key.endswith("/") else b"a")
    fs.copy(f"{bucket}/fc", f"{bucket}/copied", recursive=True)
    fs.mv(f"{bucket}/fc", f"{bucket}/moved", recursive=True)
    assert sorted(o.key for o in client.list_objects(bucket)) == [
        "copied/", "copied/a", "copied/empty/", "moved/", "moved/a", "moved/empty/",
    ]  # fmt: skip


class Sent:
    """The requests sent inside ``with sent:``, as the client logs them
    (``"HEAD bucket/key -> 200"``)."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self._caplog = caplog

    def __enter__(self) -> None:
        self._caplog.clear()
        self._level = self._caplog.at_level(logging.DEBUG, logger="objsdk")
        self._level.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._level.__exit__(*exc)

    def __call__(self, method: str = "") -> list[str]:
        messages = [r.getMessage() for r in self._caplog.records]
        return [m for m in messages if " -> " in m and m.startswith(method)]


@pytest.fixture
def sent(caplog: pytest.LogCaptureFixture) -> Sent:
    return Sent(caplog)


def test_cp_file_of_an_object_asks_for_it_once(
    fs: ObjsdkFileSystem, client: Client, bucket: str, sent: Sent
) -> None:
    # The copy's own HEAD says whether it is an object; asking first whether it is a
    # directory cost each file of a recursive copy one request more. One CopyObject
    # after it, as s3fs sends: the copy is the whole object, made on the server;
    # nothing to ask of it after.
    client.put_object(bucket, "one", b"1")
    with sent:
        fs.cp_file(f"{bucket}/one", f"{bucket}/two")
    assert sent() == [f"HEAD {bucket}/one -> 200", f"PUT {bucket}/two -> 200"]
    assert client.get_object(bucket, "two") == b"1"


def test_get_file_of_an_object_asks_for_it_once(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path, sent: Sent
) -> None:
    # The download's own HEAD says whether it is an object: asking first whether the
    # path is a directory cost every file one request more.
    client.put_object(bucket, "one", b"1")
    with sent:
        fs.get_file(f"{bucket}/one", str(tmp_path / "one"))
    assert sent("HEAD") == [f"HEAD {bucket}/one -> 200"]
    assert (tmp_path / "one").read_bytes() == b"1"


def test_get_file_of_a_directory_makes_it_and_of_nothing_raises_file_not_found(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path
) -> None:
    client.put_object(bucket, "dir/a", b"a")
    fs.get_file(f"{bucket}/dir", str(tmp_path / "dir"))
    assert (tmp_path / "dir").is_dir()
    assert list((tmp_path / "dir").iterdir()) == []  # as fsspec: the directory alone
    fs.get_file(f"{bucket}/dir", str(tmp_path / "dir"))  # already there: nothing to do
    fs.get_file(f"{bucket}/dir", str(tmp_path / "made") + os.sep)
    assert (tmp_path / "made").is_dir()
    with pytest.raises(FileNotFoundError, match="nothing"):
        fs.get_file(f"{bucket}/nothing", str(tmp_path / "nothing"))
    assert not (tmp_path / "nothing").exists()


def test_get_of_one_small_object_sends_a_head_and_a_get_as_s3fs_does(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path, sent: Sent
) -> None:
    # fsspec's get asks whether the path is a directory (a HEAD); that HEAD said what
    # the object is, so one GET fetches it.
    client.put_object(bucket, "one", b"1" * 5000)
    with sent:
        fs.get(f"{bucket}/one", str(tmp_path / "one"))
    assert sent() == [f"HEAD {bucket}/one -> 200", f"GET {bucket}/one -> 200"]
    assert (tmp_path / "one").read_bytes() == b"1" * 5000
    assert [p.name for p in tmp_path.iterdir()] == ["one"]  # no temporary file left


def test_get_of_one_larger_object_asks_for_it_no_more_than_fsspec_and_the_download_do(
    fs: ObjsdkFileSystem,
    client: Client,
    bucket: str,
    tmp_path: Path,
    sent: Sent,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(many, "SMALL_OBJECT", 100)  # 5000 bytes go through download()
    client.put_object(bucket, "one", b"1" * 5000)
    with sent:
        fs.get(f"{bucket}/one", str(tmp_path / "one"))
    assert sent("HEAD") == [f"HEAD {bucket}/one -> 200"] * 2
    assert (tmp_path / "one").read_bytes() == b"1" * 5000


def test_put_and_get_a_tree(fs: ObjsdkFileSystem, bucket: str, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "one").write_bytes(b"1")
    (src / "sub" / "two").write_bytes(os.urandom(50_000))
    fs.put(str(src), f"{bucket}/up", recursive=True)
    fs.get(f"{bucket}/up", str(tmp_path / "back"), recursive=True)
    for rel in ("one", "sub/two"):
        assert (tmp_path / "back" / rel).read_bytes() == (src / rel).read_bytes()


def test_get_file_into_a_file_object_writes_from_its_position_and_leaves_it_open(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    client.put_object(bucket, "k", b"payload")
    out = io.BytesIO(b"head:")
    out.seek(0, io.SEEK_END)
    fs.get_file(f"{bucket}/k", out)
    fs.get_file(f"{bucket}/k", "ignored-name", outfile=out)
    assert not out.closed
    assert out.getvalue() == b"head:payloadpayload"


def test_without_options_it_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, s3_server: Any, bucket: str, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    fs = fsspec.filesystem("objsdk", skip_instance_cache=True)
    fs.pipe_file(f"{bucket}/env", b"from env")
    with fsspec.open(f"objsdk://{bucket}/env") as f:
        assert f.read() == b"from env"


def test_s3fs_style_storage_options_carry_over(s3_server: Any, client: Client, bucket: str) -> None:
    client.put_object(bucket, "s3fs", b"same options")
    fs = ObjsdkFileSystem(
        key=s3_server.access_key,
        secret=s3_server.secret_key,
        client_kwargs={"endpoint_url": s3_server.endpoint, "region_name": "us-east-1"},
        skip_instance_cache=True,
    )
    assert fs.cat_file(f"{bucket}/s3fs") == b"same options"


def test_anon_sends_unsigned_requests(local_minio: Any, bucket: str) -> None:
    fs = ObjsdkFileSystem(endpoint_url=local_minio.endpoint, anon=True, skip_instance_cache=True)
    with pytest.raises(PermissionError):
        fs.cat_file(f"{bucket}/anything")


def test_repr_hides_the_secret_and_pickles_round_trip(
    fs: ObjsdkFileSystem, options: dict[str, str], client: Client, bucket: str
) -> None:
    assert options["secret"] not in repr(fs) + str(fs)
    client.put_object(bucket, "p", b"pickled")
    copy = pickle.loads(pickle.dumps(fs))
    assert copy.cat_file(f"{bucket}/p") == b"pickled"
    with fs.open(f"{bucket}/p") as f:
        f.read(2)
        g = pickle.loads(pickle.dumps(f))
    assert g.read() == b"ckled"


def test_ls_of_a_path_nothing_lies_under_asks_only_whether_it_is_a_file(
    fs: ObjsdkFileSystem, client: Client, bucket: str, sent: Sent
) -> None:
    # The listing found nothing under the path: a HEAD says whether it is a file. Asking
    # info (a HEAD, then that same listing again) cost a request more than s3fs's two.
    client.put_object(bucket, "f.txt", b"abc")
    with sent:
        assert fs.ls(f"{bucket}/f.txt", detail=False) == [f"{bucket}/f.txt"]
    assert sent() == [f"GET {bucket}/ -> 200", f"HEAD {bucket}/f.txt -> 200"]
    assert fs.ls(f"{bucket}/f.txt", detail=True)[0]["size"] == 3
    with sent, pytest.raises(FileNotFoundError, match="nope"):
        fs.ls(f"{bucket}/nope")
    assert sent() == [f"GET {bucket}/ -> 200", f"HEAD {bucket}/nope -> 404"]
    client.put_object(bucket, "marked/", b"")  # an empty directory, as a marker says
    with sent:
        assert fs.ls(f"{bucket}/marked") == []
    assert sent() == [f"GET {bucket}/ -> 200"]


def test_isdir_is_one_listing_of_what_lies_under_the_path_as_s3fs_asks(
    fs: ObjsdkFileSystem, client: Client, bucket: str, sent: Sent
) -> None:
    # fsspec's own isdir is info(path): a HEAD, then the listing. s3fs lists alone: a
    # path is a directory when keys lie under it.
    for key in ("d/a", "marked/"):
        client.put_object(bucket, key, b"x")
    with sent:
        assert fs.isdir(f"{bucket}/d")
    assert sent() == [f"GET {bucket}/ -> 200"]
    assert fs.isdir(f"s3://{bucket}/d/")
    assert fs.isdir(f"{bucket}/marked")
    assert not fs.isdir(f"{bucket}/d/a")
    assert not fs.isdir(f"{bucket}/nothing")
    assert not fs.isdir(f"{bucket}-no-such-bucket/d")
    assert fs.isdir(bucket)
    assert fs.isdir("")
    assert not fs.isdir(f"{bucket}-no-such-bucket")


def test_du_adds_up_one_listing_as_s3fs_does(
    fs: ObjsdkFileSystem, client: Client, bucket: str, sent: Sent
) -> None:
    # fsspec's own du sends a HEAD for every file the listing found.
    for i in range(5):
        client.put_object(bucket, f"du/d{i % 2}/{i}", b"x" * (10 + i))
    with sent:
        assert fs.du(f"{bucket}/du") == sum(10 + i for i in range(5))
    assert sent() == [f"GET {bucket}/ -> 200"]
    assert fs.du(f"{bucket}/du", total=False) == {
        f"{bucket}/du/d{i % 2}/{i}": 10 + i for i in range(5)
    }
    assert fs.du(f"{bucket}/du", total=False, withdirs=True) == {
        f"{bucket}/du": 0,
        f"{bucket}/du/d0": 0,
        f"{bucket}/du/d1": 0,
        **{f"{bucket}/du/d{i % 2}/{i}": 10 + i for i in range(5)},
    }
    assert fs.du(f"{bucket}/du", maxdepth=1) == 0  # only the folders at depth 1
    assert fs.du(f"{bucket}/du/d0/0") == 10  # a file: its size


@pytest.mark.needs_feature("checks_signatures")
def test_a_prefix_the_caller_may_list_is_a_directory_though_its_head_is_refused(
    s3_server: Any, client: Client, bucket: str, tmp_path: Path
) -> None:
    # A home prefix per user (s3:ListBucket with an s3:prefix condition): a HEAD of
    # "home" is refused (403, as S3 answers for what the caller may not read), and was
    # taken for "not a directory".
    from s3_helpers import grant_unsigned

    grant_unsigned(s3_server, bucket, ["s3:GetObject"], under="home/", listing=True)
    for key in ("home/a.txt", "home/sub/b.txt", "other/c.txt"):
        client.put_object(bucket, key, b"x")
    fs = ObjsdkFileSystem(endpoint_url=s3_server.endpoint, anon=True, skip_instance_cache=True)
    assert fs.isdir(f"{bucket}/home")
    assert fs.info(f"{bucket}/home")["type"] == "directory"
    fs.get_file(f"{bucket}/home", str(tmp_path / "home"))
    assert (tmp_path / "home").is_dir()
    fs.get(f"{bucket}/home", str(tmp_path / "all"), recursive=True)
    assert (tmp_path / "all" / "sub" / "b.txt").read_bytes() == b"x"
    with pytest.raises(PermissionError):
        fs.info(f"{bucket}/other")  # refused both ways: the HEAD's refusal
    with pytest.raises(PermissionError):
        fs.cat_file(f"{bucket}/other/c.txt")


def test_a_glob_lists_each_directory_it_walks_once_and_asks_nothing_more(
    fs: ObjsdkFileSystem, client: Client, bucket: str, sent: Sent
) -> None:
    # fsspec's find asks isdir(root), then info(root): two HEADs and two listings more
    # than the walk, whose first listing already says the root is a directory (s3fs
    # answers both from that listing, cached).
    for key in ("g/d0/a.json", "g/d0/b.txt", "g/d1/c.json", "g/top.json"):
        client.put_object(bucket, key, b"{}")
    with sent:
        found = fs.glob(f"{bucket}/g/*/*.json")
    assert found == [f"{bucket}/g/d0/a.json", f"{bucket}/g/d1/c.json"]
    assert sent() == [f"GET {bucket}/ -> 200"] * 3  # g, g/d0, g/d1
    assert fs.glob(f"{bucket}/g/*.json") == [f"{bucket}/g/top.json"]
    assert fs.find(f"{bucket}/g", maxdepth=1, withdirs=True) == [
        f"{bucket}/g", f"{bucket}/g/d0", f"{bucket}/g/d1", f"{bucket}/g/top.json"
    ]  # fmt: skip
    with sent:
        assert fs.find(f"{bucket}/g/top.json", maxdepth=1) == [f"{bucket}/g/top.json"]
    assert sent() == [f"GET {bucket}/ -> 200", f"HEAD {bucket}/g/top.json -> 200"]
    assert (
        fs.find(f"{bucket}/g/top.json", maxdepth=1, detail=True)[f"{bucket}/g/top.json"]["size"]
        == 2
    )  # the file's entry, where fsspec's find gives {}
    client.put_object(bucket, "m/", b"")  # a directory with a marker and nothing else
    assert fs.find(f"{bucket}/m", maxdepth=1, withdirs=True) == [f"{bucket}/m"]
    assert fs.find(f"{bucket}/m", maxdepth=1) == []
    assert fs.find(f"{bucket}/nothing", maxdepth=1, withdirs=True) == []
    assert fs.glob(f"{bucket}/g/top.json/*") == []
