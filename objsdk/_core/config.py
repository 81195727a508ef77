"""Where a client's settings come from: flags, then the environment, then the AWS files.

The chain is the one boto3 and the aws CLI follow, so an existing setup just works:

1. explicit values (command-line flags, keyword arguments);
2. the environment: ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``
   with ``AWS_SECRET_ACCESS_KEY`` (and ``AWS_SESSION_TOKEN``), ``AWS_REGION`` /
   ``AWS_DEFAULT_REGION``; the keys are skipped when a profile is named explicitly
   (``--profile``, ``profile=``; not ``AWS_PROFILE``), as botocore's credential chain
   does: that profile's keys are used, or none;
3. the shared files of the selected profile (``--profile``, else ``AWS_PROFILE``, else
   ``default``): credentials from ``~/.aws/credentials`` (``[name]`` sections), then from
   ``~/.aws/config`` (``[profile name]`` sections, ``[default]``), which also gives
   ``region`` and ``endpoint_url`` (directly in the profile, or in the ``s3`` block of the
   profile's ``services`` section). ``AWS_SHARED_CREDENTIALS_FILE`` and
   ``AWS_CONFIG_FILE`` move the files.

An access key and its secret always come together from one place: a key found in the
environment is never paired with a secret from a file. The session token comes from the
same place as the key.

Pure: the environment, the home directory and the way files are read are arguments, so
the whole chain is tested without touching the machine. Nothing here speaks HTTP.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..errors import InvalidArgument

__all__ = [
    "ConfigError",
    "ResolvedConfig",
    "credentials_for",
    "read_text_if_exists",
    "resolve_config",
]

FileReader = Callable[[str], "str | None"]


class ConfigError(InvalidArgument):
    """The configuration is incomplete or contradictory (a missing profile, half a key
    pair, an unreadable config file). Messages name the setting and where it was read,
    never a secret."""


def _mask(value: str | None) -> str | None:
    if value is None:
        return None
    return "****" + value[-4:] if len(value) > 8 else "****"


@dataclass(frozen=True)
class ResolvedConfig:
    """The settings a client is built from, and where each one was found.

    ``sources`` maps ``endpoint``, ``credentials`` and ``region`` to ``"explicit"``,
    ``"environment"``, ``"credentials file"`` or ``"config file"``. The repr shows the
    access key masked and never the secret key or session token.
    """

    endpoint: str | None = None
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    region: str | None = None
    profile: str = "default"
    sources: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (
            f"ResolvedConfig(endpoint={self.endpoint!r}, access_key={_mask(self.access_key)!r}, "
            f"secret_key={'<set>' if self.secret_key else None}, "
            f"session_token={'<set>' if self.session_token else None}, "
            f"region={self.region!r}, profile={self.profile!r}, sources={dict(self.sources)!r})"
        )

    __str__ = __repr__

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("ResolvedConfig holds credentials and is not pickled")

    def client_kwargs(self) -> dict[str, object]:
        """Keyword arguments for ``Client(endpoint, **kwargs)`` (region only when known)."""
        kwargs: dict[str, object] = {
            "access_key": self.access_key,
            "secret_key": self.secret_key,
            "session_token": self.session_token,
        }
        if self.region:
            kwargs["region"] = self.region
        return kwargs


def read_text_if_exists(path: str) -> str | None:
    """The file's text, or None if there is no such file (the default file reader)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _home(environ: Mapping[str, str], home: str | os.PathLike[str] | None) -> str:
    if home is not None:
        return os.fspath(home)
    for name in ("HOME", "USERPROFILE"):
        if environ.get(name):
            return environ[name]
    raise ConfigError(
        "cannot find the home directory for ~/.aws (HOME is not set); "
        "set AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE"
    )


def _expand(path: str, home: str) -> str:
    if path == "~" or path.startswith(("~/", "~" + os.sep)):
        return os.path.join(home, path[2:])
    return path


def _parse(text: str | None, path: str) -> configparser.ConfigParser | None:
    if text is None:
        return None
    parser = configparser.ConfigParser(interpolation=None, default_section="\x00no-default")
    try:
        parser.read_string(text, source=path)
    except configparser.Error as e:
        # configparser messages quote the offending line, which may hold a secret.
        lineno = getattr(e, "lineno", None)
        where = f" line {lineno}" if lineno else ""
        raise ConfigError(f"cannot parse {path}{where}: {type(e).__name__}") from None
    return parser


def _section(
    parser: configparser.ConfigParser | None, names: tuple[str, ...]
) -> Mapping[str, str] | None:
    if parser is None:
        return None
    for name in names:
        if parser.has_section(name):
            return dict(parser.items(name))
    return None


