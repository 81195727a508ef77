"""AWS Signature Version 4 for S3, as pure functions.

Nothing here touches the network or reads a clock: the signing time is always passed in as
an aware ``datetime``. The output is byte-for-byte what botocore's ``S3SigV4Auth`` and
``S3SigV4QueryAuth`` produce for the same request (``tests/test_signing_botocore.py`` checks
that), and the AWS worked examples are reproduced in ``tests/test_signing.py``.

References (S3 API reference):

* "Authenticating Requests (AWS Signature Version 4)"
* "Signature Calculations for the Authorization Header: Transferring Payload in a Single Chunk"
* "Authenticating Requests: Using Query Parameters (AWS Signature Version 4)" (presigned URLs)

Secrets never appear in exceptions raised here.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Protocol
from urllib.parse import SplitResult, parse_qsl, quote, urlsplit, urlunsplit

from objsdk._core.secret_headers import SecretHeaders
from objsdk.errors import InvalidArgument

from .refresh import DEFAULT_POLICY, RefreshPolicy, Stage, utc

__all__ = [
    "EMPTY_SHA256",
    "UNSIGNED_PAYLOAD",
    "Credentials",
    "CurrentCredentials",
    "Signer",
    "canonical_request",
    "encode_key_path",
    "encode_query",
    "host_header",
    "payload_sha256",
    "presign_url",
    "sign_request",
    "signing_key",
    "uri_encode",
]

UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

_ALGORITHM = "AWS4-HMAC-SHA256"
# "Authenticating Requests: Using Query Parameters": X-Amz-Expires is 1 s to 7 days.
_MAX_PRESIGN_EXPIRES = 7 * 24 * 3600

# Headers that are never signed. This is botocore's SIGNED_HEADERS_BLACKLIST (hop-by-hop
# headers, and headers that proxies or the HTTP stack may add or rewrite after signing, which
# would invalidate the signature), plus Authorization, which botocore removes before signing.
_UNSIGNED_HEADERS = frozenset(
    {
        "authorization",
        "baggage",
        "connection",
        "expect",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "traceparent",
        "tracestate",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "x-amzn-trace-id",
    }
)
# Query parameters presign_url adds; compared case-insensitively so a URL cannot carry two.
_PRESIGN_PARAMS = frozenset(
    {
        "x-amz-algorithm",
        "x-amz-credential",
        "x-amz-date",
        "x-amz-expires",
        "x-amz-signedheaders",
        "x-amz-security-token",
        "x-amz-signature",
    }
)
# RFC 9110 field-name (token); anything else would corrupt the "name:value" canonical lines.
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE_CHARS = re.compile(r"[\r\n\x00]")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Credentials:
    """An access key pair, optionally with an STS session token, and when it stops
    working: ``expiry`` is an aware datetime (stored in UTC), None for keys that do not
    expire. The repr shows only the key id and the expiry."""

    access_key: str
    secret_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)
    expiry: datetime | None = None

    def __post_init__(self) -> None:
        if self.expiry is not None:
            # A frozen value normalises its own field once, here, as dataclasses allow.
            object.__setattr__(self, "expiry", utc(self.expiry, "expiry"))

    def expired(self, now: datetime) -> bool:
        """Whether they no longer work at ``now`` (never, without an expiry)."""
        return self.expiry is not None and utc(now) >= self.expiry

    def stage(
        self,
        now: datetime,
        *,
        obtained: datetime | None = None,
        policy: RefreshPolicy = DEFAULT_POLICY,
    ) -> Stage:
        """Where they stand at ``now`` under ``policy`` (:meth:`RefreshPolicy.stage`;
        ``obtained``, when they arrived, scales the windows to their lifetime)."""
        return policy.stage(self.expiry, now, obtained=obtained)

    def needs_refresh(
        self,
        now: datetime,
        *,
        obtained: datetime | None = None,
        policy: RefreshPolicy = DEFAULT_POLICY,
    ) -> bool:
        """Whether a refresh is due at ``now``: they are in the advisory or mandatory
        window, or expired (see :meth:`stage`)."""
        return self.stage(now, obtained=obtained, policy=policy) is not Stage.FRESH


def uri_encode(text: str, *, encode_slash: bool = True) -> str:
    """Percent-encode ``text`` the way S3's ``UriEncode`` does.

    Every UTF-8 byte except the unreserved ``A-Z a-z 0-9 - . _ ~`` becomes ``%XX`` (uppercase
    hex); a space is ``%20``, never ``+``. With ``encode_slash=False``, ``/`` is kept (object key
    paths). See "Signature Calculations for the Authorization Header", UriEncode().
    """
    try:
        # quote() leaves exactly RFC 3986's unreserved set alone (including "~" since Python
        # 3.7), emits uppercase hex and encodes str as UTF-8, which is UriEncode's definition.
        return quote(text, safe="" if encode_slash else "/", encoding="utf-8", errors="strict")
    except UnicodeEncodeError:
        # Lone surrogates have no UTF-8 form, so S3 could never store such a name.
        raise InvalidArgument(f"not encodable as UTF-8: {text!r}") from None


def encode_key_path(key: str) -> str:
    """Encode an object key for the URL path, keeping ``/`` (S3 does not re-encode paths)."""
    return uri_encode(key, encode_slash=False)


def encode_query(params: Iterable[tuple[str, str]]) -> str:
    """Build the canonical query string, which is also sent on the wire unchanged.

    Names and values are ``uri_encode``'d (``/`` included), pairs sorted by encoded name and
    then encoded value (repeated names are kept), joined as ``name=value`` with ``&``; an empty
    value gives ``name=``, as in the "GET bucket lifecycle" example (``lifecycle=``).
    """
    pairs = sorted((uri_encode(name), uri_encode(value)) for name, value in params)
    return "&".join(f"{name}={value}" for name, value in pairs)


def payload_sha256(data: bytes | bytearray | memoryview) -> str:
    """Hex SHA-256 of ``data``, hashed in place (a memoryview is never copied)."""
    # cast("B") makes any C-contiguous buffer (e.g. array('I'), multi-dimensional views) a flat
    # byte view, so the digest covers its bytes rather than being refused for its format.
    return hashlib.sha256(memoryview(data).cast("B")).hexdigest()


def signing_key(secret_key: str, date: str, region: str, service: str = "s3") -> bytes:
    """Derive the SigV4 signing key for ``date`` (``YYYYMMDD``), region and service."""
    key = _hmac(("AWS4" + secret_key).encode("utf-8"), date)
    key = _hmac(key, region)
    key = _hmac(key, service)
    return _hmac(key, "aws4_request")


# The key changes once a day: four HMACs of every request's five are spent deriving it
# again. A few keys are kept (several clients, a date rolling over); a pure function of
# its arguments, so a cache cannot make a signature wrong.
_cached_signing_key = functools.lru_cache(maxsize=8)(signing_key)


def canonical_request(
    method: str,
    url: str,
    headers: Mapping[str, str],
    signed_header_names: Sequence[str],
    payload_hash: str,
) -> str:
    """Return the SigV4 canonical request for the exact wire ``url``.

    The path is used verbatim (S3, unlike other services, neither normalises nor double-encodes
    it) and an empty path is ``/``; the raw query is split on ``&`` and the first ``=`` and
    sorted, as it is assumed to be encoded already (see :func:`encode_query`). Each name in
    ``signed_header_names`` is looked up case-insensitively in ``headers``; ``host`` falls back
    to the URL's host. Repeated header names are joined with ``,``.
    """
    parts = _split_url(url)
    grouped = _group_headers(headers)
    canonical: dict[str, str] = {}
    for name in signed_header_names:
        lname = name.lower()
        if lname in grouped:
            canonical[lname] = grouped[lname]
        elif lname == "host":
            canonical[lname] = _host_from_url(parts)
        else:
            raise InvalidArgument(f"signed header {name!r} is not among the request headers")
    return _canonical_request(
        method, parts, canonical, _raw_canonical_query(parts.query), payload_hash
    )


def sign_request(
    method: str,
    url: str,
    headers: Mapping[str, str],
    *,
    credentials: Credentials,
    region: str,
    now: datetime,
    payload_hash: str = UNSIGNED_PAYLOAD,
    service: str = "s3",
) -> SecretHeaders:
    """Sign a request for the ``Authorization`` header and return the headers to add
    (whose ``repr`` hides the signature and the session token).

    The result has ``x-amz-date``, ``x-amz-content-sha256`` (= ``payload_hash``),
    ``x-amz-security-token`` (only with a session token) and ``Authorization``; they replace any
    caller copies. ``Host`` is signed but not returned: it comes from the URL (default ports
    dropped) unless ``headers`` has one. All other given headers are signed except hop-by-hop
    and proxy-rewritten ones (same list as botocore); ``url`` must be the exact wire URL.
    """
    amz_date = _amz_date(now)
    scope = _scope(amz_date, region, service)
    # SecretHeaders from the start: a header refused below leaves this frame's locals in
    # the traceback, the session token among them. (Filled item by item: a dict literal
    # copied into one costs twice as much.)
    added = SecretHeaders()
    added["x-amz-date"] = amz_date
    added["x-amz-content-sha256"] = payload_hash
    if credentials.session_token:  # botocore also treats "" as no token
        added["x-amz-security-token"] = credentials.session_token
    parts = _split_url(url)
    to_sign = _headers_to_sign(parts, headers, added)
    creq = _canonical_request(
        method, parts, to_sign, _raw_canonical_query(parts.query), payload_hash
    )
    signature = _signature(credentials, amz_date, region, service, scope, creq)
    # botocore separates the three parts with ", "; the AWS examples use "," and S3 accepts
    # both. Matching botocore keeps the cross-check byte-exact.
    added["Authorization"] = (
        f"{_ALGORITHM} Credential={credentials.access_key}/{scope}, "
        f"SignedHeaders={';'.join(to_sign)}, Signature={signature}"
    )
    return added


class CurrentCredentials(Protocol):
    """Where a :class:`Signer` takes the credentials of each request from: ``current()``
    answers the ones to sign with now (refreshing them first when they are due). The
    transport's provider is one; it is called once per request, so it must be cheap."""

    def current(self) -> Credentials: ...


