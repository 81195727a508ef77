"""The EC2 instance metadata service (IMDS) as a credential source: its settings, the
requests that fetch a role's credentials, and what the answers mean.

Settings, each from its environment variable, else the profile's key (botocore's
``BOTOCORE_DEFAUT_SESSION_VARIABLES``)::

    AWS_EC2_METADATA_DISABLED=true          (environment only) never ask the service
    AWS_EC2_METADATA_SERVICE_ENDPOINT       ec2_metadata_service_endpoint
    AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE  ec2_metadata_service_endpoint_mode  ipv4 | ipv6
    AWS_IMDS_USE_IPV6                       imds_use_ipv6   (when no mode is given)
    AWS_METADATA_SERVICE_TIMEOUT            metadata_service_timeout       seconds, 1
    AWS_METADATA_SERVICE_NUM_ATTEMPTS       metadata_service_num_attempts  1
    AWS_EC2_METADATA_V1_DISABLED            ec2_metadata_v1_disabled       false

A fetch (IMDSv2, "Use the Instance Metadata Service to access instance metadata", EC2
user guide): ``PUT latest/api/token`` with ``x-aws-ec2-metadata-token-ttl-seconds``
gives a session token; ``GET latest/meta-data/iam/security-credentials/`` with it in
``x-aws-ec2-metadata-token`` names the instance's role (first line); ``GET`` of that
path plus the role name answers ``{"Code": "Success", "AccessKeyId",
"SecretAccessKey", "Token", "Expiration"}``. A service that refuses the token request
(403, 404, 405: IMDSv1 only) is asked again without a token, unless IMDSv1 is disabled.

When the service cannot renew the role's credentials it keeps handing out the last ones,
past their expiry, and AWS keeps accepting them for a while ("static stability");
:func:`extend_stale_expiry` moves such an expiry a little into the future, as botocore
does, so the client retries later instead of failing now.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar
from urllib.parse import urlsplit

from ..errors import ConfigError, ProtocolError
from .credential_json import METADATA_FIELDS, credentials_from_fields, json_object
from .refresh import ADVISORY_WINDOW, utc
from .signing import Credentials

__all__ = [
    "BASE_URL_IPV4",
    "BASE_URL_IPV6",
    "InstanceMetadata",
    "TokenOutcome",
    "extend_stale_expiry",
    "instance_metadata",
]

BASE_URL_IPV4 = "http://169.254.169.254/"
BASE_URL_IPV6 = "http://[fd00:ec2::254]/"
TOKEN_PATH = "latest/api/token"
ROLE_PATH = "latest/meta-data/iam/security-credentials/"
#: The token request's header and the token's lifetime asked for (6 hours, botocore's).
TOKEN_TTL_HEADER = "x-aws-ec2-metadata-token-ttl-seconds"
TOKEN_TTL_SECONDS = 21600
#: The header that carries the token on the metadata requests.
TOKEN_HEADER = "x-aws-ec2-metadata-token"


class TokenOutcome(enum.Enum):
    """What the answer to the token request means (:meth:`InstanceMetadata.token_outcome`)."""

    #: The body is the token: send it with the metadata requests.
    TOKEN = "token"
    #: The service speaks only IMDSv1: ask without a token.
    WITHOUT_TOKEN = "without token"
    #: Try the token request again (another attempt, if any are left).
    RETRY = "retry"


@dataclass(frozen=True)
class InstanceMetadata:
    """The service at ``base_url`` with its request ``timeout`` (seconds), ``attempts``
    per request and whether IMDSv1 (requests without a token) is refused.
    ``fallback_for`` is the profile that was named but gave no credentials, when this
    source is only the end of the chain (for the error if the service has none)."""

    base_url: str = BASE_URL_IPV4
    timeout: float = 1.0
    attempts: int = 1
    v1_disabled: bool = False
    fallback_for: str | None = None

    #: botocore's name for this source (``Credentials.method``).
    method: ClassVar[str] = "iam-role"

    def describe(self) -> str:
        return f"the EC2 instance metadata service ({self.base_url})"

    def url(self, path: str) -> str:
        """``path`` under the base URL (botocore's ``_construct_url``)."""
        return self.base_url + ("" if self.base_url.endswith("/") else "/") + path

    def token_request(self) -> tuple[str, dict[str, str]]:
        """``(url, headers)`` of the ``PUT`` that asks for a session token."""
        return self.url(TOKEN_PATH), {TOKEN_TTL_HEADER: str(TOKEN_TTL_SECONDS)}

    def token_outcome(self, status: int) -> TokenOutcome:
        """What a token answer of ``status`` means (botocore's ``_fetch_metadata_token``):
        200 a token, 403/404/405 a service without IMDSv2 (:class:`ConfigError` if
        IMDSv1 is disabled), 400 a request the service refuses (:class:`ProtocolError`),
        anything else (5xx...) worth another attempt."""
        if status == 200:
            return TokenOutcome.TOKEN
        if status in (403, 404, 405):
            if self.v1_disabled:
                raise ConfigError(
                    f"{self.describe()} gives no IMDSv2 token (HTTP {status}) and IMDSv1 is "
                    "disabled (AWS_EC2_METADATA_V1_DISABLED / ec2_metadata_v1_disabled)"
                )
            return TokenOutcome.WITHOUT_TOKEN
        if status == 400:
            raise ProtocolError(
                f"{self.describe()} refused the token request (HTTP 400)",
                operation="instance metadata",
            )
        return TokenOutcome.RETRY

    def role_request(self, token: str | None) -> tuple[str, dict[str, str]]:
        """``(url, headers)`` of the ``GET`` whose answer names the instance's role."""
        return self.url(ROLE_PATH), self._token_headers(token)

    def credentials_request(self, role: str, token: str | None) -> tuple[str, dict[str, str]]:
        """``(url, headers)`` of the ``GET`` of ``role``'s credentials."""
        # Sent as botocore sends it: IAM role names hold only [A-Za-z0-9+=,.@_-].
        return self.url(ROLE_PATH + role), self._token_headers(token)

    def _token_headers(self, token: str | None) -> dict[str, str]:
        if token is None:
            if self.v1_disabled:
                raise ConfigError(f"{self.describe()}: no IMDSv2 token, and IMDSv1 is disabled")
            return {}
        return {TOKEN_HEADER: token}

    def parse_role(self, body: bytes | str) -> str:
        """The role name in the role listing's answer (its first line);
        :class:`ProtocolError` if it is empty."""
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        lines = text.strip().splitlines()
        if not lines or not lines[0].strip():
            raise ProtocolError(
                f"{self.describe()} names no IAM role: is one attached to the instance?",
                operation="instance metadata",
            )
        return lines[0].strip()

    def parse_answer(self, body: bytes | str) -> Credentials:
        """The credentials in the role's answer; :class:`ProtocolError` naming the
        service's ``Code`` (when not ``Success``) or the missing field, never a value."""

        def error(message: str) -> ProtocolError:
            return ProtocolError(message, operation="instance metadata")

        what = f"the answer of {self.describe()}"
        document = json_object(body, what, error)
        code = document.get("Code", "Success")
        if code != "Success":
            message = document.get("Message")
            said = f": {message[:200]}" if isinstance(message, str) else ""
            raise error(f"{what} is {str(code)[:60]!r}{said}")
        return credentials_from_fields(document, what, error, METADATA_FIELDS)


def instance_metadata(
    environ: Mapping[str, str], settings: Mapping[str, str], *, fallback_for: str | None = None
) -> InstanceMetadata | None:
    """The service's settings from ``environ`` and a profile's ``settings`` (see the
    module docstring); None when ``AWS_EC2_METADATA_DISABLED`` is ``true``.
    :class:`ConfigError` naming the variable or key for a value that is not one."""
    if environ.get("AWS_EC2_METADATA_DISABLED", "").strip().lower() == "true":
        return None

    def setting(variable: str, key: str) -> tuple[str, str] | None:
        if environ.get(variable):
            return environ[variable].strip(), variable
        if settings.get(key):
            return settings[key].strip(), key
        return None

    endpoint = setting("AWS_EC2_METADATA_SERVICE_ENDPOINT", "ec2_metadata_service_endpoint")
    mode = setting("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "ec2_metadata_service_endpoint_mode")
    if mode is not None and mode[0].lower() not in ("ipv4", "ipv6"):
        raise ConfigError(f"{mode[1]} must be ipv4 or ipv6, got {mode[0]!r}")
    ipv6 = (
        mode[0].lower() == "ipv6"
        if mode is not None
        else _boolean(setting("AWS_IMDS_USE_IPV6", "imds_use_ipv6"))
    )
    # A configured endpoint wins over the mode (botocore warns and does the same).
    if endpoint is not None:
        base_url = endpoint[0]
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"{endpoint[1]} must be an http(s) URL, got {base_url!r}")
    else:
        base_url = BASE_URL_IPV6 if ipv6 else BASE_URL_IPV4
    timeout = setting("AWS_METADATA_SERVICE_TIMEOUT", "metadata_service_timeout")
    attempts = setting("AWS_METADATA_SERVICE_NUM_ATTEMPTS", "metadata_service_num_attempts")
    return InstanceMetadata(
        base_url=base_url,
        timeout=_number(timeout, 1.0, whole=False),
        attempts=int(_number(attempts, 1, whole=True)),
        v1_disabled=_boolean(setting("AWS_EC2_METADATA_V1_DISABLED", "ec2_metadata_v1_disabled")),
        fallback_for=fallback_for,
    )


def _boolean(found: tuple[str, str] | None) -> bool:
    # botocore's ensure_boolean: "true" in any case is true, anything else false.
    return found is not None and found[0].lower() == "true"


def _number(found: tuple[str, str] | None, default: float, *, whole: bool) -> float:
    if found is None:
        return default
    text, origin = found
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        value = 0
    if not value > 0:
        kind = "a whole number >= 1" if whole else "a number of seconds > 0"
        raise ConfigError(f"{origin} must be {kind}, got {text!r}")
    return value


def extend_stale_expiry(
    expiry: datetime | None,
    now: datetime,
    jitter: timedelta,
    *,
    window: timedelta = ADVISORY_WINDOW,
) -> datetime | None:
    """The expiry to give the service's credentials: ``expiry`` itself, unless it falls
    within ``window + jitter`` of ``now`` (or before it); then ``now + window +
    jitter``, so the client keeps the credentials and asks again some minutes later
    rather than failing while the service cannot renew them. ``jitter`` is the
    caller's random choice between 2 and 10 minutes (botocore's
    ``_evaluate_expiration``), so that a fleet does not ask all at once."""
    if expiry is None:
        return None
    expiry, now = utc(expiry, "expiry"), utc(now)
    margin = window + jitter
    if now >= expiry - margin:
        return now + margin
    return expiry
