"""One frozen client configuration, resolved in one place for every entry point."""

from __future__ import annotations

import argparse
import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest

from objsdk import Client, InvalidArgument
from objsdk._core.client_config import ClientConfig, resolve_client_config, tls_verify
from objsdk._core.config import ConfigError

EP = "http://127.0.0.1:9000"
AK = "AKIAEXAMPLEKEY"
SK = "the-secret-key-value"
TOKEN = "the-session-token-value"


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No AWS_* variable and an empty home: only what a test sets."""
    import os

    for name in list(os.environ):
        if name.startswith(("AWS_", "REQUESTS_CA_BUNDLE")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_a_client_config_cannot_be_changed() -> None:
    config = ClientConfig(EP, AK, SK)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.region = "eu-west-1"  # type: ignore[misc]


def test_the_config_repr_shows_no_secret_no_token_and_only_part_of_the_key() -> None:
    text = repr(ClientConfig(EP, AK, SK, TOKEN)) + str(ClientConfig(EP, AK, SK, TOKEN))
    assert SK not in text
    assert TOKEN not in text
    assert AK not in text
    assert EP in text


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"addressing_style": "dns"}, "addressing_style"),
        ({"access_key": AK}, "both"),
        ({"max_pool_connections": 0}, "max_pool_connections"),
        ({"timeout": (0, 5)}, "timeout"),
        # A socket cannot wait that long (CPython's clock overflows near 9.2e9 s).
        ({"timeout": (5, float("inf"))}, "timeout"),
        ({"timeout": (1e12, 5)}, "timeout"),
        ({"request_checksum_calculation": "always"}, "request_checksum_calculation"),
        ({"region": ""}, "region"),
        ({"region": "us east 1"}, "region"),
        ({"region": "eu/west"}, "region"),
        ({"access_key": 7, "secret_key": SK}, "access_key and secret_key must be str"),
        ({"access_key": "", "secret_key": SK}, "access_key"),
        ({"access_key": AK + "\n", "secret_key": SK}, "access_key"),
    ],
)
def test_each_setting_is_checked_when_the_config_is_made(
    arguments: dict[str, Any], named: str
) -> None:
    with pytest.raises(InvalidArgument, match=named):
        ClientConfig(EP, **arguments)


@pytest.mark.parametrize(
    "secret", ["", SK + "\n", SK + "\r\n", " " + SK, SK + " ", "ab\x00cdefgh", "ab\tcdefgh"]
)
def test_a_secret_no_server_could_match_is_refused_without_showing_it(secret: str) -> None:
    # Sent, a secret read with its newline failed every request as SignatureDoesNotMatch.
    with pytest.raises(InvalidArgument, match="secret_key is empty, starts or ends") as info:
        ClientConfig(EP, access_key=AK, secret_key=secret)
    assert SK not in str(info.value)
    with pytest.raises(InvalidArgument, match="session_token") as info:
        ClientConfig(EP, access_key=AK, secret_key=SK, session_token=secret or "\n")
    assert SK not in str(info.value)


def test_regions_and_secrets_of_other_services_are_taken() -> None:
    for region in ("auto", "garage", "fr-par", "my_region", "us-west-004"):
        assert ClientConfig(EP, region=region).region == region
    assert ClientConfig(EP, access_key=AK, secret_key="inner space").secret_key == "inner space"


def test_settings_are_stored_normalised() -> None:
    config = ClientConfig(EP, timeout=(3, 7), response_checksum_validation="WHEN_REQUIRED")
    assert config.timeout == (3.0, 7.0)
    assert config.response_checksum_validation == "when_required"


def test_a_client_is_built_from_its_config_and_shows_it() -> None:
    config = ClientConfig(EP, AK, SK, region="eu-west-1", max_pool_connections=3)
    with Client.from_config(config) as client:
        assert client.config is config
        assert client.region == "eu-west-1"
        assert client.credentials is not None
        assert client.credentials.secret_key == SK
        assert client.transport.max_pool_connections == 3  # type: ignore[attr-defined]
    with Client(EP, AK, SK, region="eu-west-1", max_pool_connections=3) as same:
        assert same.config == config


def test_a_pickled_client_is_rebuilt_from_its_config_without_calling_init(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = Client(EP, AK, SK, region="eu-west-1", pickle_credentials=True, retries=2)
    data = pickle.dumps(original)

    def no_init(self: Client, *args: object, **kwargs: object) -> None:
        raise AssertionError("__init__ called while unpickling")

    monkeypatch.setattr(Client, "__init__", no_init)
    clone = pickle.loads(data)
    assert clone.config == original.config
    assert repr(clone) == repr(original)


def test_a_pickled_config_leaves_the_secret_behind_and_finds_it_where_it_lands(
    monkeypatch: pytest.MonkeyPatch, bare_env: Path
) -> None:
    data = pickle.dumps(ClientConfig(EP, AK, SK, TOKEN, region="eu-west-1"))
    assert SK.encode() not in data
    assert TOKEN.encode() not in data
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AK)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SK)
    back = pickle.loads(data)
    assert (back.access_key, back.secret_key, back.session_token) == (AK, SK, None)
    assert back.region == "eu-west-1"


def test_pickle_credentials_carries_the_secret_in_the_config_pickle() -> None:
    config = ClientConfig(EP, AK, SK, TOKEN, pickle_credentials=True)
    data = pickle.dumps(config)
    assert SK.encode() in data
    assert pickle.loads(data) == config


# -- one resolution for every entry point ------------------------------------------------


def _cli_config(**flags: Any) -> ClientConfig:
    from objsdk.cli.commands import Context
    from objsdk.cli.parser import GLOBAL_DEFAULTS

    return Context(argparse.Namespace(**{**GLOBAL_DEFAULTS, **flags})).client_config()


def _fs_config(**options: Any) -> ClientConfig:
    pytest.importorskip("fsspec")
    from objsdk.filesystem import ObjsdkFileSystem

    config: ClientConfig = ObjsdkFileSystem(skip_instance_cache=True, **options).client.config
    return config


def test_without_an_endpoint_every_entry_point_uses_aws_s3_in_the_region(
    monkeypatch: pytest.MonkeyPatch, bare_env: Path
) -> None:
    makers = (lambda: Client.from_env().config, _cli_config, _fs_config)
    found = {(c.endpoint, c.region, c.addressing_style) for c in (make() for make in makers)}
    assert found == {("https://s3.amazonaws.com", "us-east-1", "auto")}
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    found = {(c.endpoint, c.region) for c in (make() for make in makers)}
    assert found == {("https://s3.eu-west-1.amazonaws.com", "eu-west-1")}


def test_fips_asked_for_with_a_custom_endpoint_is_the_same_config_error_everywhere(
    monkeypatch: pytest.MonkeyPatch, bare_env: Path
) -> None:
    monkeypatch.setenv("AWS_USE_FIPS_ENDPOINT", "true")
    makers = (lambda: Client.from_env().config, _cli_config, _fs_config)
    assert {make().endpoint for make in makers} == {"https://s3-fips.us-east-1.amazonaws.com"}
    monkeypatch.setenv("AWS_ENDPOINT_URL", EP)
    messages = set()
    for make in makers:
        with pytest.raises(ConfigError, match="AWS_USE_FIPS_ENDPOINT") as caught:
            make()
        messages.add(str(caught.value))
    assert len(messages) == 1
    assert EP in messages.pop()


def test_the_environment_configures_the_client_of_every_entry_point_alike(
    monkeypatch: pytest.MonkeyPatch, bare_env: Path
) -> None:
    bundle = bare_env / "ca.pem"
    for name, value in {
        "AWS_ENDPOINT_URL": EP,
        "AWS_ACCESS_KEY_ID": AK,
        "AWS_SECRET_ACCESS_KEY": SK,
        "AWS_REGION": "eu-west-3",
        "AWS_MAX_ATTEMPTS": "3",
        "AWS_CA_BUNDLE": str(bundle),
        "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
    }.items():
        monkeypatch.setenv(name, value)
    expected = ClientConfig(
        EP,
        AK,
        SK,
        region="eu-west-3",
        retries=2,
        verify=str(bundle),
        response_checksum_validation="when_required",
        credentials_from="the environment (AWS_ACCESS_KEY_ID)",
    )
    assert Client.from_env().config == expected
    assert _cli_config() == expected
    assert _fs_config() == expected


def test_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"AWS_ENDPOINT_URL": "http://env:1", "AWS_MAX_ATTEMPTS": "3", "AWS_CA_BUNDLE": "/ca"}
    config = resolve_client_config(
        env, endpoint=EP, retries=7, verify=False, home="/nowhere", read_file=lambda p: None
    )
    assert (config.endpoint, config.retries, config.verify) == (EP, 7, False)


def test_the_ca_bundle_comes_from_the_argument_then_the_environment() -> None:
    assert tls_verify("/mine.pem", {"AWS_CA_BUNDLE": "/env.pem"}) == "/mine.pem"
    assert tls_verify(False, {"AWS_CA_BUNDLE": "/env.pem"}) is False
    assert tls_verify(None, {"AWS_CA_BUNDLE": "/a.pem", "REQUESTS_CA_BUNDLE": "/b.pem"}) == "/a.pem"
    assert tls_verify(None, {"REQUESTS_CA_BUNDLE": "/b.pem"}) == "/b.pem"
    assert tls_verify(None, {}) is True


def test_a_client_made_without_verify_takes_the_ca_bundle_of_its_environment(
    monkeypatch: pytest.MonkeyPatch, bare_env: Path
) -> None:
    monkeypatch.setenv("AWS_CA_BUNDLE", "/env.pem")
    with Client(EP) as client:
        assert client.config.verify is None  # decided where the client is built
        assert client.transport._verify == "/env.pem"  # type: ignore[attr-defined]


def test_an_anonymous_filesystem_has_no_credentials_even_with_keys_in_the_environment(
    monkeypatch: pytest.MonkeyPatch, bare_env: Path
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AK)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SK)
    config = _fs_config(endpoint_url=EP, anon=True)
    assert config.keys is None
    assert config == ClientConfig(EP, verify=True, anonymous=True)


def test_the_configuration_a_client_exposes_and_its_error_are_public_names() -> None:
    import objsdk

    client = objsdk.Client("http://127.0.0.1:9", "AKID", "SECRET")
    assert isinstance(client.config, objsdk.ClientConfig)
    assert objsdk.Client.from_config(client.config).config == client.config
    assert issubclass(objsdk.ConfigError, objsdk.InvalidArgument)