class _Fixed:
    """Credentials that never change, as :class:`CurrentCredentials`."""

    __slots__ = ("credentials",)

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials

    def current(self) -> Credentials:
        return self.credentials


class Signer:
    """Signs the requests of one client: with the credentials ``credentials`` gives
    (fixed :class:`Credentials`, a :class:`CurrentCredentials` asked again for every
    request, or None: requests go unsigned), for its region, at the time its clock
    reads (an aware ``datetime``). The one place a request's ``Authorization`` comes
    from, whatever sends it."""

    __slots__ = ("_current", "_fixed", "clock", "provider", "region")

    def __init__(
        self,
        credentials: Credentials | CurrentCredentials | None,
        region: str,
        clock: Callable[[], datetime],
    ) -> None:
        # Fixed credentials are signed with as they are: the hot path is one attribute test.
        self._fixed = credentials if isinstance(credentials, Credentials) else None
        if isinstance(credentials, Credentials):
            credentials = _Fixed(credentials)
        #: What the credentials come from (None: unsigned).
        self.provider: CurrentCredentials | None = credentials
        # The bound method, looked up once: the hot path is one call.
        self._current = None if credentials is None else credentials.current
        self.region = region
        self.clock = clock

    @property
    def credentials(self) -> Credentials | None:
        """The credentials the next request is signed with (None: unsigned)."""
        return None if self._current is None else self._current()

    def __repr__(self) -> str:
        provider = self.provider
        key = provider.credentials.access_key if isinstance(provider, _Fixed) else None
        shown = f"access_key={key!r}" if key is not None else f"credentials={provider!r}"
        return f"Signer({shown}, region={self.region!r})"

    def sign(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        payload_hash: str,
        region: str | None = None,
    ) -> SecretHeaders:
        """``headers`` with the SigV4 headers added (see :func:`sign_request`), as sent
        now, for ``region`` (default: the signer's); unchanged without credentials. Their
        ``repr`` hides the credentials."""
        signed = SecretHeaders(headers)
        current = self._current
        if current is not None:
            signed.update(
                sign_request(
                    method,
                    url,
                    headers,
                    credentials=self._fixed or current(),
                    region=self.region if region is None else region,
                    now=self.clock(),
                    payload_hash=payload_hash,
                )
            )
        return signed


