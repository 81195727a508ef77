"""Which credential source a client uses: botocore's chain, as a pure decision.

:func:`resolve_credential_source` reads the environment and the shared files
(:class:`~objsdk._core.profiles.SharedFiles`) and returns a frozen description of the
one source to fetch credentials from; nothing is fetched, run or read here. The order
is botocore's ``create_credential_resolver``; the first that applies wins:

1. the environment's keys (``AWS_ACCESS_KEY_ID``...), unless a profile was named
   explicitly (an argument, ``--profile``; not ``AWS_PROFILE``): :class:`EnvironmentKeys`;
2. the profile's ``role_arn`` (without ``web_identity_token_file``): :class:`AssumeRole`
   with the credentials of its ``source_profile`` (resolved by the profile steps
   below, or by this step again for a chain of roles) or its ``credential_source``
   (``Environment``, ``EcsContainer``, ``Ec2InstanceMetadata``);
3. the profile's own sources, in this order (the steps a ``source_profile`` is
   resolved with, the environment left out):

   a. web identity: ``AWS_WEB_IDENTITY_TOKEN_FILE`` with ``AWS_ROLE_ARN`` and
      ``AWS_ROLE_SESSION_NAME`` (environment, unless a profile was named explicitly),
      each else the profile's ``web_identity_token_file``, ``role_arn``,
      ``role_session_name``: :class:`WebIdentity`;
   b. SSO (``sso_account_id`` / ``sso_role_name``): :class:`~objsdk._core.sso.SSO`;
   c. keys in the credentials file's section: :class:`ProfileKeys`;
   d. ``login_session`` (``aws login``): refused, objsdk cannot sign its requests;
   e. ``credential_process``: :class:`~objsdk._core.credential_process.CredentialProcess`;
   f. keys in the config file's section: :class:`ProfileKeys`;

4. the container endpoint (``AWS_CONTAINER_CREDENTIALS_*``):
   :class:`~objsdk._core.container_credentials.ContainerEndpoint`;
5. the EC2 instance metadata service, unless ``AWS_EC2_METADATA_DISABLED=true``:
   :class:`~objsdk._core.instance_metadata.InstanceMetadata`.

botocore's two boto2-era sources between steps 3 and 4 (``AWS_CREDENTIAL_FILE`` and
``~/.boto``) are not read. A profile that is named (explicitly or by ``AWS_PROFILE``)
must exist; one that gives nothing, with the metadata service disabled, is a
:class:`ConfigError` saying what to add (:func:`no_credentials_error`). A source
configured wrongly (a ``source_profile`` cycle, ``mfa_serial``, half a key pair...) is
a :class:`ConfigError` naming the profile.

Every source has ``describe()``, a label for messages and logs such as ``profile `ml`
(credential_process)``, and ``method``, botocore's name for it. No repr, ``describe()``
or message holds a secret key or token.

Fetching is the caller's part; each source says what to send and reads the answer:

* :class:`EnvironmentKeys`, :class:`ProfileKeys`: ``.credentials`` (the environment's
  expire at ``AWS_CREDENTIAL_EXPIRATION``; reading it again is their refresh);
* :class:`AssumeRole`: credentials of ``.source`` first, then ``.request(endpoint,
  region, now)`` signed with them (endpoint: :func:`~objsdk._core.sts.sts_endpoint`),
  answer :func:`~objsdk._core.sts.parse_sts_credentials` or
  :func:`~objsdk._core.sts.parse_sts_error`;
* :class:`WebIdentity`: read ``.token_file``, then ``.request(text, endpoint, region,
  now)`` unsigned, answer as for :class:`AssumeRole`;
* SSO: read ``.cache_path``, ``.token(text, now)``, ``.role_credentials_request``,
  ``.parse_role_credentials`` (and ``.renewal_request`` / ``.renewed`` for a token
  due for renewal);
* ``credential_process``: run ``.args()``, ``.parse_output(stdout)`` or
  ``.failure(status, stderr)``;
* container endpoint: ``GET .url`` with ``.headers(token file text)``, ``.parse_answer``;
* instance metadata: ``.token_request``, ``.token_outcome``, ``.role_request``,
  ``.parse_role``, ``.credentials_request``, ``.parse_answer``, then
  :func:`~objsdk._core.instance_metadata.extend_stale_expiry`.

Then :func:`~objsdk._core.refresh.on_arrival` on what arrived, and the
:class:`~objsdk._core.refresh.RefreshPolicy` stage before each use.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, TypeAlias

from ..errors import ConfigError
from .container_credentials import ContainerEndpoint, container_endpoint
from .credential_process import CredentialProcess
from .instance_metadata import InstanceMetadata, instance_metadata
from .profiles import SharedFiles, named_profile, parse_shared_files, read_text_if_exists
from .refresh import parse_expiration
from .signing import Credentials
from .sso import SSO, sso_source
from .sts import StsRequest, default_session_name, sts_request

__all__ = [
    "CREDENTIAL_SOURCES",
    "AssumeRole",
    "CredentialSource",
    "EnvironmentKeys",
    "ProfileKeys",
    "WebIdentity",
    "environment_keys",
    "no_credentials_error",
    "resolve_credential_source",
]

#: The ``credential_source`` values of a role profile (botocore's canonical names of
#: the providers it allows there; case matters, as in botocore).
CREDENTIAL_SOURCES = ("Environment", "EcsContainer", "Ec2InstanceMetadata")
# STS's bounds on DurationSeconds ("AssumeRole", AWS STS API Reference).
_MIN_DURATION, _MAX_DURATION = 900, 43200


@dataclass(frozen=True)
class EnvironmentKeys:
    """Keys from ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and
    ``AWS_SECURITY_TOKEN`` / ``AWS_SESSION_TOKEN``, expiring at
    ``AWS_CREDENTIAL_EXPIRATION`` if set (re-reading the environment is their refresh)."""

    credentials: Credentials

    method: ClassVar[str] = "env"

    def describe(self) -> str:
        return "the environment (AWS_ACCESS_KEY_ID)"

    def __reduce__(self) -> tuple[Any, ...]:
        # A pickle (a client sent to a worker) carries the access key alone; the
        # process that unpickles it reads the secret from its own environment.
        return (_environment_keys_again, (self.credentials.access_key,))


@dataclass(frozen=True)
class ProfileKeys:
    """Keys written in profile ``profile`` of the shared file ``path`` (the credentials
    file when ``in_credentials_file``, else the config file)."""

    profile: str
    path: str
    in_credentials_file: bool
    credentials: Credentials

    @property
    def method(self) -> str:
        return "shared-credentials-file" if self.in_credentials_file else "config-file"

    def describe(self) -> str:
        return f"profile `{self.profile}` (aws_access_key_id in {self.path})"

    def __reduce__(self) -> tuple[Any, ...]:
        # As EnvironmentKeys: the secret is read again from the file where unpickled.
        fields = (self.profile, self.path, self.in_credentials_file)
        return (_profile_keys_again, (*fields, self.credentials.access_key))


@dataclass(frozen=True)
class WebIdentity:
    """``AssumeRoleWithWebIdentity`` of ``role_arn`` with the token in ``token_file``
    (read again for every call: Kubernetes rotates it). ``profile`` is the profile that
    configures it, None when the environment does (``AWS_WEB_IDENTITY_TOKEN_FILE``)."""

    role_arn: str
    token_file: str
    role_session_name: str | None = None
    profile: str | None = None

    method: ClassVar[str] = "assume-role-with-web-identity"

    def describe(self) -> str:
        if self.profile is None:
            return f"the environment (AWS_WEB_IDENTITY_TOKEN_FILE, role {self.role_arn})"
        return f"profile `{self.profile}` (web_identity_token_file, role {self.role_arn})"

    def request(
        self, token_file_text: str, endpoint: str, region: str | None, now: datetime
    ) -> StsRequest:
        """The ``AssumeRoleWithWebIdentity`` call (:mod:`~objsdk._core.sts`) with the
        token file's text (surrounding whitespace dropped) read just before;
        :class:`ConfigError` if the file is empty."""
        token = token_file_text.strip()
        if not token:
            raise ConfigError(f"{self.describe()}: the token file {self.token_file} is empty")
        return sts_request(
            "AssumeRoleWithWebIdentity",
            endpoint,
            region,
            {
                "RoleArn": self.role_arn,
                "RoleSessionName": self.role_session_name or default_session_name(now),
                "WebIdentityToken": token,
            },
        )


@dataclass(frozen=True)
class AssumeRole:
    """``AssumeRole`` of profile ``profile``'s ``role_arn``, signed with the
    credentials of ``source`` (another source; an :class:`AssumeRole` for a chain of
    roles), with its ``role_session_name``, ``external_id`` and ``duration_seconds``."""

    profile: str
    role_arn: str
    source: CredentialSource
    role_session_name: str | None = None
    external_id: str | None = None
    duration_seconds: int | None = None

    method: ClassVar[str] = "assume-role"

    def describe(self) -> str:
        return (
            f"profile `{self.profile}` (role {self.role_arn}, assumed with "
            f"{self.source.describe()})"
        )

    def request(self, endpoint: str, region: str | None, now: datetime) -> StsRequest:
        """The ``AssumeRole`` call (:mod:`~objsdk._core.sts`), to sign with the
        source's credentials."""
        return sts_request(
            "AssumeRole",
            endpoint,
            region,
            {
                "RoleArn": self.role_arn,
                "RoleSessionName": self.role_session_name or default_session_name(now),
                "DurationSeconds": self.duration_seconds,
                "ExternalId": self.external_id,
            },
        )


