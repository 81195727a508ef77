"""S3 XML bodies are parsed and built without a network."""

import xml.etree.ElementTree as ET
from datetime import datetime, timezone

import pytest

from objsdk._core.s3xml import (
    XMLParseError,
    build_delete_body,
    error_from_response,
    parse_copy_result,
    parse_delete_result,
    parse_error,
    parse_http_date,
    parse_list_buckets,
    parse_list_objects_v2,
    xml_carries,
)

NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'


def test_error_body_fields_are_parsed():
    body = (
        b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>NoSuchKey</Code>"
        b"<Message>The specified key does not exist.</Message><Key>a/b</Key>"
        b"<BucketName>bkt</BucketName><RequestId>R1</RequestId></Error>"
    )
    err = parse_error(body)
    assert err is not None
    assert (err.code, err.message, err.key, err.bucket, err.request_id) == (
        "NoSuchKey",
        "The specified key does not exist.",
        "a/b",
        "bkt",
        "R1",
    )


def test_error_body_drops_string_to_sign_and_signature():
    body = (
        b"<Error><Code>SignatureDoesNotMatch</Code><Message>bad</Message>"
        b"<StringToSign>AWS4-HMAC-SHA256 secretish</StringToSign>"
        b"<SignatureProvided>deadbeef</SignatureProvided></Error>"
    )
    err = parse_error(body)
    assert err is not None
    assert "deadbeef" not in repr(err)
    assert "secretish" not in repr(err)


@pytest.mark.parametrize("body", [b"", b"not xml", b"<html>oops</html>", b"<Error><Code>"])
def test_non_error_bodies_parse_to_none(body):
    assert parse_error(body) is None


def test_list_buckets_in_server_order():
    body = (
        f"<ListAllMyBucketsResult {NS}><Owner><ID>x</ID></Owner><Buckets>"
        "<Bucket><Name>b1</Name><CreationDate>2024-01-02T03:04:05.000Z</CreationDate></Bucket>"
        "<Bucket><Name>a2</Name><CreationDate>2024-01-03T03:04:05Z</CreationDate></Bucket>"
        "</Buckets></ListAllMyBucketsResult>"
    ).encode()
    buckets = parse_list_buckets(body)
    assert [b.name for b in buckets] == ["b1", "a2"]
    assert buckets[0].creation_date == datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def test_list_objects_page_with_url_encoded_keys_is_decoded():
    body = (
        f"<ListBucketResult {NS}><Name>b</Name><EncodingType>url</EncodingType>"
        "<IsTruncated>true</IsTruncated><NextContinuationToken>tok==</NextContinuationToken>"
        '<Contents><Key>a+b%2Bc%25d%0A</Key><Size>3</Size><ETag>"e"</ETag>'
        "<LastModified>2024-01-02T03:04:05.000Z</LastModified></Contents>"
        "<CommonPrefixes><Prefix>dir%20x/</Prefix></CommonPrefixes>"
        "</ListBucketResult>"
    ).encode()
    page = parse_list_objects_v2(body)
    assert [o.key for o in page.objects] == ["a b+c%d\n"]
    assert page.objects[0].size == 3
    assert page.objects[0].etag == '"e"'
    assert [p.prefix for p in page.prefixes] == ["dir x/"]
    assert page.is_truncated
    assert page.next_token == "tok=="


def test_list_objects_keys_are_verbatim_without_encoding_type():
    body = (
        b"<ListBucketResult><Contents><Key>a+b%20</Key><Size>0</Size></Contents></ListBucketResult>"
    )
    assert parse_list_objects_v2(body).objects[0].key == "a+b%20"


def test_list_objects_last_page_is_not_truncated():
    page = parse_list_objects_v2(
        b"<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>"
    )
    assert not page.is_truncated
    assert page.objects == []


def test_malformed_listing_raises_a_parse_error():
    with pytest.raises(XMLParseError, match="malformed XML"):
        parse_list_objects_v2(b"<ListBucketResult>")


def test_delete_body_escapes_keys_and_is_quiet():
    body = build_delete_body(["a&b", "<k>", 'q"'])
    assert body.startswith(b"<Delete><Quiet>true</Quiet>")
    assert b"<Key>a&amp;b</Key>" in body
    assert b"<Key>&lt;k&gt;</Key>" in body


