"""AWS STS ``AssumeRole`` and ``AssumeRoleWithWebIdentity`` as pure functions: where to
send them, the request bodies, and the credentials (or the error) in the answers.

Both are ``POST``s of a form (``Action``, ``Version=2011-06-15`` and the action's
parameters, "AWS STS API Reference", Query API). ``AssumeRole`` is signed (SigV4,
service ``sts``) with the source credentials; ``AssumeRoleWithWebIdentity`` is not
signed: the web identity token is the proof. A success answers::

    <AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
      <AssumeRoleResult><Credentials>
        <AccessKeyId/><SecretAccessKey/><SessionToken/><Expiration>2024-...Z</Expiration>
      </Credentials>...</AssumeRoleResult>...
    </AssumeRoleResponse>

and a failure ``<ErrorResponse><Error><Code/><Message/></Error><RequestId/>``.

The endpoint (:func:`sts_endpoint`) is ``AWS_ENDPOINT_URL_STS``, else the ``sts``
block of the profile's ``[services NAME]`` section, else the regional endpoint
``https://sts.REGION.amazonaws.com`` (``amazonaws.com.cn`` in China; the global
``https://sts.amazonaws.com`` when no region is known). Unlike botocore, the global
``AWS_ENDPOINT_URL`` and a profile's ``endpoint_url`` are not used for STS: for objsdk
they name the S3-compatible server, which is seldom an STS as well.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar
from urllib.parse import urlencode

from ..errors import XMLParseError
from .profiles import SharedFiles
from .refresh import parse_expiration, utc
from .s3xml import xml_root, xml_text
from .signing import Credentials

__all__ = [
    "STS_VERSION",
    "StsError",
    "StsRequest",
    "aws_dns_suffix",
    "configured_endpoint",
    "default_session_name",
    "parse_sts_credentials",
    "parse_sts_error",
    "sts_endpoint",
    "sts_request",
]

STS_VERSION = "2011-06-15"
#: The signing region of the global endpoint.
GLOBAL_REGION = "us-east-1"
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded; charset=utf-8"


def aws_dns_suffix(region: str) -> str:
    """The domain of AWS's regional endpoints in ``region``'s partition."""
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"


def configured_endpoint(
    environ: Mapping[str, str], files: SharedFiles, profile: str, service: str
) -> str | None:
    """The endpoint configured for ``service`` (botocore's service id: ``sts``,
    ``sso``, ``sso-oidc``): ``AWS_ENDPOINT_URL_<SERVICE>`` (``-`` as ``_``, upper
    case), else ``endpoint_url`` in the ``<service>`` block of the ``[services NAME]``
    section profile ``profile`` names; None if neither, or if
    ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` (or the profile's
    ``ignore_configured_endpoint_urls``) is ``true``."""
    settings = files.settings(profile)
    ignore = (
        environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
        or settings.get("ignore_configured_endpoint_urls")
        or ""
    )
    if ignore.strip().lower() == "true":
        return None
    name = service.replace("-", "_")
    return environ.get(f"AWS_ENDPOINT_URL_{name.upper()}") or files.service_setting(
        profile, name, "endpoint_url"
    )


def sts_endpoint(
    environ: Mapping[str, str], files: SharedFiles, profile: str, region: str | None
) -> str:
    """The STS endpoint for a client of profile ``profile`` in ``region`` (see the
    module docstring and :func:`configured_endpoint`)."""
    configured = configured_endpoint(environ, files, profile, "sts")
    if configured:
        return configured
    if not region:
        return "https://sts.amazonaws.com"
    return f"https://sts.{region}.{aws_dns_suffix(region)}"


def default_session_name(now: datetime) -> str:
    """The ``RoleSessionName`` when the configuration gives none (botocore's is
    ``botocore-session-<seconds>``): it shows in CloudTrail as who assumed the role."""
    return f"objsdk-session-{int(utc(now).timestamp())}"


@dataclass(frozen=True)
class StsRequest:
    """One STS call: ``POST`` ``body`` (form-encoded; the repr hides it: it may hold a
    web identity token) to ``url`` with ``headers``, signed for ``region`` and service
    ``sts`` with the source credentials when ``signed``."""

    action: str
    url: str
    body: bytes = field(repr=False)
    region: str
    signed: bool

    #: The SigV4 service name.
    service: ClassVar[str] = "sts"

    @property
    def headers(self) -> dict[str, str]:
        return {"Content-Type": FORM_CONTENT_TYPE, "Accept": "application/xml"}


def sts_request(
    action: str,
    endpoint: str,
    region: str | None,
    params: Mapping[str, str | int | None],
) -> StsRequest:
    """The ``POST`` of ``action`` (``AssumeRole`` or ``AssumeRoleWithWebIdentity``) with
    ``params`` (None values left out) to ``endpoint``, signed for ``region`` (the global
    region without one) when the action is ``AssumeRole``."""
    fields: list[tuple[str, str]] = [("Action", action), ("Version", STS_VERSION)]
    fields += [(name, str(value)) for name, value in params.items() if value is not None]
    return StsRequest(
        action=action,
        url=endpoint,
        body=urlencode(fields).encode("ascii"),
        region=region or GLOBAL_REGION,
        signed=action != "AssumeRoleWithWebIdentity",
    )


def parse_sts_credentials(body: bytes, action: str) -> Credentials:
    """The credentials in ``action``'s success answer; :class:`XMLParseError` naming
    the missing element (never a value)."""
    root = xml_root(body)
    found = root.find(f"{{*}}{action}Result/{{*}}Credentials")
    if found is None:
        tag = root.tag.rpartition("}")[2]
        raise XMLParseError(f"{action}: the answer <{tag}> has no {action}Result/Credentials")
    fields = {
        name: xml_text(found, name)
        for name in ("AccessKeyId", "SecretAccessKey", "SessionToken", "Expiration")
    }
    missing = [name for name, value in fields.items() if not value]
    if missing:
        raise XMLParseError(f"{action}: the answer's Credentials have no {', '.join(missing)}")
    try:
        expiry = parse_expiration(fields["Expiration"])
    except ValueError as e:
        raise XMLParseError(f"{action}: Expiration {e}") from None
    return Credentials(
        str(fields["AccessKeyId"]),
        str(fields["SecretAccessKey"]),
        str(fields["SessionToken"]),
        expiry,
    )


# STS errors worth another attempt: the identity provider did not answer in time
# (AssumeRoleWithWebIdentity, botocore retries it), throttling.
_RETRYABLE = frozenset({"IDPCommunicationError", "Throttling", "ThrottlingException"})


@dataclass(frozen=True)
class StsError:
    """An STS ``<ErrorResponse>``: ``code`` (``AccessDenied``, ``ExpiredToken``,
    ``InvalidIdentityToken``...), ``message`` and the request id."""

    code: str
    message: str = ""
    request_id: str | None = None

    @property
    def retryable(self) -> bool:
        """Whether another attempt may succeed (throttling, an identity provider that
        did not answer)."""
        return self.code in _RETRYABLE


def parse_sts_error(body: bytes) -> StsError | None:
    """The error in an STS error answer; None if ``body`` is not an ``ErrorResponse``
    (an empty body, HTML from a proxy...)."""
    if not body.lstrip().startswith(b"<"):
        return None
    try:
        root = xml_root(body)
    except XMLParseError:
        return None
    error = root.find("{*}Error") if root.tag.rpartition("}")[2] == "ErrorResponse" else None
    if error is None:
        return None
    return StsError(
        code=xml_text(error, "Code") or "Unknown",
        message=(xml_text(error, "Message") or "").strip(),
        request_id=xml_text(root, "RequestId"),
    )
