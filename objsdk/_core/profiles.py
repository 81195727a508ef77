"""The AWS shared files (``~/.aws/config`` and ``~/.aws/credentials``) as one parsed value.

The files are read with :mod:`configparser` (without interpolation; a parse error never
quotes the line, which may hold a secret) and laid out the way botocore's
``Session.full_config`` lays them out:

* ``[default]`` and ``[profile NAME]`` sections of the config file are profiles (a name
  may be quoted: ``[profile "my name"]``); ``[sso-session NAME]`` and ``[services NAME]``
  sections are SSO sessions and endpoint overrides;
* every section of the credentials file is a profile of that name;
* a profile's *settings* are its config section with its credentials section laid over
  it (the credentials file wins key by key), so ``role_arn``, ``credential_process``...
  may be written in either file; static keys are still told apart by the file they are
  in (botocore's ``shared-credentials-file`` and ``config-file`` sources).

Values that hold an indented block (``s3 =\\n  endpoint_url = ...``) stay text here;
:meth:`SharedFiles.service_setting` reads one. Pure: the environment, the home directory
and the file reader are arguments. The repr shows the paths and profile names, never a
value (the files hold secret keys).
"""

from __future__ import annotations

import configparser
import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..errors import ConfigError

__all__ = [
    "FileReader",
    "SharedFiles",
    "load_shared_files",
    "named_profile",
    "parse_shared_files",
    "profile_name",
    "read_text_if_exists",
]

FileReader = Callable[[str], "str | None"]


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


def _nested(value: str | None) -> dict[str, str]:
    """The ``key = value`` lines of an indented sub-block (``s3 =\\n  endpoint_url = ...``)."""
    out: dict[str, str] = {}
    for line in (value or "").splitlines():
        name, sep, val = line.partition("=")
        if sep:
            out[name.strip().lower()] = val.strip()
    return out


Sections = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class SharedFiles:
    """The two shared files, parsed (see the module docstring). ``home`` is the
    directory ``~`` stood for (the SSO token cache lives under it); None when unknown."""

    config_path: str = "~/.aws/config"
    credentials_path: str = "~/.aws/credentials"
    config_profiles: Sections = field(default_factory=dict)
    credentials_profiles: Sections = field(default_factory=dict)
    sso_sessions: Sections = field(default_factory=dict)
    services: Sections = field(default_factory=dict)
    home: str | None = None

    def __repr__(self) -> str:
        return (
            f"SharedFiles(config_path={self.config_path!r}, "
            f"credentials_path={self.credentials_path!r}, "
            f"config_profiles={sorted(self.config_profiles)!r}, "
            f"credentials_profiles={sorted(self.credentials_profiles)!r}, "
            f"sso_sessions={sorted(self.sso_sessions)!r}, services={sorted(self.services)!r}, "
            f"home={self.home!r})"
        )

    __str__ = __repr__

    def has_profile(self, name: str) -> bool:
        """Whether either file has profile ``name``."""
        return name in self.config_profiles or name in self.credentials_profiles

    def settings(self, name: str) -> Mapping[str, str]:
        """Profile ``name``'s settings: its config section with its credentials section
        laid over it (empty if neither file has it)."""
        merged = dict(self.config_profiles.get(name, {}))
        merged.update(self.credentials_profiles.get(name, {}))
        return merged

    def where(self, name: str) -> str:
        """The file(s) profile ``name`` is in, for messages."""
        paths = [
            path
            for path, profiles in (
                (self.config_path, self.config_profiles),
                (self.credentials_path, self.credentials_profiles),
            )
            if name in profiles
        ]
        return " and ".join(paths) or f"neither {self.config_path} nor {self.credentials_path}"

    def service_setting(self, profile: str, service: str, key: str) -> str | None:
        """``key`` of ``service``'s block in the ``[services NAME]`` section profile
        ``profile`` names with ``services = NAME`` (None if any of those is missing)."""
        section = self.settings(profile).get("services")
        block = self.services.get(section or "", {}).get(service.lower())
        return _nested(block).get(key.lower()) or None


def named_profile(environ: Mapping[str, str], profile: str | None) -> str | None:
    """The profile named: ``profile`` if given, else ``AWS_DEFAULT_PROFILE``, else
    ``AWS_PROFILE`` (botocore's order); None if none is."""
    return profile or environ.get("AWS_DEFAULT_PROFILE") or environ.get("AWS_PROFILE") or None


def profile_name(environ: Mapping[str, str], profile: str | None) -> str:
    """The profile in effect: the one named (:func:`named_profile`), else ``default``."""
    return named_profile(environ, profile) or "default"


def parse_shared_files(
    config_text: str | None,
    credentials_text: str | None,
    *,
    config_path: str = "~/.aws/config",
    credentials_path: str = "~/.aws/credentials",
    home: str | None = None,
) -> SharedFiles:
    """The files' texts (None: no such file) parsed; :class:`ConfigError` naming the
    file and line if one is not an INI file (never quoting the line: it may hold a
    secret)."""
    config = _parse(config_text, config_path)
    credentials = _parse(credentials_text, credentials_path)
    profiles: dict[str, dict[str, str]] = {}
    sso_sessions: dict[str, dict[str, str]] = {}
    services: dict[str, dict[str, str]] = {}
    if config is not None:
        for section in config.sections():
            values = dict(config.items(section))
            if section == "default":
                profiles["default"] = values
                continue
            kind, name = _section_name(section)
            target = {"profile": profiles, "sso-session": sso_sessions, "services": services}
            if kind in target and name is not None:
                target[kind][name] = values
    creds: dict[str, dict[str, str]] = {}
    if credentials is not None:
        creds = {section: dict(credentials.items(section)) for section in credentials.sections()}
    return SharedFiles(
        config_path=config_path,
        credentials_path=credentials_path,
        config_profiles=profiles,
        credentials_profiles=creds,
        sso_sessions=sso_sessions,
        services=services,
        home=home,
    )


def load_shared_files(
    environ: Mapping[str, str],
    *,
    home: str | os.PathLike[str] | None = None,
    read_file: FileReader = read_text_if_exists,
) -> SharedFiles:
    """The shared files ``environ`` points at (``AWS_CONFIG_FILE``,
    ``AWS_SHARED_CREDENTIALS_FILE``, else under ``home``, default ``HOME``), read with
    ``read_file`` (a path → its text, or None when there is no such file) and parsed."""
    home_dir = _home(environ, home)
    config_path = _expand(environ.get("AWS_CONFIG_FILE") or "~/.aws/config", home_dir)
    credentials_path = _expand(
        environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials", home_dir
    )
    return parse_shared_files(
        read_file(config_path),
        read_file(credentials_path),
        config_path=config_path,
        credentials_path=credentials_path,
        home=home_dir,
    )


def _section_name(section: str) -> tuple[str, str | None]:
    """``profile "my name"`` → ("profile", "my name"): botocore splits a section name as
    a shell would and takes exactly two words."""
    try:
        words = shlex.split(section)
    except ValueError:
        return section, None
    if len(words) != 2:
        return section, None
    return words[0], words[1]
