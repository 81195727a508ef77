"""Every Client operation against a real MinIO server."""

from __future__ import annotations

import array
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

import objsdk
from objsdk import Client, ObjectSummary, Prefix

pytestmark = pytest.mark.integration

# Keys that break naive URL building, signing or XML handling. Each must round-trip.
AWKWARD_KEYS = [
    "plain",
    "with space",
    "plus+sign",
    "percent%20literal",
    "percent%",
    "question?mark",
    "hash#tag",
    "semi;colon",
    "equals=sign",
    "amp&ersand",
    "tilde~",
    "star*",
    "single'quote",
    'double"quote',
    "back\\slash",
    "unicode/räksmörgås",
    "cjk/漢字かな",
    "emoji/🦄🚀",
    "nested/a/b/c/d.txt",
    "trailing space ",
    " leading space",
    "comma,and:colon",
    "brackets[]{}()",
    "caret^pipe|",
    "at@dollar$bang!",
    "angle<>",
    "tab\there",
    "a" * 200,
    "deep/" + "/".join(["seg"] * 40),
    "x" * 250 + "/" + "/".join(["é" * 127] * 3),  # 1015 bytes, segments under 255
]


def test_awkward_key_list_is_thirty_long():
    assert len(AWKWARD_KEYS) == 30
    assert all(len(k.encode()) <= 1024 for k in AWKWARD_KEYS)


def test_bucket_lifecycle(client: Client, fresh_bucket_name: str) -> None:
    assert not client.bucket_exists(fresh_bucket_name)
    client.create_bucket(fresh_bucket_name)
    assert client.bucket_exists(fresh_bucket_name)
    assert fresh_bucket_name in [b.name for b in client.list_buckets()]
    client.delete_bucket(fresh_bucket_name)
    assert not client.bucket_exists(fresh_bucket_name)


def test_creating_an_existing_bucket_raises_bucket_already_exists(client, bucket, s3_features):
    if s3_features.refuses_own_bucket:
        with pytest.raises(objsdk.BucketAlreadyExists, match=bucket):
            client.create_bucket(bucket)
    else:
        # AWS's us-east-1 (and moto) answer 200 to the owner: the bucket stays as it was.
        client.put_object(bucket, "k", b"kept")
        client.create_bucket(bucket)
        assert client.get_object(bucket, "k") == b"kept"


def test_deleting_a_non_empty_bucket_raises_bucket_not_empty(client, bucket):
    client.put_object(bucket, "k", b"x")
    with pytest.raises(objsdk.BucketNotEmpty, match=bucket):
        client.delete_bucket(bucket)


def test_missing_bucket_raises_no_such_bucket_naming_it(client):
    with pytest.raises(objsdk.NoSuchBucket, match="no-such-bucket-here"):
        client.get_object("no-such-bucket-here", "k")


def test_listing_a_missing_bucket_names_the_bucket_and_the_prefix(client):
    with pytest.raises(objsdk.NoSuchBucket) as info:
        list(client.list_objects("objsdk-no-such-bucket-1", "logs/"))
    assert (info.value.bucket, info.value.prefix) == ("objsdk-no-such-bucket-1", "logs/")
    assert "prefix 'logs/'" in str(info.value)


def test_missing_key_raises_no_such_key_naming_bucket_and_key(client, bucket):
    with pytest.raises(objsdk.NoSuchKey) as info:
        client.get_object(bucket, "missing/key.bin")
    assert info.value.bucket == bucket
    assert info.value.key == "missing/key.bin"
    assert f"bucket {bucket!r}, key 'missing/key.bin'" in str(info.value)


def test_head_of_missing_key_raises_no_such_key(client, bucket):
    with pytest.raises(objsdk.NoSuchKey, match="nothing"):
        client.head_object(bucket, "nothing")


def test_zero_byte_object_round_trips(client, bucket):
    info = client.put_object(bucket, "empty", b"")
    assert info.size == 0
    assert client.get_object(bucket, "empty") == b""
    assert client.head_object(bucket, "empty").size == 0


