"""objsdk._core.signing against an independent oracle: botocore's S3 SigV4 signers.

Hypothesis builds awkward requests; each is signed by objsdk and by botocore (``S3SigV4Auth``
for the Authorization header, ``S3SigV4QueryAuth`` for presigned URLs) with botocore's clock
frozen at the same instant, and the results must be byte-for-byte identical.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from unittest import mock
from urllib.parse import parse_qsl, urlsplit

import botocore.auth
import botocore.credentials
import botocore.utils
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from objsdk._core.signing import (
    UNSIGNED_PAYLOAD,
    Credentials,
    canonical_request,
    encode_key_path,
    encode_query,
    payload_sha256,
    presign_url,
    sign_request,
    uri_encode,
)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- strategies ---------------------------------------------------------------------------

AWKWARD = " +%?#;=&~*'\"\\/-._!$()[]{}<>|^`@:,\t\n\x00\x7féß日本😀\u00a0\u200b"
# Only UTF-8-encodable text: surrogates cannot be S3 names (uri_encode refuses them).
ANY_TEXT = st.characters(codec="utf-8")
awkward_text = st.text(
    alphabet=st.one_of(st.sampled_from(AWKWARD), st.sampled_from(string.ascii_letters), ANY_TEXT),
    max_size=30,
)

keys = awkward_text.filter(bool)
query_params = st.lists(st.tuples(awkward_text, awkward_text), max_size=6)
buckets = st.sampled_from(["examplebucket", "my.bucket", "b-1"])

# Header values as an HTTP client can send them: printable ASCII with messy spaces and tabs.
# CR/LF/NUL are excluded because they cannot occur inside a header value (objsdk refuses them,
# and HTTP clients reject them).
header_values = st.text(alphabet=string.printable.strip("\r\n\x0b\x0c") + "  \t", max_size=30)
header_names = st.one_of(
    st.sampled_from(
        [
            "Content-Type",
            "content-type",
            "Range",
            "Content-MD5",
            "Content-Length",
            "Cache-Control",
            "If-Match",
            "If-None-Match",
            "Content-Disposition",
            "X-Amz-Meta-Owner",
            "x-amz-meta-owner",
            "x-amz-storage-class",
            "x-amz-checksum-crc32c",
            # Headers the signer sets itself, or never signs: both must agree on dropping them.
            "X-Amz-Date",
            "x-amz-content-sha256",
            "X-Amz-Security-Token",
            "Authorization",
            "User-Agent",
            "Expect",
            "X-Amzn-Trace-Id",
            "Transfer-Encoding",
            "Connection",
            "Host",
        ]
    ),
    st.from_regex(r"x-amz-meta-[a-zA-Z0-9_-]{1,12}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,16}", fullmatch=True),
).filter(
    # Date is excluded: given a Date header botocore rewrites it from its own clock and drops
    # X-Amz-Date (an alternative signing mode); objsdk signs a caller's Date as-is, which the
    # AWS PUT Object example covers in test_signing.py.
    lambda name: name.lower() != "date"
)
header_maps = st.dictionaries(header_names, header_values, max_size=6)

tokens = st.text(alphabet=string.ascii_letters + string.digits + "/+=", min_size=1, max_size=40)
credentials = st.builds(
    Credentials,
    access_key=st.text(alphabet=string.ascii_uppercase + string.digits, min_size=1, max_size=20),
    secret_key=st.text(alphabet=ANY_TEXT, max_size=40),
    session_token=st.one_of(st.none(), tokens),
)
times = st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2099, 12, 31),
    timezones=st.just(timezone.utc),
)
regions = st.sampled_from(["us-east-1", "eu-west-3", "us-gov-west-1", "local"])
methods = st.sampled_from(["GET", "PUT", "HEAD", "DELETE", "POST"])


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    netloc: str
    virtual_host: bool


@st.composite
def endpoints(draw: st.DrawFn) -> Endpoint:
    scheme = draw(st.sampled_from(["http", "https"]))
    host = draw(st.sampled_from(["s3.amazonaws.com", "S3.Example.COM", "localhost", "127.0.0.1"]))
    port = draw(st.sampled_from([None, 80, 443, 9000]))
    netloc = host if port is None else f"{host}:{port}"
    if draw(st.booleans()):
        # Path-style on an IPv6 literal: the Host value needs brackets.
        return Endpoint(scheme, "[::1]" if port is None else f"[::1]:{port}", virtual_host=False)
    return Endpoint(scheme, netloc, virtual_host=draw(st.booleans()))


@st.composite
def wire_urls(draw: st.DrawFn) -> str:
    """A wire URL as objsdk's client builds it, or another correctly encoded form of it."""
    endpoint = draw(endpoints())
    bucket = draw(buckets)
    key = encode_key_path(draw(keys))
    if endpoint.virtual_host:
        url = f"{endpoint.scheme}://{bucket}.{endpoint.netloc}/{key}"
    else:
        url = f"{endpoint.scheme}://{endpoint.netloc}/{bucket}/{key}"
    params = draw(query_params)
    if draw(st.booleans()):
        query = encode_query(params)  # what the client sends: already canonical
    else:
        # Any correctly encoded query must sign the same: unsorted, and subresources written
        # without "=" (the AWS lifecycle example's "?lifecycle").
        pairs = [
            uri_encode(name)
            if not value and draw(st.booleans())
            else f"{uri_encode(name)}={uri_encode(value)}"
            for name, value in draw(st.permutations(params))
        ]
        query = "&".join(pairs)
    return f"{url}?{query}" if params else url


