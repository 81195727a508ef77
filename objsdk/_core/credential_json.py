"""Credentials from the JSON documents that hand them out, as one pure function.

A ``credential_process`` prints ``{"Version": 1, "AccessKeyId", "SecretAccessKey",
"SessionToken", "Expiration"}``; a container endpoint and the instance metadata service
answer ``{"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}``; the SSO portal
answers ``{"roleCredentials": {"accessKeyId", ...}}``. Each format's field names are a
:class:`CredentialFields` here, and one function checks them. Its errors name the source
and the missing or malformed field, never a value (the document holds the secret key and
the token).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ObjsdkError
from .refresh import parse_expiration
from .signing import Credentials

__all__ = [
    "METADATA_FIELDS",
    "PROCESS_FIELDS",
    "SSO_FIELDS",
    "CredentialFields",
    "credentials_from_fields",
    "json_object",
]

ErrorFactory = Callable[[str], ObjsdkError]


@dataclass(frozen=True)
class CredentialFields:
    """The field names of one format of credential document. ``temporary``: the format
    hands out only temporary credentials, so its token and its expiration must be there."""

    access_key: str
    secret_key: str
    token: str
    expiration: str
    temporary: bool


# A container endpoint and the instance metadata service answer the same format.
METADATA_FIELDS = CredentialFields(
    "AccessKeyId", "SecretAccessKey", "Token", "Expiration", temporary=True
)
# A credential_process may print long-term keys: no token, no expiration.
PROCESS_FIELDS = CredentialFields(
    "AccessKeyId", "SecretAccessKey", "SessionToken", "Expiration", temporary=False
)
# The SSO portal's roleCredentials, their expiration made ISO 8601 by the caller.
SSO_FIELDS = CredentialFields(
    "accessKeyId", "secretAccessKey", "sessionToken", "expiration", temporary=True
)


def json_object(body: bytes | str, what: str, error: ErrorFactory) -> Mapping[str, Any]:
    """``body`` (UTF-8) as a JSON object; ``error(message)`` naming ``what`` if it is not
    one (the message gives its size, never its text)."""
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
        parsed = json.loads(text)
    except (UnicodeDecodeError, ValueError):
        raise error(f"{what} is not JSON ({len(body)} bytes)") from None
    if not isinstance(parsed, dict):
        raise error(f"{what} is JSON but not an object ({type(parsed).__name__})")
    return parsed


def credentials_from_fields(
    document: Mapping[str, Any], what: str, error: ErrorFactory, fields: CredentialFields
) -> Credentials:
    """The :class:`Credentials` in ``document`` under the names ``fields`` gives.

    The key and secret must be non-empty strings; the token and the expiration must be
    present for a ``temporary`` format (else absent or null). The expiration is ISO 8601
    (:func:`~objsdk._core.refresh.parse_expiration`). ``error(message)`` makes the
    error, whose message names ``what`` and the field."""
    access_key, secret_key = fields.access_key, fields.secret_key
    token, expiration = fields.token, fields.expiration
    required = (
        (access_key, secret_key, token, expiration)
        if fields.temporary
        else (access_key, secret_key)
    )
    missing = [name for name in required if not document.get(name)]
    if missing:
        raise error(f"{what} has no {', '.join(missing)}")
    for name in (access_key, secret_key, token):
        value = document.get(name)
        if value is not None and not isinstance(value, str):
            raise error(f"{what}: {name} is a {type(value).__name__}, not a string")
    expiry = None
    if document.get(expiration) is not None:
        try:
            expiry = parse_expiration(document[expiration])
        except ValueError as e:
            raise error(f"{what}: {expiration} {e}") from None
    return Credentials(
        document[access_key],
        document[secret_key],
        document.get(token) or None,
        expiry,
    )
