"""Server-side encryption headers go on exactly the requests S3 wants them on, and SSE-C's
key never shows (request shapes on a MockTransport, no server)."""

from __future__ import annotations

import logging
import os
import pickle
from urllib.parse import urlsplit

import pytest

from objsdk import SSEC, SSEKMS, SSES3, Client, InvalidArgument
from objsdk._core.sse import request_kind, sse_headers
from objsdk._transport.mock import MockResponse, MockTransport, Request

KEY = bytes(range(32))
CREATE = b"<InitiateMultipartUploadResult><UploadId>U1</UploadId></InitiateMultipartUploadResult>"
COMPLETE = (
    b"<CompleteMultipartUploadResult><ETag>&quot;e&quot;</ETag></CompleteMultipartUploadResult>"
)
COPY = b"<CopyObjectResult><ETag>&quot;c&quot;</ETag></CopyObjectResult>"


def answer(request: Request) -> MockResponse:
    query = urlsplit(request.url).query
    if request.method == "POST" and query.startswith("uploads"):
        return MockResponse(200, {}, CREATE)
    if request.method == "POST":
        return MockResponse(200, {}, COMPLETE)
    if request.method == "PUT" and "x-amz-copy-source" in request.headers:
        return MockResponse(200, {}, COPY)
    if request.method == "PUT":
        return MockResponse(200, {"ETag": '"p"'}, b"")
    if request.method == "HEAD":
        return MockResponse(200, {"ETag": '"p"', "Content-Length": "4"}, b"")
    return MockResponse(206, {"ETag": '"p"', "Content-Range": "bytes 1-2/4"}, b"bc")


def traffic(sse: object) -> dict[str, dict[str, str]]:
    """Each kind of request a client with ``sse`` sends, with its encryption headers."""
    transport = MockTransport(answer, endpoint="https://s3.test")
    client = Client("https://s3.test", "AK", "SK", transport=transport, sse=sse)  # type: ignore[arg-type]
    with client.open_write("b", "k", part_size=5 << 20) as w:
        w.write(os.urandom(6 << 20))  # two parts
    client.put_object("b", "small", b"abcd")
    client.get_object("b", "small", offset=1, length=2)
    client.head_object("b", "small")
    client.copy_object("b", "small", "b", "copy")
    client.put_object_tags("b", "small", {"a": "1"})
    seen: dict[str, dict[str, str]] = {}
    for r in transport.requests:
        query = urlsplit(r.url).query
        name = {
            ("POST", "uploads="): "create",
            ("POST", "uploadId=U1"): "complete",
            ("PUT", "partNumber=1&uploadId=U1"): "part",
            ("PUT", "partNumber=2&uploadId=U1"): "part",
            ("PUT", ""): "copy" if "x-amz-copy-source" in r.headers else "put",
            ("GET", ""): "ranged get",
            ("HEAD", ""): "head",
            ("PUT", "tagging="): "tagging",
        }[(r.method, query)]
        found = {
            k.lower(): v for k, v in r.headers.items() if "server-side-encryption" in k.lower()
        }
        assert seen.get(name, found) == found  # every request of a kind alike
        seen[name] = found
    return seen


def test_sse_s3_goes_only_on_the_requests_that_create_an_object() -> None:
    aes = {"x-amz-server-side-encryption": "AES256"}
    assert traffic(SSES3()) == {
        "create": aes,
        "part": {},
        "complete": {},
        "put": aes,
        "ranged get": {},
        "head": {},
        "copy": aes,
        "tagging": {},
    }


def test_sse_kms_names_its_key_and_context_when_creating() -> None:
    seen = traffic(SSEKMS("my-key", {"team": "data"}))
    assert seen["put"]["x-amz-server-side-encryption"] == "aws:kms"
    assert seen["put"]["x-amz-server-side-encryption-aws-kms-key-id"] == "my-key"
    assert "x-amz-server-side-encryption-context" in seen["create"]
    assert seen["part"] == seen["ranged get"] == seen["head"] == {}


def test_sse_c_goes_on_every_request_on_the_object_and_copies_name_the_source_key() -> None:
    seen = traffic(SSEC(KEY))
    customer = seen["put"]
    assert customer["x-amz-server-side-encryption-customer-algorithm"] == "AES256"
    assert set(customer) == {
        "x-amz-server-side-encryption-customer-algorithm",
        "x-amz-server-side-encryption-customer-key",
        "x-amz-server-side-encryption-customer-key-md5",
    }
    for kind in ("create", "part", "complete", "ranged get", "head"):
        assert seen[kind] == customer, kind
    assert (
        seen["copy"]["x-amz-copy-source-server-side-encryption-customer-key"]
        == customer["x-amz-server-side-encryption-customer-key"]
    )
    assert seen["tagging"] == {}


def test_sse_c_key_is_never_in_a_repr_a_pickle_or_a_log(caplog: pytest.LogCaptureFixture) -> None:
    import base64

    shown = base64.b64encode(KEY).decode()
    sse = SSEC(KEY)
    client = Client(
        "https://s3.test",
        "AK",
        "SK",
        transport=MockTransport(answer, endpoint="https://s3.test"),
        sse=sse,
    )
    with caplog.at_level(logging.DEBUG, logger="objsdk"):
        client.put_object("b", "k", b"x")
    assert shown not in repr(sse) + repr(client) + repr(client.transport) + caplog.text
    blob = pickle.dumps(sse)
    assert KEY not in blob
    assert shown.encode() not in blob
    with pytest.raises(InvalidArgument, match="never pickled"):
        pickle.loads(blob).read_headers()


def test_sse_c_is_refused_over_plain_http_and_a_key_must_be_32_bytes() -> None:
    with pytest.raises(InvalidArgument, match="https"):
        Client("http://s3.test", "AK", "SK", sse=SSEC(KEY))
    with pytest.raises(InvalidArgument, match="32 bytes"):
        SSEC(b"short")


@pytest.mark.parametrize(
    ("method", "key", "params", "kind"),
    [
        ("PUT", "k", {}, "create"),
        ("POST", "k", {"uploads": ""}, "create"),
        ("PUT", "k", {"partNumber": "1", "uploadId": "u"}, "read"),
        ("POST", "k", {"uploadId": "u"}, "read"),
        ("GET", "k", {"versionId": "v"}, "read"),
        ("HEAD", "k", {}, "read"),
        ("GET", "k", {"tagging": ""}, None),
        ("DELETE", "k", {}, None),
        ("GET", None, {"list-type": "2"}, None),
        ("PUT", None, {}, None),
    ],
)
def test_request_kinds(method: str, key: str | None, params: dict[str, str], kind: str) -> None:
    assert request_kind(method, key, params, {}) == kind


def test_an_upload_part_copy_names_the_uploads_key_and_the_sources() -> None:
    part = {"partNumber": "1", "uploadId": "u"}
    assert request_kind("PUT", "k", part, {"x-amz-copy-source": "/b/s"}) == "part_copy"
    sent = sse_headers(SSEC(KEY), "part_copy")
    assert sent.keys() == {
        *SSEC(KEY).read_headers(),
        *SSEC(KEY).copy_source_headers(),
    }
    assert sse_headers(SSES3(), "part_copy") == {}  # the upload's Create chose it
