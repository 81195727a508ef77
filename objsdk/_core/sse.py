"""Server-side encryption settings and the headers each S3 request needs for them (pure).

S3 encrypts an object at rest with a key it manages (SSE-S3, ``AES256``), with a KMS key
(SSE-KMS, ``aws:kms`` and an optional key id and context), or with a key the caller sends
on every request and S3 never stores (SSE-C). Which request carries which headers is
S3's rule ("Specifying server-side encryption", "Using server-side encryption with
customer-provided keys" in the S3 user guide):

* the requests that create an object (PutObject, CreateMultipartUpload, CopyObject's
  destination) carry the setting, whatever its kind;
* SSE-C's key also goes on every request that reads or extends the object: GetObject
  (ranged or not), HeadObject, UploadPart, UploadPartCopy, CompleteMultipartUpload (needed
  there when the upload has a checksum, as objsdk's always do); SSE-S3 and SSE-KMS
  headers on those are refused by S3, so they are not sent;
* a copy of an SSE-C source also names the source's key in the
  ``x-amz-copy-source-server-side-encryption-customer-*`` headers.

SSE-C's key is a secret: it never appears in a repr or message and is never pickled (an
unpickled :class:`SSEC` has no key and refuses to make headers), and S3 refuses it over
plain HTTP, so objsdk does too.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from objsdk import errors

__all__ = ["SSE", "SSEC", "SSEKMS", "SSES3", "RequestKind"]

# What a request does to the object, as far as encryption headers go.
RequestKind = str  # "create", "read" (GET, HEAD, UploadPart, Complete), "copy", "part_copy"


class SSE:
    """A server-side encryption setting (:class:`SSES3`, :class:`SSEKMS`, :class:`SSEC`)."""

    #: True when the setting holds a secret that must travel only over TLS (SSE-C).
    needs_tls = False

    def create_headers(self) -> dict[str, str]:
        """Headers for a request that creates an object."""
        raise NotImplementedError

    def read_headers(self) -> dict[str, str]:
        """Headers for a request that reads or extends an existing object."""
        return {}

    def copy_source_headers(self) -> dict[str, str]:
        """Headers naming this setting for the source of a copy."""
        return {}


@dataclass(frozen=True)
class SSES3(SSE):
    """SSE-S3: the server encrypts with keys it manages (``AES256``)."""

    def create_headers(self) -> dict[str, str]:
        return {"x-amz-server-side-encryption": "AES256"}


@dataclass(frozen=True)
class SSEKMS(SSE):
    """SSE-KMS: the server encrypts with a KMS key (``key_id``; the account's default
    when None), with an optional encryption ``context`` (string pairs)."""

    key_id: str | None = None
    context: Mapping[str, str] = field(default_factory=dict)

    def create_headers(self) -> dict[str, str]:
        headers = {"x-amz-server-side-encryption": "aws:kms"}
        if self.key_id:
            headers["x-amz-server-side-encryption-aws-kms-key-id"] = self.key_id
        if self.context:
            text = json.dumps(dict(self.context), separators=(",", ":"), sort_keys=True)
            headers["x-amz-server-side-encryption-context"] = base64.b64encode(
                text.encode()
            ).decode()
        return headers


class SSEC(SSE):
    """SSE-C: the caller's 256-bit ``key`` (32 bytes) encrypts the object; it goes with
    every request on the object, over TLS only. Never shown, logged or pickled."""

    needs_tls = True

    def __init__(self, key: bytes | None) -> None:
        if key is not None and (not isinstance(key, bytes) or len(key) != 32):
            raise errors.InvalidArgument(
                "an SSE-C key must be 32 bytes (AES-256)"
                + (f", got {len(key)} bytes" if isinstance(key, bytes) else "")
            )
        self._key = key

    def __repr__(self) -> str:
        return "SSEC(key=<hidden>)" if self._key is not None else "SSEC(key=<not pickled>)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SSEC) and other._key == self._key

    def __hash__(self) -> int:
        return hash(("SSEC", self._key))

    def __reduce__(self) -> tuple[Any, ...]:
        # The key is never pickled: the copy knows SSE-C is wanted and says so on use.
        return (SSEC, (None,))

    def _customer(self, prefix: str) -> dict[str, str]:
        if self._key is None:
            raise errors.InvalidArgument(
                "this SSE-C setting was unpickled, and its key is never pickled: give the "
                "key again in this process (Client(..., sse=SSEC(key)))"
            )
        return {
            f"{prefix}-algorithm": "AES256",
            f"{prefix}-key": base64.b64encode(self._key).decode(),
            f"{prefix}-key-MD5": base64.b64encode(hashlib.md5(self._key).digest()).decode(),
        }

    def create_headers(self) -> dict[str, str]:
        return self._customer("x-amz-server-side-encryption-customer")

    def read_headers(self) -> dict[str, str]:
        return self._customer("x-amz-server-side-encryption-customer")

    def copy_source_headers(self) -> dict[str, str]:
        return self._customer("x-amz-copy-source-server-side-encryption-customer")


def request_kind(
    method: str, key: str | None, params: Mapping[str, str], headers: Mapping[str, str]
) -> RequestKind | None:
    """What a request does to its object: ``"create"``, ``"copy"`` (a CopyObject),
    ``"part_copy"`` (an UploadPartCopy: it extends an upload and reads a source),
    ``"read"`` (GET, HEAD, UploadPart, Complete), or None (bucket requests and
    subresources such as ``?tagging``, ``?uploads`` listings)."""
    if key is None:
        return None
    names = set(params)
    copying = any(h.lower() == "x-amz-copy-source" for h in headers)
    if method == "PUT" and "partNumber" in names:
        return "part_copy" if copying else "read"  # UploadPartCopy, UploadPart
    if method == "PUT" and not names:
        return "copy" if copying else "create"
    if method == "POST" and names == {"uploads"}:
        return "create"
    if method == "POST" and names == {"uploadId"}:
        return "read"  # CompleteMultipartUpload
    if method in ("GET", "HEAD") and names <= {"versionId", "partNumber"}:
        return "read"
    return None


def sse_headers(
    sse: SSE, kind: RequestKind | None, *, copy_source: SSE | None = None
) -> dict[str, str]:
    """The headers ``sse`` adds to a request of ``kind`` (see :func:`request_kind`);
    a copy also names ``copy_source``'s key (the same setting unless given)."""
    if kind is None:
        return {}
    if kind == "create":
        return sse.create_headers()
    if kind in ("copy", "part_copy"):
        source = copy_source if copy_source is not None else sse
        own = sse.create_headers() if kind == "copy" else sse.read_headers()
        return {**own, **source.copy_source_headers()}
    return sse.read_headers()
