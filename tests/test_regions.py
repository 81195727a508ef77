"""AWS S3 without an endpoint typed: the region's endpoint, FIPS and dual-stack, the
region an endpoint's host name says, and botocore's addressing rule, cross-checked
against botocore's own endpoint resolution (no request is sent anywhere).

botocore builds the URL of a GetObject for each region, bucket name and setting; the
request is stopped before it leaves (``before-send``), and objsdk's client made with the
same settings must build the same URL.
"""

from __future__ import annotations

import functools
import itertools
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.config import Config

from objsdk import Client, ConfigError, InvalidArgument
from objsdk._core.regions import parse_s3_host, s3_endpoint, virtual_hostable

REGIONS = [
    "us-east-1",
    "us-west-2",
    "eu-west-1",
    "ap-southeast-5",
    "cn-north-1",
    "us-gov-west-1",
    "us-iso-east-1",
    "us-isob-east-1",
    "eusc-de-east-1",
]
BUCKETS = [
    "mybucket",
    "my.bucket",
    "MyBucket",
    "my_bucket",
    "ab",
    "a" * 63,
    "192.168.1.1",
    "a--b",
    "xn--abc",
    "my-bucket-",
    "my..bucket",
]
FLAGS = [(False, False), (True, False), (False, True), (True, True)]


class _Stop(Exception):
    """Raised by the before-send hook: nothing leaves the machine."""


@functools.cache
def _botocore_urls(region: str, fips: bool, dualstack: bool, style: str) -> dict[str, str]:
    """The URL botocore sends a GetObject of key ``k`` to, per bucket name (an error
    message where botocore refuses the settings)."""
    client = botocore.session.get_session().create_client(
        "s3",
        region_name=region,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=Config(
            s3={"addressing_style": style},
            use_fips_endpoint=fips,
            use_dualstack_endpoint=dualstack,
            retries={"max_attempts": 1},
        ),
    )
    seen: list[str] = []

    def stop(request: Any, **_: Any) -> None:
        seen.append(request.url)
        raise _Stop

    client.meta.events.register("before-send", stop)
    urls = {}
    for bucket in BUCKETS:
        try:
            client.get_object(Bucket=bucket, Key="k")
        except _Stop:
            urls[bucket] = seen.pop()
        except Exception as e:  # botocore refuses the combination (FIPS in China)
            urls[bucket] = f"refused: {type(e).__name__}"
    return urls


def _objsdk_url(region: str, fips: bool, dualstack: bool, style: str, bucket: str) -> str:
    try:
        client = Client(
            region=region,
            use_fips_endpoint=fips,
            use_dualstack_endpoint=dualstack,
            addressing_style=style,
        )
    except ConfigError as e:
        return f"refused: {e}"
    return client.endpoint.build_url(bucket, "k")


@pytest.mark.parametrize(
    ("region", "fips", "dualstack", "style"),
    [(r, f, d, s) for r, (f, d), s in itertools.product(REGIONS, FLAGS, ("auto", "path"))],
)
def test_without_an_endpoint_the_request_goes_where_botocore_sends_it(
    region: str, fips: bool, dualstack: bool, style: str
) -> None:
    expected = _botocore_urls(region, fips, dualstack, style)
    for bucket in BUCKETS:
        got = _objsdk_url(region, fips, dualstack, style, bucket)
        if expected[bucket].startswith("refused"):
            assert got.startswith("refused"), (bucket, got)
        else:
            assert got == expected[bucket], bucket


@pytest.mark.parametrize(("region", "fips", "dualstack"), [(r, *f) for r in REGIONS for f in FLAGS])
def test_explicit_virtual_addressing_is_botocores_for_names_that_allow_it(
    region: str, fips: bool, dualstack: bool
) -> None:
    expected = _botocore_urls(region, fips, dualstack, "virtual")
    for bucket in BUCKETS:
        if expected[bucket].startswith("refused") or not virtual_hostable(bucket, tls=True):
            continue
        assert _objsdk_url(region, fips, dualstack, "virtual", bucket) == expected[bucket]


@pytest.mark.parametrize(("region", "fips", "dualstack"), [(r, *f) for r in REGIONS for f in FLAGS])
def test_the_host_names_botocore_uses_give_back_their_region_and_kind(
    region: str, fips: bool, dualstack: bool
) -> None:
    for style in ("auto", "path"):
        for url in _botocore_urls(region, fips, dualstack, style).values():
            if url.startswith("refused"):
                continue
            host = parse_s3_host(url.split("/")[2])
            assert host is not None, url
            assert (host.region, host.fips, host.dualstack) == (region, fips, dualstack), url


