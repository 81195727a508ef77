"""``ClientConfig``: everything a ``Client`` is built from, as one frozen value.

A client is its configuration plus a connection pool. The configuration is checked once,
when the value is made (:class:`~objsdk.InvalidArgument` naming the argument), and never
changes; a pickled client is its configuration, and the pool is rebuilt on the other
side. :func:`resolve_client_config` is the one place a configuration is worked out from
arguments, the environment and the AWS shared files (the chain of
:mod:`objsdk._core.config`): ``Client.from_env``, the command line, the fsspec
filesystem and the benchmark suite all go through it.

The secret key and session token never appear in a repr or message. A pickle leaves them
out unless ``pickle_credentials=True``; unpickling then takes the secret for the same
access key from the process it lands in (its environment or AWS files), so reading the
process's environment there is the one impurity of this module.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import EllipsisType
from typing import Any

from ..errors import InvalidArgument
from .addressing import ADDRESSING_STYLES
from .config import (
    ConfigError,
    check_timeout,
    checksum_setting,
    credentials_for,
    resolve_config,
)
from .credential_sources import (
    CredentialSource,
    EnvironmentKeys,
    ProfileKeys,
    resolve_credential_source,
)
from .profiles import FileReader, load_shared_files, read_text_if_exists
from .regions import s3_location
from .signing import Credentials
from .sse import SSE

__all__ = [
    "DEFAULT_MAX_POOL_CONNECTIONS",
    "DEFAULT_REGION",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "ClientConfig",
    "check_ca_bundle",
    "no_credentials_error",
    "resolve_client_config",
    "tls_verify",
    "with_credentials",
]

DEFAULT_REGION = "us-east-1"
#: ``(connect_seconds, read_seconds)``.
DEFAULT_TIMEOUT = (10.0, 60.0)
DEFAULT_MAX_POOL_CONNECTIONS = 16
#: Retries after the first attempt, when neither an argument nor ``max_attempts`` /
#: ``retry_mode`` says otherwise.
DEFAULT_RETRIES = 5
# SigV4 puts the access key and the region in the credential scope of the Authorization
# header ("AKID/20240101/us-east-1/s3/aws4_request"): printable ASCII without spaces, and
# no "/" in a region. A region is any such name (MinIO's are configurable; R2's "auto").
_ACCESS_KEY_RE = re.compile(r"[\x21-\x7e]+")
_REGION_RE = re.compile(r"[\x21-\x2e\x30-\x7e]+")
# A secret ends with whitespace or holds a control character only by mistake (a file read
# with its newline); the server would answer SignatureDoesNotMatch, naming nothing.
_SECRET_RE = re.compile(r"[^\x00-\x20\x7f](?:[^\x00-\x1f\x7f]*[^\x00-\x20\x7f])?")


def tls_verify(verify: bool | str | None, environ: Mapping[str, str]) -> bool | str:
    """What checks TLS certificates: ``verify`` if given (True, False or a CA bundle
    path), else ``AWS_CA_BUNDLE`` or ``REQUESTS_CA_BUNDLE`` from ``environ``, else True
    (the system's CAs)."""
    if verify is not None:
        return verify
    return environ.get("AWS_CA_BUNDLE") or environ.get("REQUESTS_CA_BUNDLE") or True


def check_ca_bundle(verify: bool | str) -> None:
    """A CA bundle named for an https endpoint must be there: the handshake would fail
    on every request as a broken connection, retried, without naming the file."""
    if isinstance(verify, str) and not os.path.exists(verify):
        raise ConfigError(
            f"the CA bundle {verify!r} does not exist (given as verify=, AWS_CA_BUNDLE, "
            "REQUESTS_CA_BUNDLE or a profile's ca_bundle)"
        )


@dataclass(frozen=True)
class ClientConfig:
    """The settings of one client (see ``Client`` for each one's meaning).

    ``retries`` is a count, None (no retries) or a urllib3 ``Retry`` (the transport
    checks it: the core does not import urllib3). ``verify`` None means the CA bundle of
    the environment the client is built in (:func:`tls_verify`). The checksum settings
    are stored lower-cased, ``timeout`` as floats. ``endpoint`` and ``region`` not given
    (None) are worked out when the value is made and stored
    (:func:`~objsdk._core.regions.s3_location`): AWS S3's endpoint of the region, the
    region an AWS endpoint's host name says, else :data:`DEFAULT_REGION`.

    How requests are signed, one of: ``access_key`` and ``secret_key`` (and
    ``session_token``); ``credentials``, a :class:`Credentials` or a function that
    returns the ones to use (called again when they near their expiry);
    ``credential_source``, a source of the chain (``credential_sources``: a role, SSO,
    a ``credential_process``...); ``anonymous=True``, unsigned requests. With none of
    them, the client resolves the chain where it is built (:func:`with_credentials`),
    for ``profile`` if one is named.
    """

    endpoint: str | None = None
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    region: str | None = None
    timeout: tuple[float, float] = DEFAULT_TIMEOUT
    max_pool_connections: int = DEFAULT_MAX_POOL_CONNECTIONS
    retries: object = DEFAULT_RETRIES
    addressing_style: str = "auto"
    verify: bool | str | None = None
    pickle_credentials: bool = False
    request_checksum_calculation: str | None = None
    response_checksum_validation: str | None = None
    sse: SSE | None = None  # an SSEC pickles without its key
    use_fips_endpoint: bool = False
    use_dualstack_endpoint: bool = False
    credentials: Credentials | Callable[[], Credentials] | None = None
    anonymous: bool = False
    profile: str | None = None
    credential_source: CredentialSource | None = None
    #: Where ``access_key`` and ``secret_key`` came from when the chain found them (its
    #: source's description, named in errors); None when they were given.
    credentials_from: str | None = None

    def __post_init__(self) -> None:
        # A frozen value normalises its own fields once, here, as dataclasses allow.
        for name in ("request_checksum_calculation", "response_checksum_validation"):
            object.__setattr__(self, name, checksum_setting(name, getattr(self, name)))
        if self.addressing_style not in ADDRESSING_STYLES:
            raise InvalidArgument(
                "addressing_style must be 'auto', 'path' or 'virtual', got "
                f"{self.addressing_style!r}"
            )
        if self.region is not None and (
            not isinstance(self.region, str) or not _REGION_RE.fullmatch(self.region)
        ):
            raise InvalidArgument(
                "region must name a region such as 'us-east-1' (printable ASCII, no spaces "
                f"or '/'), got {self.region!r}"
            )
        for name in ("use_fips_endpoint", "use_dualstack_endpoint"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidArgument(f"{name} must be True or False, got {getattr(self, name)!r}")
        endpoint, region = s3_location(
            self.endpoint,
            self.region,
            default_region=DEFAULT_REGION,
            fips=self.use_fips_endpoint,
            dualstack=self.use_dualstack_endpoint,
        )
        object.__setattr__(self, "endpoint", endpoint)
        object.__setattr__(self, "region", region)
        if (self.access_key is None) != (self.secret_key is None):
            raise InvalidArgument("give both access_key and secret_key, or neither")
        _check_credentials(self.access_key, self.secret_key, self.session_token)
        self._check_signing()
        if self.max_pool_connections < 1:
            raise InvalidArgument("max_pool_connections must be at least 1")
        object.__setattr__(self, "timeout", check_timeout(self.timeout))

    def _check_signing(self) -> None:
        """At most one way of signing (see the class docstring), each well formed."""
        given = self.credentials
        if given is not None and not (isinstance(given, Credentials) or callable(given)):
            raise InvalidArgument(
                "credentials must be a Credentials or a function returning one, got "
                f"{type(given).__name__}"
            )
        if isinstance(given, Credentials):
            _check_credentials(given.access_key, given.secret_key, given.session_token)
        ways = [
            name
            for name, used in (
                ("access_key/secret_key", self.access_key is not None),
                ("credentials", given is not None),
                ("credential_source", self.credential_source is not None),
            )
            if used
        ]
        if self.anonymous and ways:
            raise InvalidArgument(
                f"anonymous=True sends unsigned requests: give it without {' or '.join(ways)}"
            )
        if len(ways) > 1:
            raise InvalidArgument(f"give one of {' and '.join(ways)}, not both")
        if self.profile is not None and (not isinstance(self.profile, str) or not self.profile):
            raise InvalidArgument(f"profile must be a profile name, got {self.profile!r}")

    @property
    def keys(self) -> Credentials | None:
        """The static key pair (and token) given as ``access_key``/``secret_key``
        (None: signed otherwise, or unsigned)."""
        if self.access_key is None or self.secret_key is None:
            return None
        return Credentials(self.access_key, self.secret_key, self.session_token)

    def signing(self) -> str:
        """How requests are signed, for messages: ``anonymous``, ``keys``,
        ``credentials`` or the source's description; ``chain`` when still to be
        resolved."""
        if self.anonymous:
            return "anonymous"
        if self.access_key is not None:
            return "keys"
        if self.credentials is not None:
            return "credentials"
        if self.credential_source is not None:
            return self.credential_source.describe()
        return "chain"

    def __repr__(self) -> str:
        shown = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("access_key", "secret_key", "session_token", "credential_source")
            and (
                f.name not in ("credentials", "anonymous", "profile", "credentials_from")
                or getattr(self, f.name)
            )
        }
        if self.credential_source is not None:
            shown["credential_source"] = self.credential_source.describe()
        key = self.access_key
        masked = None if key is None else (key[:4] + "..." if len(key) > 4 else "...")
        return (
            f"ClientConfig(endpoint={self.endpoint!r}, access_key={masked!r}, "
            f"secret_key={'<set>' if self.secret_key else None}, "
            f"session_token={'<set>' if self.session_token else None}, "
            + ", ".join(f"{k}={v!r}" for k, v in shown.items() if k != "endpoint")
            + ")"
        )

    __str__ = __repr__

    # -- pickling: the secret stays behind unless pickle_credentials=True ----------------

    def shared(self) -> dict[str, Any]:
        """The fields as a pickle carries them: without the secret key and session token
        unless ``pickle_credentials`` (a :class:`Credentials` given as ``credentials``
        leaves as its access key alone), with the ``credentials`` function (it must
        pickle: :class:`pickle.PicklingError` naming it if not) and the source (which
        pickles without any secret: each source's own pickling leaves them out).
        :meth:`restored` makes the value again."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        given = self.credentials
        if not self.pickle_credentials:
            fields["secret_key"] = fields["session_token"] = None
            if isinstance(given, Credentials):
                fields["credentials"] = None
                fields["access_key"] = given.access_key
        if given is not None and not isinstance(given, Credentials):
            _check_picklable(given)
        return fields

    @classmethod
    def restored(
        cls, fields: Mapping[str, Any], environ: Mapping[str, str] | None = None
    ) -> ClientConfig:
        """The configuration :meth:`shared` described. An access key without its secret
        takes the secret (and token) this process has for it in ``environ`` (default
        ``os.environ``) or its AWS files; :class:`ConfigError` says how to fix it if
        there is none."""
        values = dict(fields)
        if values["access_key"] is not None and values["secret_key"] is None:
            values["secret_key"], values["session_token"] = credentials_for(
                values["endpoint"] or "AWS S3",
                values["access_key"],
                os.environ if environ is None else environ,
                home=os.path.expanduser("~"),
            )
        return cls(**values)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self).restored, (self.shared(),))


def _check_picklable(function: Callable[[], Credentials]) -> None:
    """Refuse to pickle a client whose ``credentials`` function cannot be: the error
    names the function, where pickle's own would name only its type."""
    try:
        pickle.dumps(function)
    except Exception as e:
        name = getattr(function, "__qualname__", None) or repr(function)
        raise pickle.PicklingError(
            f"this client cannot be pickled: its credentials function {name!r} cannot be "
            f"({type(e).__name__}: {e}); pass a module-level function or a picklable "
            "object with __call__, or build the client again where it is used"
        ) from None


def no_credentials_error(profile: str | None) -> ConfigError:
    """The error for a client that the chain gives no credentials and that is not
    ``anonymous``."""
    named = f" (profile `{profile}`)" if profile else ""
    return ConfigError(
        f"no credentials{named}: the environment, the AWS shared files, the container "
        "endpoint and (AWS_EC2_METADATA_DISABLED is true) the instance metadata service "
        "give none. Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, configure a profile "
        "(see docs/credentials.md), pass credentials=, or anonymous=True for unsigned "
        "requests (public buckets)"
    )


def with_credentials(
    config: ClientConfig,
    environ: Mapping[str, str],
    *,
    home: str | os.PathLike[str] | None = None,
    read_file: FileReader = read_text_if_exists,
) -> ClientConfig:
    """``config`` itself if it says how to sign (keys, ``credentials``, a source,
    ``anonymous``); else with what the chain finds in ``environ`` and the shared files
    for its ``profile`` (:func:`~objsdk._core.credential_sources.resolve_credential_source`):
    keys that never expire as ``access_key``/``secret_key``, any other source as
    ``credential_source``. :class:`ConfigError` if it finds nothing, or for a profile
    that cannot give credentials. ``home`` defaults to ``HOME``, else this user's (an
    environment without ``HOME``, a test's, still finds the user's ``~/.aws``)."""
    if config.signing() != "chain":
        return config
    home = home if home is not None else environ.get("HOME") or os.path.expanduser("~")
    files = load_shared_files(environ, home=home, read_file=read_file)
    source = resolve_credential_source(environ, files, config.profile)
    if source is None:
        raise no_credentials_error(config.profile)
    if isinstance(source, EnvironmentKeys | ProfileKeys) and source.credentials.expiry is None:
        keys = source.credentials
        return dataclasses.replace(
            config,
            access_key=keys.access_key,
            secret_key=keys.secret_key,
            session_token=keys.session_token,
            credentials_from=source.describe(),
        )
    return dataclasses.replace(config, credential_source=source)


def resolve_client_config(
    environ: Mapping[str, str],
    *,
    endpoint: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
    session_token: str | None = None,
    region: str | None = None,
    profile: str | None = None,
    timeout: tuple[float, float] = DEFAULT_TIMEOUT,
    max_pool_connections: int = DEFAULT_MAX_POOL_CONNECTIONS,
    retries: object = ...,
    addressing_style: str | None = None,
    verify: bool | str | None = None,
    pickle_credentials: bool = False,
    request_checksum_calculation: str | None = None,
    response_checksum_validation: str | None = None,
    sse: SSE | None = None,
    use_fips_endpoint: bool | None = None,
    use_dualstack_endpoint: bool | None = None,
    credentials: Credentials | Callable[[], Credentials] | None = None,
    anonymous: bool = False,
    home: str | os.PathLike[str] | None = None,
    read_file: FileReader = read_text_if_exists,
) -> ClientConfig:
    """The configuration the arguments, ``environ`` and the AWS files give (arguments
    first; see :func:`~objsdk._core.config.resolve_config` for the chain, ``home`` and
    ``read_file``). ``credentials`` (see :class:`ClientConfig`) or ``anonymous``
    given: the credential chain is not asked. Not given: the endpoint is AWS S3's in
    the region, FIPS or dual-stack if ``AWS_USE_FIPS_ENDPOINT`` /
    ``AWS_USE_DUALSTACK_ENDPOINT`` (or the profile's ``use_fips_endpoint`` /
    ``use_dualstack_endpoint``) say ``true``; the region is the one an AWS endpoint's
    host name says, else ``us-east-1``; ``addressing_style`` is the profile's (``s3 =``
    block), else ``auto``; ``retries`` (``...``) is ``max_attempts`` - 1, else
    ``retry_mode``'s attempts - 1, else 5; ``verify`` is ``AWS_CA_BUNDLE``, else the
    profile's ``ca_bundle``, else :func:`tls_verify` of ``environ``."""
    found = resolve_config(
        environ,
        endpoint=endpoint,
        access_key=access_key,
        secret_key=secret_key,
        session_token=session_token,
        region=region,
        profile=profile,
        home=home,
        read_file=read_file,
        resolve_credentials=credentials is None and not anonymous,
        settings={
            "request_checksum_calculation": request_checksum_calculation,
            "response_checksum_validation": response_checksum_validation,
            "addressing_style": addressing_style,
            "use_fips_endpoint": use_fips_endpoint,
            "use_dualstack_endpoint": use_dualstack_endpoint,
        },
    )
    chain = credentials is None and not anonymous
    if chain and found.access_key is None and found.credential_source is None:
        # Never left for the client to resolve again, in another environment.
        raise no_credentials_error(profile)
    if isinstance(retries, EllipsisType):
        from_settings = found.retries()
        retries = DEFAULT_RETRIES if from_settings is None else from_settings
    return ClientConfig(
        found.endpoint,
        found.access_key,
        found.secret_key,
        found.session_token,
        region=found.region,
        timeout=timeout,
        max_pool_connections=max_pool_connections,
        retries=retries,
        addressing_style=found.addressing_style or "auto",
        # The argument, else AWS_CA_BUNDLE or the profile's ca_bundle, else the rest.
        verify=tls_verify(verify if verify is not None else found.ca_bundle, environ),
        pickle_credentials=pickle_credentials,
        request_checksum_calculation=found.request_checksum_calculation,
        response_checksum_validation=found.response_checksum_validation,
        sse=sse,
        use_fips_endpoint=bool(found.use_fips_endpoint),
        use_dualstack_endpoint=bool(found.use_dualstack_endpoint),
        credentials=credentials,
        anonymous=anonymous,
        profile=profile,
        credential_source=found.credential_source,
        credentials_from=found.credentials_from,
    )


def _check_credentials(access_key: object, secret_key: object, session_token: object) -> None:
    """Refuse keys no server can accept, without ever showing the secret or the token."""
    if access_key is None:
        return
    if not isinstance(access_key, str) or not isinstance(secret_key, str):
        raise InvalidArgument(
            f"access_key and secret_key must be str, got {type(access_key).__name__} "
            f"and {type(secret_key).__name__}"
        )
    if not _ACCESS_KEY_RE.fullmatch(access_key):
        raise InvalidArgument(
            "access_key must be printable ASCII without spaces: it holds whitespace, a "
            "control character or non-ASCII (a newline read from a file?), or is empty"
        )
    if not _SECRET_RE.fullmatch(secret_key):
        raise InvalidArgument(
            "secret_key is empty, starts or ends with whitespace, or holds a control "
            "character (a newline read from a file?)"
        )
    if session_token is not None and (
        not isinstance(session_token, str) or not _SECRET_RE.fullmatch(session_token)
    ):
        raise InvalidArgument(
            "session_token must be a str without control characters or surrounding whitespace"
        )