def presign_url(
    method: str,
    url: str,
    *,
    credentials: Credentials,
    region: str,
    now: datetime,
    expires: int,
    service: str = "s3",
    headers: Mapping[str, str] | None = None,
) -> str:
    """Return ``url`` presigned with query-string authentication, valid ``expires`` seconds.

    The payload hash is ``UNSIGNED-PAYLOAD`` (the body is unknown when presigning) unless
    ``headers`` has ``x-amz-content-sha256``, whose value is then used. Existing query
    parameters are kept (decoded, ``+`` read as a space, then re-encoded): the returned query
    is canonical (sorted, :func:`encode_query`) with ``X-Amz-Signature`` last. ``headers``
    (e.g. ``content-type``) are signed and must then be sent verbatim by whoever uses the URL;
    ``host`` is always signed.
    """
    if isinstance(expires, bool) or not isinstance(expires, int):
        raise InvalidArgument(f"expires must be an int, not {type(expires).__name__}")
    if not 1 <= expires <= _MAX_PRESIGN_EXPIRES:
        raise InvalidArgument(
            f"expires must be between 1 and {_MAX_PRESIGN_EXPIRES} seconds, got {expires}"
        )
    amz_date = _amz_date(now)
    scope = _scope(amz_date, region, service)
    parts = _split_url(url)
    to_sign = _headers_to_sign(parts, headers or {}, {})
    params = _decode_query(parts.query)
    clashing = sorted({name for name, _ in params if name.lower() in _PRESIGN_PARAMS})
    if clashing:
        raise InvalidArgument(f"url already has presign parameters: {', '.join(clashing)}")
    params += [
        ("X-Amz-Algorithm", _ALGORITHM),
        ("X-Amz-Credential", f"{credentials.access_key}/{scope}"),
        ("X-Amz-Date", amz_date),
        ("X-Amz-Expires", str(expires)),
        ("X-Amz-SignedHeaders", ";".join(to_sign)),
    ]
    if credentials.session_token:
        # For S3 the token is part of the signed query string (botocore does the same).
        params.append(("X-Amz-Security-Token", credentials.session_token))
    query = encode_query(params)
    # A signed x-amz-content-sha256 header, if the caller will send one, is the payload hash S3
    # checks (as botocore and MinIO do); otherwise it is UNSIGNED-PAYLOAD.
    payload_hash = to_sign.get("x-amz-content-sha256", UNSIGNED_PAYLOAD)
    creq = _canonical_request(method, parts, to_sign, query, payload_hash)
    signature = _signature(credentials, amz_date, region, service, scope, creq)
    # The signature cannot sign itself, so it is the one parameter outside the sorted order.
    wire_query = f"{query}&X-Amz-Signature={signature}"
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", wire_query, ""))