# --- botocore side ----------------------------------------------------------------------------


class RecordingS3SigV4Auth(botocore.auth.S3SigV4Auth):
    """botocore's signer, keeping the canonical request so a mismatch is readable."""

    last_canonical_request = ""

    def canonical_request(self, request: Any) -> str:
        self.last_canonical_request = str(super().canonical_request(request))
        return self.last_canonical_request


def _boto_credentials(creds: Credentials) -> botocore.credentials.Credentials:
    return botocore.credentials.Credentials(creds.access_key, creds.secret_key, creds.session_token)


def _frozen_clock(now: datetime) -> Any:
    # botocore reads the time through get_current_datetime(), which returns naive UTC.
    naive_utc = now.astimezone(timezone.utc).replace(tzinfo=None)
    return mock.patch.object(botocore.auth, "get_current_datetime", return_value=naive_utc)


def _merge(headers: dict[str, str], added: dict[str, str]) -> dict[str, str]:
    """What the client sends: the signer's headers replace any case variant of theirs."""
    replaced = {name.lower() for name in added}
    merged = {name: value for name, value in headers.items() if name.lower() not in replaced}
    merged.update(added)
    return merged


# --- the oracle tests -------------------------------------------------------------------------


@SETTINGS
@given(
    method=methods,
    url=wire_urls(),
    headers=header_maps,
    creds=credentials,
    region=regions,
    now=times,
    body=st.one_of(st.none(), st.binary(max_size=64)),
)
def test_authorization_header_matches_botocore_s3_sigv4(
    method: str,
    url: str,
    headers: dict[str, str],
    creds: Credentials,
    region: str,
    now: datetime,
    body: bytes | None,
) -> None:
    signed_payload = body is not None
    payload_hash = payload_sha256(body) if body is not None else UNSIGNED_PAYLOAD
    ours = sign_request(
        method,
        url,
        headers,
        credentials=creds,
        region=region,
        now=now,
        payload_hash=payload_hash,
    )

    request = AWSRequest(method=method, url=url, headers=headers, data=body or b"")
    # The explicit s3 setting takes precedence in S3SigV4Auth._should_sha256_sign_payload, so
    # botocore hashes the body when asked and uses UNSIGNED-PAYLOAD otherwise, whatever the
    # scheme or checksum headers.
    request.context["client_config"] = Config(s3={"payload_signing_enabled": signed_payload})
    auth = RecordingS3SigV4Auth(_boto_credentials(creds), "s3", region)
    with _frozen_clock(now):
        auth.add_auth(request)

    signed_names = ours["Authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    our_creq = canonical_request(method, url, _merge(headers, ours), signed_names, payload_hash)
    assert our_creq == auth.last_canonical_request
    assert ours["Authorization"] == request.headers["Authorization"]
    assert ours["x-amz-date"] == request.headers["X-Amz-Date"]
    assert ours["x-amz-content-sha256"] == request.headers["X-Amz-Content-SHA256"]
    if creds.session_token:
        assert ours["x-amz-security-token"] == request.headers["X-Amz-Security-Token"]


def _presign_headers_ok(headers: dict[str, str]) -> bool:
    lowered = [name.lower() for name in headers]
    sha_values = [v for name, v in headers.items() if name.lower() == "x-amz-content-sha256"]
    return (
        # An Authorization header makes no sense with query auth (S3 rejects a request with
        # both); botocore's query signer would sign it, objsdk never signs Authorization.
        "authorization" not in lowered
        # A given x-amz-content-sha256 becomes the payload hash; botocore takes the first raw
        # value, objsdk the canonical (trimmed, comma-joined) one. A payload hash is a single
        # token without whitespace, so only such values are meaningful.
        and all(v and v.split() == [v] for v in sha_values)
        and len(sha_values) <= 1
    )


PRESIGN_PARAMS = {
    "x-amz-algorithm",
    "x-amz-credential",
    "x-amz-date",
    "x-amz-expires",
    "x-amz-signedheaders",
    "x-amz-security-token",
    "x-amz-signature",
}


def _presign_query_ok(params: list[tuple[str, str]]) -> bool:
    names = [name for name, _ in params]
    return (
        # botocore's query signer parses the URL query into a dict and so drops repeated names
        # (a botocore limitation; objsdk keeps them).
        len(set(names)) == len(names)
        # objsdk refuses a URL that already carries presign parameters.
        and not any(name.lower() in PRESIGN_PARAMS for name in names)
    )


@SETTINGS
@given(
    method=methods,
    endpoint=endpoints(),
    key=keys,
    params=query_params.filter(_presign_query_ok),
    headers=header_maps.filter(_presign_headers_ok),
    creds=credentials,
    region=regions,
    now=times,
    expires=st.integers(min_value=1, max_value=604800),
)
def test_presigned_url_matches_botocore_s3_query_auth(
    method: str,
    endpoint: Endpoint,
    key: str,
    params: list[tuple[str, str]],
    headers: dict[str, str],
    creds: Credentials,
    region: str,
    now: datetime,
    expires: int,
) -> None:
    url = f"{endpoint.scheme}://{endpoint.netloc}/bucket/{encode_key_path(key)}"
    query = encode_query(params)
    if query:
        url = f"{url}?{query}"
    ours = presign_url(
        method,
        url,
        credentials=creds,
        region=region,
        now=now,
        expires=expires,
        headers=headers,
    )

    request = AWSRequest(method=method, url=url, headers=headers)
    auth = botocore.auth.S3SigV4QueryAuth(_boto_credentials(creds), "s3", region, expires=expires)
    with _frozen_clock(now):
        auth.add_auth(request)

    ours_parts, boto_parts = urlsplit(ours), urlsplit(request.url)
    assert (ours_parts.scheme, ours_parts.netloc, ours_parts.path) == (
        boto_parts.scheme,
        boto_parts.netloc,
        boto_parts.path,
    )
    # botocore puts operation parameters first, objsdk sorts them; the parameters themselves
    # and, above all, the signature must be identical.
    ours_query = parse_qsl(ours_parts.query, keep_blank_values=True)
    boto_query = parse_qsl(boto_parts.query, keep_blank_values=True)
    assert sorted(ours_query) == sorted(boto_query)
    assert ours_query[-1] == boto_query[-1]
    assert ours_query[-1][0] == "X-Amz-Signature"


@SETTINGS
@given(params=st.lists(st.tuples(awkward_text, awkward_text), max_size=8))
def test_encode_query_matches_botocore_canonical_query_params(
    params: list[tuple[str, str]],
) -> None:
    auth = botocore.auth.SigV4Auth(None, "s3", "us-east-1")
    assert encode_query(params) == auth._canonical_query_string_params(params)


@SETTINGS
@given(text=awkward_text)
def test_uri_encode_matches_botocore_percent_encode(text: str) -> None:
    assert uri_encode(text) == botocore.utils.percent_encode(text)
