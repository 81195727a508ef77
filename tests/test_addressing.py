"""Endpoints, bucket/key checks and the exact wire URL."""

import pytest

from objsdk._core.addressing import Endpoint, check_bucket, check_key
from objsdk.errors import InvalidArgument


def test_path_style_url_puts_bucket_in_path():
    ep = Endpoint.parse("http://127.0.0.1:9000")
    assert ep.build_url("bkt", "a/b c") == "http://127.0.0.1:9000/bkt/a/b%20c"


def test_bucket_url_has_no_trailing_slash():
    assert Endpoint.parse("http://h:1").build_url("bkt") == "http://h:1/bkt"


def test_service_url_is_root():
    assert Endpoint.parse("https://s3.example.com/").build_url() == "https://s3.example.com/"


def test_virtual_hosted_url_puts_bucket_in_host():
    ep = Endpoint.parse("https://s3.example.com", addressing_style="virtual")
    assert ep.build_url("bkt", "k") == "https://bkt.s3.example.com/k"


def test_virtual_hosted_refuses_non_dns_bucket():
    ep = Endpoint.parse("https://s3.example.com", addressing_style="virtual")
    with pytest.raises(InvalidArgument, match="Bad_Bucket"):
        ep.build_url("Bad_Bucket", "k")


def test_query_is_canonical_and_sorted():
    url = Endpoint.parse("http://h").build_url("b", None, [("prefix", "a b"), ("list-type", "2")])
    assert url == "http://h/b?list-type=2&prefix=a%20b"


def test_dot_segments_in_keys_are_kept_verbatim():
    assert Endpoint.parse("http://h").build_url("b", "x/../y") == "http://h/b/x/../y"


def test_endpoint_without_scheme_defaults_to_http():
    assert Endpoint.parse("localhost:9000").url == "http://localhost:9000"


@pytest.mark.parametrize(
    "url", ["ftp://h", "http://", "http://h/path", "http://h?x=1", "http://h:99999"]
)
def test_bad_endpoints_are_refused(url):
    with pytest.raises(InvalidArgument, match="endpoint"):
        Endpoint.parse(url)


def test_endpoint_with_credentials_is_refused_without_echoing_them():
    with pytest.raises(InvalidArgument) as info:
        Endpoint.parse("http://user:hunter2@h:9000")
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize("bucket", ["", "-x", "a/b", "a b", "x" * 300])
def test_impossible_bucket_names_are_refused_by_name(bucket):
    with pytest.raises(InvalidArgument, match="invalid bucket name"):
        check_bucket(bucket)


def test_empty_key_is_refused():
    with pytest.raises(InvalidArgument, match="must not be empty"):
        check_key("")


def test_key_over_1024_utf8_bytes_is_refused():
    check_key("é" * 512)  # exactly 1024 bytes
    with pytest.raises(InvalidArgument, match="1026 bytes"):
        check_key("é" * 513)


def test_key_with_lone_surrogate_is_refused():
    with pytest.raises(InvalidArgument, match="not valid UTF-8"):
        check_key("a\udc80")
