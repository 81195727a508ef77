"""Untrusted bytes from a server: the S3 XML parsers and the read path's response checks
give values or their documented errors (XMLParseError; Changed, BadResponse, SizeUnknown),
never another exception, never a hang (property tests)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from objsdk._core.continuation import (
    BadResponse,
    Changed,
    Continuation,
    SizeUnknown,
    check_response,
    ranged_body,
)
from objsdk._core.s3xml import (
    XMLParseError,
    error_from_response,
    error_in_body,
    parse_complete_result,
    parse_copy_result,
    parse_delete_result,
    parse_error,
    parse_list_buckets,
    parse_list_multipart_uploads,
    parse_list_objects_v2,
    parse_upload_id,
)
from objsdk.errors import S3Error

FAST = settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])

PARSERS: list[Callable[[bytes], Any]] = [
    parse_list_buckets,
    parse_list_objects_v2,
    parse_delete_result,
    parse_copy_result,
    parse_upload_id,
    parse_complete_result,
    parse_list_multipart_uploads,
]

FIELDS = [
    "Key",
    "Size",
    "ETag",
    "LastModified",
    "StorageClass",
    "Prefix",
    "IsTruncated",
    "NextContinuationToken",
    "EncodingType",
    "Name",
    "CreationDate",
    "Code",
    "Message",
    "UploadId",
    "Initiated",
    "NextKeyMarker",
    "NextUploadIdMarker",
    "ChecksumCRC32C",
    "ChecksumType",
    "VersionId",
]
ROOTS = [
    "ListBucketResult",
    "ListAllMyBucketsResult",
    "DeleteResult",
    "CopyObjectResult",
    "InitiateMultipartUploadResult",
    "CompleteMultipartUploadResult",
    "ListMultipartUploadsResult",
    "Error",
]
CONTAINERS = ["Contents", "CommonPrefixes", "Buckets", "Bucket", "Error", "Upload", None]

# Text a field may carry: anything, and the near misses of numbers, dates and percent codes.
field_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", "-1", "1e3", "0x10", "९", "2024-13-01T00:00:00Z", "%zz", "%", "true"]),
    st.integers().map(str),
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@st.composite
def s3_documents(draw: st.DrawFn) -> bytes:
    """Well-formed XML shaped like S3's answers, with arbitrary field values."""
    root = draw(st.sampled_from(ROOTS))
    ns = draw(st.sampled_from(["", ' xmlns="http://s3.amazonaws.com/doc/2006-03-01/"']))
    parts = [f"<{root}{ns}>"]
    for _ in range(draw(st.integers(0, 6))):
        container = draw(st.sampled_from(CONTAINERS))
        fields = draw(st.lists(st.tuples(st.sampled_from(FIELDS), field_text), max_size=5))
        inner = "".join(
            f"<{n}>{_escape(''.join(ch for ch in v if ch.isprintable()))}</{n}>" for n, v in fields
        )
        if container == "Buckets":
            inner = f"<Bucket>{inner}</Bucket>"
        parts.append(f"<{container}>{inner}</{container}>" if container else inner)
    parts.append(f"</{root}>")
    return "".join(parts).encode()


def _parsed_or_documented(parse: Callable[[bytes], Any], body: bytes) -> None:
    with contextlib.suppress(XMLParseError):
        parse(body)


@pytest.mark.parametrize("parse", PARSERS, ids=lambda p: p.__name__)
@FAST
@given(body=st.binary(max_size=300))
@example(body=b'<?xml version="1.0" encoding="no-such-codec"?><a/>')
@example(body=b'<!DOCTYPE a [<!ENTITY e SYSTEM "file:///etc/passwd">]><a>&e;</a>')
@example(body=b"<a>" * 5000)
def test_xml_parsers_take_any_bytes(parse: Callable[[bytes], Any], body: bytes) -> None:
    _parsed_or_documented(parse, body)


