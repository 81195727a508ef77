"""Every s3fs option is honoured or refused by name, never ignored: the test walks s3fs's
``S3FileSystem.__init__`` and ``_open`` signatures, so an option s3fs adds fails here
until it is classified. Against MinIO."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
import s3fs

from objsdk import SSEKMS, SSES3, Client
from objsdk.filesystem import ObjsdkFileSystem

pytestmark = pytest.mark.integration

Check = Callable[[dict[str, Any], str, Client], None]


@pytest.fixture
def options(local_minio: Any) -> dict[str, Any]:
    return {
        "endpoint_url": local_minio.endpoint,
        "key": local_minio.access_key,
        "secret": local_minio.secret_key,
        "skip_instance_cache": True,
    }


def _fs(options: dict[str, Any], **more: Any) -> ObjsdkFileSystem:
    return ObjsdkFileSystem(**{**options, **more})


def _acls(calls: list[dict[str, Any]]) -> list[str | None]:
    """The ``x-amz-acl`` of each PUT or CreateMultipartUpload among a transport's calls."""
    writes = ("put_object", "create_multipart_upload")
    return [(c.get("headers") or {}).get("x-amz-acl") for c in calls if c["operation"] in writes]


def _spy(obj: Any, name: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    real = getattr(obj, name)

    def call(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(*args, **kwargs)

    setattr(obj, name, call)
    return calls


# -- S3FileSystem.__init__: how each honoured option shows ------------------------------


def check_credentials(options: dict[str, Any], bucket: str, client: Client) -> None:
    client.put_object(bucket, "c", b"creds")
    assert _fs(options).cat_file(f"{bucket}/c") == b"creds"
    with pytest.raises(PermissionError):
        _fs(options, secret="wrong").cat_file(f"{bucket}/c")
    with pytest.raises(PermissionError):
        _fs(options, token="not-a-session-token").cat_file(f"{bucket}/c")


def check_anon(options: dict[str, Any], bucket: str, client: Client) -> None:
    with pytest.raises(PermissionError):
        _fs(options, anon=True).ls(bucket)


def check_username_password(options: dict[str, Any], bucket: str, client: Client) -> None:
    fs = ObjsdkFileSystem(
        endpoint_url=options["endpoint_url"],
        username=options["key"],
        password=options["secret"],
        skip_instance_cache=True,
    )
    assert fs.ls(bucket) == []
    with pytest.raises(ValueError, match="username"):
        _fs(options, username="x")


def check_use_ssl(options: dict[str, Any], bucket: str, client: Client) -> None:
    assert _fs(options, use_ssl=False).ls(bucket) == []  # an http endpoint is plain already
    with pytest.raises(ValueError, match="use_ssl"):
        _fs({**options, "endpoint_url": "https://127.0.0.1:1"}, use_ssl=False)


def check_client_kwargs(options: dict[str, Any], bucket: str, client: Client) -> None:
    fs = ObjsdkFileSystem(
        key=options["key"],
        client_kwargs={
            "endpoint_url": options["endpoint_url"],
            "aws_secret_access_key": options["secret"],
            "region_name": "us-east-1",
            "max_pool_connections": 3,
        },
        skip_instance_cache=True,
    )
    assert fs.ls(bucket) == []
    assert fs.client.config.max_pool_connections == 3
    with pytest.raises(TypeError, match="no_such_argument"):
        _fs(options, client_kwargs={"no_such_argument": 1})


def check_default_block_size(options: dict[str, Any], bucket: str, client: Client) -> None:
    client.put_object(bucket, "b", b"x" * 100)
    fs = _fs(options, default_block_size=6 << 20)
    with fs.open(f"{bucket}/b") as f:
        assert (f.blocksize, f.part_size) == (6 << 20, 6 << 20)
    with fs.open(f"{bucket}/w", "wb") as w:
        assert w.part_size == 6 << 20


def check_default_cache_type(options: dict[str, Any], bucket: str, client: Client) -> None:
    client.put_object(bucket, "c", b"x")
    with _fs(options, default_cache_type="none").open(f"{bucket}/c") as f:
        assert f.readahead == 0  # one stream, nothing kept
    with pytest.raises(ValueError, match="default_cache_type"):
        _fs(options, default_cache_type="bytes")


def check_version_aware(options: dict[str, Any], bucket: str, client: Client) -> None:
    client.set_bucket_versioning(bucket, True)
    old = client.put_object(bucket, "v", b"old").version_id
    client.put_object(bucket, "v", b"new")
    assert _fs(options, version_aware=True).cat_file(f"{bucket}/v?versionId={old}") == b"old"
    with pytest.raises(ValueError, match="version_aware"):
        _fs(options).cat_file(f"{bucket}/v?versionId={old}")
    for v in list(client.list_object_versions(bucket)):
        client.delete_object(bucket, v.key, version_id=v.version_id)


def check_config_kwargs(options: dict[str, Any], bucket: str, client: Client) -> None:
    fs = _fs(
        options,
        config_kwargs={
            "max_pool_connections": 5,
            "connect_timeout": 3,
            "read_timeout": 7,
            "retries": {"max_attempts": 2},
            "s3": {"addressing_style": "path"},
            "signature_version": "s3v4",
        },
    )
    config = fs.client.config
    assert (config.max_pool_connections, config.timeout, config.retries) == (5, (3, 7), 2)
    assert fs.ls(bucket) == []
    with pytest.raises(ValueError, match="config_kwargs"):
        _fs(options, config_kwargs={"tcp_keepalive": True})


def check_s3_additional_kwargs(options: dict[str, Any], bucket: str, client: Client) -> None:
    fs = _fs(
        options,
        s3_additional_kwargs={
            "ContentType": "text/csv",
            "CacheControl": "no-cache",
            "Metadata": {"source": "s3fs-code"},
        },
    )
    fs.pipe_file(f"{bucket}/piped", b"a,b\n")
    with fs.open(f"{bucket}/opened", "wb") as w:
        w.write(b"a,b\n")
    for key in ("piped", "opened"):
        info = client.head_object(bucket, key)
        assert (info.content_type, info.cache_control) == ("text/csv", "no-cache")
        assert info.metadata == {"source": "s3fs-code"}
    assert (
        _fs(options, s3_additional_kwargs={"ServerSideEncryption": "AES256"}).client.config.sse
        == SSES3()
    )
    kms = _fs(
        options,
        s3_additional_kwargs={"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "k1"},
    )
    assert kms.client.config.sse == SSEKMS("k1")
    owner = _fs(options, s3_additional_kwargs={"ACL": "bucket-owner-full-control"})
    sent = _spy(owner.client.transport, "request")
    owner.pipe_file(f"{bucket}/acl", b"x")
    assert _acls(sent) == ["bucket-owner-full-control"]
    with pytest.raises(ValueError, match="acl must be a canned ACL"):
        _fs(options, s3_additional_kwargs={"ACL": "public"}).pipe_file(f"{bucket}/no", b"x")
    with pytest.raises(ValueError, match="RequestPayer"):
        _fs(options, s3_additional_kwargs={"RequestPayer": "requester"})


def check_max_concurrency(options: dict[str, Any], bucket: str, client: Client) -> None:
    fs = _fs(options, max_concurrency=3)
    calls = _spy(fs.client, "upload")
    fs.pipe_file(f"{bucket}/m", b"x")
    assert calls[0]["parallel"] == 3
    with pytest.raises(ValueError, match="max_concurrency"):
        _fs(options, max_concurrency=0)


def check_fixed_upload_size(options: dict[str, Any], bucket: str, client: Client) -> None:
    fs = _fs(options, fixed_upload_size=True, default_block_size=5 << 20)
    calls = _spy(fs.client, "upload")
    fs.pipe_file(f"{bucket}/f", b"x")
    assert calls[0]["part_size"] == 5 << 20
    adaptive = _fs(options)
    calls = _spy(adaptive.client, "upload")
    adaptive.pipe_file(f"{bucket}/g", b"x")
    assert "part_size" not in calls[0]


def check_cache_regions(options: dict[str, Any], bucket: str, client: Client) -> None:
    # objsdk always finds a bucket's region and remembers it, as s3fs does when asked:
    # a filesystem told the wrong region reads the bucket either way.
    client.put_object(bucket, "r", b"found")
    for cache in (True, False):
        fs = _fs(options, cache_regions=cache, region="eu-central-1")
        assert fs.cat_file(f"{bucket}/r") == b"found"
        assert fs.cat_file(f"{bucket}/r") == b"found"


INIT_HONOURED: dict[str, Check] = {
    "anon": check_anon,
    "endpoint_url": check_credentials,
    "key": check_credentials,
    "secret": check_credentials,
    "token": check_credentials,
    "username": check_username_password,
    "password": check_username_password,
    "use_ssl": check_use_ssl,
    "client_kwargs": check_client_kwargs,
    "default_block_size": check_default_block_size,
    "default_cache_type": check_default_cache_type,
    "version_aware": check_version_aware,
    "config_kwargs": check_config_kwargs,
    "s3_additional_kwargs": check_s3_additional_kwargs,
    "max_concurrency": check_max_concurrency,
    "fixed_upload_size": check_fixed_upload_size,
    "cache_regions": check_cache_regions,
}

# Refused unless given s3fs's default: (a value that is not the default).
INIT_REFUSED: dict[str, Any] = {
    "requester_pays": True,
    "default_fill_cache": False,
    "session": object(),
    "asynchronous": True,
    "loop": object(),
    "local_expiry_check": True,
    # fsspec's, which s3fs passes on: objsdk caches no listings.
    "use_listings_cache": True,
    "listings_expiry_time": 10,
    "max_paths": 10,
}


def _names(function: Any) -> set[str]:
    return {
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name not in ("self", "path")
    }


def test_every_s3fs_init_option_is_classified() -> None:
    names = _names(s3fs.S3FileSystem.__init__)
    assert names <= set(INIT_HONOURED) | set(INIT_REFUSED), sorted(
        names - set(INIT_HONOURED) - set(INIT_REFUSED)
    )
    assert "version_aware" in names  # the walk sees s3fs's real signature


@pytest.mark.parametrize("name", sorted(INIT_HONOURED))
def test_s3fs_init_option_is_honoured(
    name: str, options: dict[str, Any], bucket: str, client: Client
) -> None:
    INIT_HONOURED[name](options, bucket, client)


@pytest.mark.parametrize("name", sorted(INIT_REFUSED))
def test_s3fs_init_option_is_refused_by_name(name: str, options: dict[str, Any]) -> None:
    with pytest.raises((TypeError, ValueError), match=name):
        _fs(options, **{name: INIT_REFUSED[name]})


def test_s3fs_defaults_of_refused_options_are_accepted(
    options: dict[str, Any], bucket: str
) -> None:
    defaults = {
        name: p.default
        for name, p in inspect.signature(s3fs.S3FileSystem.__init__).parameters.items()
        if name in INIT_REFUSED
    }
    assert _fs(options, **defaults, use_listings_cache=False).ls(bucket) == []


def test_an_unknown_storage_option_is_a_type_error_naming_it(options: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="verison_aware"):
        _fs(options, verison_aware=True)


# -- S3FileSystem._open --------------------------------------------------------------


def open_block_size(fs: ObjsdkFileSystem, bucket: str, client: Client) -> None:
    client.put_object(bucket, "o", b"0123456789")
    with fs.open(f"{bucket}/o", block_size=3 << 20) as f:
        assert f.blocksize == 3 << 20
        assert f.read() == b"0123456789"
    with fs.open(f"{bucket}/w", "wb", block_size=7 << 20) as w:
        assert w.part_size == 7 << 20


def open_version_id(fs: ObjsdkFileSystem, bucket: str, client: Client) -> None:
    client.set_bucket_versioning(bucket, True)
    old = client.put_object(bucket, "o", b"old").version_id
    client.put_object(bucket, "o", b"new")
    vfs = ObjsdkFileSystem(**fs.storage_options, version_aware=True)
    with vfs.open(f"{bucket}/o", version_id=old) as f:
        assert f.read() == b"old"
    with pytest.raises(ValueError, match="version_aware"):
        fs.open(f"{bucket}/o", version_id=old)
    for v in list(client.list_object_versions(bucket)):
        client.delete_object(bucket, v.key, version_id=v.version_id)


def open_cache_type(fs: ObjsdkFileSystem, bucket: str, client: Client) -> None:
    client.put_object(bucket, "o", b"x")
    with fs.open(f"{bucket}/o", cache_type="none") as f:
        assert f.readahead == 0
    with pytest.raises(ValueError, match="cache_type"):
        fs.open(f"{bucket}/o", cache_type="mmap")
    # Dask's name for it when it reads Parquet footers.
    with fs.open(f"{bucket}/o", default_cache="none") as f:
        assert f.readahead == 0
    with fs.open(f"{bucket}/o", default_cache="none", cache_type="readahead") as f:
        assert f.readahead != 0


def open_autocommit(fs: ObjsdkFileSystem, bucket: str, client: Client) -> None:
    f = fs.open(f"{bucket}/later", "wb", autocommit=False)
    f.write(b"held")
    f.close()
    assert not fs.exists(f"{bucket}/later")
    f.commit()
    assert fs.cat(f"{bucket}/later") == b"held"


def open_acl(fs: ObjsdkFileSystem, bucket: str, client: Client) -> None:
    client.put_object(bucket, "o", b"x")
    sent = _spy(fs.client.transport, "request")
    with fs.open(f"{bucket}/w", "wb", acl="public-read") as w:
        w.write(b"1")
    with fs.open(f"{bucket}/o", "rb", acl="public-read") as r:  # ignored, as s3fs does
        assert r.read() == b"x"
    assert _acls(sent) == ["public-read"]


def open_size(fs: ObjsdkFileSystem, bucket: str, client: Client) -> None:
    client.put_object(bucket, "o", b"sized")
    heads = _spy(fs.client, "head_object")
    with fs.open(f"{bucket}/o", size=5) as f:
        assert f.size == 5
        assert f.read() == b"sized"
    assert heads == []  # the size was given: no HEAD


OPEN_HONOURED: dict[str, Callable[[ObjsdkFileSystem, str, Client], None]] = {
    "mode": open_autocommit,
    "block_size": open_block_size,
    "version_id": open_version_id,
    "cache_type": open_cache_type,
    "autocommit": open_autocommit,
    "size": open_size,
    "acl": open_acl,
}
OPEN_REFUSED: dict[str, Any] = {
    "fill_cache": False,
    "requester_pays": True,
    "cache_options": {"blocksize": 1},
}


def test_every_s3fs_open_argument_is_classified() -> None:
    names = _names(s3fs.S3FileSystem._open)
    assert names <= set(OPEN_HONOURED) | set(OPEN_REFUSED), sorted(
        names - set(OPEN_HONOURED) - set(OPEN_REFUSED)
    )


@pytest.mark.parametrize("name", sorted(OPEN_HONOURED))
def test_s3fs_open_argument_is_honoured(
    name: str, options: dict[str, Any], bucket: str, client: Client
) -> None:
    OPEN_HONOURED[name](_fs(options), bucket, client)


@pytest.mark.parametrize("name", sorted(OPEN_REFUSED))
def test_s3fs_open_argument_is_refused_by_name(
    name: str, options: dict[str, Any], bucket: str, client: Client
) -> None:
    client.put_object(bucket, "o", b"x")
    with pytest.raises((TypeError, ValueError), match=name):
        _fs(options).open(f"{bucket}/o", **{name: OPEN_REFUSED[name]})


def test_unknown_open_arguments_are_type_errors_naming_them(
    options: dict[str, Any], bucket: str, client: Client
) -> None:
    client.put_object(bucket, "o", b"x")
    fs = _fs(options)
    with pytest.raises(TypeError, match="versionid"):
        fs.open(f"{bucket}/o", versionid="x")
    with pytest.raises(ValueError, match="RequestPayer"):
        fs.open(f"{bucket}/w", "wb", RequestPayer="requester")
    with pytest.raises(TypeError, match="content_type"):
        fs.open(f"{bucket}/o", "rb", content_type="text/plain")  # a write option


def test_open_takes_boto3_and_objsdk_names_for_what_a_write_stores(
    options: dict[str, Any], bucket: str, client: Client
) -> None:
    fs = _fs(options)
    sent = _spy(fs.client.transport, "request")
    with fs.open(
        f"{bucket}/a", "wb", ContentType="text/csv", Metadata={"k": "v"}, ACL="private"
    ) as w:
        w.write(b"1")
    with fs.open(f"{bucket}/b", "wb", content_type="text/csv", cache_control="max-age=1") as w:
        w.write(b"2")
    assert client.head_object(bucket, "a").metadata == {"k": "v"}
    assert client.head_object(bucket, "b").cache_control == "max-age=1"
    assert {client.head_object(bucket, k).content_type for k in "ab"} == {"text/csv"}
    assert _acls(sent) == ["private", None]