@pytest.mark.parametrize(
    ("host", "region", "fips", "dualstack", "bucket"),
    [
        ("s3.amazonaws.com", "us-east-1", False, False, None),
        ("s3-external-1.amazonaws.com", "us-east-1", False, False, None),
        ("s3.eu-west-1.amazonaws.com", "eu-west-1", False, False, None),
        ("s3-eu-west-1.amazonaws.com", "eu-west-1", False, False, None),
        ("s3.dualstack.eu-west-1.amazonaws.com", "eu-west-1", False, True, None),
        ("s3-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1", True, False, None),
        ("s3-fips.dualstack.us-east-2.amazonaws.com", "us-east-2", True, True, None),
        ("bucket.s3.eu-west-1.amazonaws.com", "eu-west-1", False, False, "bucket"),
        ("my.bucket.s3-eu-west-1.amazonaws.com", "eu-west-1", False, False, "my.bucket"),
        ("s3.s3.eu-west-1.amazonaws.com", "eu-west-1", False, False, "s3"),
        ("S3.CN-NORTH-1.AMAZONAWS.COM.CN", "cn-north-1", False, False, None),
    ],
)
def test_an_aws_host_name_says_its_region(
    host: str, region: str, fips: bool, dualstack: bool, bucket: str | None
) -> None:
    found = parse_s3_host(host)
    assert found is not None
    assert (found.region, found.fips, found.dualstack, found.bucket) == (
        region,
        fips,
        dualstack,
        bucket,
    )


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "minio.example.com",
        "s3.example.com",
        "s3-website-us-east-1.amazonaws.com",
        "s3-website.eu-west-1.amazonaws.com",
        "vpce-1a2b.s3.us-east-1.vpce.amazonaws.com",
        "s3.eu-west-1.amazonaws.com.evil.example",
        "storage.googleapis.com",
    ],
)
def test_other_host_names_are_custom_endpoints(host: str) -> None:
    assert parse_s3_host(host) is None


def test_an_aws_endpoint_typed_gives_its_region_and_virtual_hosted_addressing() -> None:
    client = Client("https://s3.eu-west-1.amazonaws.com")
    assert client.region == "eu-west-1"
    assert client.endpoint.build_url("mybucket", "k") == (
        "https://mybucket.s3.eu-west-1.amazonaws.com/k"
    )
    # Dots over TLS would match no certificate: path-style, as botocore does.
    assert client.endpoint.build_url("my.bucket", "k") == (
        "https://s3.eu-west-1.amazonaws.com/my.bucket/k"
    )
    for endpoint, region in [
        ("https://s3-ap-south-1.amazonaws.com", "ap-south-1"),
        ("https://s3.dualstack.sa-east-1.amazonaws.com", "sa-east-1"),
        ("https://mybucket.s3.eu-central-1.amazonaws.com", "eu-central-1"),
        ("https://s3.amazonaws.com", "us-east-1"),
    ]:
        assert Client(endpoint).region == region
    # A region given wins over the host name's.
    assert Client("https://s3.eu-west-1.amazonaws.com", region="us-west-2").region == "us-west-2"


def test_custom_endpoints_ip_addresses_and_path_style_keep_the_bucket_in_the_path() -> None:
    for endpoint in ("http://127.0.0.1:9000", "https://minio.example.com", "http://[::1]:9000"):
        client = Client(endpoint)
        assert client.region == "us-east-1"
        assert client.config.addressing_style == "auto"
        assert client.endpoint.build_url("mybucket", "k") == f"{endpoint}/mybucket/k"
    aws = Client("https://s3.eu-west-1.amazonaws.com", addressing_style="path")
    assert (
        aws.endpoint.build_url("mybucket", "k") == "https://s3.eu-west-1.amazonaws.com/mybucket/k"
    )
    custom = Client("https://minio.example.com", addressing_style="virtual")
    assert custom.endpoint.build_url("mybucket", "k") == "https://mybucket.minio.example.com/k"


def test_dotted_buckets_are_virtual_hosted_over_plain_http_only() -> None:
    assert Client("http://s3.eu-west-1.amazonaws.com").endpoint.build_url("my.bucket", "k") == (
        "http://my.bucket.s3.eu-west-1.amazonaws.com/k"
    )


def test_an_unknown_addressing_style_is_refused_naming_the_choices() -> None:
    with pytest.raises(InvalidArgument, match="'auto', 'path' or 'virtual'"):
        Client(addressing_style="dns")


def test_fips_or_dual_stack_with_an_endpoint_that_is_not_one_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"use_fips_endpoint .*'http://127\.0\.0\.1:9000'"):
        Client("http://127.0.0.1:9000", use_fips_endpoint=True)
    with pytest.raises(ConfigError, match=r"use_dualstack_endpoint .*s3\.eu-west-1"):
        Client("https://s3.eu-west-1.amazonaws.com", use_dualstack_endpoint=True)
    with pytest.raises(ConfigError, match="no FIPS endpoints in region 'cn-north-1'"):
        Client(region="cn-north-1", use_fips_endpoint=True)
    # An endpoint that is what the setting asks for is kept.
    fips = Client("https://s3-fips.us-east-2.amazonaws.com", use_fips_endpoint=True)
    assert (fips.region, fips.endpoint.url) == (
        "us-east-2",
        "https://s3-fips.us-east-2.amazonaws.com",
    )


