"""``Client.copy``: an object of any size copied on the server, pinned to one version.

* Up to ``multipart_threshold`` one CopyObject; above it, parts the server copies
  (UploadPartCopy): the copy's bytes, content type and metadata are the source's.
* ``content_type``, ``metadata`` or a standard header replace what the source had.
* A source replaced mid-copy is never spliced: the copy fails, no upload is left.
* A version of a versioned object is copied as named.
* One CopyObject gives the copy a full-object CRC32C of its own, so its reads are
  verified whatever checksum the source had.
"""

from __future__ import annotations

import io
import os
from typing import Any

import pytest
from s3_helpers import boto3_client

from objsdk import Client, InvalidArgument, ObjectChangedError, ObjsdkError
from objsdk._transfer import copy as copy_module
from objsdk._transfer.multipart_calls import list_multipart_uploads
from objsdk.testing import S3Features

pytestmark = pytest.mark.integration

MiB = 1 << 20
PARTS = {"multipart_threshold": 5 * MiB, "part_size": 5 * MiB}


def _source(client: Client, bucket: str, size: int = 23 * MiB) -> bytes:
    data = os.urandom(size)
    client.put_object(
        bucket,
        "src",
        data,
        content_type="text/x-mine",
        metadata={"who": "me"},
        cache_control="max-age=60",
    )
    return data


@pytest.mark.parametrize("route", [{}, PARTS], ids=["one-copy", "parts"])
def test_the_copy_holds_the_source_bytes_type_and_metadata(
    client: Client, bucket: str, route: dict[str, int]
) -> None:
    data = _source(client, bucket)
    info = client.copy(bucket, "src", bucket, "dst", **route)
    assert client.get_object(bucket, "dst") == data
    assert (info.size, info.content_type, info.metadata) == (
        len(data),
        "text/x-mine",
        {"who": "me"},
    )
    assert info.cache_control == "max-age=60"
    # The route taken: a multipart ETag ("-<parts>") only for the parts (23 MiB / 5 MiB).
    assert (info.etag or "").strip('"').endswith("-5") == bool(route)


@pytest.mark.parametrize("route", [{}, PARTS], ids=["one-copy", "parts"])
def test_a_given_type_or_metadata_replaces_the_sources(
    client: Client, bucket: str, route: dict[str, int]
) -> None:
    _source(client, bucket, 6 * MiB)
    typed = client.copy(bucket, "src", bucket, "t", content_type="a/b", **route)
    assert (typed.content_type, typed.metadata, typed.cache_control) == ("a/b", {}, None)
    tagged = client.copy(bucket, "src", bucket, "m", metadata={"k": "v"}, **route)
    assert tagged.metadata == {"k": "v"}


def test_a_source_replaced_mid_copy_is_never_spliced(
    client: Client, bucket: str, s3_features: S3Features, monkeypatch: pytest.MonkeyPatch
) -> None:
    _source(client, bucket)
    real, calls = copy_module.upload_part_copy, []

    def replacing_the_source(*args: object, **kwargs: object) -> object:
        calls.append(None)
        if len(calls) == 2:  # between the first part and the second
            client.put_object(bucket, "src", os.urandom(7 * MiB))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(copy_module, "upload_part_copy", replacing_the_source)
    expected = ObjectChangedError if s3_features.checks_copy_source_if_match else ObjsdkError
    with pytest.raises(expected):
        client.copy(bucket, "src", bucket, "dst", parallel=1, **PARTS)
    assert "dst" not in [o.key for o in client.list_objects(bucket)]
    assert list(list_multipart_uploads(client.transport, bucket)) == []


def test_a_version_is_copied_as_named(client: Client, bucket: str) -> None:
    client.set_bucket_versioning(bucket, True)
    old = client.put_object(bucket, "src", b"old" * MiB * 2).version_id
    client.put_object(bucket, "src", b"new")
    for route in ({}, PARTS):
        copied = client.copy(bucket, "src", bucket, "dst", version_id=old, **route)
        assert copied.size == 6 * MiB
        assert client.get_object(bucket, "dst") == b"old" * MiB * 2
    for v in list(client.list_object_versions(bucket)):
        client.delete_object(bucket, v.key, version_id=v.version_id)


def test_bad_arguments_are_refused_naming_them(client: Client, bucket: str) -> None:
    client.put_object(bucket, "src", b"x")
    with pytest.raises(InvalidArgument, match="parallel"):
        client.copy(bucket, "src", bucket, "dst", parallel=0)
    with pytest.raises(InvalidArgument, match="multipart_threshold"):
        client.copy(bucket, "src", bucket, "dst", multipart_threshold=-1)
    with pytest.raises(InvalidArgument, match="part_size"):
        client.copy(bucket, "src", bucket, "dst", multipart_threshold=0, part_size=MiB)


class Stop(Exception):
    pass


def test_progress_counts_the_parts_and_an_exception_from_it_aborts_the_copy(
    client: Client, bucket: str
) -> None:
    data = _source(client, bucket)
    calls: list[tuple[int, int | None]] = []
    client.copy(bucket, "src", bucket, "dst", progress=lambda d, t: calls.append((d, t)), **PARTS)
    assert calls[-1] == (len(data), len(data))
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)

    def stop(done: int, total: int | None) -> None:
        raise Stop

    with pytest.raises(Stop):
        client.copy(bucket, "src", bucket, "stopped", progress=stop, **PARTS)
    assert "stopped" not in [o.key for o in client.list_objects(bucket)]
    assert list(list_multipart_uploads(client.transport, bucket)) == []


@pytest.mark.parametrize("writer", ["boto3 multipart (CRC32)", "objsdk"])
def test_one_copy_object_gives_the_copy_a_crc32c_its_reads_verify(
    client: Client, bucket: str, s3_server: Any, writer: str
) -> None:
    data = os.urandom(12 * MiB)
    if writer == "objsdk":
        client.put_object(bucket, "src", data)
    else:
        from boto3.s3.transfer import TransferConfig

        config = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
        boto3_client(s3_server).upload_fileobj(io.BytesIO(data), bucket, "src", Config=config)
    client.copy(bucket, "src", bucket, "dst")
    assert "crc32c" in client.head_object(bucket, "dst").checksums
    with client.open(bucket, "dst") as f:
        assert f.read() == data
        assert f.stats.verified == "crc32c"
