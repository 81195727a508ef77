"""IAM Identity Center (SSO) profiles: their settings, the token ``aws sso login`` caches,
and the portal's ``GetRoleCredentials`` request and answer.

A profile uses SSO when it has ``sso_account_id`` or ``sso_role_name`` (botocore's
``SSOProvider``). It takes ``sso_start_url`` and ``sso_region`` from the
``[sso-session NAME]`` section its ``sso_session`` names (a value given in both places
must agree), or, in the legacy form, from the profile itself.

``aws sso login`` writes the access token to ``~/.aws/sso/cache/<sha1>.json``, the SHA-1
(hex) of the session name, or of the start URL for a legacy profile::

    {"startUrl", "region", "accessToken", "expiresAt": "2024-01-02T03:04:05Z",
     "refreshToken", "clientId", "clientSecret", "registrationExpiresAt"}

(the last four only for an ``sso-session``, whose token can be renewed through the
SSO OIDC ``CreateToken`` call within 15 minutes of its expiry). With the token,
``GET https://portal.sso.REGION.amazonaws.com/federation/credentials?role_name=..&
account_id=..`` (header ``x-amz-sso_bearer_token``) answers ``{"roleCredentials":
{"accessKeyId", "secretAccessKey", "sessionToken", "expiration": <epoch ms>}}``.

A token that is missing or expired is a :class:`ConfigError` that says to run
``aws sso login --profile NAME``. No message or repr holds a token.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar
from urllib.parse import urlencode

from ..errors import ConfigError, ProtocolError
from .credential_json import SSO_FIELDS, credentials_from_fields, json_object
from .profiles import SharedFiles
from .refresh import parse_expiration, utc
from .signing import Credentials
from .sts import aws_dns_suffix

__all__ = [
    "SSO",
    "SsoToken",
    "parse_sso_token",
    "sso_cache_file",
    "sso_source",
]

#: A cached token within this long of its expiry is renewed if it can be (botocore's
#: ``SSOTokenProvider._REFRESH_WINDOW``).
TOKEN_REFRESH_WINDOW = timedelta(minutes=15)
BEARER_HEADER = "x-amz-sso_bearer_token"


def sso_cache_file(home: str, key: str) -> str:
    """Where ``aws sso login`` caches the token of session name (or legacy start URL)
    ``key``: ``~/.aws/sso/cache/<sha1 hex of key>.json`` under ``home``."""
    digest = hashlib.sha1(key.encode("utf-8")).hexdigest()
    return os.path.join(home, ".aws", "sso", "cache", f"{digest}.json")


@dataclass(frozen=True)
class SsoToken:
    """A cached SSO access token (the repr hides the token, the refresh token and the
    client secret)."""

    access_token: str = field(repr=False)
    expires_at: datetime
    refresh_token: str | None = field(default=None, repr=False)
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    registration_expires_at: datetime | None = None
    start_url: str | None = None
    region: str | None = None

    def __post_init__(self) -> None:
        # Aware times, kept in UTC (a naive one is refused).
        object.__setattr__(self, "expires_at", utc(self.expires_at, "expires_at"))
        if self.registration_expires_at is not None:
            registration = utc(self.registration_expires_at, "registration_expires_at")
            object.__setattr__(self, "registration_expires_at", registration)

    def expired(self, now: datetime) -> bool:
        return utc(now) >= self.expires_at

    def renewable(self, now: datetime) -> bool:
        """Whether ``CreateToken`` can renew it: it has a refresh token and a client
        registration that has not expired."""
        return (
            self.refresh_token is not None
            and self.client_id is not None
            and self.client_secret is not None
            and self.registration_expires_at is not None
            and utc(now) < self.registration_expires_at
        )

    def cache_text(self) -> str:
        """The token as ``aws sso login`` writes its cache file (to save a renewal
        where the aws CLI finds it too)."""
        document: dict[str, str] = {"accessToken": self.access_token}
        times = {
            "expiresAt": self.expires_at,
            "registrationExpiresAt": self.registration_expires_at,
        }
        for name, moment in times.items():
            if moment is not None:
                document[name] = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        texts = {
            "refreshToken": self.refresh_token,
            "clientId": self.client_id,
            "clientSecret": self.client_secret,
            "startUrl": self.start_url,
            "region": self.region,
        }
        document.update({name: value for name, value in texts.items() if value is not None})
        return json.dumps(document)

    def renewal_due(self, now: datetime) -> bool:
        """Whether to renew it before use: within :data:`TOKEN_REFRESH_WINDOW` of its
        expiry and :meth:`renewable`."""
        return self.expires_at - utc(now) < TOKEN_REFRESH_WINDOW and self.renewable(now)


def parse_sso_token(text: str, where: str) -> SsoToken:
    """The token in the cache file ``where`` holding ``text``; :class:`ConfigError`
    naming the file and the missing or malformed field (never a value)."""

    def error(message: str) -> ConfigError:
        return ConfigError(message)

    document = json_object(text, f"the SSO token cache {where}", error)
    missing = [name for name in ("accessToken", "expiresAt") if not document.get(name)]
    if missing:
        raise ConfigError(f"the SSO token cache {where} has no {', '.join(missing)}")

    def text_of(name: str) -> str | None:
        value = document.get(name)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"the SSO token cache {where}: {name} is not a string")
        return value

    def time_of(name: str) -> datetime | None:
        value = document.get(name)
        if value is None:
            return None
        try:
            return parse_expiration(value)
        except ValueError as e:
            raise ConfigError(f"the SSO token cache {where}: {name} {e}") from None

    expires_at = time_of("expiresAt")
    assert expires_at is not None  # checked above
    return SsoToken(
        access_token=str(text_of("accessToken")),
        expires_at=expires_at,
        refresh_token=text_of("refreshToken"),
        client_id=text_of("clientId"),
        client_secret=text_of("clientSecret"),
        registration_expires_at=time_of("registrationExpiresAt"),
        start_url=text_of("startUrl"),
        region=text_of("region"),
    )


@dataclass(frozen=True)
class SSO:
    """Profile ``profile``'s SSO role: ``role_name`` in account ``account_id`` through
    the portal of ``start_url`` in ``region``, logged in as ``session_name`` (None:
    legacy profile); its token is cached in ``cache_path``."""

    profile: str
    start_url: str
    region: str
    account_id: str
    role_name: str
    session_name: str | None
    cache_path: str

    #: botocore's name for this source (``Credentials.method``).
    method: ClassVar[str] = "sso"

    def describe(self) -> str:
        via = f"sso-session `{self.session_name}`" if self.session_name else "legacy SSO"
        return f"profile `{self.profile}` (SSO, {via})"

    def login_command(self) -> str:
        """The command that logs in again: ``aws sso login --profile NAME``."""
        return f"aws sso login --profile {shlex.quote(self.profile)}"

    def token(self, cache_text: str | None, now: datetime) -> SsoToken:
        """The token in the cache file (``cache_text`` its text, None if there is none)
        that is usable at ``now``: :class:`ConfigError` saying to run
        :meth:`login_command` if there is none or it has expired (renewing one due for
        it, :meth:`SsoToken.renewal_due`, is the caller's choice before this)."""
        if cache_text is None:
            raise ConfigError(
                f"{self.describe()} is not logged in (no token in {self.cache_path}): "
                f"run `{self.login_command()}`"
            )
        token = parse_sso_token(cache_text, self.cache_path)
        if token.expired(now):
            raise ConfigError(
                f"the SSO login of {self.describe()} expired at "
                f"{token.expires_at:%Y-%m-%dT%H:%M:%SZ}: run `{self.login_command()}`"
            )
        return token

    def role_credentials_request(
        self, token: SsoToken, endpoint: str | None = None
    ) -> tuple[str, dict[str, str]]:
        """``(url, headers)`` of the portal's ``GetRoleCredentials`` (an unsigned
        ``GET``), to ``endpoint`` if one is configured (``AWS_ENDPOINT_URL_SSO``, see
        :func:`~objsdk._core.sts.configured_endpoint`), else the region's portal."""
        query = urlencode({"role_name": self.role_name, "account_id": self.account_id})
        url = endpoint or f"https://portal.sso.{self.region}.{aws_dns_suffix(self.region)}"
        return f"{url.rstrip('/')}/federation/credentials?{query}", {
            BEARER_HEADER: token.access_token
        }

    def renewal_request(
        self, token: SsoToken, now: datetime, endpoint: str | None = None
    ) -> tuple[str, bytes]:
        """``(url, JSON body)`` of the SSO OIDC ``CreateToken`` (an unsigned ``POST``,
        ``Content-Type: application/json``) that renews ``token`` with its refresh
        token, to ``endpoint`` if one is configured (``AWS_ENDPOINT_URL_SSO_OIDC``),
        else the region's; :class:`ConfigError` saying to log in if it is not
        :meth:`SsoToken.renewable`."""
        if not token.renewable(now):
            raise ConfigError(
                f"the SSO login of {self.describe()} cannot be renewed: "
                f"run `{self.login_command()}`"
            )
        body = {
            "grantType": "refresh_token",
            "clientId": token.client_id,
            "clientSecret": token.client_secret,
            "refreshToken": token.refresh_token,
        }
        url = endpoint or f"https://oidc.{self.region}.{aws_dns_suffix(self.region)}"
        return f"{url.rstrip('/')}/token", json.dumps(body).encode("utf-8")

    def renewed(self, token: SsoToken, body: bytes | str, now: datetime) -> SsoToken:
        """``token`` renewed by ``CreateToken``'s answer ``{"accessToken", "expiresIn"
        (seconds), "refreshToken" (optional)}`` received at ``now``;
        :class:`ProtocolError` naming the missing field."""

        def error(message: str) -> ProtocolError:
            return ProtocolError(message, operation="SSO OIDC CreateToken")

        what = f"the SSO OIDC answer for {self.describe()}"
        document = json_object(body, what, error)
        access, expires_in = document.get("accessToken"), document.get("expiresIn")
        if not isinstance(access, str) or not access:
            raise error(f"{what} has no accessToken")
        if isinstance(expires_in, bool) or not isinstance(expires_in, int | float):
            raise error(f"{what} has no expiresIn in seconds")
        refresh = document.get("refreshToken")
        return dataclasses.replace(
            token,
            access_token=access,
            expires_at=utc(now) + timedelta(seconds=expires_in),
            refresh_token=refresh if isinstance(refresh, str) and refresh else token.refresh_token,
            start_url=token.start_url or self.start_url,
            region=token.region or self.region,
        )

    def unauthorized(self) -> ConfigError:
        """The error for a portal answer of 401/403 (``UnauthorizedException``: the
        token was revoked or the login ended)."""
        return ConfigError(
            f"the SSO portal refused the login of {self.describe()}: run `{self.login_command()}`"
        )

    def parse_role_credentials(self, body: bytes | str) -> Credentials:
        """The credentials in ``GetRoleCredentials``' answer; :class:`ProtocolError`
        naming the missing field (never a value)."""

        def error(message: str) -> ProtocolError:
            return ProtocolError(message, operation="SSO GetRoleCredentials")

        what = f"the SSO portal's answer for {self.describe()}"
        document = json_object(body, what, error)
        role = document.get("roleCredentials")
        if not isinstance(role, dict):
            raise error(f"{what} has no roleCredentials")
        fields: dict[str, Any] = dict(role)
        expiration = fields.get("expiration")
        if isinstance(expiration, bool) or not isinstance(expiration, int | float):
            raise error(f"{what} has no expiration in epoch milliseconds")
        moment = datetime.fromtimestamp(expiration / 1000, timezone.utc)
        fields["expiration"] = moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return credentials_from_fields(fields, what, error, SSO_FIELDS)


_REQUIRED = ("sso_start_url", "sso_region", "sso_account_id", "sso_role_name")


def sso_source(profile: str, files: SharedFiles) -> SSO | None:
    """Profile ``profile``'s SSO role (None if it has neither ``sso_account_id`` nor
    ``sso_role_name``). :class:`ConfigError` for an ``sso_session`` naming no
    ``[sso-session]`` section, a value the profile and the session give differently,
    or missing settings (named), as botocore's ``SSOProvider``."""
    settings: Mapping[str, str] = files.settings(profile)
    if "sso_account_id" not in settings and "sso_role_name" not in settings:
        return None
    resolved = dict(settings)
    session_name = settings.get("sso_session")
    if session_name is not None:
        session = files.sso_sessions.get(session_name)
        if session is None:
            raise ConfigError(
                f"profile `{profile}` names sso_session `{session_name}`, but "
                f"{files.config_path} has no [sso-session {session_name}] section"
            )
        for key, value in session.items():
            if resolved.get(key, value) != value:
                raise ConfigError(
                    f"profile `{profile}` and [sso-session {session_name}] give different "
                    f"values of {key}"
                )
            resolved[key] = value
    missing = [key for key in _REQUIRED if not resolved.get(key)]
    if missing:
        raise ConfigError(
            f"profile `{profile}` is configured for SSO but has no {', '.join(missing)} "
            f"(in {files.where(profile)}"
            + (f" or [sso-session {session_name}]" if session_name else "")
            + ")"
        )
    # Without a known home the path keeps its "~" for the caller to expand.
    home = files.home or "~"
    return SSO(
        profile=profile,
        start_url=resolved["sso_start_url"],
        region=resolved["sso_region"],
        account_id=resolved["sso_account_id"],
        role_name=resolved["sso_role_name"],
        session_name=session_name,
        cache_path=sso_cache_file(home, session_name or resolved["sso_start_url"]),
    )
