"""Where a client's settings come from: flags, then the environment, then the AWS files.

The chain is the one boto3 and the aws CLI follow:

1. explicit values (command-line flags, keyword arguments);
2. the environment: ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, ``AWS_REGION`` /
   ``AWS_DEFAULT_REGION``;
3. the shared files of the selected profile (``--profile``, else
   ``AWS_DEFAULT_PROFILE``, else ``AWS_PROFILE``, else ``default``), read and laid out
   by :mod:`objsdk._core.profiles` (``AWS_SHARED_CREDENTIALS_FILE`` and
   ``AWS_CONFIG_FILE`` move the files): ``region`` and ``endpoint_url`` (directly in the
   profile, or in the ``s3`` block of the profile's ``services`` section).

The credentials are the credential chain's
(:func:`~objsdk._core.credential_sources.resolve_credential_source`): the environment's
keys (skipped when a profile is named explicitly: ``--profile``, ``profile=``; not
``AWS_PROFILE``), a role, web identity, SSO, the profile's keys, its
``credential_process``, the container endpoint or the instance metadata service. Keys
that never expire are returned as ``access_key``/``secret_key``; any other source as
``credential_source``, fetched by the client.

The settings ``max_attempts``, ``retry_mode``, ``request_checksum_calculation``,
``response_checksum_validation`` and ``ca_bundle`` follow the same order: explicit, then
their ``AWS_*`` variables, then the profile in ``~/.aws/config``.

An access key and its secret always come together from one place: a key found in the
environment is never paired with a secret from a file. The session token comes from the
same place as the key (``AWS_SECURITY_TOKEN`` before ``AWS_SESSION_TOKEN``, as botocore).

Pure: the environment, the home directory and the way files are read are arguments, so
the whole chain is tested without touching the machine. Nothing here speaks HTTP.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

# ConfigError is defined with every other error; importable from here as before.
from ..errors import ConfigError, InvalidArgument
from .addressing import ADDRESSING_STYLES
from .credential_sources import (
    CredentialSource,
    EnvironmentKeys,
    ProfileKeys,
    resolve_credential_source,
)
from .profiles import (
    FileReader,
    SharedFiles,
    _expand,
    _home,
    _nested,
    load_shared_files,
    named_profile,
    read_text_if_exists,
)

__all__ = [
    "CHECKSUM_WHEN",
    "RETRY_MODES",
    "ConfigError",
    "ResolvedConfig",
    "check_setting",
    "check_timeout",
    "checksum_setting",
    "credentials_for",
    "read_text_if_exists",
    "resolve_config",
]


#: The values of ``request_checksum_calculation`` and ``response_checksum_validation``
#: (botocore's): send or ask for checksums whenever the service supports them, or only
#: when an operation requires them.
CHECKSUM_WHEN = ("when_supported", "when_required")
#: ``retry_mode`` (botocore's, ``AWS_RETRY_MODE``) and the attempts each makes unless
#: ``max_attempts`` says otherwise. All three use objsdk's one policy (exponential
#: backoff with jitter); ``adaptive``'s client-side rate limiting is not implemented.
RETRY_MODES = {"legacy": 5, "standard": 3, "adaptive": 3}

# Settings read from the environment, then from the profile in ~/.aws/config (None: no
# variable, the profile only).
_SETTINGS = {
    "max_attempts": "AWS_MAX_ATTEMPTS",
    "retry_mode": "AWS_RETRY_MODE",
    "request_checksum_calculation": "AWS_REQUEST_CHECKSUM_CALCULATION",
    "response_checksum_validation": "AWS_RESPONSE_CHECKSUM_VALIDATION",
    "ca_bundle": "AWS_CA_BUNDLE",
    "use_fips_endpoint": "AWS_USE_FIPS_ENDPOINT",
    "use_dualstack_endpoint": "AWS_USE_DUALSTACK_ENDPOINT",
    "addressing_style": None,
}
# Settings a profile gives in its nested ``s3 =`` block (botocore's S3 configuration),
# that block only, or that block when the profile has none of its own.
_S3_BLOCK_ONLY = ("addressing_style",)
_S3_BLOCK_TOO = ("use_dualstack_endpoint",)
_BOOLEANS = ("use_fips_endpoint", "use_dualstack_endpoint")


def _mask(value: str | None) -> str | None:
    if value is None:
        return None
    return "****" + value[-4:] if len(value) > 8 else "****"


@dataclass(frozen=True)
class ResolvedConfig:
    """The settings a client is built from, and where each one was found.

    ``sources`` maps ``endpoint``, ``credentials``, ``region`` and each setting found
    (``max_attempts``...) to ``"explicit"``, ``"environment"``, ``"credentials file"``
    or ``"config file"`` (for credentials that are not static keys, their source's
    description). ``credential_source`` is the source of credentials that are not
    static keys (a role, SSO...), fetched by the client. The repr shows the
    access key masked and never the secret key or session token.
    """

    endpoint: str | None = None
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    region: str | None = None
    profile: str = "default"
    sources: Mapping[str, str] = field(default_factory=dict)
    max_attempts: int | None = None
    retry_mode: str | None = None
    request_checksum_calculation: str | None = None
    response_checksum_validation: str | None = None
    ca_bundle: str | None = None
    use_fips_endpoint: bool | None = None
    use_dualstack_endpoint: bool | None = None
    addressing_style: str | None = None
    credential_source: CredentialSource | None = None
    #: Where static keys the chain found came from (its source's description).
    credentials_from: str | None = None

    def __repr__(self) -> str:
        return (
            f"ResolvedConfig(endpoint={self.endpoint!r}, access_key={_mask(self.access_key)!r}, "
            f"secret_key={'<set>' if self.secret_key else None}, "
            f"session_token={'<set>' if self.session_token else None}, "
            f"region={self.region!r}, profile={self.profile!r}, sources={dict(self.sources)!r}, "
            f"max_attempts={self.max_attempts!r}, retry_mode={self.retry_mode!r}, "
            f"request_checksum_calculation={self.request_checksum_calculation!r}, "
            f"response_checksum_validation={self.response_checksum_validation!r}, "
            f"ca_bundle={self.ca_bundle!r}, use_fips_endpoint={self.use_fips_endpoint!r}, "
            f"use_dualstack_endpoint={self.use_dualstack_endpoint!r}, "
            f"addressing_style={self.addressing_style!r}"
            + (
                ""
                if self.credential_source is None
                else f", credential_source={self.credential_source.describe()!r}"
            )
            + ")"
        )

    __str__ = __repr__

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("ResolvedConfig holds credentials and is not pickled")

    def retries(self) -> int | None:
        """Retries after the first attempt that ``max_attempts`` (else ``retry_mode``)
        gives; None when neither was found."""
        attempts = self.max_attempts or RETRY_MODES.get(self.retry_mode or "")
        return None if attempts is None else attempts - 1  # attempts count the first one

    def client_kwargs(self) -> dict[str, object]:
        """Keyword arguments for ``Client(endpoint, **kwargs)`` (region only when known)."""
        kwargs: dict[str, object] = {
            "access_key": self.access_key,
            "secret_key": self.secret_key,
            "session_token": self.session_token,
        }
        if self.region:
            kwargs["region"] = self.region
        retries = self.retries()
        if retries is not None:
            kwargs["retries"] = retries
        for name in ("request_checksum_calculation", "response_checksum_validation"):
            if getattr(self, name):
                kwargs[name] = getattr(self, name)
        if self.ca_bundle:
            kwargs["verify"] = self.ca_bundle
        for name in ("use_fips_endpoint", "use_dualstack_endpoint", "addressing_style"):
            if getattr(self, name) is not None:
                kwargs[name] = getattr(self, name)
        return kwargs


def _nonempty(environ: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = environ.get(name)
        if value:
            return value
    return None


def resolve_config(
    environ: Mapping[str, str],
    *,
    endpoint: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
    session_token: str | None = None,
    region: str | None = None,
    profile: str | None = None,
    home: str | os.PathLike[str] | None = None,
    read_file: FileReader = read_text_if_exists,
    settings: Mapping[str, object] | None = None,
    resolve_credentials: bool = True,
) -> ResolvedConfig:
    """Resolve every setting through the chain (see the module docstring).

    ``environ`` is the environment to read (``os.environ`` in real use); ``home`` the
    directory holding ``.aws`` (default ``HOME`` from ``environ``); ``read_file(path)``
    returns a file's text or None when it does not exist. Raises :class:`ConfigError`
    for half a key pair, a named profile that exists in neither file, a credential
    source configured wrongly, or a file that cannot be parsed. A setting found nowhere
    is None (the endpoint and the credentials too: the caller decides whether that is an
    error). ``resolve_credentials=False`` leaves the credentials alone (for unsigned
    requests, or credentials given otherwise).

    ``settings`` holds explicit values of ``max_attempts``, ``retry_mode``,
    ``request_checksum_calculation``, ``response_checksum_validation`` and
    ``ca_bundle``; those not
    given come from their ``AWS_*`` variables, then from the profile's config (read
    only if the home directory is known), each checked (:func:`check_setting`).
    """
    if (access_key is None) != (secret_key is None):
        raise ConfigError("give both the access key and the secret key, or neither")
    if session_token is not None and access_key is None:
        raise ConfigError("a session token needs an access key and a secret key")

    explicit_profile = named_profile(environ, profile)
    profile_name = explicit_profile or "default"
    sources: dict[str, str] = {}

    explicit_settings = {k: v for k, v in (settings or {}).items() if v is not None}
    unknown = set(explicit_settings) - set(_SETTINGS)
    if unknown:
        raise ConfigError(f"unknown settings {sorted(unknown)}")
    wanted = [
        name
        for name, variable in _SETTINGS.items()
        if name not in explicit_settings and not (variable and _nonempty(environ, variable))
    ]
    chain = resolve_credentials and access_key is None
    files_needed = endpoint is None or chain or region is None or explicit_profile is not None
    if not files_needed and wanted:
        # Only for these settings: a home directory that cannot be found is no error.
        with contextlib.suppress(ConfigError):
            home = _home(environ, home)
            files_needed = True
    files: SharedFiles | None = None
    config_section: Mapping[str, str] | None = None
    config_path = ""
    home_dir = ""
    if files_needed:
        home_dir = _home(environ, home)
        files = load_shared_files(environ, home=home_dir, read_file=read_file)
        config_path = files.config_path
        config_section = files.config_profiles.get(profile_name)
        if explicit_profile is not None and not files.has_profile(profile_name):
            raise ConfigError(
                f"profile {profile_name!r} is in neither {files.credentials_path} nor "
                f"{files.config_path}"
            )

    # -- credentials: one source for the pair and its token ---------------------------
    key: str | None = None
    secret: str | None = None
    token: str | None = None
    source: CredentialSource | None = None
    credentials_from: str | None = None
    if access_key is not None:
        key, secret, token = access_key, secret_key, session_token
        sources["credentials"] = "explicit"
    elif chain and files is not None:
        source = resolve_credential_source(environ, files, profile)
        if isinstance(source, EnvironmentKeys | ProfileKeys) and source.credentials.expiry is None:
            keys = source.credentials
            key, secret, token = keys.access_key, keys.secret_key, keys.session_token
            sources["credentials"] = (
                "environment"
                if isinstance(source, EnvironmentKeys)
                else "credentials file"
                if source.in_credentials_file
                else "config file"
            )
            credentials_from = source.describe()
            source = None
        elif source is not None:
            sources["credentials"] = source.describe()

    # -- endpoint ------------------------------------------------------------------------
    resolved_endpoint = endpoint
    if resolved_endpoint is not None:
        sources["endpoint"] = "explicit"
    elif (
        env_endpoint := _nonempty(environ, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
    ) is not None:
        resolved_endpoint = env_endpoint
        sources["endpoint"] = "environment"
    elif config_section is not None and files is not None:
        found = files.service_setting(profile_name, "s3", "endpoint_url") or config_section.get(
            "endpoint_url"
        )
        if found:
            resolved_endpoint = found
            sources["endpoint"] = "config file"

    # -- region --------------------------------------------------------------------------
    resolved_region = region
    if resolved_region is not None:
        sources["region"] = "explicit"
    elif (env_region := _nonempty(environ, "AWS_REGION", "AWS_DEFAULT_REGION")) is not None:
        resolved_region = env_region
        sources["region"] = "environment"
    elif config_section is not None and config_section.get("region"):
        resolved_region = config_section["region"]
        sources["region"] = "config file"

    # -- retries and checksum dialect -------------------------------------------------------
    chosen: dict[str, int | str] = {}
    for name, variable in _SETTINGS.items():
        if name in explicit_settings:
            chosen[name] = check_setting(name, explicit_settings[name], "the argument")
            sources[name] = "explicit"
        elif variable and (value := _nonempty(environ, variable)) is not None:
            chosen[name] = check_setting(name, value, variable)
            sources[name] = "environment"
        elif (in_profile := _profile_setting(config_section, name)) is not None:
            where = f"{name} of profile {profile_name!r} in {config_path}"
            chosen[name] = check_setting(name, in_profile, where)
            sources[name] = "config file"
            if name == "ca_bundle":  # ~ is the home the files were found in
                chosen[name] = _expand(str(chosen[name]), home_dir)
    attempts = chosen.get("max_attempts")
    words = {k: str(v) for k, v in chosen.items() if k != "max_attempts"}

    return ResolvedConfig(
        endpoint=resolved_endpoint,
        access_key=key,
        secret_key=secret,
        session_token=token,
        region=resolved_region,
        profile=profile_name,
        sources=sources,
        max_attempts=attempts if isinstance(attempts, int) else None,
        retry_mode=words.get("retry_mode"),
        request_checksum_calculation=words.get("request_checksum_calculation"),
        response_checksum_validation=words.get("response_checksum_validation"),
        ca_bundle=words.get("ca_bundle"),
        use_fips_endpoint=_boolean(words.get("use_fips_endpoint")),
        use_dualstack_endpoint=_boolean(words.get("use_dualstack_endpoint")),
        addressing_style=words.get("addressing_style"),
        credential_source=source,
        credentials_from=credentials_from,
    )


def _profile_setting(section: Mapping[str, str] | None, name: str) -> str | None:
    """Setting ``name`` of a profile's section: its own line, or its ``s3`` block's."""
    if section is None:
        return None
    if name not in _S3_BLOCK_ONLY and section.get(name):
        return section[name]
    if name in _S3_BLOCK_ONLY or name in _S3_BLOCK_TOO:
        return _nested(section.get("s3")).get(name) or None
    return None


def _boolean(word: str | None) -> bool | None:
    return None if word is None else word == "true"


def check_setting(name: str, value: object, where: str) -> int | str:
    """``value`` of setting ``name`` checked and normalised (``max_attempts`` a whole
    number >= 1, the others one of their words, lower-cased); ``where`` it came from is
    named in the error."""
    if name == "ca_bundle":
        # A path; whether it holds certificates is for the TLS handshake to say, and a
        # plain-http endpoint never reads it.
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"ca_bundle ({where}) must be the path of a CA bundle, got {value!r}")
        return value.strip()
    if name in _BOOLEANS:
        if isinstance(value, bool):
            return "true" if value else "false"
        word = value.strip().lower() if isinstance(value, str) else value
        if word not in ("true", "false"):
            raise ConfigError(f"{name} ({where}) must be true or false, got {value!r}")
        return str(word)
    if name == "max_attempts":
        text = str(value).strip()
        if isinstance(value, bool) or not text.isdigit() or int(text) < 1:
            raise ConfigError(f"max_attempts ({where}) must be a whole number >= 1, got {value!r}")
        return int(text)
    choices = {"retry_mode": tuple(RETRY_MODES), "addressing_style": ADDRESSING_STYLES}.get(
        name, CHECKSUM_WHEN
    )
    word = value.strip().lower() if isinstance(value, str) else value
    if word not in choices:
        raise ConfigError(f"{name} ({where}) must be one of {', '.join(choices)}; got {value!r}")
    return str(word)


def credentials_for(
    endpoint: str, access_key: str, environ: Mapping[str, str], *, home: str
) -> tuple[str, str | None]:
    """The secret key (and session token) for ``access_key`` in ``environ`` or the shared
    files: how a Client pickled without them (the default) gets them back."""
    cfg = resolve_config(environ, home=environ.get("HOME") or home)
    if cfg.access_key == access_key and cfg.secret_key:
        return cfg.secret_key, cfg.session_token
    shown = access_key[:4] + "..." if len(access_key) > 4 else "..."
    raise ConfigError(
        f"a Client for {endpoint} was pickled without its secret key (the default) and "
        f"this process has none for access key {shown}: set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (or an AWS profile) where it is unpickled, or create the "
        "Client with pickle_credentials=True"
    )


def checksum_setting(name: str, value: str | None) -> str | None:
    """A checksum setting given as an argument, checked (None: not given)."""
    return None if value is None else str(check_setting(name, value, "the argument"))


# The longest wait a socket takes: CPython keeps timeouts as int64 nanoseconds
# (socket.settimeout raises OverflowError from about 9.2e9 s).
MAX_TIMEOUT = 1e9


def check_timeout(timeout: tuple[float, float]) -> tuple[float, float]:
    """``(connect_seconds, read_seconds)``, both > 0 and at most :data:`MAX_TIMEOUT`, as
    floats; else InvalidArgument."""
    try:
        connect, read = timeout
        if 0 < connect <= MAX_TIMEOUT and 0 < read <= MAX_TIMEOUT:
            return (float(connect), float(read))
    except (TypeError, ValueError):
        pass
    raise InvalidArgument(
        "timeout must be (connect_seconds, read_seconds), both > 0 and at most "
        f"{MAX_TIMEOUT:g}; got {timeout!r}"
    )