def test_put_get_head_with_metadata(client, bucket):
    data = os.urandom(100_000)
    put = client.put_object(
        bucket, "m", data, content_type="application/x-test", metadata={"Origin": "tests"}
    )
    head = client.head_object(bucket, "m")
    assert head.size == len(data)
    assert head.etag == put.etag
    assert head.content_type == "application/x-test"
    assert head.metadata == {"origin": "tests"}
    assert head.last_modified is not None
    assert client.get_object(bucket, "m") == data


def test_ranged_get_returns_exactly_the_range(client, bucket):
    data = bytes(range(256)) * 10
    client.put_object(bucket, "r", data)
    assert client.get_object(bucket, "r", offset=100, length=50) == data[100:150]
    assert client.get_object(bucket, "r", offset=2500) == data[2500:]
    assert client.get_object(bucket, "r", offset=10, length=0) == b""


def test_ranged_get_past_the_end_raises_invalid_range_naming_offset(client, bucket):
    client.put_object(bucket, "short", b"abc")
    with pytest.raises(objsdk.InvalidRange, match="offset=10"):
        client.get_object(bucket, "short", offset=10)


def test_put_from_bytearray_and_memoryview(client, bucket):
    buf = bytearray(os.urandom(4096))
    client.put_object(bucket, "ba", buf)
    client.put_object(bucket, "mv", memoryview(buf)[100:200])
    assert client.get_object(bucket, "ba") == bytes(buf)
    assert client.get_object(bucket, "mv") == bytes(buf[100:200])


def test_put_takes_any_contiguous_buffer_as_its_bytes(client, bucket):
    numbers = array.array("d", range(100))
    grid = memoryview(bytes(range(96))).cast("i", (4, 6))
    client.put_object(bucket, "array", numbers)
    client.put_object(bucket, "grid", grid)
    assert client.get_object(bucket, "array") == numbers.tobytes()
    assert client.get_object(bucket, "grid") == bytes(range(96))


@pytest.mark.parametrize("data", [memoryview(b"0123456789")[::2], "text", None, 5])
def test_put_refuses_what_is_neither_contiguous_bytes_nor_a_file(client, bucket, data):
    with pytest.raises(objsdk.InvalidArgument, match=f"bucket '{bucket}', key 'k'"):
        client.put_object(bucket, "k", data)
    assert list(client.list_objects(bucket)) == []


def test_copy_object(client, bucket):
    client.put_object(bucket, "src key+", b"copy me")
    info = client.copy_object(bucket, "src key+", bucket, "dst/ключ")
    assert info.etag
    assert client.get_object(bucket, "dst/ключ") == b"copy me"


def test_delete_object_then_get_raises_no_such_key(client, bucket):
    client.put_object(bucket, "gone", b"x")
    client.delete_object(bucket, "gone")
    with pytest.raises(objsdk.NoSuchKey):
        client.get_object(bucket, "gone")


def test_delete_objects_removes_all_and_reports_nothing(client, bucket):
    keys = [f"d/{i}" for i in range(1200)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: client.put_object(bucket, k, b""), keys))
    assert client.delete_objects(bucket, keys) == []
    assert list(client.list_objects(bucket, prefix="d/")) == []


def test_delete_objects_deletes_exactly_the_keys_named_line_breaks_and_controls_too(
    client, bucket, s3_features
):
    # "a\rb" written as it is in the XML body reaches the server as "a\nb" (XML 1.0
    # §2.11), and "c\x01" cannot be written in XML at all: the first deleted the wrong
    # object, the second failed the whole batch.
    lf = "\n" if s3_features.stores_line_feed_keys else "|"
    keys = ["a\rb", f"a{lf}b", f"a\r{lf}b", "c\x01", "c\x1f", "amp&<>\"'", "plain", "tab\t"]
    for key in keys:
        client.put_object(bucket, key, b"x")
    assert client.delete_objects(bucket, ["a\rb", "c\x01", "amp&<>\"'", "plain"]) == []
    left = sorted([f"a{lf}b", f"a\r{lf}b", "c\x1f", "tab\t"])
    assert sorted(e.key for e in client.list_objects(bucket)) == left
    assert client.delete_objects(bucket, [f"a\r{lf}b", "c\x1f"]) == []
    assert sorted(e.key for e in client.list_objects(bucket)) == sorted([f"a{lf}b", "tab\t"])


