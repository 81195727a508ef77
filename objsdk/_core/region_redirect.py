"""Whether an error answer says the bucket lives in another region, and which (pure).

S3 tells a request signed for, or sent to, the wrong region in several ways (botocore's
``S3RegionRedirectorv2`` follows the same ones):

* ``301 PermanentRedirect`` (the bucket is in another region than the endpoint's),
  ``307 TemporaryRedirect`` (a new bucket whose DNS name is not everywhere yet), and
  ``302``: the region in the ``x-amz-bucket-region`` header, else in the body's
  ``<Endpoint>`` host name or the ``Location`` header's;
* ``400 AuthorizationHeaderMalformed`` naming the region it expected: in the
  ``x-amz-bucket-region`` header, the body's ``<Region>``, or MinIO's message
  ("... expecting 'eu-west-1'");
* a ``400`` without a body (a HEAD's answer has none): the header if there is one;
  else nothing says which region, and the bucket's must be asked for
  (:attr:`Redirect.region` None; a HeadBucket's answer carries the header).

The caller re-signs for that region once and remembers it per bucket.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from .regions import parse_s3_host, valid_region
from .s3xml import ErrorBody

__all__ = ["BUCKET_REGION_HEADER", "Redirect", "bucket_region", "region_redirect"]

#: The header S3 names a bucket's region in (HeadBucket's answer, redirects, 400s).
BUCKET_REGION_HEADER = "x-amz-bucket-region"
_REDIRECT_STATUSES = (301, 302, 307)
_REDIRECT_CODES = ("PermanentRedirect", "TemporaryRedirect")
_WRONG_REGION = "AuthorizationHeaderMalformed"
# MinIO's message for a request signed for another region than its own.
_EXPECTING = re.compile(r"expecting '([^']+)'")


@dataclass(frozen=True)
class Redirect:
    """An answer saying the bucket is in another region: ``region`` is the one it
    names, None when it names none (ask the bucket: :func:`bucket_region` of a
    HeadBucket's answer)."""

    region: str | None


def bucket_region(headers: Mapping[str, str]) -> str | None:
    """The region an answer's ``x-amz-bucket-region`` header names, if it is one."""
    return _region(headers.get(BUCKET_REGION_HEADER))


def region_redirect(
    status: int, headers: Mapping[str, str], error: ErrorBody | None
) -> Redirect | None:
    """Whether the error answer of ``status`` with ``headers`` and parsed body
    ``error`` (None: no S3 error body) says the bucket is in another region (see the
    module docstring); None when it says something else."""
    code = error.code if error is not None else headers.get("x-minio-error-code")
    redirect = status in _REDIRECT_STATUSES or code in _REDIRECT_CODES
    wrong_region = code == _WRONG_REGION
    bodiless_400 = status == 400 and error is None and code in (None, _WRONG_REGION)
    if not (redirect or wrong_region or bodiless_400):
        return None
    message = error.message if error is not None else headers.get("x-minio-error-desc", "")
    expected = _EXPECTING.search(message or "")
    region = (
        bucket_region(headers)
        or _region(error.region if error is not None else None)
        or _region(expected[1] if expected else None)
        or _host_region(error.endpoint if error is not None else None)
        or _host_region(_host(headers.get("Location")))
    )
    if region is not None:
        return Redirect(region)
    # An AuthorizationHeaderMalformed naming no region is about something else (a
    # malformed credential scope); a redirect or a bare 400 may still be the region's.
    return None if wrong_region and not bodiless_400 else Redirect(None)


def _region(value: str | None) -> str | None:
    value = (value or "").strip()
    return value if value and valid_region(value) else None


def _host_region(host: str | None) -> str | None:
    """The region an AWS S3 host name names (``bucket.s3.eu-west-1.amazonaws.com``)."""
    if not host:
        return None
    found = parse_s3_host(host.partition(":")[0])
    return None if found is None else found.region


def _host(url: str | None) -> str | None:
    if not url:
        return None
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None
