"""Storage options and ``open()`` arguments, s3fs's included: each one is honoured or
refused with a TypeError/ValueError naming it, never silently ignored.

An s3fs user switches to ``objsdk://`` by changing the URL scheme only, so s3fs's
options are understood under s3fs's names (``S3FileSystem.__init__`` and ``_open``);
the few that have no meaning here are refused unless given their s3fs default, which
describes what objsdk does anyway. docs/fsspec.md has the table, option by option.
"""

from __future__ import annotations

import base64
import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from objsdk import errors
from objsdk._core.addressing import ADDRESSING_STYLES
from objsdk._core.client_config import ClientConfig, resolve_client_config
from objsdk._core.config import credentials_for
from objsdk._core.sizes import DEFAULT_PART_SIZE
from objsdk._core.sse import SSE, SSEC, SSEKMS, SSES3

__all__ = [
    "CACHE_TYPES",
    "OPEN_READ_OPTIONS",
    "OPEN_WRITE_OPTIONS",
    "Settings",
    "client_config",
    "parse_storage_options",
    "write_options",
]

# s3fs's default cache is read-ahead; objsdk's ObjectFile reads ahead itself, and "none"
# is one stream with nothing kept. fsspec's other caches chain as blockcache::objsdk://.
CACHE_TYPES = ("readahead", "none")

# s3_additional_kwargs / open() keywords (boto3's names) for what a write stores.
_WRITE_PARAMS = {
    "ContentType": "content_type",
    "CacheControl": "cache_control",
    "ContentEncoding": "content_encoding",
    "ContentDisposition": "content_disposition",
    "StorageClass": "storage_class",
    "Metadata": "metadata",
    "ACL": "acl",
}
_SSE_PARAMS = (
    "ServerSideEncryption",
    "SSEKMSKeyId",
    "SSEKMSEncryptionContext",
    "SSECustomerAlgorithm",
    "SSECustomerKey",
    "SSECustomerKeyMD5",
)
# objsdk's own names for the same, accepted by open() in write modes.
OPEN_WRITE_OPTIONS = frozenset({*_WRITE_PARAMS.values(), "parallel", "part_size"})
OPEN_READ_OPTIONS = frozenset({"readahead", "part_size"})

# Every storage option understood, for an unknown one to be compared with: the
# filesystem's own keyword arguments (spec.py), then s3fs's and fsspec's, handled here.
OWN_OPTIONS = (
    "endpoint_url",
    "key",
    "secret",
    "token",
    "region",
    "profile",
    "client_kwargs",
    "readahead",
    "parallel",
    "part_size",
    "anon",
    "pickle_credentials",
)
_S3FS_OPTIONS = (
    "username",
    "password",
    "use_ssl",
    "requester_pays",
    "default_block_size",
    "default_fill_cache",
    "default_cache_type",
    "version_aware",
    "config_kwargs",
    "s3_additional_kwargs",
    "session",
    "cache_regions",
    "asynchronous",
    "loop",
    "max_concurrency",
    "fixed_upload_size",
    "local_expiry_check",
    "use_listings_cache",
    "listings_expiry_time",
    "max_paths",
    "skip_instance_cache",
)
# What other clients call an option (boto3's, objsdk.Client's), where the spelling alone
# would not suggest it.
_CALLED_ELSEWHERE = {
    "access_key": "key",
    "aws_access_key_id": "key",
    "secret_key": "secret",
    "aws_secret_access_key": "secret",
    "session_token": "token",
    "aws_session_token": "token",
    "endpoint": "endpoint_url",
    "region_name": "region",
    "profile_name": "profile",
}

# config_kwargs (botocore.config.Config) keys and the Client argument they become.
_CONFIG_KEYS = (
    "max_pool_connections",
    "connect_timeout",
    "read_timeout",
    "retries",
    "s3",
    "region_name",
    "signature_version",
    "use_fips_endpoint",
    "use_dualstack_endpoint",
)


def _refuse_unless(name: str, value: Any, allowed: Any, why: str) -> None:
    if value != allowed:
        raise ValueError(f"{name}={value!r} is not supported by ObjsdkFileSystem: {why}")