def test_awkward_keys_round_trip_through_put_get_list_copy_presign(client, bucket):
    for i, key in enumerate(AWKWARD_KEYS):
        client.put_object(bucket, key, f"value {i}".encode())
    listed = [e.key for e in client.list_objects(bucket)]
    assert sorted(listed) == sorted(AWKWARD_KEYS)
    for i, key in enumerate(AWKWARD_KEYS):
        expected = f"value {i}".encode()
        assert client.get_object(bucket, key) == expected, key
        assert client.head_object(bucket, key).size == len(expected)
        client.copy_object(bucket, key, bucket, "copies/" + key[:900])
        assert client.get_object(bucket, "copies/" + key[:900]) == expected, key
        resp = requests.get(client.presign("GET", bucket, key), timeout=10)
        assert resp.status_code == 200, key
        assert resp.content == expected, key


@pytest.mark.parametrize(
    "key", ["a//b", "a/./b", "a/../b", "..", "seg/" + "x" * 256 + "/end"], ids=repr
)
def test_keys_with_dot_segments_round_trip_or_raise_a_clear_error_naming_the_key(
    client, bucket, key, s3_features
):
    if not s3_features.refuses_dot_segment_keys:
        # S3 keys are opaque strings: sent as they are (not normalised), stored as they are.
        client.put_object(bucket, key, b"x")
        assert client.get_object(bucket, key) == b"x"
        assert [e.key for e in client.list_objects(bucket)] == [key]
        return
    with pytest.raises(objsdk.S3Error) as info:  # MinIO stores keys as file paths
        client.put_object(bucket, key, b"x")
    assert info.value.key == key
    assert repr(key)[:60] in str(info.value)


def test_presigned_put_uploads(client, bucket):
    url = client.presign("PUT", bucket, "via presign", expires=60)
    resp = requests.put(url, data=b"presigned body", timeout=10)
    assert resp.status_code == 200
    assert client.get_object(bucket, "via presign") == b"presigned body"


@pytest.mark.needs_feature("checks_signatures")
def test_wrong_secret_is_access_denied_without_the_secret(s3_server, bucket):
    wrong = "not-the-secret-" + "z" * 20
    with (
        Client(s3_server.endpoint, s3_server.access_key, wrong, retries=0) as bad,
        pytest.raises(objsdk.AccessDenied) as info,
    ):
        bad.get_object(bucket, "k")
    text = str(info.value) + repr(info.value)
    assert wrong not in text
    assert s3_server.secret_key not in text
    assert "Signature=" not in text


@pytest.mark.needs_feature("checks_signatures")
def test_unknown_access_key_is_access_denied(s3_server, bucket):
    with (
        Client(s3_server.endpoint, "nobody", "whatever-secret", retries=0) as bad,
        pytest.raises(objsdk.AccessDenied),
    ):
        bad.list_buckets()


def test_unreachable_endpoint_is_a_connect_error(unused_port):
    with (
        Client(f"http://127.0.0.1:{unused_port}", "a", "b", retries=0) as c,
        pytest.raises(objsdk.ConnectError, match="cannot reach"),
    ):
        c.list_buckets()


@pytest.fixture(scope="module")
def listing_bucket(client):
    """A bucket with 2,500 keys: 2,000 under 'flat/' and 500 spread over 5 'dirs'."""
    name = "listing-" + os.urandom(4).hex()
    client.create_bucket(name)
    keys = [f"flat/{i:05d}" for i in range(2000)] + [f"tree/d{i % 5}/f{i:04d}" for i in range(500)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: client.put_object(name, k, b""), keys))
    yield name, keys
    client.delete_objects(name, keys)
    client.delete_bucket(name)


