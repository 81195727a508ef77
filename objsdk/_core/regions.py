"""AWS S3's endpoints and regions (pure): the endpoint of a region, what an endpoint's
host name says (its region, FIPS, dual-stack), and which bucket names can be
virtual-hosted.

The names are the ones botocore's S3 endpoint ruleset gives
(``botocore/data/s3/2006-03-01/endpoint-rule-set-1.json``, with the partitions of
``botocore/data/partitions.json``): ``s3.<region>.<suffix>``, ``s3-fips.<region>``,
``s3.dualstack.<region>``, ``s3-fips.dualstack.<region>``, and for ``us-east-1``
without either flag the legacy global ``s3.amazonaws.com`` (botocore's default while
``AWS_S3_US_EAST_1_REGIONAL_ENDPOINT`` is unset). ``tests/test_regions.py`` holds the
cross-check against botocore.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import ConfigError

__all__ = [
    "S3Host",
    "dns_suffix",
    "parse_s3_host",
    "s3_endpoint",
    "s3_host",
    "s3_location",
    "valid_region",
    "virtual_hostable",
]

# The partitions other than "aws" (whose suffix is also that of unknown regions), by
# their regionRegex in botocore's partitions.json, and their DNS suffix.
_PARTITIONS = (
    (re.compile(r"cn-\w+-\d+"), "amazonaws.com.cn"),
    (re.compile(r"eusc-de-\w+-\d+"), "amazonaws.eu"),
    (re.compile(r"us-iso-\w+-\d+"), "c2s.ic.gov"),
    (re.compile(r"us-isob-\w+-\d+"), "sc2s.sgov.gov"),
    (re.compile(r"eu-isoe-\w+-\d+"), "cloud.adc-e.uk"),
    (re.compile(r"us-isof-\w+-\d+"), "csp.hci.ic.gov"),
)
_AWS_SUFFIX = "amazonaws.com"
_SUFFIXES = (_AWS_SUFFIX, *(suffix for _, suffix in _PARTITIONS))

# A region goes into a host name: one DNS label (botocore's validate_region_name).
_REGION_LABEL = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?")
# A region as AWS names them, by the prefixes of every partition's regionRegex: what a
# host name is read as (s3-website-us-east-1 is no region, us-gov-west-1 is).
_AWS_REGION = r"(?:us|eu|ap|sa|ca|me|af|il|mx|cn|eusc)(?:-[a-z]+)+-\d+"
# An S3 API host name, optionally with a bucket in front (virtual-hosted style).
_S3_HOST = re.compile(
    r"(?:(?P<bucket>.+)\.)?"
    r"(?:(?P<global>s3|s3-external-1)"
    rf"|s3-(?P<legacy>{_AWS_REGION})"
    rf"|s3(?P<fips>-fips)?(?P<dualstack>\.dualstack)?\.(?P<region>{_AWS_REGION})"
    r"|(?P<accelerate>s3-accelerate)(?P<accelerate_dualstack>\.dualstack)?)"
    r"\.(?P<suffix>" + "|".join(re.escape(s) for s in _SUFFIXES) + ")"
)

# botocore's aws.isVirtualHostableS3Bucket: 3-63 characters, lower case, not an IPv4
# address, and DNS labels (several, dot-separated, only where TLS is not in the way).
_HOST_LABEL = re.compile(r"(?!-)[a-zA-Z\d-]{1,63}(?<!-)")
_IPV4 = re.compile(r"(?:[0-9]{1,3}\.){3}[0-9]{1,3}")


def valid_region(region: str) -> bool:
    """Whether ``region`` can name an AWS endpoint (one DNS label)."""
    return _REGION_LABEL.fullmatch(region) is not None


def dns_suffix(region: str) -> str:
    """The domain of ``region``'s partition: ``amazonaws.com`` unless the region is in
    China, the European Sovereign Cloud or an isolated partition."""
    for pattern, suffix in _PARTITIONS:
        if pattern.fullmatch(region):
            return suffix
    return _AWS_SUFFIX


def s3_host(region: str, *, fips: bool = False, dualstack: bool = False) -> str:
    """The host name of S3 in ``region`` (:class:`ConfigError` for a region that cannot
    name one, or FIPS in China, where S3 has no FIPS endpoints)."""
    if not valid_region(region):
        raise ConfigError(
            f"region {region!r} cannot name an AWS S3 endpoint: give an AWS region such as "
            "'eu-west-1', or the endpoint of the service to use"
        )
    suffix = dns_suffix(region)
    if fips and suffix == "amazonaws.com.cn":
        raise ConfigError(
            f"S3 has no FIPS endpoints in region {region!r}: unset AWS_USE_FIPS_ENDPOINT "
            "(or the profile's use_fips_endpoint, use_fips_endpoint=)"
        )
    service = "s3-fips" if fips else "s3"
    if dualstack:
        return f"{service}.dualstack.{region}.{suffix}"
    if not fips and region == "us-east-1":
        return "s3.amazonaws.com"
    return f"{service}.{region}.{suffix}"


def s3_endpoint(region: str, *, fips: bool = False, dualstack: bool = False) -> str:
    """The https URL of S3 in ``region`` (see :func:`s3_host`)."""
    return f"https://{s3_host(region, fips=fips, dualstack=dualstack)}"


@dataclass(frozen=True)
class S3Host:
    """What an AWS S3 host name says: the ``region`` it serves (None for Transfer
    Acceleration, which serves them all), whether it is a ``fips`` or ``dualstack``
    endpoint, and the ``bucket`` it names if it is a bucket's own (virtual-hosted)
    name rather than the service's."""

    region: str | None
    fips: bool = False
    dualstack: bool = False
    accelerate: bool = False
    bucket: str | None = None

    @property
    def service(self) -> bool:
        """Whether this is the service's own host name (buckets go in front of it)."""
        return self.bucket is None