@dataclass
class Settings:
    """What the storage options decide, beyond the Client's own arguments."""

    key: str | None = None
    secret: str | None = None
    token: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    anon: bool = False
    client_kwargs: dict[str, Any] = field(default_factory=dict)
    sse: SSE | None = None
    write: dict[str, Any] = field(default_factory=dict)  # what every write stores
    block_size: int | None = None
    cache_type: str = "readahead"
    version_aware: bool = False
    parallel: int | None = None
    fixed_upload_size: bool = False


def parse_storage_options(
    *,
    key: str | None,
    secret: str | None,
    token: str | None,
    endpoint_url: str | None,
    region: str | None,
    anon: bool,
    client_kwargs: Mapping[str, Any] | None,
    parallel: int | None,
    s3fs: dict[str, Any],
) -> Settings:
    """Settings from the storage options; ``s3fs`` holds s3fs's own (and fsspec's) by
    name. Raises TypeError for an unknown option, ValueError for one refused."""
    out = Settings(anon=bool(anon), parallel=parallel)
    username, password = s3fs.pop("username", None), s3fs.pop("password", None)
    if username is not None and key is not None:
        raise ValueError("give key or username, not both")
    if password is not None and secret is not None:
        raise ValueError("give secret or password, not both")
    key, secret = key if username is None else username, secret if password is None else password

    # client_kwargs: boto3's spellings, then objsdk.Client's own arguments.
    extra = dict(client_kwargs or {})
    endpoint_url = endpoint_url or extra.pop("endpoint_url", None)
    region = region or extra.pop("region_name", None)
    key = key or extra.pop("aws_access_key_id", None)
    secret = secret or extra.pop("aws_secret_access_key", None)
    token = token or extra.pop("aws_session_token", None)
    if "use_ssl" in extra:  # s3fs: client_kwargs' use_ssl wins over the option
        s3fs["use_ssl"] = extra.pop("use_ssl")
    out.client_kwargs = extra

    use_ssl = s3fs.pop("use_ssl", True)
    if use_ssl is False and endpoint_url and endpoint_url.startswith("https://"):
        raise ValueError(
            f"use_ssl=False contradicts the https endpoint_url {endpoint_url!r}: give an "
            "http:// endpoint_url for plain HTTP"
        )
    _refuse_unless(
        "requester_pays",
        s3fs.pop("requester_pays", False),
        False,
        "MinIO has no requester-pays buckets and objsdk sends no x-amz-request-payer",
    )
    block = s3fs.pop("default_block_size", None)
    if block is not None:
        if isinstance(block, bool) or not isinstance(block, int) or block < 1:
            raise ValueError(f"default_block_size must be a positive int, got {block!r}")
        out.block_size = block
    _refuse_unless(
        "default_fill_cache",
        s3fs.pop("default_fill_cache", True),
        True,
        "objsdk files keep no cache of bytes already read",
    )
    out.cache_type = check_cache_type(
        "default_cache_type", s3fs.pop("default_cache_type", "readahead")
    )
    out.version_aware = bool(s3fs.pop("version_aware", False))
    _config(out, dict(s3fs.pop("config_kwargs", None) or {}))
    _additional(out, dict(s3fs.pop("s3_additional_kwargs", None) or {}))
    _refuse_unless(
        "session",
        s3fs.pop("session", None),
        None,
        "objsdk has no botocore session; give key/secret or a profile",
    )
    # objsdk always learns a bucket's region from the first answer that names it and
    # remembers it (s3fs does with cache_regions=True): both values describe that.
    s3fs.pop("cache_regions", None)
    _refuse_unless(
        "asynchronous",
        s3fs.pop("asynchronous", False),
        False,
        "ObjsdkFileSystem is synchronous (its transfers run their own threads)",
    )
    _refuse_unless("loop", s3fs.pop("loop", None), None, "ObjsdkFileSystem runs no event loop")
    concurrency = s3fs.pop("max_concurrency", None)
    if concurrency is not None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {concurrency!r}")
        out.parallel = out.parallel or concurrency
    out.fixed_upload_size = bool(s3fs.pop("fixed_upload_size", False))
    _refuse_unless(
        "local_expiry_check",
        s3fs.pop("local_expiry_check", False),
        False,
        "objsdk pins every read with If-Match, which the server checks",
    )
    _refuse_unless(
        "use_listings_cache",
        s3fs.pop("use_listings_cache", False),
        False,
        "objsdk never caches listings: every listing asks the server",
    )
    for name in ("listings_expiry_time", "max_paths"):
        _refuse_unless(name, s3fs.pop(name, None), None, "objsdk never caches listings")
    if s3fs:
        raise TypeError(
            "ObjsdkFileSystem got unknown storage options: "
            + ", ".join(_with_suggestion(name) for name in sorted(s3fs))
        )
    out.key, out.secret, out.token = key, secret, token
    out.endpoint_url, out.region = endpoint_url, region
    return out


