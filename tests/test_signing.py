"""Fixed vectors for objsdk._core.signing: AWS's worked S3 SigV4 examples and encoding edge cases.

The examples are from the S3 API reference pages "Signature Calculations for the Authorization
Header: Transferring Payload in a Single Chunk" (GET object, PUT object, GET bucket lifecycle,
GET bucket) and "Authenticating Requests: Using Query Parameters" (presigned URL). All use the
same example credentials, region, bucket and time.
"""

from __future__ import annotations

import array
import hashlib
import hmac
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qsl, urlsplit

import pytest

from objsdk._core.signing import (
    EMPTY_SHA256,
    UNSIGNED_PAYLOAD,
    Credentials,
    canonical_request,
    encode_key_path,
    encode_query,
    payload_sha256,
    presign_url,
    sign_request,
    signing_key,
    uri_encode,
)
from objsdk.errors import InvalidArgument

AWS_CREDS = Credentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
AWS_NOW = datetime(2013, 5, 24, tzinfo=timezone.utc)
AWS_BUCKET_URL = "https://examplebucket.s3.amazonaws.com"
AWS_SCOPE = "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"


def _sign(method: str, url: str, headers: dict[str, str], **kwargs: object) -> dict[str, str]:
    options: dict[str, object] = {
        "credentials": AWS_CREDS,
        "region": "us-east-1",
        "now": AWS_NOW,
        "payload_hash": EMPTY_SHA256,
    }
    options.update(kwargs)
    return sign_request(method, url, headers, **options)  # type: ignore[arg-type]


def _signed_headers(authorization: str) -> list[str]:
    return authorization.split("SignedHeaders=")[1].split(",")[0].split(";")


def _signature(authorization: str) -> str:
    return authorization.rsplit("Signature=", 1)[1]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- AWS worked examples -------------------------------------------------------------------