#: Any one of the sources (each has ``method`` and ``describe()``).
CredentialSource: TypeAlias = (
    EnvironmentKeys
    | ProfileKeys
    | AssumeRole
    | WebIdentity
    | SSO
    | CredentialProcess
    | ContainerEndpoint
    | InstanceMetadata
)


def environment_keys(environ: Mapping[str, str]) -> EnvironmentKeys | None:
    """The environment's keys (None without ``AWS_ACCESS_KEY_ID``). The token is
    ``AWS_SECURITY_TOKEN``, else ``AWS_SESSION_TOKEN`` (botocore's order).
    :class:`ConfigError` for a key without its secret or an expiration that is not
    ISO 8601."""
    key = environ.get("AWS_ACCESS_KEY_ID")
    if not key:
        return None
    secret = environ.get("AWS_SECRET_ACCESS_KEY")
    if not secret:
        raise ConfigError("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
    token = environ.get("AWS_SECURITY_TOKEN") or environ.get("AWS_SESSION_TOKEN") or None
    expiry = None
    if environ.get("AWS_CREDENTIAL_EXPIRATION"):
        try:
            expiry = parse_expiration(environ["AWS_CREDENTIAL_EXPIRATION"])
        except ValueError as e:
            raise ConfigError(f"AWS_CREDENTIAL_EXPIRATION: {e}") from None
    return EnvironmentKeys(Credentials(key, secret, token, expiry))


@dataclass
class _Chain:
    """One resolution: the inputs, and the profiles a chain of roles has visited."""

    environ: Mapping[str, str]
    files: SharedFiles
    profile: str
    visited: list[str] = field(default_factory=list)

    def resolve(self, *, explicit: bool, named: bool) -> CredentialSource | None:
        if not explicit and (keys := environment_keys(self.environ)) is not None:
            return keys
        settings = self.files.settings(self.profile)
        if _assumes_role(settings):
            self.visited = [self.profile]
            return self.assume_role(self.profile)
        found = self.profile_source(self.profile, environment=not explicit)
        if found is not None:
            return found
        if (container := container_endpoint(self.environ)) is not None:
            return container
        fallback = self.profile if named else None
        imds = instance_metadata(self.environ, settings, fallback_for=fallback)
        if imds is None and named:
            raise no_credentials_error(self.profile, self.files)
        return imds

    def profile_source(self, name: str, *, environment: bool) -> CredentialSource | None:
        """Step 3 of the chain for profile ``name`` (the environment's web identity
        variables only when ``environment``)."""
        settings = self.files.settings(name)
        web = self.web_identity(name, settings, environment=environment)
        if web is not None:
            return web
        sso = sso_source(name, self.files)
        if sso is not None:
            return sso
        in_credentials = self.files.credentials_profiles.get(name, {})
        if "aws_access_key_id" in in_credentials:
            return self.profile_keys(name, in_credentials, in_credentials_file=True)
        if "login_session" in settings:
            raise ConfigError(
                f"profile `{name}` uses `aws login` (login_session), which objsdk does not "
                f"support: use credential_process = aws configure export-credentials "
                f"--profile {name} --format process in another profile"
            )
        if settings.get("credential_process"):
            return CredentialProcess(name, settings["credential_process"])
        in_config = self.files.config_profiles.get(name, {})
        if "aws_access_key_id" in in_config:
            return self.profile_keys(name, in_config, in_credentials_file=False)
        return None

    def profile_keys(
        self, name: str, section: Mapping[str, str], *, in_credentials_file: bool
    ) -> ProfileKeys:
        files = self.files
        path = files.credentials_path if in_credentials_file else files.config_path
        key, secret = section.get("aws_access_key_id"), section.get("aws_secret_access_key")
        if not key or not secret:
            half = "aws_secret_access_key" if key else "aws_access_key_id"
            raise ConfigError(f"profile `{name}` in {path} has no {half}")
        # botocore's order: the older name first.
        token = section.get("aws_security_token") or section.get("aws_session_token") or None
        return ProfileKeys(name, path, in_credentials_file, Credentials(key, secret, token))

    def web_identity(
        self, name: str, settings: Mapping[str, str], *, environment: bool
    ) -> WebIdentity | None:
        def value(variable: str, key: str) -> tuple[str | None, bool]:
            if environment and self.environ.get(variable):
                return self.environ[variable], True
            return settings.get(key) or None, False

        token_file, from_environment = value(
            "AWS_WEB_IDENTITY_TOKEN_FILE", "web_identity_token_file"
        )
        if token_file is None:
            return None
        role_arn, _ = value("AWS_ROLE_ARN", "role_arn")
        if role_arn is None:
            given = (
                "AWS_WEB_IDENTITY_TOKEN_FILE is set"
                if from_environment
                else f"profile `{name}` has web_identity_token_file"
            )
            raise ConfigError(
                f"{given} but no role to assume: set AWS_ROLE_ARN or role_arn in profile `{name}`"
            )
        session_name, _ = value("AWS_ROLE_SESSION_NAME", "role_session_name")
        return WebIdentity(
            role_arn=role_arn,
            token_file=token_file,
            role_session_name=session_name,
            profile=None if from_environment else name,
        )

    def assume_role(self, name: str) -> AssumeRole:
        """Step 2 for profile ``name`` (botocore's ``AssumeRoleProvider``)."""
        settings = self.files.settings(name)
        if settings.get("mfa_serial"):
            raise ConfigError(
                f"profile `{name}` needs an MFA code (mfa_serial), and objsdk cannot prompt "
                "for one: use credential_process = aws configure export-credentials "
                f"--profile {name} --format process in another profile (the aws CLI prompts "
                "and caches the role's credentials)"
            )
        source_profile = settings.get("source_profile")
        credential_source = settings.get("credential_source")
        if source_profile is not None and credential_source is not None:
            raise ConfigError(
                f"profile `{name}` has both source_profile and credential_source; keep one"
            )
        source: CredentialSource
        if credential_source is not None:
            source = self.named_source(name, credential_source)
        elif source_profile is not None:
            source = self.source_profile(name, source_profile)
        else:
            raise ConfigError(
                f"profile `{name}` has role_arn but neither source_profile nor "
                f"credential_source ({', '.join(CREDENTIAL_SOURCES)}) to assume it with"
            )
        return AssumeRole(
            profile=name,
            role_arn=settings["role_arn"],
            source=source,
            role_session_name=settings.get("role_session_name") or None,
            external_id=settings.get("external_id") or None,
            duration_seconds=_duration(name, settings.get("duration_seconds")),
        )

    def named_source(self, name: str, credential_source: str) -> CredentialSource:
        found: CredentialSource | None
        if credential_source == "Environment":
            found = environment_keys(self.environ)
        elif credential_source == "EcsContainer":
            found = container_endpoint(self.environ)
        elif credential_source == "Ec2InstanceMetadata":
            # The service's settings are the client's profile's (botocore builds one
            # metadata provider per session).
            found = instance_metadata(self.environ, self.files.settings(self.profile))
        else:
            raise ConfigError(
                f"profile `{name}` has credential_source {credential_source!r}; it must be "
                f"one of {', '.join(CREDENTIAL_SOURCES)}"
            )
        if found is None:
            raise ConfigError(
                f"profile `{name}` takes its credentials from credential_source "
                f"{credential_source}, which has none: " + _UNSET[credential_source]
            )
        return found

    def source_profile(self, name: str, source: str) -> CredentialSource:
        if not self.files.has_profile(source):
            raise ConfigError(
                f"profile `{name}` names source_profile `{source}`, which is in neither "
                f"{self.files.config_path} nor {self.files.credentials_path}"
            )
        settings = self.files.settings(source)
        static = "aws_access_key_id" in settings or "aws_secret_access_key" in settings
        # A profile may name itself to assume its role with its own keys; any other
        # return to a visited profile is a cycle.
        if source in self.visited and (source != name or not static):
            chain = " -> ".join(f"`{p}`" for p in [*self.visited, source])
            raise ConfigError(f"the source_profile settings form a cycle: {chain}")
        self.visited.append(source)
        if static or not _assumes_role(settings):
            found = self.profile_source(source, environment=False)
            if found is None:
                raise ConfigError(
                    f"profile `{name}` names source_profile `{source}`, which gives no "
                    "credentials (keys, SSO, web identity or credential_process)"
                )
            return found
        return self.assume_role(source)


def _shown(access_key: str) -> str:
    return access_key[:4] + "..." if len(access_key) > 4 else "..."


def _environment_keys_again(access_key: str) -> EnvironmentKeys:
    """An :class:`EnvironmentKeys` unpickled: the keys of this process's environment,
    which must have the same access key (:class:`ConfigError` if not)."""
    found = environment_keys(os.environ)
    if found is None or found.credentials.access_key != access_key:
        raise ConfigError(
            f"credentials from the environment (access key {_shown(access_key)}) were "
            "pickled without their secret, and this process's environment has no "
            "AWS_SECRET_ACCESS_KEY for that key: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY where it is unpickled"
        )
    return found


def _profile_keys_again(
    profile: str, path: str, in_credentials_file: bool, access_key: str
) -> ProfileKeys:
    """A :class:`ProfileKeys` unpickled: the keys read again from ``path``, which must
    have the same access key (:class:`ConfigError` if not)."""
    text = read_text_if_exists(path)
    if in_credentials_file:
        files = parse_shared_files(None, text, credentials_path=path)
        section = files.credentials_profiles.get(profile, {})
    else:
        files = parse_shared_files(text, None, config_path=path)
        section = files.config_profiles.get(profile, {})
    found = None
    if "aws_access_key_id" in section:
        chain = _Chain(os.environ, files, profile)
        found = chain.profile_keys(profile, section, in_credentials_file=in_credentials_file)
    if found is None or found.credentials.access_key != access_key:
        raise ConfigError(
            f"credentials of profile `{profile}` (access key {_shown(access_key)}) were "
            f"pickled without their secret, and {path} has none for that key where they "
            "were unpickled"
        )
    return found


_UNSET = {
    "Environment": "AWS_ACCESS_KEY_ID is not set",
    "EcsContainer": "neither AWS_CONTAINER_CREDENTIALS_RELATIVE_URI nor _FULL_URI is set",
    "Ec2InstanceMetadata": "AWS_EC2_METADATA_DISABLED is true",
}


def _assumes_role(settings: Mapping[str, str]) -> bool:
    # A profile with web_identity_token_file is web identity's, even with role_arn.
    return "role_arn" in settings and "web_identity_token_file" not in settings


def _duration(profile: str, text: str | None) -> int | None:
    if text is None or not text.strip():
        return None
    value = text.strip()
    if not value.isdigit() or not _MIN_DURATION <= int(value) <= _MAX_DURATION:
        raise ConfigError(
            f"duration_seconds of profile `{profile}` must be a whole number of seconds "
            f"from {_MIN_DURATION} to {_MAX_DURATION}, got {text!r}"
        )
    return int(value)


def resolve_credential_source(
    environ: Mapping[str, str], files: SharedFiles, profile: str | None = None
) -> CredentialSource | None:
    """The source a client of ``profile`` fetches its credentials from (see the module
    docstring for the order). ``profile`` is the explicitly named profile (an argument,
    ``--profile``), None to take ``AWS_DEFAULT_PROFILE``, ``AWS_PROFILE`` or
    ``default`` and to consider the environment's keys first.

    None when nothing gives credentials and no profile was named (the metadata service
    disabled): the client is anonymous. :class:`ConfigError` for a named profile that
    does not exist or gives nothing, and for a source configured wrongly."""
    named = named_profile(environ, profile)
    if named and not files.has_profile(named):
        raise ConfigError(
            f"profile `{named}` is in neither {files.config_path} nor {files.credentials_path}"
        )
    chain = _Chain(environ, files, named or "default")
    return chain.resolve(explicit=profile is not None, named=bool(named))


def no_credentials_error(profile: str, files: SharedFiles) -> ConfigError:
    """The error for profile ``profile`` when it gives no credentials and neither the
    container endpoint nor the instance metadata service does: what to add to it."""
    return ConfigError(
        f"profile `{profile}` ({files.where(profile)}) gives no credentials: add "
        "aws_access_key_id and aws_secret_access_key, role_arn with source_profile or "
        "credential_source, sso_session (then run "
        f"`aws sso login --profile {profile}`), web_identity_token_file with role_arn, "
        "or credential_process"
    )