def _with_suggestion(name: str) -> str:
    """``name``, followed by the known option it is closest to, if any is close."""
    meant = _CALLED_ELSEWHERE.get(name) or next(
        iter(difflib.get_close_matches(name, (*OWN_OPTIONS, *_S3FS_OPTIONS), n=1)), None
    )
    return f"{name} (did you mean {meant}?)" if meant else name


def client_config(
    settings: Settings, *, profile: str | None, pickle_credentials: bool
) -> ClientConfig:
    """The client's configuration: the storage options (``client_kwargs``, objsdk.Client's
    own arguments, last and winning), then the usual chain (environment, AWS files, and
    every credential source of ``profile``). A key without its secret (a filesystem
    unpickled without it, the default) takes this process's secret for that key;
    ``anon`` sends unsigned requests (``Client(anonymous=True)``)."""
    key, secret, token = settings.key, settings.secret, settings.token
    if settings.anon:
        key = secret = token = None
    elif key is not None and secret is None:
        secret, token = _secret_for(settings.endpoint_url, key)
    elif secret is not None and key is None:
        # A secret is half of a key pair; the other half is never taken from elsewhere.
        raise errors.ConfigError(
            "ObjsdkFileSystem: secret= given without key=: pass key= too (the access key "
            "the secret belongs to), or neither and set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, or use profile= (a profile in ~/.aws)"
        )
    options: dict[str, Any] = {
        "access_key": key,
        "secret_key": secret,
        "session_token": token,
        "region": settings.region,
        **settings.client_kwargs,
    }
    if settings.anon:  # unsigned requests, for public buckets, whatever client_kwargs say
        options.update(access_key=None, secret_key=None, session_token=None, credentials=None)
        options["anonymous"] = True
    return resolve_client_config(
        os.environ,
        endpoint=settings.endpoint_url,
        profile=profile,
        pickle_credentials=pickle_credentials,
        sse=settings.sse,
        **options,
    )


def _secret_for(endpoint_url: str | None, key: str) -> tuple[str, str | None]:
    """The secret (and token) this process has for access key ``key``."""
    try:
        return credentials_for(
            endpoint_url or "the endpoint", key, os.environ, home=os.path.expanduser("~")
        )
    except errors.InvalidArgument:
        shown = key[:4] + "..." if len(key) > 4 else "..."
        raise errors.InvalidArgument(
            f"the storage options name access key {shown} without its secret (an "
            "ObjsdkFileSystem is pickled without it unless made with pickle_credentials=True) "
            "and this process has none for that key: pass secret=..., or set "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or an AWS profile)"
        ) from None


def check_cache_type(name: str, value: Any) -> str:
    if value not in CACHE_TYPES:
        raise ValueError(
            f"{name}={value!r} is not supported by ObjsdkFileSystem: its files are "
            f"{' or '.join(map(repr, CACHE_TYPES))} (read-ahead, or one stream); chain "
            "fsspec's caches in the URL instead (blockcache::objsdk://..., simplecache::...)"
        )
    return str(value)


