"""The configuration chain: explicit values, then the environment, then the AWS files."""

from __future__ import annotations

import pickle
import textwrap
from collections.abc import Mapping

import pytest

from objsdk._core.config import ConfigError, ResolvedConfig, resolve_config
from objsdk._core.instance_metadata import InstanceMetadata

HOME = "/home/u"
CREDS = f"{HOME}/.aws/credentials"
CONFIG = f"{HOME}/.aws/config"


def files(**by_path: str) -> Mapping[str, str]:
    return {path: textwrap.dedent(text) for path, text in by_path.items()}


def resolve(
    environ: Mapping[str, str] | None = None, fs: Mapping[str, str] | None = None, **explicit: str
) -> ResolvedConfig:
    store = dict(fs or {})
    return resolve_config(environ or {}, home=HOME, read_file=store.get, **explicit)


SHARED = files(
    **{
        CREDS: """
        [default]
        aws_access_key_id = FILEKEY
        aws_secret_access_key = FILESECRET

        [dev]
        aws_access_key_id = DEVKEY
        aws_secret_access_key = DEVSECRET
        aws_session_token = DEVTOKEN
        """,
        CONFIG: """
        [default]
        region = eu-west-1
        endpoint_url = http://file-endpoint:9000

        [profile dev]
        region = eu-central-1
        endpoint_url = http://dev-endpoint:9000
        """,
    }
)

ENV = {
    "AWS_ENDPOINT_URL": "http://env-endpoint:9000",
    "AWS_ACCESS_KEY_ID": "ENVKEY",
    "AWS_SECRET_ACCESS_KEY": "ENVSECRET",
    "AWS_REGION": "ap-south-1",
}


def test_nothing_configured_resolves_to_nothing() -> None:
    cfg = resolve()
    assert (cfg.endpoint, cfg.access_key, cfg.secret_key, cfg.region) == (None, None, None, None)
    assert cfg.profile == "default"


def test_explicit_values_win_over_environment_and_files() -> None:
    cfg = resolve(
        ENV,
        SHARED,
        endpoint="http://flag:1",
        access_key="FLAGKEY",
        secret_key="FLAGSECRET",
        region="us-west-2",
    )
    assert cfg.endpoint == "http://flag:1"
    assert (cfg.access_key, cfg.secret_key) == ("FLAGKEY", "FLAGSECRET")
    assert cfg.region == "us-west-2"
    assert dict(cfg.sources) == {
        "endpoint": "explicit",
        "credentials": "explicit",
        "region": "explicit",
    }


def test_environment_wins_over_files() -> None:
    cfg = resolve(ENV, SHARED)
    assert cfg.endpoint == "http://env-endpoint:9000"
    assert (cfg.access_key, cfg.secret_key) == ("ENVKEY", "ENVSECRET")
    assert cfg.region == "ap-south-1"
    assert set(cfg.sources.values()) == {"environment"}


def test_default_profile_comes_from_the_shared_files() -> None:
    cfg = resolve({}, SHARED)
    assert (cfg.access_key, cfg.secret_key, cfg.session_token) == ("FILEKEY", "FILESECRET", None)
    assert cfg.endpoint == "http://file-endpoint:9000"
    assert cfg.region == "eu-west-1"
    assert cfg.sources["credentials"] == "credentials file"


def test_aws_profile_selects_a_profile_section_in_both_files() -> None:
    cfg = resolve({"AWS_PROFILE": "dev"}, SHARED)
    assert (cfg.access_key, cfg.session_token) == ("DEVKEY", "DEVTOKEN")
    assert cfg.endpoint == "http://dev-endpoint:9000"
    assert cfg.region == "eu-central-1"
    assert cfg.profile == "dev"


def test_explicit_profile_wins_over_aws_profile() -> None:
    cfg = resolve({"AWS_PROFILE": "nope"}, SHARED, profile="dev")
    assert cfg.access_key == "DEVKEY"


def test_unknown_named_profile_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="'ghost'"):
        resolve({}, SHARED, profile="ghost")


def test_credentials_can_live_in_the_config_file() -> None:
    fs = files(
        **{
            CONFIG: """
            [profile ci]
            aws_access_key_id = CFGKEY
            aws_secret_access_key = CFGSECRET
            """
        }
    )
    cfg = resolve({"AWS_PROFILE": "ci"}, fs)
    assert (cfg.access_key, cfg.secret_key) == ("CFGKEY", "CFGSECRET")
    assert cfg.sources["credentials"] == "config file"


def test_env_key_is_never_paired_with_a_file_secret() -> None:
    with pytest.raises(ConfigError, match="AWS_SECRET_ACCESS_KEY is not"):
        resolve({"AWS_ACCESS_KEY_ID": "ENVKEY"}, SHARED)


