"""Signing a request again (AWS SigV4, header auth) after the proxy removed headers the
client had signed, so that the server still accepts it."""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import quote, unquote, urlsplit

from .http import Headers, without

__all__ = ["ALGORITHM", "resign"]

ALGORITHM = "AWS4-HMAC-SHA256"


def resign(
    target: str, method: str, headers: Headers, removed: set[str], access_key: str, secret: str
) -> Headers:
    """Sign the request again (SigV4, header auth) without the ``removed`` headers,
    keeping its date, scope and payload hash."""
    fields = dict(
        part.strip().split("=", 1) for part in _all_values(headers, "Authorization").split(",")
    )
    scope = fields[f"{ALGORITHM} Credential"].split("/", 1)[1]
    signed = [h for h in fields["SignedHeaders"].split(";") if h not in removed]
    split = urlsplit(target)
    pairs = sorted(
        (quote(unquote(k), safe="-_.~"), quote(unquote(v), safe="-_.~"))
        for k, _, v in (p.partition("=") for p in split.query.split("&") if p)
    )
    canonical_headers = "".join(
        f"{name}:{' '.join(_all_values(headers, name).split())}\n" for name in signed
    )
    canonical = "\n".join(
        [
            method,
            split.path or "/",
            "&".join(f"{k}={v}" for k, v in pairs),
            canonical_headers,
            ";".join(signed),
            _all_values(headers, "x-amz-content-sha256"),
        ]
    )
    amz_date = _all_values(headers, "x-amz-date")
    to_sign = "\n".join(
        [ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = f"AWS4{secret}".encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    auth = (
        f"{ALGORITHM} Credential={access_key}/{scope}, "
        f"SignedHeaders={';'.join(signed)}, Signature={signature}"
    )
    return [*without(headers, "Authorization"), ("Authorization", auth)]


def _all_values(headers: Headers, name: str) -> str:
    """All values of header ``name``, joined by commas as SigV4 wants ('' if absent)."""
    lname = name.lower()
    return ",".join(v.strip() for k, v in headers if k.lower() == lname)
