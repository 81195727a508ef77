"""A bucket in another region than the client's: which answers say so (pure), and what
the client does with them (re-sign once for that region, on AWS send to its endpoint,
remember it for the bucket), against a transport that plays S3's part offline.

The same against a real MinIO with a site region is in test_region_redirect_minio.py.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

import pytest

from objsdk import AccessDenied, Client, S3Error
from objsdk._core.region_redirect import Redirect, region_redirect
from objsdk._core.s3xml import parse_error
from objsdk._transport.mock import MockResponse, MockTransport, Request

PERMANENT_REDIRECT = (
    b"<Error><Code>PermanentRedirect</Code><Message>The bucket you are attempting to access "
    b"must be addressed using the specified endpoint.</Message><Bucket>bkt</Bucket>"
    b"<Endpoint>bkt.s3.eu-west-1.amazonaws.com</Endpoint></Error>"
)
WRONG_REGION = (
    b"<Error><Code>AuthorizationHeaderMalformed</Code><Message>The authorization header is "
    b"malformed; the region 'us-east-1' is wrong; expecting 'ap-south-1'</Message>"
    b"<Region>ap-south-1</Region></Error>"
)
MINIO_WRONG_REGION = (
    b"<Error><Code>AuthorizationHeaderMalformed</Code><Message>The authorization header is "
    b"malformed; the region is wrong; expecting &#39;eu-west-1&#39;.</Message></Error>"
)
MALFORMED_SCOPE = (
    b"<Error><Code>AuthorizationHeaderMalformed</Code><Message>The authorization header is "
    b"malformed; incorrect service 's4'.</Message></Error>"
)
NO_SUCH_KEY = b"<Error><Code>NoSuchKey</Code><Message>no</Message></Error>"


@pytest.mark.parametrize(
    ("status", "headers", "body", "expected"),
    [
        (301, {"x-amz-bucket-region": "eu-west-1"}, b"", "eu-west-1"),
        (301, {}, PERMANENT_REDIRECT, "eu-west-1"),
        (307, {"Location": "https://bkt.s3-ap-south-1.amazonaws.com/k"}, b"", "ap-south-1"),
        (302, {}, b"", None),  # says "elsewhere" but not where: ask the bucket
        (400, {}, WRONG_REGION, "ap-south-1"),
        (400, {"x-amz-bucket-region": "sa-east-1"}, WRONG_REGION, "sa-east-1"),
        (400, {}, MINIO_WRONG_REGION, "eu-west-1"),
        # A HEAD's answer has no body: the header, MinIO's headers, or nothing.
        (400, {"x-amz-bucket-region": "eu-west-1"}, b"", "eu-west-1"),
        (
            400,
            {
                "x-minio-error-code": "AuthorizationHeaderMalformed",
                "x-minio-error-desc": "\"... the region is wrong; expecting 'eu-west-1'.\"",
            },
            b"",
            "eu-west-1",
        ),
        (400, {}, b"", None),
        # Not about the region.
        (400, {}, MALFORMED_SCOPE, "no"),
        (400, {"x-minio-error-code": "InvalidArgument"}, b"", "no"),
        (404, {"x-amz-bucket-region": "eu-west-1"}, NO_SUCH_KEY, "no"),
        (403, {"x-amz-bucket-region": "eu-west-1"}, b"", "no"),
        # A region that could not be one is not followed.
        (301, {"x-amz-bucket-region": "eu-west-1.evil.example"}, b"", None),
    ],
)
def test_which_answers_name_another_region(
    status: int, headers: dict[str, str], body: bytes, expected: str | None
) -> None:
    found = region_redirect(status, headers, parse_error(body))
    assert found == (None if expected == "no" else Redirect(expected))


def _region_of(request: Request) -> str:
    """The region a request was signed for (its credential scope)."""
    found = re.search(r"Credential=[^/]+/\d{8}/([^/]+)/s3/", request.headers["Authorization"])
    assert found is not None
    return found[1]


class AwsS3:
    """S3 as AWS answers for a bucket ``b`` in eu-west-1: a request to another region's
    endpoint gets a 301 (with the header, as S3 sends it), one signed for another region
    a 400 AuthorizationHeaderMalformed (a HEAD's: no body); HeadBucket says the region
    whatever it answers."""

    def __init__(self, *, header: bool = True, bucket_region: str = "eu-west-1") -> None:
        self.header = header
        self.region = bucket_region
        self.lock = threading.Lock()
        self.objects: dict[str, bytes] = {"k": b"hello"}

    def __call__(self, request: Request) -> MockResponse:
        host = urlsplit(request.url).hostname or ""
        signed = _region_of(request)
        where = {"x-amz-bucket-region": self.region} if self.header else {}
        if request.method == "HEAD" and request.key is None:  # HeadBucket
            ok = signed == self.region and self.region in host
            return MockResponse(200 if ok else 301, {"x-amz-bucket-region": self.region})
        if self.region not in host:
            body = b"" if request.method == "HEAD" else PERMANENT_REDIRECT
            return MockResponse(301, where, body)
        if signed != self.region:
            expected = WRONG_REGION.replace(b"ap-south-1", b"eu-west-1")
            return MockResponse(400, where, b"" if request.method == "HEAD" else expected)
        if request.method == "PUT":
            with self.lock:
                self.objects[request.key or ""] = request.body
            return MockResponse(200, {"ETag": '"e"'})
        data = self.objects.get(request.key or "")
        if data is None:
            return MockResponse(404, {}, NO_SUCH_KEY)
        headers = {"Content-Length": str(len(data)), "ETag": '"e"'}
        return MockResponse(200, headers, b"" if request.method == "HEAD" else data)


def _client(
    s3: Callable[[Request], MockResponse], endpoint: str, style: str = "auto"
) -> tuple[Client, MockTransport]:
    transport = MockTransport(s3, endpoint=endpoint, addressing_style=style)
    return Client(endpoint, "AKIDEXAMPLE", "secret", transport=transport), transport


def test_a_301_from_aws_sends_the_request_to_the_buckets_region_once_then_always() -> None:
    client, transport = _client(AwsS3(), "https://s3.amazonaws.com")
    assert client.get_object("bkt", "k") == b"hello"
    first = transport.requests
    assert [(urlsplit(r.url).hostname, _region_of(r)) for r in first] == [
        ("bkt.s3.amazonaws.com", "us-east-1"),
        ("bkt.s3.eu-west-1.amazonaws.com", "eu-west-1"),
    ]
    transport.requests = []
    client.put_object("bkt", "k2", b"x")
    client.head_object("bkt", "k2")
    assert [(urlsplit(r.url).hostname, _region_of(r)) for r in transport.requests] == [
        ("bkt.s3.eu-west-1.amazonaws.com", "eu-west-1")
    ] * 2


def test_path_style_and_a_regional_endpoint_move_to_the_buckets_regional_endpoint() -> None:
    client, transport = _client(AwsS3(), "https://s3.us-west-2.amazonaws.com", style="path")
    assert client.get_object("bkt", "k") == b"hello"
    assert [r.url for r in transport.requests] == [
        "https://s3.us-west-2.amazonaws.com/bkt/k",
        "https://s3.eu-west-1.amazonaws.com/bkt/k",
    ]


def test_a_head_whose_400_names_no_region_asks_the_bucket_then_is_signed_for_it() -> None:
    client, transport = _client(AwsS3(header=False), "https://s3.eu-west-1.amazonaws.com")
    assert client.head_object("bkt", "k").size == 5
    assert [(r.method, r.key, _region_of(r)) for r in transport.requests] == [
        ("HEAD", "k", "us-east-1"),  # 400, no body, no header
        ("HEAD", None, "us-east-1"),  # HeadBucket: its answer names eu-west-1
        ("HEAD", "k", "eu-west-1"),
    ]


def test_a_file_upload_and_a_streamed_read_follow_the_redirect(tmp_path) -> None:
    client, transport = _client(AwsS3(), "https://s3.amazonaws.com")
    path = tmp_path / "f"
    path.write_bytes(b"from a file")
    client.upload("bkt", "f", str(path))
    with client.open("bkt", "f") as f:
        assert f.read() == b"from a file"
    assert [_region_of(r) for r in transport.requests] == ["us-east-1"] + ["eu-west-1"] * (
        len(transport.requests) - 1
    )


def test_a_request_is_redirected_once_only() -> None:
    # A service that names a region and then refuses that one too: no loop.
    def always_elsewhere(request: Request) -> MockResponse:
        elsewhere = "eu-west-1" if _region_of(request) != "eu-west-1" else "ap-south-1"
        return MockResponse(301, {"x-amz-bucket-region": elsewhere}, PERMANENT_REDIRECT)

    client, transport = _client(always_elsewhere, "http://127.0.0.1:9000")
    with pytest.raises(S3Error, match="PermanentRedirect") as caught:
        client.get_object("bkt", "k")
    assert caught.value.status == 301
    assert [_region_of(r) for r in transport.requests] == ["us-east-1", "eu-west-1"]


def test_an_error_that_is_not_about_the_region_is_raised_without_a_second_request() -> None:
    def malformed(request: Request) -> MockResponse:
        return MockResponse(400, {}, MALFORMED_SCOPE)

    client, transport = _client(malformed, "http://127.0.0.1:9000")
    with pytest.raises(S3Error, match="incorrect service"):
        client.get_object("bkt", "k")
    assert len(transport.requests) == 1


def test_a_redirect_naming_the_region_already_used_is_the_error_it_was() -> None:
    def denied_here(request: Request) -> MockResponse:
        if request.key is None:
            return MockResponse(403, {"x-amz-bucket-region": "us-east-1"})
        return MockResponse(400, {})  # a bodiless 400: ask the bucket, which says us-east-1

    client, transport = _client(denied_here, "http://127.0.0.1:9000")
    with pytest.raises(S3Error) as caught:
        client.head_object("bkt", "k")
    assert not isinstance(caught.value, AccessDenied)
    assert caught.value.status == 400
    # Asked once; the HEAD goes once more without x-amz-checksum-mode, as any HEAD
    # refused with a bare 400 does (see the checksum dialect).
    assert [(r.method, r.key) for r in transport.requests] == [
        ("HEAD", "k"),
        ("HEAD", None),
        ("HEAD", "k"),
    ]


def test_a_presigned_url_is_signed_for_the_buckets_region_asked_once() -> None:
    client, transport = _client(AwsS3(), "https://s3.amazonaws.com")
    urls = [client.presign("GET", "bkt", key) for key in ("k", "other")]
    for url in urls:
        parts = urlsplit(url)
        assert parts.hostname == "bkt.s3.eu-west-1.amazonaws.com"
        assert "/eu-west-1/s3/" in parse_qs(parts.query)["X-Amz-Credential"][0]
    assert [(r.method, r.key) for r in transport.requests] == [("HEAD", None)]


def test_a_presigned_url_uses_the_region_a_redirect_taught_without_asking() -> None:
    client, transport = _client(AwsS3(), "https://s3.amazonaws.com")
    client.get_object("bkt", "k")
    sent = len(transport.requests)
    url = client.presign("PUT", "bkt", "k")
    assert "/eu-west-1/s3/" in parse_qs(urlsplit(url).query)["X-Amz-Credential"][0]
    assert len(transport.requests) == sent


def test_a_presigned_url_for_a_bucket_whose_region_cannot_be_asked_uses_the_clients() -> None:
    def unreachable(request: Request) -> MockResponse:
        from objsdk.errors import ConnectError

        raise ConnectError("refused")

    client, transport = _client(unreachable, "http://127.0.0.1:9000")
    for _ in range(2):
        url = client.presign("GET", "bkt", "k")
        assert "/us-east-1/s3/" in parse_qs(urlsplit(url).query)["X-Amz-Credential"][0]
    assert len(transport.requests) == 1  # asked once, not at every URL


def test_threads_share_what_a_redirect_taught() -> None:
    client, transport = _client(AwsS3(), "https://s3.amazonaws.com")
    client.get_object("bkt", "k")
    transport.requests = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            for _ in range(20):
                assert client.get_object("bkt", "k") == b"hello"
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert {_region_of(r) for r in transport.requests} == {"eu-west-1"}
    assert len(transport.requests) == 80
