"""Where a request goes: endpoint parsing, bucket/key checks and URL building (pure).

The URL built here is sent byte for byte and is also what gets signed, so its path and
query use S3's own encoding (``signing.encode_key_path`` / ``signing.encode_query``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from objsdk._core.regions import S3Host, parse_s3_host, s3_host, virtual_hostable
from objsdk._core.signing import encode_key_path, encode_query
from objsdk.errors import InvalidArgument

__all__ = ["ADDRESSING_STYLES", "Endpoint", "Route", "check_bucket", "check_count", "check_key"]

# S3's limit on key length, in UTF-8 bytes ("Creating object key names", S3 user guide).
MAX_KEY_BYTES = 1024

# Permissive on purpose (old S3 regions allow upper case and '_'); the server has the
# final word. What is rejected here could never form a valid request path.
_BUCKET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")
# Virtual-hosted style puts the bucket in the host name, so it must be a DNS label list.
_DNS_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def check_bucket(bucket: str) -> None:
    """Raise InvalidArgument naming ``bucket`` if it cannot be a bucket name."""
    if not isinstance(bucket, str) or not _BUCKET_RE.match(bucket):
        raise InvalidArgument(
            f"invalid bucket name {bucket!r}: use 3-63 characters from a-z, 0-9, '.' and '-'"
        )


def check_key(key: str) -> None:
    """Raise InvalidArgument naming ``key`` if no S3 server could accept it."""
    if not isinstance(key, str):
        raise InvalidArgument(f"object key must be str, got {type(key).__name__}")
    if not key:
        raise InvalidArgument("object key must not be empty")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise InvalidArgument(f"object key {key!r} is not valid UTF-8: {e.reason}") from None
    if size > MAX_KEY_BYTES:
        raise InvalidArgument(
            f"object key {key[:40]!r}... is {size} bytes in UTF-8; S3 allows {MAX_KEY_BYTES}"
        )


#: ``auto``: virtual-hosted on AWS S3's endpoints for the bucket names that allow it,
#: path-style everywhere else (botocore's rule); ``path`` and ``virtual`` as they say.
ADDRESSING_STYLES = ("auto", "path", "virtual")


@dataclass(frozen=True)
class Endpoint:
    """A parsed service endpoint such as ``http://127.0.0.1:9000``, and how it names a
    bucket (``addressing_style``, one of :data:`ADDRESSING_STYLES`). ``aws`` is what
    its host name says if it is one of AWS S3's (:func:`~objsdk._core.regions.parse_s3_host`)."""

    scheme: str
    netloc: str
    addressing_style: str = "path"
    aws: S3Host | None = field(default=None, init=False, repr=False, compare=False)
    # Whether every bucket goes in the path (virtual_hosted is False for all): known
    # here once, so that building a URL asks one attribute, not a method.
    _all_in_path: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A frozen value derives its own fields once, here, as dataclasses allow.
        aws = parse_s3_host(self.host)
        object.__setattr__(self, "aws", aws)
        all_in_path = self.addressing_style == "path" or (
            self.addressing_style != "virtual" and (aws is None or not aws.service)
        )
        object.__setattr__(self, "_all_in_path", all_in_path)

    @classmethod
    def parse(cls, url: str, *, addressing_style: str = "path") -> Endpoint:
        """Parse and check an endpoint URL (scheme and host only)."""
        if not isinstance(url, str) or not url:
            raise InvalidArgument(f"endpoint must be a URL like 'http://host:9000', got {url!r}")
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https"):
            raise InvalidArgument(f"endpoint {url!r}: scheme must be http or https")
        if not parts.hostname:
            raise InvalidArgument(f"endpoint {url!r} has no host")
        if parts.username or parts.password:
            # Never keep credentials in a URL: it ends up in logs and reprs.
            raise InvalidArgument(
                "endpoint must not contain credentials; pass access_key/secret_key"
            )
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise InvalidArgument(f"endpoint {url!r} must not have a path or query")
        try:
            parts.port  # noqa: B018 - validates the port number
        except ValueError as e:
            raise InvalidArgument(f"endpoint {url!r}: {e}") from None
        if addressing_style not in ADDRESSING_STYLES:
            raise InvalidArgument(
                f"addressing_style must be 'auto', 'path' or 'virtual', got {addressing_style!r}"
            )
        return cls(parts.scheme, parts.netloc.lower(), addressing_style)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.netloc}"

    @property
    def host(self) -> str:
        """The host name (or address) without port or brackets."""
        return urlsplit(f"{self.scheme}://{self.netloc}").hostname or ""

    def virtual_hosted(self, bucket: str) -> bool:
        """Whether ``bucket`` goes in the host name (else in the path)."""
        if self.addressing_style == "virtual":
            return True
        if self.addressing_style == "path" or self.aws is None or not self.aws.service:
            return False
        return virtual_hostable(bucket, tls=self.scheme == "https")

    def for_region(self, region: str) -> Endpoint:
        """This endpoint for requests signed for ``region``: on AWS S3's regional
        endpoints, the same kind of endpoint (FIPS, dual-stack) in that region; any other
        endpoint (a custom one, Transfer Acceleration, a bucket's own host name) serves
        every region itself."""
        aws = self.aws
        if aws is None or not aws.service or aws.accelerate or aws.region == region:
            return self
        try:
            host = s3_host(region, fips=aws.fips, dualstack=aws.dualstack)
        except InvalidArgument:
            return self
        port = urlsplit(f"{self.scheme}://{self.netloc}").port
        netloc = host if port is None else f"{host}:{port}"
        return Endpoint(self.scheme, netloc, self.addressing_style)

    def build_url(
        self,
        bucket: str | None = None,
        key: str | None = None,
        params: Iterable[tuple[str, str]] = (),
    ) -> str:
        """The exact wire URL for a bucket/key/query (see :meth:`virtual_hosted`)."""
        netloc = self.netloc
        path = "/"
        if bucket is not None:
            if not self._all_in_path and self.virtual_hosted(bucket):
                if not _DNS_BUCKET_RE.match(bucket) or ".." in bucket:
                    raise InvalidArgument(
                        f"bucket {bucket!r} cannot be used with virtual-hosted addressing"
                    )
                netloc = f"{bucket}.{netloc}"
            else:
                path = f"/{bucket}/" if key is not None else f"/{bucket}"
        if key is not None:
            path = path.rstrip("/") + "/" + encode_key_path(key)
        query = encode_query(params)
        return f"{self.scheme}://{netloc}{path}" + (f"?{query}" if query else "")


@dataclass(frozen=True)
class Route:
    """Where the requests for a bucket go and the region they are signed for."""

    endpoint: Endpoint
    region: str


def check_count(name: str, value: object, least: int, bucket: str, key: str) -> None:
    """Refuse an argument that is not an int of at least ``least`` (bools are not
    counts), naming it and the object it was for."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidArgument(
            f"{name} must be an int >= {least}, got {value!r} (bucket {bucket!r}, key {key!r})"
        )