def _nested(value: str | None) -> dict[str, str]:
    """The ``key = value`` lines of an indented sub-block (``s3 =\\n  endpoint_url = ...``)."""
    out: dict[str, str] = {}
    for line in (value or "").splitlines():
        name, sep, val = line.partition("=")
        if sep:
            out[name.strip().lower()] = val.strip()
    return out


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
) -> ResolvedConfig:
    """Resolve every setting through the chain (see the module docstring).

    ``environ`` is the environment to read (``os.environ`` in real use); ``home`` the
    directory holding ``.aws`` (default ``HOME`` from ``environ``); ``read_file(path)``
    returns a file's text or None when it does not exist. Raises :class:`ConfigError`
    for half a key pair, a named profile that exists in neither file, or a file that
    cannot be parsed. A setting found nowhere is None (the endpoint too: the caller
    decides whether that is an error).
    """
    if (access_key is None) != (secret_key is None):
        raise ConfigError("give both the access key and the secret key, or neither")
    if session_token is not None and access_key is None:
        raise ConfigError("a session token needs an access key and a secret key")

    explicit_profile = profile or _nonempty(environ, "AWS_PROFILE", "AWS_DEFAULT_PROFILE")
    profile_name = explicit_profile or "default"
    sources: dict[str, str] = {}

    files_needed = (
        endpoint is None or access_key is None or region is None or explicit_profile is not None
    )
    creds_section: Mapping[str, str] | None = None
    config_section: Mapping[str, str] | None = None
    config_parser: configparser.ConfigParser | None = None
    creds_path = config_path = ""
    if files_needed:
        home_dir = _home(environ, home)
        creds_path = _expand(
            environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials", home_dir
        )
        config_path = _expand(environ.get("AWS_CONFIG_FILE") or "~/.aws/config", home_dir)
        creds_section = _section(_parse(read_file(creds_path), creds_path), (profile_name,))
        config_parser = _parse(read_file(config_path), config_path)
        config_names = (
            ("default", "profile default")
            if profile_name == "default"
            else (f"profile {profile_name}",)
        )
        config_section = _section(config_parser, config_names)
        if explicit_profile is not None and creds_section is None and config_section is None:
            raise ConfigError(
                f"profile {profile_name!r} is in neither {creds_path} nor {config_path}"
            )

    # -- credentials: one source for the pair and its token ---------------------------
    key: str | None
    secret: str | None
    token: str | None
    if access_key is not None:
        key, secret, token = access_key, secret_key, session_token
        sources["credentials"] = "explicit"
    elif profile is None and (env_key := _nonempty(environ, "AWS_ACCESS_KEY_ID")) is not None:
        # A profile named explicitly (an argument, --profile) skips the environment's
        # keys, as in botocore; AWS_PROFILE does not.
        env_secret = _nonempty(environ, "AWS_SECRET_ACCESS_KEY")
        if env_secret is None:
            raise ConfigError("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
        key, secret = env_key, env_secret
        token = _nonempty(environ, "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
        sources["credentials"] = "environment"
    else:
        key = secret = token = None
        for section, path, label in (
            (creds_section, creds_path, "credentials file"),
            (config_section, config_path, "config file"),
        ):
            if section is None or not section.get("aws_access_key_id"):
                continue
            if not section.get("aws_secret_access_key"):
                raise ConfigError(
                    f"profile {profile_name!r} in {path} has aws_access_key_id "
                    "but no aws_secret_access_key"
                )
            key = section["aws_access_key_id"]
            secret = section["aws_secret_access_key"]
            token = section.get("aws_session_token") or section.get("aws_security_token")
            sources["credentials"] = label
            break

    # -- endpoint ------------------------------------------------------------------------
    resolved_endpoint = endpoint
    if resolved_endpoint is not None:
        sources["endpoint"] = "explicit"
    elif (
        env_endpoint := _nonempty(environ, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
    ) is not None:
        resolved_endpoint = env_endpoint
        sources["endpoint"] = "environment"
    elif config_section is not None:
        services = config_section.get("services")
        s3_block: dict[str, str] = {}
        if services and config_parser is not None:
            svc = _section(config_parser, (f"services {services}",))
            s3_block = _nested((svc or {}).get("s3"))
        found = s3_block.get("endpoint_url") or config_section.get("endpoint_url")
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

    return ResolvedConfig(
        endpoint=resolved_endpoint,
        access_key=key,
        secret_key=secret,
        session_token=token,
        region=resolved_region,
        profile=profile_name,
        sources=sources,
    )


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