def parse_s3_host(host: str) -> S3Host | None:
    """What the host name ``host`` (without port) says, if it is one of AWS S3's API
    endpoints (``s3.eu-west-1.amazonaws.com``, ``s3-eu-west-1.amazonaws.com``,
    ``s3.dualstack.eu-west-1.amazonaws.com``, ``bucket.s3.eu-west-1.amazonaws.com``,
    ``s3.amazonaws.com``...); None for any other host (a custom endpoint)."""
    found = _S3_HOST.fullmatch(host.lower().rstrip("."))
    if found is None:
        return None
    bucket = found["bucket"]
    if found["global"]:
        return S3Host("us-east-1", bucket=bucket)
    if found["accelerate"]:
        return S3Host(
            None, dualstack=bool(found["accelerate_dualstack"]), accelerate=True, bucket=bucket
        )
    region = found["legacy"] or found["region"]
    return S3Host(
        region, fips=bool(found["fips"]), dualstack=bool(found["dualstack"]), bucket=bucket
    )


def virtual_hostable(bucket: str, *, tls: bool) -> bool:
    """Whether ``bucket`` can go in front of an AWS host name (botocore's rule): 3 to 63
    characters, lower case, not an IPv4 address, and one DNS label, or several joined by
    dots when ``tls`` is off (over TLS, ``a.b.s3.amazonaws.com`` matches no certificate
    of ``*.s3.amazonaws.com``)."""
    if len(bucket) < 3 or len(bucket) > 63 or bucket.lower() != bucket or _IPV4.fullmatch(bucket):
        return False
    labels = bucket.split(".")
    if tls and len(labels) > 1:
        return False
    return all(_HOST_LABEL.fullmatch(label) for label in labels)


def s3_location(
    endpoint: str | None,
    region: str | None,
    *,
    default_region: str,
    fips: bool = False,
    dualstack: bool = False,
) -> tuple[str, str]:
    """The endpoint URL and the region of a client given ``endpoint`` and ``region``
    (None: not given). Without an endpoint, AWS S3's in the region (else
    ``default_region``), FIPS and dual-stack as asked. A given endpoint is kept; the
    region not given is the one its host name says if it is AWS S3's
    (``s3.eu-west-1.amazonaws.com``), else ``default_region``. FIPS or dual-stack asked
    for with an endpoint that is not such an endpoint is a :class:`ConfigError`: the
    traffic would not go where the setting says."""
    if endpoint is None:
        region = default_region if region is None else region
        return s3_endpoint(region, fips=fips, dualstack=dualstack), region
    try:
        host = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}").hostname
    except ValueError:
        host = None  # the endpoint's own check names what is wrong with it
    aws = parse_s3_host(host) if host else None
    for wanted, has, name, setting, variable in (
        (fips, aws is not None and aws.fips, "FIPS", "use_fips_endpoint", "AWS_USE_FIPS_ENDPOINT"),
        (
            dualstack,
            aws is not None and aws.dualstack,
            "dual-stack",
            "use_dualstack_endpoint",
            "AWS_USE_DUALSTACK_ENDPOINT",
        ),
    ):
        if wanted and not has:
            raise ConfigError(
                f"{setting} ({variable}, or the profile's {setting}) asks for an S3 {name} "
                f"endpoint, but the endpoint given, {endpoint!r}, is not one: give no "
                f"endpoint (the region's {name} endpoint is then used), or unset {setting}"
            )
    if region is None:
        region = (aws.region if aws is not None else None) or default_region
    return endpoint, region
