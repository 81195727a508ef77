"""The container credentials endpoint (ECS task roles, EKS Pod Identity): where it is,
what to send it and what its answer means.

The environment names the endpoint (botocore's ``ContainerProvider``):

* ``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI``: a path on ``http://169.254.170.2`` (ECS);
  it wins when both are set;
* ``AWS_CONTAINER_CREDENTIALS_FULL_URI``: a whole URL, accepted only over https or to a
  host that cannot be someone else's: a loopback address, ``localhost``, the ECS and EKS
  addresses ``169.254.170.2``, ``169.254.170.23`` and ``fd00:ec2::23``, since the
  request may carry an authorization token;
* ``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`` (read again for every fetch: EKS rotates
  it), else ``AWS_CONTAINER_AUTHORIZATION_TOKEN``: the ``Authorization`` header's value.

The endpoint answers ``GET`` with ``{"AccessKeyId", "SecretAccessKey", "Token",
"Expiration"}``.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ..errors import ConfigError, ProtocolError
from .credential_json import METADATA_FIELDS, credentials_from_fields, json_object
from .signing import Credentials

__all__ = [
    "ALLOWED_HOSTS",
    "ECS_ADDRESS",
    "ContainerEndpoint",
    "check_full_uri",
    "container_endpoint",
]

RELATIVE_URI = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"
FULL_URI = "AWS_CONTAINER_CREDENTIALS_FULL_URI"
TOKEN = "AWS_CONTAINER_AUTHORIZATION_TOKEN"
TOKEN_FILE = "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"
#: The ECS agent's credentials address, the host of a relative URI.
ECS_ADDRESS = "169.254.170.2"
#: The hosts a plain-http full URI may name, besides loopback addresses (botocore's
#: ``ContainerMetadataFetcher._ALLOWED_HOSTS``: ECS, EKS Pod Identity over IPv4 and IPv6).
ALLOWED_HOSTS = (ECS_ADDRESS, "169.254.170.23", "fd00:ec2::23", "localhost")


@dataclass(frozen=True)
class ContainerEndpoint:
    """The endpoint at ``url``, named by environment variable ``variable``, and the
    authorization token to send (``auth_token``, or the file ``auth_token_file`` to read
    it from; the repr hides the token)."""

    url: str
    variable: str = RELATIVE_URI
    auth_token: str | None = field(default=None, repr=False)
    auth_token_file: str | None = None

    #: botocore's name for this source (``Credentials.method``).
    method: ClassVar[str] = "container-role"

    def describe(self) -> str:
        return f"the container credentials endpoint ({self.variable})"

    def __reduce__(self) -> tuple[Any, ...]:
        if self.auth_token is None:
            return (type(self), (self.url, self.variable, None, self.auth_token_file))
        # A pickle never carries the token: the process that unpickles it takes
        # AWS_CONTAINER_AUTHORIZATION_TOKEN from its own environment.
        return (_container_endpoint_again, (self.url, self.variable))

    def headers(self, token_file_text: str | None = None) -> dict[str, str]:
        """The headers of the ``GET``. With ``auth_token_file``, ``token_file_text`` is
        the file's text, read just before (surrounding whitespace is dropped).
        :class:`ConfigError` for a token that cannot be a header value (a CR or LF)."""
        headers = {"Accept": "application/json"}
        token = self.auth_token
        origin = TOKEN
        if self.auth_token_file is not None:
            if token_file_text is None:
                raise ConfigError(f"{TOKEN_FILE} is set: give the text of {self.auth_token_file}")
            token, origin = token_file_text.strip(), f"{TOKEN_FILE} ({self.auth_token_file})"
        if token is not None:
            if "\r" in token or "\n" in token:
                raise ConfigError(
                    f"the container authorization token from {origin} holds a line break; "
                    "it cannot be sent as a header"
                )
            headers["Authorization"] = token
        return headers

    def parse_answer(self, body: bytes | str) -> Credentials:
        """The credentials in the endpoint's 200 answer; :class:`ProtocolError` naming
        the missing or malformed field (never a value)."""
        operation = "container credentials"

        def error(message: str) -> ProtocolError:
            return ProtocolError(message, operation=operation)

        what = f"the answer of {self.describe()}"
        return credentials_from_fields(json_object(body, what, error), what, error, METADATA_FIELDS)


def container_endpoint(environ: Mapping[str, str]) -> ContainerEndpoint | None:
    """The endpoint ``environ`` names (None if neither URI variable is set).
    :class:`ConfigError` for a full URI to a host it may not name (see the module
    docstring) or that is not a URL."""
    relative = environ.get(RELATIVE_URI)
    full = environ.get(FULL_URI)
    if relative:
        url, variable = f"http://{ECS_ADDRESS}{relative}", RELATIVE_URI
    elif full:
        url, variable = full, FULL_URI
        check_full_uri(full)
    else:
        return None
    token_file = environ.get(TOKEN_FILE) or None
    return ContainerEndpoint(
        url,
        variable,
        auth_token=None if token_file else environ.get(TOKEN) or None,
        auth_token_file=token_file,
    )


def _container_endpoint_again(url: str, variable: str) -> ContainerEndpoint:
    """A :class:`ContainerEndpoint` with a token, unpickled: the endpoint this
    process's environment names, which must be the same (:class:`ConfigError` if
    not)."""
    found = container_endpoint(os.environ)
    if found is None or (found.url, found.variable) != (url, variable):
        raise ConfigError(
            f"credentials from the container endpoint ({variable}) were pickled without "
            f"its authorization token, and this process's environment does not name the "
            f"same endpoint: set {variable} and {TOKEN} (or {TOKEN_FILE}) where it is "
            "unpickled"
        )
    return found


def check_full_uri(url: str) -> None:
    """Refuse (:class:`ConfigError`) an ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` that is
    not an http(s) URL, or is plain http to a host outside loopback and
    :data:`ALLOWED_HOSTS`."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        host = None
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        raise ConfigError(f"{FULL_URI} must be an http or https URL, got {url!r}")
    if parts.scheme == "https" or host in ALLOWED_HOSTS or _is_loopback(host):
        return
    raise ConfigError(
        f"{FULL_URI} names host {host!r} over plain http: use https, a loopback address, "
        f"or one of {', '.join(ALLOWED_HOSTS)}"
    )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