def test_aws_example_get_object_with_range_signature() -> None:
    added = _sign("GET", f"{AWS_BUCKET_URL}/test.txt", {"Range": "bytes=0-9"})
    assert added["Authorization"] == (
        f"AWS4-HMAC-SHA256 Credential={AWS_SCOPE}, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )


def test_aws_example_get_object_canonical_request_text() -> None:
    headers = {
        "Range": "bytes=0-9",
        "x-amz-content-sha256": EMPTY_SHA256,
        "x-amz-date": "20130524T000000Z",
    }
    creq = canonical_request(
        "GET",
        f"{AWS_BUCKET_URL}/test.txt",
        headers,
        ["host", "range", "x-amz-content-sha256", "x-amz-date"],
        EMPTY_SHA256,
    )
    assert creq == (
        "GET\n/test.txt\n\n"
        "host:examplebucket.s3.amazonaws.com\n"
        "range:bytes=0-9\n"
        f"x-amz-content-sha256:{EMPTY_SHA256}\n"
        "x-amz-date:20130524T000000Z\n\n"
        "host;range;x-amz-content-sha256;x-amz-date\n"
        f"{EMPTY_SHA256}"
    )
    # The hash the example's StringToSign carries.
    assert _sha256(creq) == "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"


def test_aws_example_put_object_signs_date_header_and_encodes_dollar_in_key() -> None:
    body = b"Welcome to Amazon S3."
    assert payload_sha256(body) == (
        "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"
    )
    added = _sign(
        "PUT",
        f"{AWS_BUCKET_URL}/{encode_key_path('test$file.text')}",
        {"Date": "Fri, 24 May 2013 00:00:00 GMT", "x-amz-storage-class": "REDUCED_REDUNDANCY"},
        payload_hash=payload_sha256(body),
    )
    assert _signed_headers(added["Authorization"]) == [
        "date",
        "host",
        "x-amz-content-sha256",
        "x-amz-date",
        "x-amz-storage-class",
    ]
    assert _signature(added["Authorization"]) == (
        "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"
    )


def test_aws_example_get_bucket_lifecycle_subresource_without_value() -> None:
    added = _sign("GET", f"{AWS_BUCKET_URL}/?lifecycle", {})
    assert _signature(added["Authorization"]) == (
        "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"
    )


def test_aws_example_get_bucket_lifecycle_canonical_query_is_name_equals() -> None:
    creq = canonical_request("GET", f"{AWS_BUCKET_URL}/?lifecycle", {}, ["host"], EMPTY_SHA256)
    assert creq.split("\n")[2] == "lifecycle="


def test_aws_example_list_objects_with_sorted_query() -> None:
    query = encode_query([("prefix", "J"), ("max-keys", "2")])
    assert query == "max-keys=2&prefix=J"
    added = _sign("GET", f"{AWS_BUCKET_URL}/?{query}", {})
    assert _signature(added["Authorization"]) == (
        "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
    )


def test_aws_example_presigned_url() -> None:
    url = presign_url(
        "GET",
        f"{AWS_BUCKET_URL}/test.txt",
        credentials=AWS_CREDS,
        region="us-east-1",
        now=AWS_NOW,
        expires=86400,
    )
    assert url == (
        f"{AWS_BUCKET_URL}/test.txt"
        "?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
        "&X-Amz-Date=20130524T000000Z"
        "&X-Amz-Expires=86400"
        "&X-Amz-SignedHeaders=host"
        "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
    )


def test_aws_example_presigned_url_canonical_request_hash() -> None:
    unsigned_url = presign_url(
        "GET",
        f"{AWS_BUCKET_URL}/test.txt",
        credentials=AWS_CREDS,
        region="us-east-1",
        now=AWS_NOW,
        expires=86400,
    ).rsplit("&X-Amz-Signature=", 1)[0]
    creq = canonical_request("GET", unsigned_url, {}, ["host"], UNSIGNED_PAYLOAD)
    assert _sha256(creq) == "3bfa292879f6447bbcda7001decf97f4a54dc650c8942174ae0a9121cf58ad04"


def test_signing_key_matches_aws_derivation_example() -> None:
    # "Examples of how to derive a signing key for Signature Version 4" (IAM, 2012-02-15).
    key = signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215", "us-east-1", "iam")
    assert key.hex() == "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"


# --- sign_request -------------------------------------------------------------------------


def test_a_signature_follows_the_secret_and_the_day_it_is_made_with() -> None:
    # The signing key is derived once per secret, day, region and service: a new secret
    # (rotated credentials) or a new day must each give the signature computed afresh.
    url, headers = f"{AWS_BUCKET_URL}/test.txt", {"Range": "bytes=0-9"}
    first = _sign("GET", url, headers)
    rotated = Credentials(AWS_CREDS.access_key, AWS_CREDS.secret_key + "x")
    for credentials, now in [
        (rotated, AWS_NOW),
        (AWS_CREDS, AWS_NOW + timedelta(days=1)),
        (AWS_CREDS, AWS_NOW),
    ]:
        signed = _signature(
            _sign("GET", url, headers, credentials=credentials, now=now)["Authorization"]
        )
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        creq = canonical_request(
            "GET",
            url,
            {**headers, "x-amz-content-sha256": EMPTY_SHA256, "x-amz-date": amz_date},
            ["host", "range", "x-amz-content-sha256", "x-amz-date"],
            EMPTY_SHA256,
        )
        scope = f"{amz_date[:8]}/us-east-1/s3/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{_sha256(creq)}"
        key = signing_key(credentials.secret_key, amz_date[:8], "us-east-1")
        assert signed == hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    assert _sign("GET", url, headers) == first


def test_sign_request_returns_only_the_new_headers_without_host() -> None:
    added = _sign("GET", f"{AWS_BUCKET_URL}/k", {"Range": "bytes=0-1"})
    assert set(added) == {"x-amz-date", "x-amz-content-sha256", "Authorization"}
    assert added["x-amz-date"] == "20130524T000000Z"
    assert added["x-amz-content-sha256"] == EMPTY_SHA256


def test_sign_request_defaults_to_unsigned_payload() -> None:
    added = sign_request(
        "GET", f"{AWS_BUCKET_URL}/k", {}, credentials=AWS_CREDS, region="us-east-1", now=AWS_NOW
    )
    assert added["x-amz-content-sha256"] == UNSIGNED_PAYLOAD


def test_sign_request_adds_and_signs_session_token() -> None:
    creds = Credentials("AKID", "SECRET", session_token="TOKEN/+=")
    added = _sign("GET", f"{AWS_BUCKET_URL}/k", {}, credentials=creds)
    assert added["x-amz-security-token"] == "TOKEN/+="
    assert "x-amz-security-token" in _signed_headers(added["Authorization"])


def test_sign_request_treats_empty_session_token_as_none() -> None:
    creds = Credentials("AKID", "SECRET", session_token="")
    added = _sign("GET", f"{AWS_BUCKET_URL}/k", {}, credentials=creds)
    assert "x-amz-security-token" not in added


def test_sign_request_replaces_caller_copies_of_signer_headers() -> None:
    stale = {
        "X-Amz-Date": "20000101T000000Z",
        "X-Amz-Content-SHA256": "stale",
        "Authorization": "x",
    }
    assert _sign("GET", f"{AWS_BUCKET_URL}/k", stale) == _sign("GET", f"{AWS_BUCKET_URL}/k", {})


@pytest.mark.parametrize(
    "name", ["User-Agent", "Expect", "X-Amzn-Trace-Id", "Connection", "Transfer-Encoding"]
)
def test_sign_request_does_not_sign_headers_botocore_leaves_unsigned(name: str) -> None:
    added = _sign("PUT", f"{AWS_BUCKET_URL}/k", {name: "v"})
    assert name.lower() not in _signed_headers(added["Authorization"])


@pytest.mark.parametrize(
    "name", ["Content-Length", "Content-Type", "Content-MD5", "x-amz-meta-a", "If-Match"]
)
def test_sign_request_signs_ordinary_headers(name: str) -> None:
    added = _sign("PUT", f"{AWS_BUCKET_URL}/k", {name: "v"})
    assert name.lower() in _signed_headers(added["Authorization"])


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://h.example:80/b/k", "h.example"),
        ("https://h.example:443/b/k", "h.example"),
        ("http://h.example:443/b/k", "h.example:443"),
        ("https://h.example:80/b/k", "h.example:80"),
        ("http://localhost:9000/b/k", "localhost:9000"),
        ("https://H.Example/b/k", "h.example"),
        ("http://user:pw@h.example/b/k", "h.example"),
        ("http://[::1]:9000/b/k", "[::1]:9000"),
        ("https://[::1]/b/k", "[::1]"),
    ],
)
def test_host_is_taken_from_url_dropping_default_ports(url: str, host: str) -> None:
    creq = canonical_request("GET", url, {}, ["host"], UNSIGNED_PAYLOAD)
    assert creq.split("\n")[3] == f"host:{host}"