@pytest.mark.parametrize("parse", PARSERS, ids=lambda p: p.__name__)
@FAST
@given(body=s3_documents())
@example(body=b"<ListBucketResult><Contents><Size>x</Size></Contents></ListBucketResult>")
@example(
    body=b"<ListBucketResult><Contents><LastModified>yesterday</LastModified></Contents>"
    b"</ListBucketResult>"
)
@example(
    body=b"<ListAllMyBucketsResult><Buckets><Bucket><CreationDate>2024-13-01T00:00:00Z"
    b"</CreationDate></Bucket></Buckets></ListAllMyBucketsResult>"
)
def test_xml_parsers_take_any_field_values(parse: Callable[[bytes], Any], body: bytes) -> None:
    _parsed_or_documented(parse, body)


def test_a_size_that_is_not_a_number_is_an_xml_parse_error_naming_it() -> None:
    body = b"<ListBucketResult><Contents><Key>k</Key><Size>12x</Size></Contents></ListBucketResult>"
    with pytest.raises(XMLParseError, match="Size '12x'"):
        parse_list_objects_v2(body)


def test_a_date_that_is_not_a_date_is_an_xml_parse_error_naming_it() -> None:
    body = b"<CopyObjectResult><LastModified>soon</LastModified></CopyObjectResult>"
    with pytest.raises(XMLParseError, match="LastModified 'soon'"):
        parse_copy_result(body)


@FAST
@given(body=st.one_of(st.binary(max_size=300), s3_documents()), status=st.integers(100, 599))
def test_error_bodies_take_any_bytes(body: bytes, status: int) -> None:
    parse_error(body)
    err = error_from_response(status, {}, body, operation="op", bucket="b", key="k")
    assert isinstance(err, S3Error)
    found = error_in_body(status, body, operation="op", bucket="b", key=None)
    assert found is None or isinstance(found, S3Error)


# -- the read path's response checks ---------------------------------------------------------

header_names = st.sampled_from(
    ["ETag", "Content-Range", "Content-Length", "Last-Modified", "X-Other"]
)
header_values = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["bytes 0-99/100", "bytes */100", "bytes 5-4/10", "bytes 0-99/*", '"v1"']),
    st.builds(
        "bytes {}-{}/{}".format,
        st.integers(-5, 300),
        st.integers(-5, 300),
        st.one_of(st.integers(-5, 300), st.just("*")),
    ),
    st.integers(-5, 300).map(str),
)
headers = st.dictionaries(header_names, header_values, max_size=5)
optional_size = st.one_of(st.none(), st.integers(0, 300))


@FAST
@given(
    status=st.sampled_from([200, 206, 412, 416, 500, 302]) | st.integers(0, 999),
    headers=headers,
    want=st.integers(0, 400),
    etag=st.one_of(st.none(), st.sampled_from(['"v1"', 'W/"v1"', '"v2"'])),
    size=optional_size,
    end=optional_size,
    last_modified=st.one_of(st.none(), st.text(max_size=30)),
)
def test_check_response_gives_a_continuation_or_a_documented_verdict(
    status: int,
    headers: dict[str, str],
    want: int,
    etag: str | None,
    size: int | None,
    end: int | None,
    last_modified: str | None,
) -> None:
    try:
        cont = check_response(
            status, headers, want=want, etag=etag, size=size, end=end, last_modified=last_modified
        )
    except (Changed, BadResponse, SizeUnknown):
        return
    assert isinstance(cont, Continuation)
    if status == 206:
        assert cont.start == want  # never a body that starts elsewhere
    if status == 416 and size is not None:
        assert want >= size  # a 416 inside the pinned size is never the end


@FAST
@given(
    status=st.sampled_from([200, 206]) | st.integers(0, 999),
    headers=headers,
    body=st.binary(max_size=300),
    offset=st.integers(0, 300),
    length=st.one_of(st.none(), st.integers(1, 300)),
)
# A 416 whose Content-Range is a bare size: nothing at the offset, not an AssertionError.
@example(status=416, headers={"Content-Range": "0"}, body=b"", offset=0, length=None)
def test_ranged_body_gives_exactly_the_bytes_asked_for_or_bad_response(
    status: int, headers: dict[str, str], body: bytes, offset: int, length: int | None
) -> None:
    try:
        data = ranged_body(status, headers, body, offset=offset, length=length)
    except (BadResponse, Changed, SizeUnknown):
        return
    if length is not None:
        assert len(data) <= length
    if status == 416:
        assert data == b""
    if status == 206:
        assert headers["Content-Range"].split()[1].startswith(f"{offset}-")
