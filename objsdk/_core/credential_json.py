"""Credentials from the JSON documents that hand them out, as one pure function.

A ``credential_process`` prints ``{"Version": 1, "AccessKeyId", "SecretAccessKey",
"SessionToken", "Expiration"}``; a container endpoint and the instance metadata service
answer ``{"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}``; the SSO portal
answers ``{"roleCredentials": {"accessKeyId", ...}}``. Each caller names the fields;
this module checks them. Its errors name the source and the missing or malformed field,
never a value (the document holds the secret key and the token).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ObjsdkError
from .refresh import parse_expiration
from .signing import Credentials

__all__ = ["credentials_from_fields", "json_object"]

ErrorFactory = Callable[[str], ObjsdkError]


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
    document: Mapping[str, Any],
    what: str,
    error: ErrorFactory,
    *,
    access_key: str,
    secret_key: str,
    token: str,
    expiration: str,
    token_required: bool,
    expiration_required: bool,
) -> Credentials:
    """The :class:`Credentials` in ``document`` under the given field names.

    The key and secret must be non-empty strings; the token and the expiration must be
    present when required (else absent or null). The expiration is ISO 8601
    (:func:`~objsdk._core.refresh.parse_expiration`). ``error(message)`` makes the
    error, whose message names ``what`` and the field."""
    missing = [name for name in (access_key, secret_key) if not document.get(name)]
    missing += [
        name
        for name, required in ((token, token_required), (expiration, expiration_required))
        if required and not document.get(name)
    ]
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
