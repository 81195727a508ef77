"""Object versions, tags, user metadata and the standard headers through the public
client, against MinIO."""

from __future__ import annotations

import os
from typing import Any

import pytest
from s3_helpers import boto3_client

from objsdk import Client, InvalidArgument, NoSuchKey, ObjectVersion, S3Error
from objsdk.testing import S3Features

pytestmark = pytest.mark.integration


@pytest.fixture
def versioned(client: Client, bucket: str) -> str:
    client.set_bucket_versioning(bucket, True)
    yield bucket
    # The bucket fixture deletes current keys only: remove every version first.
    for v in list(client.list_object_versions(bucket)):
        client.delete_object(bucket, v.key, version_id=v.version_id)


def test_bucket_versioning_is_off_then_on_then_suspended(client: Client, bucket: str) -> None:
    assert client.get_bucket_versioning(bucket) is None
    client.set_bucket_versioning(bucket, True)
    assert client.get_bucket_versioning(bucket) == "Enabled"
    client.set_bucket_versioning(bucket, False)
    assert client.get_bucket_versioning(bucket) == "Suspended"
    with pytest.raises(InvalidArgument, match="enabled"):
        client.set_bucket_versioning(bucket, "yes")  # type: ignore[arg-type]


def test_every_version_is_listed_read_headed_copied_and_deleted_by_id(
    client: Client, versioned: str
) -> None:
    bucket = versioned
    first = client.upload(bucket, "k", b"first version").version_id
    second = client.upload(bucket, "k", b"second, longer version").version_id
    assert first
    assert second
    assert first != second
    listed = list(client.list_object_versions(bucket, "k"))
    assert [(v.version_id, v.is_latest, v.size) for v in listed] == [
        (second, True, 22),
        (first, False, 13),
    ]
    assert all(isinstance(v, ObjectVersion) for v in listed)
    assert client.get_object(bucket, "k", version_id=first) == b"first version"
    assert client.get_object(bucket, "k", offset=6, length=7, version_id=first) == b"version"
    assert client.head_object(bucket, "k", version_id=first).size == 13
    with client.open(bucket, "k", version_id=first) as f:
        assert f.read() == b"first version"
    client.copy_object(bucket, "k", bucket, "restored", version_id=first)
    assert client.get_object(bucket, "restored") == b"first version"

    client.delete_object(bucket, "k")  # a delete marker on top
    with pytest.raises(NoSuchKey):
        client.get_object(bucket, "k")
    markers = [v for v in client.list_object_versions(bucket, "k") if v.delete_marker]
    assert len(markers) == 1
    assert markers[0].is_latest
    client.delete_object(bucket, "k", version_id=markers[0].version_id)
    assert client.get_object(bucket, "k") == b"second, longer version"
    client.delete_object(bucket, "k", version_id=second)
    assert client.get_object(bucket, "k") == b"first version"


def test_a_head_answer_of_a_version_opens_that_version(client: Client, versioned: str) -> None:
    first = client.put_object(versioned, "k", b"first version").version_id
    second = client.put_object(versioned, "k", b"second, longer version").version_id
    head = client.head_object(versioned, "k", version_id=first)
    with client.open(versioned, "k", pin=head) as f:
        assert (f.version_id, f.size) == (first, 13)
        assert f.read() == b"first version"
    with client.open(versioned, "k", version_id=first, pin=head) as f:
        assert f.read() == b"first version"
    with pytest.raises(InvalidArgument, match=f"{second!r} is not the pinned version {first!r}"):
        client.open(versioned, "k", version_id=second, pin=head)


@pytest.mark.parametrize("size", [1000, 40 << 20], ids=["one GET", "parts"])
def test_download_and_get_into_fetch_the_version_named(
    client: Client, versioned: str, tmp_path, size: int
) -> None:
    old, new = os.urandom(size), os.urandom(size + 1)
    first = client.put_object(versioned, "k", old).version_id
    client.put_object(versioned, "k", new)
    result = client.download(versioned, "k", tmp_path / "old.bin", version_id=first)
    assert result.info.version_id == first
    assert (tmp_path / "old.bin").read_bytes() == old
    buf = bytearray(size)
    assert client.get_into(versioned, "k", buf, version_id=first) == size
    assert buf == old
    small = bytearray(100)  # one ranged GET, no HEAD first
    assert client.get_into(versioned, "k", small, offset=10, version_id=first) == 100
    assert small == old[10:110]
    client.download(versioned, "k", tmp_path / "new.bin")
    assert (tmp_path / "new.bin").read_bytes() == new


def test_a_download_of_a_version_that_does_not_exist_names_it(
    client: Client, versioned: str, tmp_path
) -> None:
    client.put_object(versioned, "k", b"x")
    missing = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(S3Error) as e:
        client.download(versioned, "k", tmp_path / "x.bin", version_id=missing)
    assert e.value.key == "k"
    assert not (tmp_path / "x.bin").exists()


def test_listing_versions_pages_through_many(client: Client, versioned: str) -> None:
    for i in range(7):
        client.put_object(versioned, f"p/{i % 3}", str(i).encode())
    listed = list(client.list_object_versions(versioned, "p/", page_size=2))
    assert len(listed) == 7
    assert sorted({v.key for v in listed}) == ["p/0", "p/1", "p/2"]
    assert sum(v.is_latest for v in listed) == 3