# --- internals ---------------------------------------------------------------------------


def _hmac(key: bytes, message: str) -> bytes:
    # hmac.digest: OpenSSL's one-shot HMAC, without building an HMAC object.
    return hmac.digest(key, message.encode("utf-8"), "sha256")


def _amz_date(now: datetime) -> str:
    if now.tzinfo is None or now.utcoffset() is None:
        # A naive time would be read as local time by astimezone(); refuse to guess.
        raise InvalidArgument("now must be a timezone-aware datetime (UTC)")
    utc = now if now.tzinfo is timezone.utc else now.astimezone(timezone.utc)
    # YYYYMMDD'T'HHMMSS'Z' (ISO 8601 basic format), without strftime: half the time
    return (
        f"{utc.year:04d}{utc.month:02d}{utc.day:02d}"
        f"T{utc.hour:02d}{utc.minute:02d}{utc.second:02d}Z"
    )


def _scope(amz_date: str, region: str, service: str) -> str:
    return f"{amz_date[:8]}/{region}/{service}/aws4_request"


def _signature(
    credentials: Credentials, amz_date: str, region: str, service: str, scope: str, creq: str
) -> str:
    string_to_sign = "\n".join(
        [_ALGORITHM, amz_date, scope, hashlib.sha256(creq.encode("utf-8")).hexdigest()]
    )
    key = _cached_signing_key(credentials.secret_key, amz_date[:8], region, service)
    return hmac.digest(key, string_to_sign.encode("utf-8"), "sha256").hex()