def test_explicit_host_header_is_signed_instead_of_url_host() -> None:
    explicit = _sign("GET", "http://127.0.0.1:9000/b/k", {"Host": "b.s3.local"})
    from_url = _sign("GET", "http://b.s3.local/b/k", {})
    assert explicit["Authorization"] == from_url["Authorization"]


def test_header_values_are_trimmed_and_whitespace_runs_collapsed() -> None:
    messy = _sign("PUT", f"{AWS_BUCKET_URL}/k", {"x-amz-meta-a": "  a \t  b   c  "})
    clean = _sign("PUT", f"{AWS_BUCKET_URL}/k", {"x-amz-meta-a": "a b c"})
    assert messy == clean


def test_header_names_differing_only_in_case_are_comma_joined() -> None:
    creq = canonical_request(
        "GET",
        f"{AWS_BUCKET_URL}/k",
        {"X-Amz-Meta-A": "1", "x-amz-meta-a": "2"},
        ["x-amz-meta-a"],
        "",
    )
    assert "x-amz-meta-a:1,2\n" in creq


def test_invalid_header_name_is_rejected() -> None:
    with pytest.raises(InvalidArgument):
        _sign("GET", f"{AWS_BUCKET_URL}/k", {"bad name": "v"})


def test_header_value_with_newline_is_rejected() -> None:
    with pytest.raises(InvalidArgument):
        _sign("GET", f"{AWS_BUCKET_URL}/k", {"x-amz-meta-a": "a\r\nb"})


def test_url_with_fragment_is_rejected_because_it_would_not_be_sent() -> None:
    with pytest.raises(InvalidArgument):
        _sign("GET", f"{AWS_BUCKET_URL}/a#b", {})


def test_non_http_url_is_rejected() -> None:
    with pytest.raises(InvalidArgument):
        _sign("GET", "ftp://h/k", {})


def test_method_is_uppercased_in_canonical_request() -> None:
    assert _sign("get", f"{AWS_BUCKET_URL}/k", {}) == _sign("GET", f"{AWS_BUCKET_URL}/k", {})


def test_naive_datetime_is_rejected() -> None:
    with pytest.raises(InvalidArgument):
        _sign("GET", f"{AWS_BUCKET_URL}/k", {}, now=datetime(2013, 5, 24))


def test_aware_non_utc_datetime_is_converted_to_utc() -> None:
    plus_two = datetime(2013, 5, 24, 2, 0, tzinfo=timezone(timedelta(hours=2)))
    assert _sign("GET", f"{AWS_BUCKET_URL}/k", {}, now=plus_two) == _sign(
        "GET", f"{AWS_BUCKET_URL}/k", {}
    )