def _config(out: Settings, config: dict[str, Any]) -> None:
    """botocore ``Config`` keywords (s3fs's ``config_kwargs``) as Client arguments."""
    for name in config:
        if name not in _CONFIG_KEYS:
            raise ValueError(
                f"config_kwargs[{name!r}] is not supported by ObjsdkFileSystem (understood: "
                f"{', '.join(_CONFIG_KEYS)})"
            )
    ck = out.client_kwargs
    if "max_pool_connections" in config:
        ck["max_pool_connections"] = config["max_pool_connections"]
    if "connect_timeout" in config or "read_timeout" in config:
        connect, read = ck.get("timeout", (10.0, 60.0))
        ck["timeout"] = (config.get("connect_timeout", connect), config.get("read_timeout", read))
    if "retries" in config:
        retries = dict(config["retries"] or {})
        unknown = set(retries) - {"max_attempts", "total_max_attempts", "mode"}
        if unknown:
            raise ValueError(f"config_kwargs['retries'] keys {sorted(unknown)} are not supported")
        attempts = retries.get("total_max_attempts", retries.get("max_attempts"))
        if attempts is not None:
            # botocore counts the first attempt in total_max_attempts; its max_attempts
            # counts retries only (legacy mode), as objsdk's retries does.
            ck["retries"] = attempts - 1 if "total_max_attempts" in retries else attempts
    if "s3" in config:
        s3 = dict(config["s3"] or {})
        style = s3.pop("addressing_style", None)
        dualstack = s3.pop("use_dualstack_endpoint", None)
        if s3:
            raise ValueError(f"config_kwargs['s3'] keys {sorted(s3)} are not supported")
        if style is not None:
            if style not in ADDRESSING_STYLES:
                raise ValueError(f"config_kwargs['s3']['addressing_style']={style!r} is unknown")
            ck["addressing_style"] = style
        if dualstack is not None:
            ck["use_dualstack_endpoint"] = dualstack
    for name in ("use_fips_endpoint", "use_dualstack_endpoint"):
        if config.get(name) is not None:
            ck[name] = config[name]
    if config.get("region_name"):
        out.region = out.region or config["region_name"]
    signature = config.get("signature_version")
    if signature is not None:
        if str(signature).lower() == "unsigned":  # botocore.UNSIGNED
            out.anon = True
        elif signature != "s3v4":
            raise ValueError(
                f"config_kwargs['signature_version']={signature!r}: objsdk signs with SigV4 "
                "('s3v4') or not at all (botocore.UNSIGNED, or anon=True)"
            )


def _additional(out: Settings, params: dict[str, Any]) -> None:
    """s3fs's ``s3_additional_kwargs``: encryption, and what every write stores."""
    out.sse = sse_from_params(params, "s3_additional_kwargs")
    out.write = write_options(params, "s3_additional_kwargs")


def sse_from_params(params: dict[str, Any], where: str) -> SSE | None:
    """Pop boto3's encryption parameters from ``params`` as an objsdk setting."""
    given = {name: params.pop(name) for name in _SSE_PARAMS if name in params}
    if not given:
        return None
    kind = given.get("ServerSideEncryption")
    if "SSECustomerKey" in given or "SSECustomerAlgorithm" in given:
        if given.get("SSECustomerAlgorithm", "AES256") != "AES256" or kind:
            raise ValueError(f"{where}: SSE-C takes SSECustomerAlgorithm='AES256' alone")
        raw = given.get("SSECustomerKey")
        if raw is None:
            raise ValueError(
                f"{where}: SSECustomerAlgorithm needs SSECustomerKey (a filesystem is "
                "pickled without it: give it again in this process)"
            )
        key = raw.encode("latin-1") if isinstance(raw, str) else bytes(raw)
        if "SSECustomerKeyMD5" in given:
            import hashlib

            if given["SSECustomerKeyMD5"] != base64.b64encode(hashlib.md5(key).digest()).decode():
                raise ValueError(f"{where}: SSECustomerKeyMD5 does not match SSECustomerKey")
        return SSEC(key)
    if kind == "AES256" and len(given) == 1:
        return SSES3()
    if kind == "aws:kms":
        context = given.get("SSEKMSEncryptionContext")
        if isinstance(context, str):  # boto3 takes it as base64 JSON
            import json

            context = json.loads(base64.b64decode(context))
        return SSEKMS(given.get("SSEKMSKeyId"), dict(context or {}))
    raise ValueError(f"{where}: unsupported encryption parameters {sorted(given)}")


def write_options(params: dict[str, Any], where: str) -> dict[str, Any]:
    """Pop boto3's write parameters (``ContentType``, ``Metadata``...) from ``params`` as
    objsdk keywords; anything left is refused, by name."""
    out = {_WRITE_PARAMS[name]: params.pop(name) for name in list(params) if name in _WRITE_PARAMS}
    if params:
        raise ValueError(
            f"{where}: {', '.join(sorted(params))} not supported by ObjsdkFileSystem "
            f"(understood: {', '.join([*_WRITE_PARAMS, *_SSE_PARAMS])})"
        )
    return out


def default_part_size(settings: Settings) -> int | None:
    """The part size uploads use: fixed when asked (``fixed_upload_size``), else None
    (adaptive)."""
    if settings.fixed_upload_size:
        return settings.block_size or DEFAULT_PART_SIZE
    return None