def test_listing_2500_keys_pages_through_all_of_them(client, listing_bucket):
    name, keys = listing_bucket
    listed = list(client.list_objects(name, page_size=1000))
    assert [e.key for e in listed] == sorted(keys)
    assert all(isinstance(e, ObjectSummary) for e in listed)


def test_listing_with_delimiter_yields_prefixes(client, listing_bucket):
    name, _ = listing_bucket
    top = list(client.list_objects(name, delimiter="/"))
    assert top == [Prefix("flat/"), Prefix("tree/")]
    dirs = list(client.list_objects(name, prefix="tree/", delimiter="/", page_size=2))
    assert [e.key for e in dirs] == [f"tree/d{i}/" for i in range(5)]


def test_listing_with_start_after(client, listing_bucket):
    name, _ = listing_bucket
    keys = [e.key for e in client.list_objects(name, prefix="flat/", start_after="flat/01997")]
    assert keys == ["flat/01998", "flat/01999"]


def test_100_mib_upload_streams_from_file_with_bounded_memory(s3_server, bucket, tmp_path):
    path = tmp_path / "big.bin"
    block = os.urandom(1 << 20)
    digest = hashlib.sha256()
    with path.open("wb") as f:
        for i in range(100):
            chunk = block[i:] + block[:i]
            f.write(chunk)
            digest.update(chunk)
    script = textwrap.dedent(
        f"""
        import json, sys
        from objsdk import Client

        def status_kib(field):
            # VmHWM is this address space's peak; ru_maxrss would carry the
            # parent's peak across fork and exec.
            for line in open("/proc/self/status"):
                if line.startswith(field + ":"):
                    return int(line.split()[1])

        client = Client.from_env()
        client.list_buckets()  # warm up: imports, connection pool
        base = status_kib("VmRSS")
        with open({str(path)!r}, "rb") as f:
            info = client.put_object({bucket!r}, "big.bin", f)
        peak = status_kib("VmHWM")
        print(json.dumps({{"base_kib": base, "peak_kib": peak, "size": info.size}}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, **s3_server.env()},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(out.stdout)
    assert result["size"] == 100 << 20
    grown_mib = (result["peak_kib"] - result["base_kib"]) / 1024
    assert grown_mib < 64, f"upload grew RSS by {grown_mib:.1f} MiB"
    with s3_server.client() as c:
        got = hashlib.sha256(c.get_object(bucket, "big.bin")).hexdigest()
    assert got == digest.hexdigest()


@pytest.mark.minio_only
def test_an_invalid_bucket_name_is_named_as_such_even_from_a_head(client):
    # MinIO answers HEAD with a bare 400: the error says what the likely cause is.
    with pytest.raises(objsdk.S3Error, match="bucket name 'v'") as e:
        client.bucket_exists("v")
    assert e.value.code == "InvalidBucketName"


@pytest.mark.needs_feature("archives_objects")
def test_an_archived_object_is_invalid_object_state_to_every_read_and_copy(
    s3_server, client, bucket, tmp_path
):
    from s3_helpers import boto3_client

    from objsdk.filesystem import ObjsdkFileSystem

    boto3_client(s3_server).put_object(Bucket=bucket, Key="cold", Body=b"c", StorageClass="GLACIER")
    reads = {
        "get_object": lambda: client.get_object(bucket, "cold"),
        "open": lambda: client.open(bucket, "cold").read(),
        "download": lambda: client.download(bucket, "cold", str(tmp_path / "cold")),
        "copy": lambda: client.copy(bucket, "cold", bucket, "warm"),
    }
    for what, read in reads.items():
        with pytest.raises(objsdk.InvalidObjectState, match="cold") as refused:
            read()
        assert refused.value.bucket == bucket, what
    assert not (tmp_path / "cold").exists()
    fs = ObjsdkFileSystem(
        endpoint_url=s3_server.endpoint,
        key=s3_server.access_key,
        secret=s3_server.secret_key,
        skip_instance_cache=True,
    )
    with pytest.raises(PermissionError):  # as s3fs maps it
        fs.cat_file(f"{bucket}/cold")
