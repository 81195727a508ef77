"""Fetching credentials from each source the chain can choose (the I/O the pure core
leaves to its caller: :mod:`objsdk._core.credential_sources` says what to send and
reads the answers).

:func:`fetcher` gives, for a source, the function a
:class:`~objsdk._transport.credentials.CredentialProvider` calls to fetch its
credentials:

* static keys (environment, profile): the keys themselves;
* ``credential_process``: the program is run (without a shell); a failure gives its
  exit status and the end of its standard error, never its standard output;
* web identity: the token file is read again each time, then STS
  ``AssumeRoleWithWebIdentity`` (unsigned);
* assume role: the source profile's credentials (refreshed by a provider of their
  own), then STS ``AssumeRole`` signed with them (SigV4, service ``sts``);
* SSO: the token ``aws sso login`` cached, renewed through SSO OIDC ``CreateToken``
  when it is due and can be (the cache file is written back, mode 0600), then the
  portal's ``GetRoleCredentials``;
* the container endpoint: ``GET`` with a 2 s timeout, 3 attempts;
* the EC2 instance metadata service
  (:mod:`~objsdk._transport.instance_metadata_fetch`): IMDSv2 (a token, then the role,
  then its credentials) with ``AWS_METADATA_SERVICE_TIMEOUT`` and ``_NUM_ATTEMPTS``;
  IMDSv1 when the token request is refused or times out, unless
  ``AWS_EC2_METADATA_V1_DISABLED``.

Every HTTP exchange goes through
:func:`~objsdk._transport.credential_exchange.exchange`, the one place the transport's
connection settings apply to credential fetches: TLS verification, and the client's
proxies (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``) for STS and SSO; the container
endpoint and the metadata service are local and are always reached directly. Errors
name the source (``describe()``) and never hold a secret, a session token or an
authorization token.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import random
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone

from objsdk import errors
from objsdk._core.client_config import ClientConfig
from objsdk._core.container_credentials import ContainerEndpoint
from objsdk._core.credential_process import CredentialProcess
from objsdk._core.credential_sources import (
    AssumeRole,
    CredentialSource,
    EnvironmentKeys,
    ProfileKeys,
    WebIdentity,
    environment_keys,
)
from objsdk._core.instance_metadata import InstanceMetadata
from objsdk._core.profiles import (
    SharedFiles,
    load_shared_files,
    profile_name,
    read_text_if_exists,
)
from objsdk._core.proxies import Proxies
from objsdk._core.signing import Credentials, CurrentCredentials, sign_request
from objsdk._core.sso import SSO, SsoToken, parse_sso_token
from objsdk._core.sts import (
    StsRequest,
    configured_endpoint,
    parse_sts_credentials,
    parse_sts_error,
    sts_endpoint,
)
from objsdk._transport.answer import Answer
from objsdk._transport.credential_exchange import LOCAL_PAUSE, exchange
from objsdk._transport.credentials import CredentialProvider
from objsdk._transport.instance_metadata_fetch import InstanceMetadataFetch

__all__ = ["FetchSettings", "fetcher", "signing_credentials"]

log = logging.getLogger("objsdk")

#: STS and the SSO services: (connect, read) seconds, and attempts per call.
REMOTE_TIMEOUT = (10.0, 30.0)
REMOTE_ATTEMPTS = 3
#: The container endpoint: seconds per attempt, attempts (botocore's).
CONTAINER_TIMEOUT = 2.0
CONTAINER_ATTEMPTS = 3


@dataclass(frozen=True)
class FetchSettings:
    """What fetching needs beyond the source: the profile in effect (its ``services``
    section may configure the STS and SSO endpoints), the region of STS calls, the TLS
    verification and the proxies of remote calls (STS, SSO), and the environment read at
    each fetch: the one the chain was resolved from (``AWS_ENDPOINT_URL_STS``,
    ``AWS_ENDPOINT_URL_SSO``, ``AWS_CONFIG_FILE``, ``HOME``...)."""

    profile: str = "default"
    region: str | None = None
    verify: bool | str = True
    proxies: Proxies | None = None
    environ: Callable[[], Mapping[str, str]] = field(default=lambda: os.environ, repr=False)

    def shared_files(self) -> SharedFiles:
        """The AWS shared files of :attr:`environ`, found as the chain found them
        (:func:`~objsdk._core.client_config.with_credentials`: ``HOME``, else this
        user's home)."""
        environ = self.environ()
        return load_shared_files(environ, home=environ.get("HOME") or os.path.expanduser("~"))


def signing_credentials(
    config: ClientConfig,
    verify: bool | str = True,
    environ: Mapping[str, str] | None = None,
) -> Credentials | CurrentCredentials | None:
    """What the requests of a client with ``config`` are signed with: its keys, a
    :class:`CredentialProvider` of its ``credentials`` function or of its source, or
    None (``anonymous``). A config that names none of them must have been through
    :func:`~objsdk._core.client_config.with_credentials` first. Fetches read
    ``environ`` when they run (the STS and SSO endpoints, the profile in effect, the
    shared files, the environment's keys): the environment ``config``'s source was
    resolved from, the process's if None."""
    if config.anonymous:
        return None
    keys = config.keys
    if keys is not None:
        if config.credentials_from is None:
            return keys
        # Found by the chain: named in errors (they never expire, never refreshed).
        return CredentialProvider(lambda: keys, config.credentials_from)
    given = config.credentials
    if isinstance(given, Credentials):
        return given
    if given is not None:
        name = getattr(given, "__qualname__", None) or type(given).__name__
        return CredentialProvider(given, f"credentials={name}")
    source = config.credential_source
    if source is None:
        raise errors.ConfigError(
            "the client's configuration names no credentials (resolve the chain with "
            "with_credentials first, or give anonymous=True)"
        )
    env = os.environ if environ is None else environ
    settings = FetchSettings(
        profile=profile_name(env, config.profile),
        region=config.region,
        verify=verify,
        # Read where the client is built, as its S3 requests' proxies are.
        proxies=Proxies.from_environ(os.environ),
        environ=lambda: env,
    )
    return CredentialProvider(fetcher(source, settings), source.describe())


def fetcher(source: CredentialSource, settings: FetchSettings) -> Callable[[], Credentials]:
    """The function that fetches ``source``'s credentials now (see the module
    docstring); each call is one fetch."""
    if isinstance(source, EnvironmentKeys):
        # Reading the environment again is their refresh (AWS_CREDENTIAL_EXPIRATION).
        return lambda: _environment_again(source, settings)
    if isinstance(source, ProfileKeys):
        keys = source.credentials
        return lambda: keys
    if isinstance(source, CredentialProcess):
        return lambda: run_credential_process(source)
    if isinstance(source, WebIdentity):
        return lambda: _web_identity(source, settings)
    if isinstance(source, AssumeRole):
        base = CredentialProvider(fetcher(source.source, settings), source.source.describe())
        return lambda: _assume_role(source, base, settings)
    if isinstance(source, SSO):
        return lambda: _sso(source, settings)
    if isinstance(source, ContainerEndpoint):
        return lambda: _container(source)
    if isinstance(source, InstanceMetadata):
        return InstanceMetadataFetch(source)
    raise errors.InvalidArgument(f"not a credential source: {type(source).__name__}")


def _environment_again(source: EnvironmentKeys, settings: FetchSettings) -> Credentials:
    """The environment's keys as they are now; :class:`ConfigError` once they have
    expired (``AWS_CREDENTIAL_EXPIRATION``) and nobody set new ones."""
    found = environment_keys(settings.environ())
    credentials = source.credentials if found is None else found.credentials
    if credentials.expired(datetime.now(timezone.utc)):
        assert credentials.expiry is not None
        raise errors.ConfigError(
            f"the credentials in {source.describe()} expired at "
            f"{credentials.expiry:%Y-%m-%dT%H:%M:%SZ} (AWS_CREDENTIAL_EXPIRATION): set new "
            "ones in this process's environment, or use a source that refreshes them"
        )
    return credentials


# -- credential_process -----------------------------------------------------------------


def run_credential_process(source: CredentialProcess) -> Credentials:
    """Run the profile's program and read what it printed."""
    args = source.args()
    program = args if isinstance(args, str) else args[0]
    try:
        done = subprocess.run(args, capture_output=True, check=False)
    except OSError as e:
        raise errors.ConfigError(
            f"{source.describe()} could not be started ({program!r}: "
            f"{e.strerror or type(e).__name__})"
        ) from None
    if done.returncode != 0:
        raise source.failure(done.returncode, done.stderr)
    return source.parse_output(done.stdout)


# -- STS --------------------------------------------------------------------------------


def _sts(
    request: StsRequest,
    what: str,
    settings: FetchSettings,
    signing: Callable[[], Credentials] | None = None,
) -> Credentials:
    """Send an STS call (signed with ``signing()``'s credentials when the request is
    signed), a few times if STS is busy or unreachable; its credentials."""
    operation = f"STS {request.action}"
    failure = ""
    for attempt in range(1, REMOTE_ATTEMPTS + 1):
        headers = dict(request.headers)
        if request.signed:
            assert signing is not None
            headers.update(
                sign_request(
                    "POST",
                    request.url,
                    headers,
                    credentials=signing(),
                    region=request.region,
                    now=datetime.now(timezone.utc),
                    payload_hash=hashlib.sha256(request.body).hexdigest(),
                    service=request.service,
                )
            )
        try:
            answer = exchange(
                "POST",
                request.url,
                headers,
                request.body,
                operation=operation,
                timeout=REMOTE_TIMEOUT,
                local=False,
                verify=settings.verify,
                proxies=settings.proxies,
            )
        except errors.TransportError as e:
            failure = f"{request.url} did not answer ({e})"
            _pause(attempt)
            continue
        if answer.status == 200:
            try:
                return parse_sts_credentials(answer.content, request.action)
            except errors.XMLParseError as e:
                raise errors.CredentialsError(f"{what}: {e}") from None
        error = parse_sts_error(answer.content)
        said = f"{error.code}: {error.message}" if error else "no STS error in the answer"
        failure = f"{request.url} answered HTTP {answer.status} ({said})"
        if answer.status < 500 and not (error and error.retryable):
            break
        _pause(attempt)
    raise errors.CredentialsError(f"{what}: {operation} failed: {failure}")


def _pause(attempt: int) -> None:
    if attempt < REMOTE_ATTEMPTS:
        time.sleep(min(2.0, 0.25 * 2**attempt) * random.uniform(0.5, 1.0))


def _web_identity(source: WebIdentity, settings: FetchSettings) -> Credentials:
    try:
        with open(source.token_file, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise errors.ConfigError(
            f"{source.describe()}: cannot read the token file {source.token_file} "
            f"({e.strerror or type(e).__name__})"
        ) from None
    environ = settings.environ()
    endpoint = sts_endpoint(environ, settings.shared_files(), settings.profile, settings.region)
    now = datetime.now(timezone.utc)
    return _sts(source.request(text, endpoint, settings.region, now), source.describe(), settings)


def _assume_role(
    source: AssumeRole, base: CredentialProvider, settings: FetchSettings
) -> Credentials:
    environ = settings.environ()
    endpoint = sts_endpoint(environ, settings.shared_files(), settings.profile, settings.region)
    request = source.request(endpoint, settings.region, datetime.now(timezone.utc))
    return _sts(request, source.describe(), settings, base.current)


# -- SSO --------------------------------------------------------------------------------


def _sso(source: SSO, settings: FetchSettings) -> Credentials:
    environ = settings.environ()
    files = settings.shared_files()
    path = os.path.expanduser(source.cache_path)
    now = datetime.now(timezone.utc)
    text = read_text_if_exists(path)
    if text is not None:
        token = parse_sso_token(text, path)
        if token.renewal_due(now):
            oidc = configured_endpoint(environ, files, settings.profile, "sso-oidc")
            text = _renew_sso_token(source, token, path, oidc, settings) or text
    token = source.token(text, datetime.now(timezone.utc))
    portal = configured_endpoint(environ, files, settings.profile, "sso")
    url, headers = source.role_credentials_request(token, portal)
    operation = "SSO GetRoleCredentials"
    answer = _remote_get(url, headers, operation, source.describe(), settings)
    if answer.status in (401, 403):
        raise source.unauthorized()
    if answer.status != 200:
        raise errors.CredentialsError(
            f"{source.describe()}: {operation} failed: the portal answered HTTP {answer.status}"
        )
    return source.parse_role_credentials(answer.content)


def _remote_get(
    url: str, headers: Mapping[str, str], operation: str, what: str, settings: FetchSettings
) -> Answer:
    for attempt in range(1, REMOTE_ATTEMPTS + 1):
        try:
            answer = exchange(
                "GET",
                url,
                headers,
                None,
                operation=operation,
                timeout=REMOTE_TIMEOUT,
                local=False,
                verify=settings.verify,
                proxies=settings.proxies,
            )
        except errors.TransportError as e:
            if attempt == REMOTE_ATTEMPTS:
                raise errors.CredentialsError(f"{what}: {e}") from e
        else:
            if answer.status < 500 or attempt == REMOTE_ATTEMPTS:
                return answer
        _pause(attempt)
    raise AssertionError("unreachable")  # pragma: no cover


def _renew_sso_token(
    source: SSO, token: SsoToken, path: str, endpoint: str | None, settings: FetchSettings
) -> str | None:
    """The cache text of ``token`` renewed through SSO OIDC ``CreateToken`` and saved
    to ``path`` (where the aws CLI finds it too); None if it cannot be renewed (the
    current token is used while it lasts: logging in again is the user's)."""
    now = datetime.now(timezone.utc)
    if not token.renewable(now):
        return None
    url, body = source.renewal_request(token, now, endpoint)
    try:
        answer = exchange(
            "POST",
            url,
            {"Content-Type": "application/json"},
            body,
            operation="SSO OIDC CreateToken",
            timeout=REMOTE_TIMEOUT,
            local=False,
            verify=settings.verify,
            proxies=settings.proxies,
        )
        if answer.status != 200:
            raise errors.CredentialsError(f"SSO OIDC CreateToken answered HTTP {answer.status}")
        renewed = source.renewed(token, answer.content, datetime.now(timezone.utc))
    except errors.ObjsdkError as e:
        log.warning("%s: the SSO login could not be renewed: %s", source.describe(), e)
        return None
    text = renewed.cache_text()
    _write_private(path, text)
    log.info("%s: the SSO login was renewed and saved to %s", source.describe(), path)
    return text


def _write_private(path: str, text: str) -> None:
    """Replace ``path`` with ``text``, readable by its owner only (mode 0600), never
    half-written."""
    directory = os.path.dirname(path) or "."
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".objsdk-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


# -- the container endpoint -------------------------------------------------------------


def _container(source: ContainerEndpoint) -> Credentials:
    failure = ""
    for attempt in range(1, CONTAINER_ATTEMPTS + 1):
        token_text = None
        if source.auth_token_file is not None:
            try:
                with open(source.auth_token_file, encoding="utf-8") as f:
                    token_text = f.read()
            except OSError as e:
                raise errors.ConfigError(
                    f"{source.describe()}: cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE "
                    f"{source.auth_token_file} ({e.strerror or type(e).__name__})"
                ) from None
        try:
            answer = exchange(
                "GET",
                source.url,
                source.headers(token_text),
                None,
                operation="container credentials",
                timeout=(CONTAINER_TIMEOUT, CONTAINER_TIMEOUT),
                local=True,
            )
        except errors.TransportError as e:
            failure = f"{source.url} did not answer ({e})"
        else:
            if answer.status == 200:
                return source.parse_answer(answer.content)
            failure = f"{source.url} answered HTTP {answer.status}"
            if answer.status < 500:
                break  # refused: another attempt gets the same answer
        if attempt < CONTAINER_ATTEMPTS:
            time.sleep(LOCAL_PAUSE)
    raise errors.CredentialsError(f"{source.describe()}: {failure}")
