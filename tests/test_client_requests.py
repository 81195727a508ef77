"""Request shapes and error mapping of Client, against `responses` (no server).

Behaviour against a real server is in test_client_minio.py; this file pins down what
goes on the wire and how every failure is reported.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import pickle
import re
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
import responses
from responses import matchers

import objsdk
from objsdk import Client
from objsdk._core.checksums import crc32c_b64
from objsdk._core.streams import SMALL_FILE_PUT
from objsdk._core.upload_record import ListedPart
from objsdk._transfer.multipart_calls import list_multipart_uploads, list_parts
from objsdk._transport.http import HTTPTransport
from objsdk._transport.mock import MockResponse, MockTransport, Request

EP = "http://s3.test:9000"
AK = "AKIDEXAMPLE"
SK = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "FQoGZXIvYXdzEXAMPLETOKEN"

NO_SUCH_KEY = (
    b"<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message>"
    b"<Key>k</Key><BucketName>b</BucketName><RequestId>REQ1</RequestId></Error>"
)
SLOW_DOWN = (
    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
)
# MinIO's answer past MINIO_API_REQUESTS_MAX.
TOO_MANY_REQUESTS = (
    b"<Error><Code>TooManyRequests</Code><Message>Please reduce your request rate</Message></Error>"
)


def error_xml(code: str) -> bytes:
    return f"<Error><Code>{code}</Code><Message>{code}</Message></Error>".encode()


@pytest.fixture
def client():
    with Client(EP, AK, SK, retries=3) as c:
        yield c


@pytest.fixture
def no_sleep(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr("time.sleep", slept.append)
    return slept


@pytest.fixture
def rsps(monkeypatch):
    # Every request through requests' adapter, where responses answers it.
    monkeypatch.setattr(HTTPTransport, "wire_requests", False)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as r:
        yield r


def test_put_object_signs_the_payload_hash_of_bytes(client, rsps):
    rsps.put(f"{EP}/b/k", headers={"ETag": '"e1"'})
    info = client.put_object("b", "k", b"hello")
    req = rsps.calls[0].request
    assert req.headers["x-amz-content-sha256"] == hashlib.sha256(b"hello").hexdigest()
    assert re.match(
        rf"AWS4-HMAC-SHA256 Credential={AK}/\d{{8}}/us-east-1/s3/aws4_request, "
        r"SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$",
        req.headers["Authorization"],
    )
    assert info.etag == '"e1"'
    assert info.size == 5


def test_put_object_sends_memoryview_without_copying(client, rsps):
    rsps.put(f"{EP}/b/k")
    buf = bytearray(b"abcdef")
    client.put_object("b", "k", memoryview(buf)[1:4])
    req = rsps.calls[0].request
    assert isinstance(req.body, memoryview)
    assert req.body.obj is buf
    assert req.headers["Content-Length"] == "3"


def test_put_object_of_empty_file_sends_content_length_zero(client, rsps, tmp_path):
    rsps.put(f"{EP}/b/k")
    path = tmp_path / "empty"
    path.write_bytes(b"")
    with path.open("rb") as f:
        client.put_object("b", "k", f)
    req = rsps.calls[0].request
    assert req.headers["Content-Length"] == "0"
    assert "Transfer-Encoding" not in req.headers


def test_put_object_streams_a_file_from_its_position_with_the_crc32c_of_those_bytes(
    client, rsps, tmp_path
):
    rsps.put(f"{EP}/b/k")
    data = os.urandom(SMALL_FILE_PUT + 10)
    path = tmp_path / "f"
    path.write_bytes(data)
    with path.open("rb") as f:
        f.seek(4)
        info = client.put_object("b", "k", f)
    req = rsps.calls[0].request
    assert req.headers["Content-Length"] == str(len(data) - 4)
    assert req.headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
    # The server refuses bytes that arrive otherwise (a file changed while it was sent).
    assert req.headers["x-amz-checksum-crc32c"] == crc32c_b64(data[4:])
    assert info.size == len(data) - 4


def test_put_object_sends_a_small_file_from_its_position_as_signed_bytes(client, rsps, tmp_path):
    rsps.put(f"{EP}/b/k")
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    with path.open("rb") as f:
        f.seek(4)
        info = client.put_object("b", "k", f)
    req = rsps.calls[0].request
    assert bytes(req.body) == b"456789"
    assert req.headers["x-amz-content-sha256"] == hashlib.sha256(b"456789").hexdigest()
    assert req.headers["x-amz-checksum-crc32c"] == crc32c_b64(b"456789")
    assert info.size == 6


@pytest.mark.parametrize("size", [0, 5, SMALL_FILE_PUT + 10], ids=["empty", "small", "streamed"])
def test_put_object_of_a_text_mode_file_is_refused_naming_the_argument_before_any_request(
    client, rsps, tmp_path, size
):
    # Before: a raw TypeError from deep in the read (and an empty text file was sent).
    path = tmp_path / "f.txt"
    path.write_text("x" * size)
    with (
        open(path) as text,
        pytest.raises(
            objsdk.InvalidArgument,
            match=r"put_object data is a text file, open it with 'rb' \(binary mode\): "
            r"TextIOWrapper \(bucket 'b', key 'k'\)",
        ),
    ):
        client.put_object("b", "k", text)
    with pytest.raises(objsdk.InvalidArgument, match=r"text file.*'rb'.*StringIO"):
        client.put_object("b", "k", io.StringIO("x"))
    assert len(rsps.calls) == 0


def test_put_object_of_a_file_like_object_that_reads_str_is_refused_saying_binary_mode(
    client, rsps
):
    class Reader:
        """Seekable and readable, but its reads give str (not an io.TextIOBase)."""

        def __init__(self) -> None:
            self.pos = 0

        def seekable(self) -> bool:
            return True

        def tell(self) -> int:
            return self.pos

        def seek(self, pos: int, whence: int = 0) -> int:
            self.pos = 10 if whence == os.SEEK_END else pos
            return self.pos

        def read(self, n: int = -1) -> str:
            return "x" * n

    with pytest.raises(objsdk.InvalidArgument, match=r"gave str, not bytes: open it with 'rb'"):
        client.put_object("b", "k", Reader())
    assert len(rsps.calls) == 0


def test_put_object_refuses_unseekable_streams_naming_the_key(client):
    class Pipe:
        def read(self, n=-1):
            return b""

        def seekable(self):
            return False

    with pytest.raises(objsdk.InvalidArgument, match=r"seekable.*'b'.*'k'"):
        client.put_object("b", "k", Pipe())  # type: ignore[arg-type]


def test_a_canned_acl_goes_with_an_upload_a_writer_and_a_copy(client, rsps):
    rsps.put(f"{EP}/b/up", headers={"ETag": '"e1"'})
    rsps.put(f"{EP}/b/w", headers={"ETag": '"e2"'})
    rsps.put(
        f"{EP}/b/copy",
        body=b"<CopyObjectResult><ETag>&quot;e3&quot;</ETag></CopyObjectResult>",
    )
    client.upload("b", "up", b"data", acl="bucket-owner-full-control")
    with client.open_write("b", "w", acl="public-read") as w:
        w.write(b"data")
    client.copy_object("b", "up", "b", "copy", acl="bucket-owner-read")
    sent = {urlsplit(c.request.url).path: c.request.headers for c in rsps.calls}
    assert sent["/b/up"]["x-amz-acl"] == "bucket-owner-full-control"
    assert sent["/b/w"]["x-amz-acl"] == "public-read"
    assert sent["/b/copy"]["x-amz-acl"] == "bucket-owner-read"
    # An ACL is not a stored header: the copy keeps its source's metadata.
    assert "x-amz-metadata-directive" not in sent["/b/copy"]


@pytest.mark.parametrize("acl", ["public", "Private", "log-delivery-write", 1])
def test_an_acl_that_is_not_an_object_canned_acl_is_refused_by_name(client, acl):
    with pytest.raises(objsdk.InvalidArgument, match=r"acl must be .*'b', key 'k'"):
        client.upload("b", "k", b"x", acl=acl)


def test_metadata_and_content_type_become_headers(client, rsps):
    rsps.put(
        f"{EP}/b/k",
        match=[
            matchers.header_matcher(
                {"x-amz-meta-color": "blue", "Content-Type": "text/plain"}, strict_match=False
            )
        ],
    )
    client.put_object("b", "k", b"x", content_type="text/plain", metadata={"Color": "blue"})


def test_non_ascii_metadata_is_refused_naming_the_key(client):
    with pytest.raises(objsdk.InvalidArgument, match=r"'note'.*bucket 'b', key 'k'"):
        client.put_object("b", "k", b"x", metadata={"note": "naïve"})


def test_metadata_keys_that_differ_only_in_case_are_refused_not_merged(client):
    # S3 stores metadata keys lower-cased: one of the two values would be lost.
    with pytest.raises(objsdk.InvalidArgument, match=r"'a' and 'A' are one key.*'b', key 'k'"):
        client.put_object("b", "k", b"x", metadata={"a": "1", "A": "2"})


@pytest.mark.parametrize("value", ["text/plaïn", "text/plain\tx", "text/plain\r\nX-A: 1"])
def test_a_content_type_outside_printable_ascii_is_refused_naming_it(client, value):
    # Sent, a non-ASCII one failed as 403 SignatureDoesNotMatch, naming nothing.
    with pytest.raises(objsdk.InvalidArgument, match=r"content_type must be .*'b', key 'k'"):
        client.put_object("b", "k", b"x", content_type=value)


def test_awkward_key_is_percent_encoded_on_the_wire(client, rsps):
    rsps.get(re.compile(rf"{re.escape(EP)}/b/.*"), body=b"x", auto_calculate_content_length=True)
    client.get_object("b", "a b+c%d?e#f;g=h&i~j*k'l\"m\\n/ü")
    url = rsps.calls[0].request.url
    assert urlsplit(url).path == "/b/a%20b%2Bc%25d%3Fe%23f%3Bg%3Dh%26i~j%2Ak%27l%22m%5Cn/%C3%BC"


def test_dot_segments_reach_the_server_unchanged(client, rsps):
    rsps.get(re.compile(rf"{re.escape(EP)}/.*"), body=b"x", auto_calculate_content_length=True)
    client.get_object("b", "x/../y")
    assert rsps.calls[0].request.path_url == "/b/x/../y"


def test_get_object_with_offset_and_length_sends_a_closed_range(client, rsps):
    rsps.get(
        f"{EP}/b/k",
        body=b"cde",
        status=206,
        headers={"Content-Range": "bytes 2-4/8"},
        match=[matchers.header_matcher({"Range": "bytes=2-4"}, strict_match=False)],
    )
    assert client.get_object("b", "k", offset=2, length=3) == b"cde"


def test_get_object_slices_when_the_server_ignores_range(client, rsps):
    rsps.get(f"{EP}/b/k", body=b"abcdefgh", status=200, auto_calculate_content_length=True)
    assert client.get_object("b", "k", offset=2, length=3) == b"cde"


def test_get_object_rejects_negative_offset_naming_key(client):
    with pytest.raises(objsdk.InvalidArgument, match=r"offset.*-1.*'k'"):
        client.get_object("b", "k", offset=-1)


@pytest.mark.parametrize(
    ("argument", "value"),
    [("offset", True), ("offset", 2.0), ("offset", "2"), ("length", False), ("length", -1)],
)
def test_get_object_refuses_an_offset_or_length_that_is_not_a_count(client, argument, value):
    # A bool is an int to Python, but offset=True is a mistake, never byte 1.
    with pytest.raises(objsdk.InvalidArgument, match=rf"{argument}.*bucket 'b', key 'k'"):
        client.get_object("b", "k", **{argument: value})


def test_no_such_key_names_bucket_and_key(client, rsps):
    rsps.get(f"{EP}/b/k", body=NO_SUCH_KEY, status=404)
    with pytest.raises(objsdk.NoSuchKey) as info:
        client.get_object("b", "k")
    err = info.value
    assert (err.status, err.code, err.bucket, err.key, err.request_id) == (
        404,
        "NoSuchKey",
        "b",
        "k",
        "REQ1",
    )
    assert "bucket 'b', key 'k'" in str(err)


def test_head_404_without_body_is_no_such_key(client, rsps):
    rsps.head(f"{EP}/b/k", status=404)
    with pytest.raises(objsdk.NoSuchKey, match="'k'"):
        client.head_object("b", "k")


def test_bucket_exists_is_false_on_404(client, rsps):
    rsps.head(f"{EP}/nope", status=404)
    assert client.bucket_exists("nope") is False


def test_bucket_exists_raises_on_403(client, rsps):
    rsps.head(f"{EP}/locked", status=403)
    with pytest.raises(objsdk.AccessDenied):
        client.bucket_exists("locked")


def test_head_object_reads_size_etag_metadata_and_checksums(client, rsps):
    rsps.head(
        f"{EP}/b/k",
        headers={
            "Content-Length": "42",
            "ETag": '"abc"',
            "Last-Modified": "Wed, 12 Oct 2009 17:50:00 GMT",
            "Content-Type": "text/plain",
            "x-amz-meta-Color": "blue",
            "x-amz-version-id": "v1",
            "x-amz-checksum-crc32c": "AAAAAA==",
        },
        match=[matchers.header_matcher({"x-amz-checksum-mode": "ENABLED"}, strict_match=False)],
    )
    info = client.head_object("b", "k")
    assert (info.size, info.etag, info.content_type, info.version_id) == (
        42,
        '"abc"',
        "text/plain",
        "v1",
    )
    assert info.metadata == {"color": "blue"}
    assert info.checksums == {"crc32c": "AAAAAA=="}
    assert info.last_modified is not None


def test_slow_down_answered_twice_then_200_succeeds(client, rsps):
    rsps.get(f"{EP}/b/k", body=SLOW_DOWN, status=503, headers={"Retry-After": "0"})
    rsps.get(f"{EP}/b/k", body=SLOW_DOWN, status=503)
    rsps.get(f"{EP}/b/k", body=b"payload", status=200, auto_calculate_content_length=True)
    assert client.get_object("b", "k") == b"payload"
    assert len(rsps.calls) == 3


def test_slow_down_after_all_retries_raises_slow_down(rsps):
    rsps.get(f"{EP}/b/k", body=SLOW_DOWN, status=503)
    with Client(EP, AK, SK, retries=2) as c, pytest.raises(objsdk.SlowDown, match="'k'"):
        c.get_object("b", "k")
    assert len(rsps.calls) == 3


@pytest.mark.parametrize(("status", "code"), [(503, "ServiceUnavailable"), (500, "InternalError")])
def test_a_post_not_known_to_be_idempotent_is_not_resent_on_a_server_error(
    client, rsps, status, code
):
    rsps.post(f"{EP}/b/k", body=error_xml(code), status=status)
    with pytest.raises(objsdk.S3Error, match=code):
        client.transport.request("POST", operation="post", bucket="b", key="k")
    assert len(rsps.calls) == 1


@pytest.mark.parametrize(("status", "body"), [(503, SLOW_DOWN), (429, TOO_MANY_REQUESTS)])
def test_a_post_not_known_to_be_idempotent_is_resent_after_a_throttling_answer(
    client, rsps, no_sleep, status, body
):
    # The server refused it before acting on it: sending it again repeats nothing.
    rsps.post(f"{EP}/b/k", body=body, status=status)
    rsps.post(f"{EP}/b/k", body=b"done")
    answer = client.transport.request("POST", operation="post", bucket="b", key="k")
    assert answer.content == b"done"
    assert len(rsps.calls) == 2
    assert rsps.calls[0].request.body == rsps.calls[1].request.body


def test_too_many_requests_is_retried_after_a_growing_wait_then_succeeds(client, rsps, no_sleep):
    rsps.get(f"{EP}/b/k", body=TOO_MANY_REQUESTS, status=429)
    rsps.get(f"{EP}/b/k", body=TOO_MANY_REQUESTS, status=429)
    rsps.get(f"{EP}/b/k", body=b"payload", status=200, auto_calculate_content_length=True)
    assert client.get_object("b", "k") == b"payload"
    assert len(rsps.calls) == 3
    first, second = no_sleep
    assert 0.25 <= first <= 0.5  # never at once
    assert 0.5 <= second <= 1.0  # then longer


def test_too_many_requests_after_all_retries_raises_slow_down_naming_the_key(rsps, no_sleep):
    rsps.get(f"{EP}/b/k", body=TOO_MANY_REQUESTS, status=429)
    with Client(EP, AK, SK, retries=2) as c, pytest.raises(objsdk.SlowDown, match="'k'") as info:
        c.get_object("b", "k")
    assert (info.value.status, info.value.code) == (429, "TooManyRequests")
    assert len(rsps.calls) == 3


def test_a_head_answered_429_without_a_body_is_retried_then_succeeds(client, rsps, no_sleep):
    rsps.head(f"{EP}/b/k", status=429)
    rsps.head(f"{EP}/b/k", headers={"Content-Length": "3", "ETag": '"e"'})
    assert client.head_object("b", "k").size == 3
    assert len(rsps.calls) == 2


@pytest.mark.parametrize("status", [503, 500])
def test_delete_objects_is_retried_on_slow_down_and_internal_error(client, rsps, status):
    # Deleting a deleted key is a no-op: the POST is idempotent (S3 API, DeleteObjects).
    rsps.post(f"{EP}/b", body=SLOW_DOWN, status=status)
    rsps.post(f"{EP}/b", body=b"<DeleteResult/>")
    assert client.delete_objects("b", ["k"]) == []
    assert len(rsps.calls) == 2
    assert rsps.calls[0].request.body == rsps.calls[1].request.body


def test_connection_refused_is_a_connect_error_from_the_original(client, rsps):
    rsps.get(f"{EP}/b/k", body=requests.exceptions.ConnectionError("refused"))
    with pytest.raises(objsdk.ConnectError, match=r"get_object.*'k'") as info:
        client.get_object("b", "k")
    assert isinstance(info.value.__cause__, requests.exceptions.ConnectionError)


def test_read_timeout_is_a_timeout(client, rsps):
    rsps.get(f"{EP}/b/k", body=requests.exceptions.ReadTimeout("slow"))
    with pytest.raises(objsdk.Timeout, match="read timed out"):
        client.get_object("b", "k")


def test_broken_chunked_body_is_a_protocol_error(client, rsps):
    rsps.get(f"{EP}/b/k", body=requests.exceptions.ChunkedEncodingError("broken"))
    with pytest.raises(objsdk.ProtocolError, match="connection broken"):
        client.get_object("b", "k")


def test_copy_object_sends_encoded_copy_source(client, rsps):
    rsps.put(
        f"{EP}/dst/new",
        body=b'<CopyObjectResult><ETag>"e"</ETag></CopyObjectResult>',
        match=[matchers.header_matcher({"x-amz-copy-source": "/src/a%20b%2B"}, strict_match=False)],
    )
    info = client.copy_object("src", "a b+", "dst", "new")
    assert info.etag == '"e"'


def test_copy_object_200_with_error_body_raises(client, rsps):
    rsps.put(
        f"{EP}/dst/new",
        body=b"<Error><Code>InternalError</Code><Message>oops</Message></Error>",
        status=200,
    )
    with pytest.raises(objsdk.S3Error, match="InternalError"):
        client.copy_object("src", "k", "dst", "new")


def test_list_objects_follows_continuation_tokens(client, rsps):
    page1 = (
        b"<ListBucketResult><IsTruncated>true</IsTruncated>"
        b"<NextContinuationToken>T2</NextContinuationToken>"
        b"<Contents><Key>a</Key><Size>1</Size></Contents></ListBucketResult>"
    )
    page2 = (
        b"<ListBucketResult><IsTruncated>false</IsTruncated>"
        b"<Contents><Key>b</Key><Size>2</Size></Contents></ListBucketResult>"
    )
    rsps.get(f"{EP}/b", body=page1)
    rsps.get(f"{EP}/b", body=page2)
    assert [e.key for e in client.list_objects("b", page_size=1)] == ["a", "b"]
    second = parse_qs(urlsplit(rsps.calls[1].request.url).query)
    assert second["continuation-token"] == ["T2"]
    assert second["max-keys"] == ["1"]


def test_list_parts_walks_pages_of_a_thousand_parts_from_the_marker_before(client, rsps):
    """A resumed upload lists its stored parts: one request per page of S3's default
    1,000 parts, each from the marker the page before gave."""
    parts = "".join(
        f'<Part><PartNumber>{n}</PartNumber><Size>5242880</Size><ETag>"e{n}"</ETag>'
        f"<ChecksumCRC32C>c{n}==</ChecksumCRC32C></Part>"
        for n in (1, 1000)
    )
    page1 = (
        "<ListPartsResult><IsTruncated>true</IsTruncated>"
        f"<NextPartNumberMarker>1000</NextPartNumberMarker>{parts}</ListPartsResult>"
    ).encode()
    page2 = (
        b"<ListPartsResult><IsTruncated>false</IsTruncated><Part><PartNumber>1001</PartNumber>"
        b'<Size>7</Size><ETag>"e"</ETag></Part></ListPartsResult>'
    )
    rsps.get(f"{EP}/b/k", body=page1)
    rsps.get(f"{EP}/b/k", body=page2)
    listed = list(list_parts(client._transport, "b", "k", "u-1"))
    assert listed == [
        ListedPart(1, 5 * 1024 * 1024, '"e1"', "c1=="),
        ListedPart(1000, 5 * 1024 * 1024, '"e1000"', "c1000=="),
        ListedPart(1001, 7, '"e"', None),
    ]
    first, second = (parse_qs(urlsplit(c.request.url).query) for c in rsps.calls)
    assert first == {"uploadId": ["u-1"]}  # no max-parts: the default, 1,000 a page
    assert second == {"uploadId": ["u-1"], "part-number-marker": ["1000"]}


INVALID_PREFIX = (
    b"<Error><Code>InvalidArgument</Code><Message>Invalid prefix.</Message>"
    b"<BucketName>b</BucketName><RequestId>REQ2</RequestId></Error>"
)


@pytest.mark.parametrize(
    "listing",
    [
        lambda c: c.list_objects("b", "logs/2024"),
        lambda c: c.list_object_versions("b", "logs/2024"),
        lambda c: list_multipart_uploads(c._transport, "b", "logs/2024"),
    ],
    ids=["objects", "versions", "uploads"],
)
def test_a_refused_listing_names_the_prefix_it_asked_for(client, rsps, listing):
    rsps.get(f"{EP}/b", body=INVALID_PREFIX, status=400)
    with pytest.raises(objsdk.S3Error) as info:
        list(listing(client))
    err = info.value
    assert (err.code, err.bucket, err.key) == ("InvalidArgument", "b", None)
    assert err.prefix == "logs/2024"
    assert "(bucket 'b', prefix 'logs/2024')" in str(err)
    assert pickle.loads(pickle.dumps(err)).prefix == "logs/2024"


def test_a_refused_listing_of_the_whole_bucket_names_the_bucket_alone(client, rsps):
    rsps.get(f"{EP}/b", body=INVALID_PREFIX, status=400)
    with pytest.raises(objsdk.S3Error) as info:
        list(client.list_objects("b"))
    assert info.value.prefix is None
    assert "(bucket 'b'):" in str(info.value)


def test_list_objects_is_lazy(client, rsps):
    it = client.list_objects("b")
    assert len(rsps.calls) == 0
    del it


def test_delete_objects_batches_1000_keys_per_request_with_content_md5(client, rsps):
    rsps.post(f"{EP}/b", body=b"<DeleteResult/>")
    assert client.delete_objects("b", (f"k{i}" for i in range(2500))) == []
    assert len(rsps.calls) == 3
    for call in rsps.calls:
        assert "Content-MD5" in call.request.headers
    assert rsps.calls[2].request.body.count(b"<Object>") == 500


@pytest.mark.parametrize("keys", ["logs", b"logs"])
def test_delete_objects_refuses_one_key_given_as_a_string(client, rsps, keys):
    # A str is an iterable of one-character keys: "logs" would delete l, o, g and s.
    with pytest.raises(objsdk.InvalidArgument, match=r"iterable of keys, not one .*'b'"):
        client.delete_objects("b", keys)
    assert len(rsps.calls) == 0


def test_delete_objects_reports_per_key_errors(client, rsps):
    rsps.post(
        f"{EP}/b",
        body=b"<DeleteResult><Error><Key>x</Key><Code>AccessDenied</Code></Error></DeleteResult>",
    )
    [failure] = client.delete_objects("b", ["x", "y"])
    assert (failure.key, failure.code) == ("x", "AccessDenied")


def test_a_key_no_xml_can_hold_is_deleted_on_its_own_and_its_error_reported_alike(client, rsps):
    rsps.post(f"{EP}/b", body=b"<DeleteResult/>")
    denied = b"<Error><Code>AccessDenied</Code><Message>no</Message></Error>"
    rsps.delete(f"{EP}/b/c%01", body=denied, status=403)
    [failure] = client.delete_objects("b", ["a", "c\x01", "d"])
    assert (failure.key, failure.code, failure.message) == ("c\x01", "AccessDenied", "no")
    [batch] = [c.request for c in rsps.calls if c.request.method == "POST"]
    assert batch.body.count(b"<Object>") == 2  # a and d, in one request
    rsps.delete(f"{EP}/gone/c%01", body=b"<Error><Code>NoSuchBucket</Code></Error>", status=404)
    with pytest.raises(objsdk.NoSuchBucket):
        client.delete_objects("gone", ["c\x01"])


def test_presign_has_signature_and_expiry(client):
    url = client.presign("GET", "b", "a b", expires=600)
    q = parse_qs(urlsplit(url).query)
    assert urlsplit(url).path == "/b/a%20b"
    assert q["X-Amz-Expires"] == ["600"]
    assert re.fullmatch(r"[0-9a-f]{64}", q["X-Amz-Signature"][0])


def test_presign_refuses_more_than_seven_days(client):
    with pytest.raises(objsdk.InvalidArgument, match="7 days"):
        client.presign("GET", "b", "k", expires=8 * 24 * 3600)


@pytest.mark.parametrize("expires", ["60", 60.5, True, None])
def test_presign_refuses_an_expiry_that_is_not_seconds_or_a_timedelta(client, expires):
    with pytest.raises(objsdk.InvalidArgument, match=r"expires .*bucket 'b', key 'k'"):
        client.presign("GET", "b", "k", expires=expires)


@pytest.mark.parametrize("method", ["FETCH", "", "GET ", "POST"])
def test_presign_refuses_a_method_no_presigned_object_request_has(client, method):
    with pytest.raises(objsdk.InvalidArgument, match=r"method .*bucket 'b', key 'k'"):
        client.presign(method, "b", "k")


@pytest.mark.parametrize("method", ["GET", "put", "Head", "DELETE"])
def test_presign_takes_the_object_methods_in_any_case(client, method):
    url = client.presign(method, "b", "k")
    assert parse_qs(urlsplit(url).query)["X-Amz-Expires"] == ["3600"]


def test_from_env_reads_aws_variables():
    env = {
        "AWS_ENDPOINT_URL": EP,
        "AWS_ACCESS_KEY_ID": AK,
        "AWS_SECRET_ACCESS_KEY": SK,
        "AWS_DEFAULT_REGION": "eu-west-1",
    }
    with Client.from_env(env) as c:
        assert c.endpoint.url == EP
        assert c.region == "eu-west-1"
        assert c.credentials is not None
        assert c.credentials.access_key == AK


def test_from_env_without_endpoint_uses_aws_s3_in_the_region(tmp_path):
    with Client.from_env({"AWS_REGION": "eu-west-1", "HOME": str(tmp_path)}) as c:
        assert (c.endpoint.url, c.region) == ("https://s3.eu-west-1.amazonaws.com", "eu-west-1")


def test_half_credentials_are_refused():
    with pytest.raises(objsdk.InvalidArgument, match="both"):
        Client(EP, AK)


def test_client_survives_pickling_when_it_may_carry_its_credentials():
    with Client(EP, AK, SK, pickle_credentials=True) as original:
        data = pickle.dumps(original)
    assert SK.encode() in data
    with pickle.loads(data) as clone:
        assert repr(clone) == repr(original)
        assert clone.credentials is not None
        assert clone.credentials.secret_key == SK


def test_a_pickled_client_leaves_its_secret_key_and_token_behind():
    with Client(EP, AK, SK, session_token=TOKEN) as original:
        data = pickle.dumps(original)
    assert SK.encode() not in data
    assert TOKEN.encode() not in data


def test_an_unpickled_client_finds_its_secret_in_the_environment(monkeypatch):
    with Client(EP, AK, SK) as original:
        data = pickle.dumps(original)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AK)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SK)
    with pickle.loads(data) as clone:
        assert clone.credentials is not None
        assert clone.credentials.secret_key == SK


def test_an_unpickled_client_without_its_secret_anywhere_says_how_to_fix_it(monkeypatch, tmp_path):
    with Client(EP, AK, SK) as original:
        data = pickle.dumps(original)
    monkeypatch.setenv("HOME", str(tmp_path))  # no shared files either
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ANOTHERKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "another-secret")
    with pytest.raises(objsdk.InvalidArgument, match="pickle_credentials=True"):
        pickle.loads(data)


class TestNoCredentialLeaks:
    """Secret key, session token and signatures never reach messages, logs or reprs."""

    @pytest.fixture
    def tclient(self):
        with Client(EP, AK, SK, session_token=TOKEN, retries=1) as c:
            yield c

    @staticmethod
    def assert_clean(text: str) -> None:
        assert SK not in text
        assert TOKEN not in text
        assert "Signature=" not in text
        assert "X-Amz-Signature" not in text

    def test_repr_of_client_and_credentials(self, tclient):
        self.assert_clean(repr(tclient))
        self.assert_clean(repr(tclient.credentials))

    def test_error_messages(self, tclient, rsps):
        rsps.get(
            f"{EP}/b/k",
            status=403,
            body=(
                b"<Error><Code>SignatureDoesNotMatch</Code><Message>no</Message>"
                b"<StringToSign>x</StringToSign><SignatureProvided>abc</SignatureProvided></Error>"
            ),
        )
        rsps.get(f"{EP}/b/k2", body=requests.exceptions.ConnectionError(f"{EP}/b/k2?{SK}"))
        with pytest.raises(objsdk.AccessDenied) as denied:
            tclient.get_object("b", "k")
        with pytest.raises(objsdk.ConnectError) as refused:
            tclient.get_object("b", "k2")
        for err in (denied.value, refused.value):
            self.assert_clean(str(err))
            self.assert_clean(repr(err))

    def test_debug_logs(self, tclient, rsps, caplog):
        rsps.get(f"{EP}/b/k", body=b"x", auto_calculate_content_length=True)
        rsps.get(f"{EP}/b/missing", body=NO_SUCH_KEY, status=404)
        with caplog.at_level(logging.DEBUG):
            tclient.get_object("b", "k")
            tclient.presign("GET", "b", "k")
            with pytest.raises(objsdk.NoSuchKey):
                tclient.get_object("b", "missing")
        assert caplog.records
        for record in caplog.records:
            self.assert_clean(record.getMessage())


NO_SUCH_BUCKET = (
    b"<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist.</Message>"
    b"<BucketName>b</BucketName></Error>"
)


def _no_such_bucket(request: Request) -> MockResponse:
    return MockResponse(404, {}, NO_SUCH_BUCKET)


@pytest.mark.parametrize("size", [100, 70 << 20])
def test_a_failed_put_of_a_bytesio_buffer_raises_the_s3_error_not_buffer_error(size):
    # The exception must not hold a view of the buffer, or leaving the with-block raises
    # BufferError ("Existing exports of data") in place of the real error. (A mock
    # transport: `responses` itself keeps every request body it saw.)
    client = Client(EP, AK, SK, transport=MockTransport(_no_such_bucket))
    with pytest.raises(objsdk.NoSuchBucket):
        _from_a_bytesio(client.put_object, "b", "k", b"x" * size)
    with pytest.raises(objsdk.NoSuchBucket):
        _from_a_bytesio(client.upload, "b", "k", b"x" * size)


def _from_a_bytesio(send: Callable[..., object], bucket: str, key: str, data: bytes) -> None:
    """The documented pattern: the buffer is closed while an error is on its way out."""
    with io.BytesIO() as buf:
        buf.write(data)
        send(bucket, key, buf.getbuffer())


def test_access_denied_to_an_anonymous_client_says_the_request_was_unsigned(client, rsps):
    denied = b"<Error><Code>AccessDenied</Code><Message>Access Denied.</Message></Error>"
    rsps.get(f"{EP}/b/k", body=denied, status=403)
    with Client(EP, anonymous=True) as anonymous, pytest.raises(objsdk.AccessDenied) as refused:
        anonymous.get_object("b", "k")
    assert "Access Denied; the request was unsigned" in str(refused.value)
    assert "anonymous=True" in str(refused.value)
    assert "Authorization" not in rsps.calls[0].request.headers
    assert (refused.value.bucket, refused.value.key) == ("b", "k")
    with pytest.raises(objsdk.AccessDenied) as signed:
        client.get_object("b", "k")
    assert "unsigned" not in str(signed.value)