def test_half_an_explicit_pair_is_an_error() -> None:
    with pytest.raises(ConfigError, match="both"):
        resolve({}, {}, access_key="K")


def test_half_a_file_pair_is_an_error_naming_the_file() -> None:
    fs = files(**{CREDS: "[default]\naws_access_key_id = K\n"})
    with pytest.raises(ConfigError, match=r"\.aws/credentials"):
        resolve({}, fs)


def test_session_token_comes_with_the_env_key() -> None:
    cfg = resolve({**ENV, "AWS_SESSION_TOKEN": "TOK"}, SHARED)
    assert cfg.session_token == "TOK"


def test_env_file_locations_are_honoured() -> None:
    fs = files(
        **{
            "/etc/creds": "[default]\naws_access_key_id = A\naws_secret_access_key = B\n",
            "/etc/conf": "[default]\nregion = sa-east-1\n",
        }
    )
    env = {"AWS_SHARED_CREDENTIALS_FILE": "/etc/creds", "AWS_CONFIG_FILE": "/etc/conf"}
    cfg = resolve(env, fs)
    assert (cfg.access_key, cfg.region) == ("A", "sa-east-1")


def test_tilde_in_file_locations_means_home() -> None:
    fs = files(**{f"{HOME}/alt": "[default]\nregion = sa-east-1\n"})
    assert resolve({"AWS_CONFIG_FILE": "~/alt"}, fs).region == "sa-east-1"


def test_aws_default_region_is_the_fallback_region_variable() -> None:
    assert resolve({"AWS_DEFAULT_REGION": "us-east-2"}).region == "us-east-2"
    both = {"AWS_DEFAULT_REGION": "us-east-2", "AWS_REGION": "us-west-1"}
    assert resolve(both).region == "us-west-1"


def test_service_specific_endpoint_variable_wins() -> None:
    env = {"AWS_ENDPOINT_URL": "http://all", "AWS_ENDPOINT_URL_S3": "http://s3only"}
    assert resolve(env).endpoint == "http://s3only"


def test_endpoint_from_a_services_section() -> None:
    fs = files(
        **{
            CONFIG: """
            [default]
            services = local

            [services local]
            s3 =
              endpoint_url = http://svc:9000
            """
        }
    )
    assert resolve({}, fs).endpoint == "http://svc:9000"


def test_empty_environment_values_are_ignored() -> None:
    cfg = resolve({"AWS_ENDPOINT_URL": "", "AWS_ACCESS_KEY_ID": ""}, SHARED)
    assert cfg.endpoint == "http://file-endpoint:9000"
    assert cfg.access_key == "FILEKEY"


def test_unparsable_file_error_does_not_quote_its_lines() -> None:
    fs = {CREDS: "aws_secret_access_key = TOPSECRET\n[default]\n"}
    with pytest.raises(ConfigError) as e:
        resolve({}, fs)
    assert "TOPSECRET" not in str(e.value)
    assert CREDS in str(e.value)


def test_repr_hides_secret_and_token_and_masks_the_key() -> None:
    cfg = resolve({**ENV, "AWS_SESSION_TOKEN": "SESSIONTOKEN"}, {})
    text = repr(cfg) + str(cfg)
    assert "ENVSECRET" not in text
    assert "SESSIONTOKEN" not in text
    assert "ENVKEY" not in text
    assert "env-endpoint" in text


def test_resolved_config_refuses_to_pickle() -> None:
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(resolve(ENV))