# --- canonical_request ---------------------------------------------------------------------


def test_canonical_path_is_verbatim_without_normalisation() -> None:
    creq = canonical_request("GET", "http://h/b//a/./../%2F%20k", {}, ["host"], "")
    assert creq.split("\n")[1] == "/b//a/./../%2F%20k"


def test_empty_path_is_slash() -> None:
    creq = canonical_request("GET", "http://h", {}, ["host"], "")
    assert creq.split("\n")[1] == "/"


def test_raw_query_is_sorted_but_not_reencoded() -> None:
    creq = canonical_request("GET", "http://h/b?z=1&a=%2F&a=%20&m", {}, ["host"], "")
    assert creq.split("\n")[2] == "a=%20&a=%2F&m=&z=1"


def test_query_value_keeps_everything_after_first_equals() -> None:
    creq = canonical_request("GET", "http://h/b?a=b=c", {}, ["host"], "")
    assert creq.split("\n")[2] == "a=b=c"


def test_canonical_request_rejects_unknown_signed_header() -> None:
    with pytest.raises(InvalidArgument):
        canonical_request("GET", "http://h/b", {}, ["host", "range"], "")


# --- uri_encode / encode_key_path / encode_query -------------------------------------------


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("AZaz09-._~", "AZaz09-._~"),
        (" ", "%20"),
        ("+", "%2B"),
        ("%", "%25"),
        ("*", "%2A"),
        ("/", "%2F"),
        ("é", "%C3%A9"),
        ("日本", "%E6%97%A5%E6%9C%AC"),
        ("😀", "%F0%9F%98%80"),
        ("?#&=;", "%3F%23%26%3D%3B"),
        ("'\"\\", "%27%22%5C"),
        ("\x00\x7f", "%00%7F"),
        ("", ""),
    ],
)
def test_uri_encode_percent_encodes_all_but_unreserved(text: str, encoded: str) -> None:
    assert uri_encode(text) == encoded


def test_uri_encode_keeps_slash_when_asked() -> None:
    assert uri_encode("a/b c/", encode_slash=False) == "a/b%20c/"


def test_encode_key_path_keeps_slashes_and_encodes_the_rest() -> None:
    assert encode_key_path("dir/sub dir/a+b%c~d*.txt") == "dir/sub%20dir/a%2Bb%25c~d%2A.txt"


def test_uri_encode_rejects_lone_surrogate() -> None:
    with pytest.raises(InvalidArgument):
        uri_encode("a\udc80")


def test_encode_query_sorts_by_encoded_name_then_value() -> None:
    query = encode_query([("b", "2"), ("a", "z"), ("a", "y"), ("B", "1")])
    assert query == "B=1&a=y&a=z&b=2"


def test_encode_query_sorts_on_encoded_form_not_raw_text() -> None:
    # Raw "_" < "`" and "a" < "é", but encoded "%60" and "%C3%A9" start with "%", which sorts
    # before every unreserved character.
    assert encode_query([("_", "1"), ("`", "2")]) == "%60=2&_=1"
    assert encode_query([("a", "1"), ("é", "2")]) == "%C3%A9=2&a=1"


def test_encode_query_empty_value_gives_name_equals() -> None:
    assert encode_query([("uploads", "")]) == "uploads="


def test_encode_query_encodes_slash_and_space_in_values() -> None:
    assert encode_query([("prefix", "a/b c+")]) == "prefix=a%2Fb%20c%2B"


def test_encode_query_of_nothing_is_empty() -> None:
    assert encode_query([]) == ""


# --- payload_sha256 / constants -------------------------------------------------------------


def test_empty_sha256_is_hash_of_empty_bytes() -> None:
    assert hashlib.sha256(b"").hexdigest() == EMPTY_SHA256 == payload_sha256(b"")


def test_payload_sha256_accepts_bytearray_and_memoryview_slices() -> None:
    data = bytearray(b"0123456789")
    expected = hashlib.sha256(b"2345").hexdigest()
    assert payload_sha256(memoryview(data)[2:6]) == expected
    assert payload_sha256(data[2:6]) == expected


def test_payload_sha256_hashes_bytes_of_non_byte_format_buffers() -> None:
    numbers = array.array("I", [1, 2, 3])
    assert payload_sha256(memoryview(numbers)) == hashlib.sha256(numbers.tobytes()).hexdigest()