def test_a_region_that_cannot_name_an_aws_endpoint_is_refused_without_an_endpoint() -> None:
    with pytest.raises(ConfigError, match="region 'my_region' cannot name an AWS S3 endpoint"):
        Client(region="my_region")
    assert Client("http://127.0.0.1:9000", region="my_region").region == "my_region"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / ".aws").mkdir()
    return tmp_path


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(home), **extra}


def test_from_env_honours_the_fips_and_dual_stack_variables(home: Path) -> None:
    env = _env(home, AWS_REGION="us-west-2", AWS_USE_FIPS_ENDPOINT="true")
    assert Client.from_env(env).endpoint.url == "https://s3-fips.us-west-2.amazonaws.com"
    env = _env(home, AWS_REGION="us-west-2", AWS_USE_DUALSTACK_ENDPOINT="TRUE")
    assert Client.from_env(env).endpoint.url == "https://s3.dualstack.us-west-2.amazonaws.com"
    env = _env(home, AWS_USE_DUALSTACK_ENDPOINT="false")
    assert Client.from_env(env).endpoint.url == "https://s3.amazonaws.com"
    with pytest.raises(ConfigError, match=r"\(AWS_USE_FIPS_ENDPOINT\) must be true or false"):
        Client.from_env(_env(home, AWS_USE_FIPS_ENDPOINT="yes"))
    with pytest.raises(ConfigError, match="AWS_USE_FIPS_ENDPOINT"):
        Client.from_env(
            _env(home, AWS_ENDPOINT_URL="http://127.0.0.1:9000", AWS_USE_FIPS_ENDPOINT="true")
        )


def test_from_env_honours_the_profiles_addressing_style_fips_and_dual_stack(home: Path) -> None:
    (home / ".aws" / "config").write_text(
        "[profile ml]\n"
        "region = eu-west-1\n"
        "use_fips_endpoint = true\n"
        "s3 =\n"
        "    addressing_style = path\n"
        "    use_dualstack_endpoint = true\n"
        "[profile custom]\n"
        "endpoint_url = https://s3.example.com\n"
        "s3 =\n"
        "    addressing_style = virtual\n"
    )
    client = Client.from_env(_env(home), profile="ml")
    assert client.config.addressing_style == "path"
    assert client.endpoint.url == "https://s3-fips.dualstack.eu-west-1.amazonaws.com"
    assert client.endpoint.build_url("b", "k") == f"{client.endpoint.url}/b/k"
    custom = Client.from_env(_env(home), profile="custom")
    assert custom.endpoint.build_url("bkt", "k") == "https://bkt.s3.example.com/k"
    # An argument wins over the profile.
    path = Client.from_env(_env(home), profile="custom", addressing_style="path")
    assert path.endpoint.build_url("bkt", "k") == "https://s3.example.com/bkt/k"


def test_a_pickled_client_keeps_its_aws_endpoint_and_region() -> None:
    import pickle

    client = Client(region="eu-west-1", use_dualstack_endpoint=True)
    copy = pickle.loads(pickle.dumps(client))
    assert (copy.endpoint, copy.region) == (client.endpoint, client.region)
    assert copy.config == client.config


def test_s3_endpoint_of_a_region() -> None:
    assert s3_endpoint("us-east-1") == "https://s3.amazonaws.com"
    assert s3_endpoint("eu-west-1") == "https://s3.eu-west-1.amazonaws.com"
    assert s3_endpoint("cn-northwest-1") == "https://s3.cn-northwest-1.amazonaws.com.cn"


def test_fsspec_keeps_auto_addressing_and_takes_botocores_endpoint_settings() -> None:
    pytest.importorskip("fsspec")
    from objsdk.filesystem import ObjsdkFileSystem

    fs = ObjsdkFileSystem(
        skip_instance_cache=True,
        anon=True,
        endpoint_url="https://s3.eu-west-1.amazonaws.com",
        config_kwargs={"s3": {"addressing_style": "auto"}},
    )
    assert fs.client.config.addressing_style == "auto"
    assert fs.client.endpoint.build_url("mybucket", "k") == (
        "https://mybucket.s3.eu-west-1.amazonaws.com/k"
    )
    fips = ObjsdkFileSystem(
        skip_instance_cache=True,
        anon=True,
        region="us-west-2",
        config_kwargs={"use_fips_endpoint": True, "s3": {"use_dualstack_endpoint": True}},
    )
    assert fips.client.endpoint.url == "https://s3-fips.dualstack.us-west-2.amazonaws.com"