def test_client_kwargs_leave_region_to_the_client_default_when_unknown() -> None:
    kwargs = resolve({"AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "B"}).client_kwargs()
    assert kwargs == {"access_key": "A", "secret_key": "B", "session_token": None}


def test_files_are_not_read_when_everything_is_explicit() -> None:
    def no_reads(path: str) -> str | None:
        raise AssertionError(f"read {path}")

    cfg = resolve_config(
        {},
        endpoint="http://e",
        access_key="A",
        secret_key="B",
        region="r",
        home=HOME,
        read_file=no_reads,
        settings={
            "max_attempts": 3,
            "retry_mode": "standard",
            "request_checksum_calculation": "when_required",
            "response_checksum_validation": "when_supported",
            "ca_bundle": "/etc/ca.pem",
            "use_fips_endpoint": False,
            "use_dualstack_endpoint": False,
            "addressing_style": "path",
        },
    )
    assert cfg.endpoint == "http://e"
    assert cfg.max_attempts == 3
    assert cfg.ca_bundle == "/etc/ca.pem"


def test_settings_not_given_are_read_from_the_profile_when_the_home_is_known() -> None:
    fs = files(**{CONFIG: "[default]\nmax_attempts = 4\nretry_mode = Standard\n"})
    cfg = resolve({}, fs, endpoint="http://e", access_key="A", secret_key="B", region="r")
    assert (cfg.max_attempts, cfg.retry_mode) == (4, "standard")
    assert cfg.sources["max_attempts"] == "config file"
    assert cfg.client_kwargs()["retries"] == 3


def test_a_wrong_setting_in_the_profile_is_an_error_naming_the_file_and_profile() -> None:
    fs = files(**{CONFIG: "[profile p]\nresponse_checksum_validation = maybe\n"})
    with pytest.raises(ConfigError, match=r"response_checksum_validation.*'p'.*config"):
        resolve({}, fs, profile="p")


def test_missing_home_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="HOME"):
        resolve_config({})


# -- whose credentials: the order botocore's credential chain follows --------------------
# (botocore.credentials.create_credential_resolver: explicit keys, then the environment
# unless a profile was named explicitly, then the profile in the credentials file, then
# in the config file.)


def test_explicit_keys_win_over_an_explicit_profile() -> None:
    cfg = resolve(ENV, SHARED, profile="dev", access_key="FLAGKEY", secret_key="FLAGSECRET")
    assert (cfg.access_key, cfg.session_token) == ("FLAGKEY", None)
    assert cfg.sources["credentials"] == "explicit"


def test_an_explicit_profile_wins_over_keys_in_the_environment() -> None:
    cfg = resolve({**ENV, "AWS_SESSION_TOKEN": "ENVTOKEN"}, SHARED, profile="dev")
    assert (cfg.access_key, cfg.secret_key, cfg.session_token) == (
        "DEVKEY",
        "DEVSECRET",
        "DEVTOKEN",
    )
    assert cfg.sources["credentials"] == "credentials file"


def test_an_explicit_profile_without_keys_takes_none_from_the_environment() -> None:
    # The chain goes on past the profile, as botocore's: to the container endpoint and
    # the instance metadata service (fetched by the client), never to the environment.
    fs = files(**{CONFIG: "[profile bare]\nregion = eu-north-1\n"})
    cfg = resolve(ENV, fs, profile="bare")
    assert (cfg.access_key, cfg.secret_key) == (None, None)
    assert isinstance(cfg.credential_source, InstanceMetadata)
    assert cfg.credential_source.fallback_for == "bare"
    assert cfg.sources["credentials"] == cfg.credential_source.describe()
    with pytest.raises(ConfigError, match=r"profile `bare` .* gives no credentials"):
        resolve({**ENV, "AWS_EC2_METADATA_DISABLED": "true"}, fs, profile="bare")


def test_keys_in_the_environment_win_over_a_profile_named_by_aws_profile() -> None:
    cfg = resolve({**ENV, "AWS_PROFILE": "dev"}, SHARED)
    assert (cfg.access_key, cfg.session_token) == ("ENVKEY", None)
    assert cfg.sources["credentials"] == "environment"
    assert cfg.profile == "dev"


def test_keys_in_the_environment_win_over_the_default_profile() -> None:
    cfg = resolve(ENV, SHARED)
    assert cfg.access_key == "ENVKEY"


def test_the_credentials_file_wins_over_the_config_file_for_one_profile() -> None:
    fs = files(
        **{
            CREDS: "[dev]\naws_access_key_id = CREDKEY\naws_secret_access_key = CREDSECRET\n",
            CONFIG: "[profile dev]\naws_access_key_id = CFGKEY\naws_secret_access_key = CFGS\n",
        }
    )
    cfg = resolve({}, fs, profile="dev")
    assert (cfg.access_key, cfg.sources["credentials"]) == ("CREDKEY", "credentials file")


def test_an_explicit_profile_leaves_endpoint_and_region_to_the_environment() -> None:
    # Only credentials skip the environment (botocore: AWS_REGION and AWS_ENDPOINT_URL
    # still come before the profile's config).
    cfg = resolve(ENV, SHARED, profile="dev")
    assert (cfg.endpoint, cfg.region) == ("http://env-endpoint:9000", "ap-south-1")


def test_the_ca_bundle_comes_from_the_environment_then_the_profile() -> None:
    fs = files(**{CONFIG: "[default]\nca_bundle = ~/certs/ca.pem\n"})
    cfg = resolve({}, fs, endpoint="http://e", access_key="A", secret_key="B", region="r")
    assert cfg.ca_bundle == f"{HOME}/certs/ca.pem"
    assert cfg.sources["ca_bundle"] == "config file"
    assert cfg.client_kwargs()["verify"] == f"{HOME}/certs/ca.pem"
    env = resolve({"AWS_CA_BUNDLE": "/etc/ca.pem"}, fs, endpoint="http://e")
    assert (env.ca_bundle, env.sources["ca_bundle"]) == ("/etc/ca.pem", "environment")
    assert "verify" not in resolve({}, {}, endpoint="http://e").client_kwargs()