# --- Credentials -------------------------------------------------------------------------


def test_credentials_repr_hides_secret_and_token() -> None:
    text = repr(Credentials("AKIDVISIBLE", "s3cr3t-value", session_token="t0k3n-value"))
    assert "AKIDVISIBLE" in text
    assert "s3cr3t-value" not in text
    assert "t0k3n-value" not in text


# --- presign_url --------------------------------------------------------------------------


def _presign(url: str = f"{AWS_BUCKET_URL}/test.txt", **kwargs: object) -> str:
    options: dict[str, object] = {
        "credentials": AWS_CREDS,
        "region": "us-east-1",
        "now": AWS_NOW,
        "expires": 3600,
    }
    options.update(kwargs)
    return presign_url("GET", url, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("expires", [0, -1, 604801])
def test_presign_rejects_expiry_outside_one_second_to_seven_days(expires: int) -> None:
    with pytest.raises(InvalidArgument):
        _presign(expires=expires)


@pytest.mark.parametrize("expires", [1, 604800])
def test_presign_accepts_expiry_bounds(expires: int) -> None:
    assert f"X-Amz-Expires={expires}&" in _presign(expires=expires)


def test_presign_rejects_bool_expiry() -> None:
    with pytest.raises(InvalidArgument):
        _presign(expires=True)


def test_presign_rejects_naive_datetime() -> None:
    with pytest.raises(InvalidArgument):
        _presign(now=datetime(2013, 5, 24))


def test_presign_keeps_existing_params_sorted_with_signature_last() -> None:
    url = _presign(f"{AWS_BUCKET_URL}/k?{encode_query([('versionId', 'v 1'), ('acl', '')])}")
    names = [name for name, _ in parse_qsl(urlsplit(url).query, keep_blank_values=True)]
    assert names[-1] == "X-Amz-Signature"
    assert names[:-1] == sorted(names[:-1])
    assert "acl=&" in url
    assert "versionId=v%201" in url


def test_presign_adds_session_token_to_query() -> None:
    creds = Credentials("AKID", "SECRET", session_token="tok/en+=")
    url = _presign(credentials=creds)
    assert "X-Amz-Security-Token=tok%2Fen%2B%3D&" in url


def test_presign_signs_given_headers() -> None:
    url = _presign(headers={"Content-Type": "text/plain", "User-Agent": "x"})
    assert "X-Amz-SignedHeaders=content-type%3Bhost&" in url


def test_presign_uses_given_content_sha256_header_as_payload_hash() -> None:
    digest = payload_sha256(b"body")
    plain = _presign(headers={"x-amz-content-sha256": UNSIGNED_PAYLOAD})
    hashed = _presign(headers={"x-amz-content-sha256": digest})
    assert "X-Amz-SignedHeaders=host%3Bx-amz-content-sha256&" in hashed
    assert plain.rsplit("=", 1)[1] != hashed.rsplit("=", 1)[1]


def test_presign_decodes_plus_in_existing_query_as_space() -> None:
    assert "prefix=a%20b&" in _presign(f"{AWS_BUCKET_URL}/?prefix=a+b")


@pytest.mark.parametrize(
    "url", ["http://h:notaport/k", "http://h:99999/k", "ftp://h/k", "http:///k", "http://:9000/k"]
)
def test_a_url_without_a_valid_http_origin_is_rejected_every_time(url: str) -> None:
    for _ in range(2):  # the origin's Host is worked out once; a refusal is not remembered
        with pytest.raises(InvalidArgument, match="URL"):
            _sign("GET", url, {})


@pytest.mark.parametrize(
    ("now", "stamp"),
    [
        (datetime(2001, 2, 3, 4, 5, 6, 789, tzinfo=timezone.utc), "20010203T040506Z"),
        (datetime(2013, 12, 31, 23, 59, 59, tzinfo=timezone.utc), "20131231T235959Z"),
        (datetime(2014, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=2))), "20131231T230000Z"),
    ],
)
def test_the_date_is_iso_8601_basic_in_utc_with_every_field_zero_padded(
    now: datetime, stamp: str
) -> None:
    assert _sign("GET", f"{AWS_BUCKET_URL}/k", {}, now=now)["x-amz-date"] == stamp


def test_presign_rejects_url_already_presigned() -> None:
    with pytest.raises(InvalidArgument):
        _presign(_presign())


def test_presign_of_empty_path_uses_slash() -> None:
    assert _presign("https://h.example").startswith("https://h.example/?X-Amz-Algorithm=")