def test_tags_are_put_read_and_deleted_per_version(client: Client, versioned: str) -> None:
    old = client.put_object(versioned, "t", b"1").version_id
    client.put_object(versioned, "t", b"2")
    assert client.get_object_tags(versioned, "t") == {}
    client.put_object_tags(versioned, "t", {"team": "data", "tier": "hot + cold: a/b@c"})
    client.put_object_tags(versioned, "t", {"old": "yes"}, version_id=old)
    assert client.get_object_tags(versioned, "t") == {"team": "data", "tier": "hot + cold: a/b@c"}
    assert client.get_object_tags(versioned, "t", version_id=old) == {"old": "yes"}
    client.delete_object_tags(versioned, "t")
    assert client.get_object_tags(versioned, "t") == {}
    assert client.get_object_tags(versioned, "t", version_id=old) == {"old": "yes"}


def test_bad_tags_are_refused_before_anything_is_sent(client: Client, bucket: str) -> None:
    with pytest.raises(InvalidArgument, match="at most 10 tags"):
        client.put_object_tags(bucket, "k", {str(i): "v" for i in range(11)})
    with pytest.raises(InvalidArgument, match="1 to 128"):
        client.put_object_tags(bucket, "k", {"": "v"})
    with pytest.raises(InvalidArgument, match="256"):
        client.put_object_tags(bucket, "k", {"k": "v" * 257})
    with pytest.raises(InvalidArgument, match="tag 'k'"):
        client.put_object_tags(bucket, "k", {"k": "<script>"})


HEADERS = {
    "cache_control": "max-age=60",
    "content_encoding": "gzip",
    "content_disposition": 'attachment; filename="a.bin"',
}


@pytest.mark.parametrize("size", [100, 12 << 20], ids=["one PUT", "multipart"])
def test_put_upload_and_open_write_store_metadata_and_the_standard_headers(
    client: Client, bucket: str, size: int
) -> None:
    data = os.urandom(size)
    client.put_object(bucket, "p", data, metadata={"origin": "put"}, **HEADERS)  # type: ignore[arg-type]
    client.upload(
        bucket,
        "u",
        data,
        content_type="application/x-test",
        metadata={"origin": "unit"},
        storage_class="STANDARD",
        multipart_threshold=5 << 20,
        **HEADERS,  # type: ignore[arg-type]
    )
    with client.open_write(
        bucket, "w", part_size=5 << 20, metadata={"origin": "writer"}, **HEADERS
    ) as w:  # type: ignore[arg-type]
        w.write(data)
    for key, origin in (("p", "put"), ("u", "unit"), ("w", "writer")):
        info = client.head_object(bucket, key)
        assert info.metadata == {"origin": origin}
        assert (info.cache_control, info.content_encoding, info.content_disposition) == (
            HEADERS["cache_control"],
            HEADERS["content_encoding"],
            HEADERS["content_disposition"],
        )
    assert client.head_object(bucket, "u").content_type == "application/x-test"


def test_copy_keeps_metadata_unless_new_metadata_or_headers_are_given(
    client: Client, bucket: str
) -> None:
    client.put_object(bucket, "src", b"x", content_type="text/plain", metadata={"a": "1"})
    client.copy_object(bucket, "src", bucket, "same")
    kept = client.head_object(bucket, "same")
    assert (kept.content_type, kept.metadata) == ("text/plain", {"a": "1"})
    client.copy_object(bucket, "src", bucket, "new", metadata={"b": "2"}, cache_control="no-cache")
    replaced = client.head_object(bucket, "new")
    assert replaced.metadata == {"b": "2"}
    assert replaced.cache_control == "no-cache"


def test_a_canned_acl_is_applied_by_a_service_that_applies_acls(
    client: Client, bucket: str, s3_server: Any, s3_features: S3Features
) -> None:
    if not s3_features.applies_acls:
        # Accepted (MinIO ignores it; an ownership-enforcing AWS bucket takes only this one).
        client.upload(bucket, "owner", b"x", acl="bucket-owner-full-control")
        assert client.get_object(bucket, "owner") == b"x"
        return
    s3 = boto3_client(s3_server)
    client.put_object(bucket, "src", b"x")
    client.upload(bucket, "up", b"x", acl="public-read")
    with client.open_write(bucket, "w", acl="public-read") as w:
        w.write(b"x")
    client.copy_object(bucket, "src", bucket, "copy", acl="public-read")

    def public(key: str) -> bool:
        grants = s3.get_object_acl(Bucket=bucket, Key=key)["Grants"]
        return any(g["Grantee"].get("URI", "").endswith("/AllUsers") for g in grants)

    assert [public(k) for k in ("src", "up", "w", "copy")] == [False, True, True, True]


def test_unknown_or_bad_header_arguments_are_refused_by_name(client: Client, bucket: str) -> None:
    with pytest.raises(TypeError, match="cache_controll"):
        client.upload(bucket, "k", b"x", cache_controll="x")  # type: ignore[call-arg]
    with pytest.raises(InvalidArgument, match="cache_control"):
        client.upload(bucket, "k", b"x", cache_control="a\r\nx-amz-acl: public-read")
    with pytest.raises(InvalidArgument, match="storage_class"):
        client.open_write(bucket, "k", storage_class="cheap please")
    assert list(client.list_objects(bucket)) == []