@pytest.mark.parametrize(
    "key", ["a\rb", "a\r\nb", "a\nb", "\r", "t\tab", "a&<>\"'b", "é\U0001f984"]
)
def test_a_key_in_a_delete_body_reads_back_unchanged(key):
    # A literal CR reaches every XML parser as LF (XML 1.0 §2.11): "a\rb" would name,
    # and delete, "a\nb".
    root = ET.fromstring(build_delete_body([key, "next"]))
    assert [k.text for k in root.iter("Key")] == [key, "next"]


def test_only_the_characters_of_xml_1_0_can_be_carried():
    assert all(xml_carries(k) for k in ["a\tb\nc\rd", " ~é\ud7ff\ue000\ufffd\U0010ffff"])
    assert not any(xml_carries(k) for k in ["a\x00", "a\x01", "\x08", "\x0b", "\x1f", "\ufffe"])


def _xml_char(c: int) -> bool:
    """XML 1.0 §2.2, production [2] (Char), as the spec writes it."""
    return (
        c in (0x9, 0xA, 0xD)
        or 0x20 <= c <= 0xD7FF
        or 0xE000 <= c <= 0xFFFD
        or 0x10000 <= c <= 0x10FFFF
    )


def test_xml_carries_follows_the_char_production_at_every_edge():
    edges = {0x9, 0xA, 0xD, 0x20, 0x7F, 0xD7FF, 0xE000, 0xFFFD, 0x10000, 0x10FFFF}
    for c in sorted({e + d for e in edges for d in (-1, 0, 1)} - {0x110000}):
        assert xml_carries(chr(c)) == _xml_char(c), hex(c)


def test_delete_result_reports_only_failures():
    body = (
        f"<DeleteResult {NS}><Deleted><Key>ok</Key></Deleted>"
        "<Error><Key>bad</Key><Code>AccessDenied</Code><Message>no</Message></Error>"
        "</DeleteResult>"
    ).encode()
    [failure] = parse_delete_result(body)
    assert (failure.key, failure.code, failure.message) == ("bad", "AccessDenied", "no")


def test_copy_result_gives_etag_and_date():
    body = (
        f"<CopyObjectResult {NS}><LastModified>2024-01-02T03:04:05.000Z</LastModified>"
        '<ETag>"abc"</ETag></CopyObjectResult>'
    ).encode()
    etag, modified = parse_copy_result(body)
    assert etag == '"abc"'
    assert modified is not None
    assert modified.year == 2024


def test_http_dates_parse_and_bad_ones_are_none():
    assert parse_http_date("Wed, 12 Oct 2009 17:50:00 GMT") == datetime(
        2009, 10, 12, 17, 50, tzinfo=timezone.utc
    )
    assert parse_http_date("yesterday") is None
    assert parse_http_date(None) is None


# -- a 400 with nothing in it (the answer to a HEAD has no body) -----------------------------


def test_a_bare_400_on_a_bucket_name_few_services_accept_names_the_bucket_rule():
    e = error_from_response(400, {}, b"", operation="bucket_exists", bucket="v", key=None)
    assert e.code == "InvalidBucketName"
    assert "'v'" in str(e)
    assert "3-63 characters" in str(e)


def test_a_services_invalid_bucket_name_answer_gains_the_bucket_rule():
    body = (
        b"<Error><Code>InvalidBucketName</Code>"
        b"<Message>The specified bucket is not valid.</Message></Error>"
    )
    e = error_from_response(400, {}, body, operation="create_bucket", bucket="ux", key=None)
    assert e.message == (
        "The specified bucket is not valid; bucket names are 3-63 characters from a-z, "
        "0-9, '.' and '-', starting and ending with a letter or digit"
    )
    # A name the rule allows: the service has another reason, its message stands alone.
    fine = error_from_response(400, {}, body, operation="create_bucket", bucket="fine", key=None)
    assert fine.message == "The specified bucket is not valid."


def test_a_bare_400_on_a_portable_bucket_name_says_bad_request_not_http400():
    e = error_from_response(400, {}, b"", operation="head_object", bucket="fine-name", key="k")
    assert e.code == "BadRequest"
    assert "HTTP400" not in str(e)
    assert "Bad Request" in str(e)


def test_a_400_whose_body_says_why_keeps_the_service_words():
    body = (
        b"<Error><Code>InvalidArgument</Code><Message>nope</Message>"
        b"<RequestId>r</RequestId></Error>"
    )
    e = error_from_response(400, {}, body, operation="put_object", bucket="v", key="k")
    assert (e.code, e.message) == ("InvalidArgument", "nope")