def _split_url(url: str) -> SplitResult:
    try:
        parts = urlsplit(url)
        host = _origin_host(parts.scheme, parts.netloc)
    except ValueError:
        raise InvalidArgument(f"malformed URL: {url!r}") from None
    if host is None:
        raise InvalidArgument(f"not an absolute http(s) URL: {url!r}")
    if "#" in url:
        # HTTP clients do not send the fragment, so an unencoded "#" in a key would silently
        # address (and sign) a different object.
        raise InvalidArgument("url has a fragment ('#'); encode keys with encode_key_path")
    return parts


def host_header(url: str) -> str:
    """The Host header an HTTP client sends for ``url`` (and the signature covers)."""
    return _host_from_url(_split_url(url))


def _host_from_url(parts: SplitResult) -> str:
    """The Host header value an HTTP client sends for this URL (validated by _split_url)."""
    return _origin_host(parts.scheme, parts.netloc) or ""


# Every request of a client goes to one origin (one per bucket, virtual-hosted): its Host
# is worked out once, not parsed again from each request's URL. A pure function of its
# arguments, so the cache cannot change a signature.
@functools.lru_cache(maxsize=256)
def _origin_host(scheme: str, netloc: str) -> str | None:
    """The Host header value an HTTP client sends to ``scheme://netloc``, as botocore
    derives it; None where that is not an http(s) origin with a host. ValueError for a
    port that is not a number in range."""
    parts = SplitResult(scheme, netloc, "", "", "")
    port = parts.port  # raises ValueError if it is invalid
    host = parts.hostname  # lowercased, without userinfo or brackets
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    if ":" in host:
        host = f"[{host}]"  # IPv6 literal
    # http.client omits a default port from Host, so it must be omitted from the signature.
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{port}"
    return host


def _trimall(value: str) -> str:
    # "Trimall": strip and collapse whitespace runs to one space. str.split() is what botocore
    # uses, so tabs and other whitespace collapse exactly as they do there.
    return " ".join(value.split())


def _group_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Lowercase names and canonical values; names differing only in case are ``,``-joined."""
    grouped: dict[str, list[str]] = {}
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            raise InvalidArgument(f"invalid header name: {name!r}")
        if _BAD_VALUE_CHARS.search(value):
            raise InvalidArgument(f"header {name!r} has a CR, LF or NUL in its value")
        grouped.setdefault(name.lower(), []).append(_trimall(value))
    return {name: ",".join(values) for name, values in grouped.items()}


def _headers_to_sign(
    parts: SplitResult, headers: Mapping[str, str], added: Mapping[str, str]
) -> dict[str, str]:
    """Canonical name -> value for every signed header, sorted by name; ``added`` wins."""
    selected = {
        name: value
        for name, value in _group_headers(headers).items()
        if name not in _UNSIGNED_HEADERS and name not in added
    }
    selected.update((name, _trimall(value)) for name, value in added.items())
    if "host" not in selected:
        selected["host"] = _host_from_url(parts)
    return dict(sorted(selected.items()))


def _raw_canonical_query(query: str) -> str:
    # The wire query is already encoded, so it is only re-sorted, never re-encoded; a name
    # without "=" (a subresource like "?acl") becomes "acl=".
    if not query:
        return ""
    pairs = sorted(pair.partition("=")[::2] for pair in query.split("&"))
    return "&".join(f"{name}={value}" for name, value in pairs)


def _decode_query(query: str) -> list[tuple[str, str]]:
    # presign_url re-encodes the query canonically, so the caller's query is decoded first.
    # Like botocore (parse_qs), "+" means a space here; encode_query never emits a bare "+".
    try:
        return parse_qsl(query, keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise InvalidArgument("url query is not valid percent-encoded UTF-8") from None


def _canonical_request(
    method: str,
    parts: SplitResult,
    headers: Mapping[str, str],
    canonical_query: str,
    payload_hash: str,
) -> str:
    # "Authenticating Requests (AWS SigV4)": an empty absolute path is "/". HTTP clients send
    # "/" for it too, so the signature still matches the wire.
    path = parts.path or "/"
    signed = sorted(headers)
    lines = "".join(f"{name}:{headers[name]}\n" for name in signed)
    return "\n".join([method.upper(), path, canonical_query, lines, ";".join(signed), payload_hash])
