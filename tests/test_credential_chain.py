"""Which credential source a client uses, and what each source's requests and answers
are: botocore's chain (environment, assume-role, web identity, SSO, the shared files,
credential_process, the container endpoint, the instance metadata service) as pure
decisions over an environment mapping and the parsed shared files. Nothing is fetched;
no repr, description or error shows a secret."""

from __future__ import annotations

import hashlib
import json
import textwrap
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, parse_qsl, urlsplit

import pytest

from objsdk._core.container_credentials import ContainerEndpoint, container_endpoint
from objsdk._core.credential_process import CredentialProcess
from objsdk._core.credential_sources import (
    AssumeRole,
    EnvironmentKeys,
    ProfileKeys,
    WebIdentity,
    no_credentials_error,
    resolve_credential_source,
)
from objsdk._core.instance_metadata import (
    InstanceMetadata,
    TokenOutcome,
    extend_stale_expiry,
    instance_metadata,
)
from objsdk._core.profiles import SharedFiles, load_shared_files, parse_shared_files
from objsdk._core.signing import Credentials
from objsdk._core.sso import SSO, SsoToken, parse_sso_token, sso_cache_file
from objsdk._core.sts import (
    default_session_name,
    parse_sts_credentials,
    parse_sts_error,
    sts_endpoint,
)
from objsdk.errors import (
    ConfigError,
    InvalidArgument,
    ObjsdkError,
    ProtocolError,
    XMLParseError,
)

HOME = "/home/u"
CONFIG = f"{HOME}/.aws/config"
CREDS = f"{HOME}/.aws/credentials"
NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
# Distinctive values: no repr, description or message may contain them.
SECRET = "wJalrXUtnFEMI-SECRET-9f8e"
TOKEN = "FwoGZXIvYXdz-TOKEN-7d6c"
WEB_TOKEN = "eyJhbGciOi-WEBTOKEN-3b2a"
SECRETS = (SECRET, TOKEN, WEB_TOKEN)

ROLE = "arn:aws:iam::123456789012:role/reader"

# A ~/.aws/credentials with the kinds of sections the cases below refer to.
CREDENTIALS_FILE = f"""
[default]
aws_access_key_id = DEFAULTKEY
aws_secret_access_key = {SECRET}

[base]
aws_access_key_id = BASEKEY
aws_secret_access_key = {SECRET}
aws_session_token = {TOKEN}
"""


def shared(config: str = "", credentials: str = "") -> SharedFiles:
    return parse_shared_files(
        textwrap.dedent(config) if config else None,
        textwrap.dedent(credentials) if credentials else None,
        config_path=CONFIG,
        credentials_path=CREDS,
        home=HOME,
    )


def resolve(
    config: str = "",
    credentials: str = "",
    environ: Mapping[str, str] | None = None,
    profile: str | None = None,
    *,
    imds: bool = False,
) -> object:
    env = dict(environ or {})
    if not imds:
        env.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    return resolve_credential_source(env, shared(config, credentials), profile)


def assert_no_secret(*values: object) -> None:
    for value in values:
        for text in (repr(value), str(value)):
            for secret in SECRETS:
                assert secret not in text, f"{secret!r} shown in {text!r}"
        describe = getattr(value, "describe", None)
        if callable(describe):
            text = describe()
            assert not any(secret in text for secret in SECRETS), text


# --- the shared files -----------------------------------------------------------------------


def test_config_sections_become_profiles_sso_sessions_and_services():
    files = shared(
        """
        [default]
        region = eu-west-1
        [profile dev]
        region = eu-central-1
        [profile "my name"]
        region = us-east-2
        [sso-session corp]
        sso_region = us-east-1
        [services local]
        sts =
          endpoint_url = http://sts.local:9000
        [preview]
        cloudfront = true
        """
    )
    assert set(files.config_profiles) == {"default", "dev", "my name"}
    assert files.sso_sessions["corp"]["sso_region"] == "us-east-1"
    assert set(files.services) == {"local"}


def test_a_profiles_settings_are_its_config_section_under_its_credentials_section():
    files = shared(
        """
        [profile dev]
        region = eu-west-1
        credential_process = from-config
        """,
        """
        [dev]
        credential_process = from-credentials
        role_session_name = s
        """,
    )
    assert files.settings("dev") == {
        "region": "eu-west-1",
        "credential_process": "from-credentials",
        "role_session_name": "s",
    }
    assert files.has_profile("dev")
    assert not files.has_profile("nope")
    assert files.settings("nope") == {}
    assert files.where("dev") == f"{CONFIG} and {CREDS}"


def test_profile_default_and_default_are_the_same_profile():
    files = shared("[profile default]\nregion = eu-west-3\n")
    assert files.settings("default") == {"region": "eu-west-3"}


def test_a_services_block_is_read_by_service_and_key():
    files = shared(
        """
        [profile dev]
        services = local
        [services local]
        sts =
          endpoint_url = http://sts.local:9000
        s3 =
          endpoint_url = http://s3.local:9000
        """
    )
    assert files.service_setting("dev", "sts", "endpoint_url") == "http://sts.local:9000"
    assert files.service_setting("dev", "STS", "ENDPOINT_URL") == "http://sts.local:9000"
    assert files.service_setting("dev", "iam", "endpoint_url") is None
    assert files.service_setting("default", "sts", "endpoint_url") is None


def test_load_shared_files_follows_the_environment_to_the_files():
    fs = {
        "/etc/aws/config": "[profile dev]\nregion = eu-west-1\n",
        f"{HOME}/.aws/credentials": "[dev]\naws_access_key_id = K\n",
    }
    files = load_shared_files({"AWS_CONFIG_FILE": "/etc/aws/config"}, home=HOME, read_file=fs.get)
    assert files.config_path == "/etc/aws/config"
    assert files.credentials_path == f"{HOME}/.aws/credentials"
    assert files.home == HOME
    assert files.settings("dev") == {"region": "eu-west-1", "aws_access_key_id": "K"}


def test_missing_files_are_empty():
    files = load_shared_files({"HOME": HOME}, read_file=lambda path: None)
    assert files.config_profiles == {}
    assert files.credentials_profiles == {}
    assert files.home == HOME


def test_an_unparsable_file_is_an_error_naming_it_without_quoting_it():
    with pytest.raises(ConfigError, match=f"cannot parse {CREDS}") as caught:
        shared(credentials=f"[dev]\n{SECRET}\n")
    assert_no_secret(caught.value)


def test_the_repr_of_the_files_names_profiles_never_values():
    files = shared(credentials=CREDENTIALS_FILE)
    assert "base" in repr(files)
    assert_no_secret(files)


# --- step 1: the environment ----------------------------------------------------------------

ENV_KEYS = {"AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": SECRET}


def test_the_environments_keys_come_first():
    source = resolve(credentials=CREDENTIALS_FILE, environ=ENV_KEYS)
    assert isinstance(source, EnvironmentKeys)
    assert source.method == "env"
    assert source.credentials == Credentials("ENVKEY", SECRET)
    assert source.describe() == "the environment (AWS_ACCESS_KEY_ID)"


def test_an_explicit_profile_skips_the_environments_keys():
    source = resolve(credentials=CREDENTIALS_FILE, environ=ENV_KEYS, profile="base")
    assert isinstance(source, ProfileKeys)
    assert source.credentials.access_key == "BASEKEY"


def test_aws_profile_does_not_skip_the_environments_keys():
    environ = {**ENV_KEYS, "AWS_PROFILE": "base"}
    source = resolve(credentials=CREDENTIALS_FILE, environ=environ)
    assert isinstance(source, EnvironmentKeys)


def test_the_environments_token_and_expiration_are_read():
    environ = {
        **ENV_KEYS,
        "AWS_SESSION_TOKEN": TOKEN,
        "AWS_CREDENTIAL_EXPIRATION": "2024-05-01T12:00:00Z",
    }
    source = resolve(environ=environ)
    assert isinstance(source, EnvironmentKeys)
    assert source.credentials == Credentials("ENVKEY", SECRET, TOKEN, NOW)


def test_aws_security_token_is_read_before_aws_session_token_as_botocore_does():
    environ = {**ENV_KEYS, "AWS_SECURITY_TOKEN": "older", "AWS_SESSION_TOKEN": "newer"}
    source = resolve(environ=environ)
    assert isinstance(source, EnvironmentKeys)
    assert source.credentials.session_token == "older"


def test_a_key_without_its_secret_in_the_environment_is_an_error():
    with pytest.raises(ConfigError, match="AWS_SECRET_ACCESS_KEY is not"):
        resolve(environ={"AWS_ACCESS_KEY_ID": "ENVKEY"})


def test_a_malformed_credential_expiration_is_an_error_naming_the_variable():
    with pytest.raises(ConfigError, match="AWS_CREDENTIAL_EXPIRATION"):
        resolve(environ={**ENV_KEYS, "AWS_CREDENTIAL_EXPIRATION": "soon"})


def test_an_empty_access_key_variable_counts_as_unset():
    source = resolve(credentials=CREDENTIALS_FILE, environ={"AWS_ACCESS_KEY_ID": ""})
    assert isinstance(source, ProfileKeys)


# --- which profile ----------------------------------------------------------------------------


def test_a_named_profile_that_does_not_exist_is_an_error_naming_it_and_the_files():
    with pytest.raises(ConfigError, match=r"profile `nope` is in neither") as caught:
        resolve(credentials=CREDENTIALS_FILE, profile="nope")
    assert CONFIG in str(caught.value)
    assert CREDS in str(caught.value)


def test_a_profile_named_by_aws_profile_must_exist_too():
    with pytest.raises(ConfigError, match="`nope`"):
        resolve(credentials=CREDENTIALS_FILE, environ={**ENV_KEYS, "AWS_PROFILE": "nope"})


def test_aws_default_profile_wins_over_aws_profile_as_in_botocore():
    environ = {"AWS_DEFAULT_PROFILE": "base", "AWS_PROFILE": "default"}
    source = resolve(credentials=CREDENTIALS_FILE, environ=environ)
    assert isinstance(source, ProfileKeys)
    assert source.profile == "base"


def test_without_a_named_profile_the_default_profile_is_used():
    source = resolve(credentials=CREDENTIALS_FILE)
    assert isinstance(source, ProfileKeys)
    assert source.profile == "default"


def test_a_missing_default_profile_is_no_error():
    assert resolve() is None


# --- step 3: the profile's own sources ------------------------------------------------------------


def test_keys_in_the_credentials_file():
    source = resolve(credentials=CREDENTIALS_FILE, profile="base")
    assert isinstance(source, ProfileKeys)
    assert source.method == "shared-credentials-file"
    assert source.in_credentials_file
    assert source.credentials == Credentials("BASEKEY", SECRET, TOKEN)
    assert source.describe() == f"profile `base` (aws_access_key_id in {CREDS})"


def test_keys_in_the_config_file():
    source = resolve(
        f"[profile dev]\naws_access_key_id = CFGKEY\naws_secret_access_key = {SECRET}\n",
        profile="dev",
    )
    assert isinstance(source, ProfileKeys)
    assert source.method == "config-file"
    assert source.path == CONFIG
    assert source.credentials == Credentials("CFGKEY", SECRET)


def test_aws_security_token_is_read_before_aws_session_token_in_a_profile():
    source = resolve(
        credentials=f"""
        [dev]
        aws_access_key_id = K
        aws_secret_access_key = {SECRET}
        aws_session_token = newer
        aws_security_token = older
        """,
        profile="dev",
    )
    assert isinstance(source, ProfileKeys)
    assert source.credentials.session_token == "older"


@pytest.mark.parametrize(
    ("section", "missing"),
    [
        ("aws_access_key_id = K", "aws_secret_access_key"),
        ("aws_access_key_id =\naws_secret_access_key = S", "aws_access_key_id"),
    ],
)
def test_half_a_key_pair_in_a_profile_is_an_error_naming_the_profile_file_and_key(section, missing):
    with pytest.raises(ConfigError, match=f"profile `dev` in {CREDS} has no {missing}"):
        resolve(credentials=f"[dev]\n{section}\n", profile="dev")


def test_credentials_file_keys_win_over_credential_process_and_config_keys():
    config = """
    [profile dev]
    credential_process = get-creds
    aws_access_key_id = CFGKEY
    aws_secret_access_key = S
    """
    source = resolve(
        config, f"[dev]\naws_access_key_id = K\naws_secret_access_key = {SECRET}\n", profile="dev"
    )
    assert isinstance(source, ProfileKeys)
    assert source.in_credentials_file


def test_credential_process_wins_over_config_file_keys():
    config = """
    [profile ml]
    credential_process = /opt/bin/get-creds --account "ml team"
    aws_access_key_id = CFGKEY
    aws_secret_access_key = S
    """
    source = resolve(config, profile="ml")
    assert isinstance(source, CredentialProcess)
    assert source.method == "custom-process"
    assert source.describe() == "profile `ml` (credential_process)"
    assert source.args(windows=False) == ["/opt/bin/get-creds", "--account", "ml team"]


def test_credential_process_may_be_written_in_the_credentials_file():
    source = resolve(credentials="[ml]\ncredential_process = get-creds\n", profile="ml")
    assert isinstance(source, CredentialProcess)


def test_sso_wins_over_keys_and_credential_process():
    config = """
    [profile dev]
    sso_start_url = https://corp.awsapps.com/start
    sso_region = eu-west-1
    sso_account_id = 123456789012
    sso_role_name = Reader
    credential_process = get-creds
    """
    source = resolve(
        config, "[dev]\naws_access_key_id = K\naws_secret_access_key = S\n", None, "dev"
    )
    assert isinstance(source, SSO)


def test_aws_login_profiles_are_refused_with_a_way_out():
    with pytest.raises(ConfigError, match=r"aws login.*export-credentials --profile dev"):
        resolve("[profile dev]\nlogin_session = arn:aws:iam::1:user/x\n", profile="dev")


# --- web identity -------------------------------------------------------------------------------

WEB_ENV = {
    "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/secrets/token",
    "AWS_ROLE_ARN": ROLE,
    "AWS_ROLE_SESSION_NAME": "pod-1",
}


def test_web_identity_from_the_environment():
    source = resolve(credentials=CREDENTIALS_FILE, environ=WEB_ENV)
    assert source == WebIdentity(ROLE, "/var/run/secrets/token", "pod-1", profile=None)
    assert isinstance(source, WebIdentity)
    assert source.method == "assume-role-with-web-identity"
    assert "AWS_WEB_IDENTITY_TOKEN_FILE" in source.describe()


def test_web_identity_from_a_profile():
    config = """
    [profile k8s]
    web_identity_token_file = /token
    role_arn = arn:aws:iam::1:role/k8s
    """
    source = resolve(config, profile="k8s")
    assert source == WebIdentity("arn:aws:iam::1:role/k8s", "/token", None, profile="k8s")


def test_each_web_identity_setting_comes_from_the_environment_else_the_profile():
    config = f"""
    [default]
    web_identity_token_file = /profile-token
    role_arn = {ROLE}
    role_session_name = from-profile
    """
    source = resolve(config, environ={"AWS_WEB_IDENTITY_TOKEN_FILE": "/env-token"})
    assert source == WebIdentity(ROLE, "/env-token", "from-profile", profile=None)


def test_an_explicit_profile_ignores_the_environments_web_identity():
    source = resolve(credentials=CREDENTIALS_FILE, environ=WEB_ENV, profile="base")
    assert isinstance(source, ProfileKeys)


def test_a_web_identity_token_without_a_role_is_an_error_saying_what_to_set():
    with pytest.raises(ConfigError, match="AWS_ROLE_ARN or role_arn"):
        resolve(environ={"AWS_WEB_IDENTITY_TOKEN_FILE": "/token"})


def test_a_profile_with_role_arn_and_web_identity_token_file_is_web_identity_not_assume_role():
    config = f"""
    [profile k8s]
    role_arn = {ROLE}
    web_identity_token_file = /token
    source_profile = base
    """
    source = resolve(config, CREDENTIALS_FILE, profile="k8s")
    assert isinstance(source, WebIdentity)


def test_web_identity_request_is_unsigned_and_carries_the_token():
    source = WebIdentity(ROLE, "/token", None)
    request = source.request(f"{WEB_TOKEN}\n", "https://sts.eu-west-1.amazonaws.com", None, NOW)
    assert request.action == "AssumeRoleWithWebIdentity"
    assert not request.signed
    assert request.url == "https://sts.eu-west-1.amazonaws.com"
    assert parse_qs(request.body.decode()) == {
        "Action": ["AssumeRoleWithWebIdentity"],
        "Version": ["2011-06-15"],
        "RoleArn": [ROLE],
        "RoleSessionName": [f"objsdk-session-{int(NOW.timestamp())}"],
        "WebIdentityToken": [WEB_TOKEN],
    }
    assert request.headers["Content-Type"].startswith("application/x-www-form-urlencoded")
    assert_no_secret(request)


def test_an_empty_web_identity_token_file_is_an_error_naming_it():
    with pytest.raises(ConfigError, match="/token is empty"):
        WebIdentity(ROLE, "/token").request("\n", "https://sts.amazonaws.com", None, NOW)


# --- step 2: assume-role --------------------------------------------------------------------------


def test_a_role_profile_is_assumed_with_its_source_profiles_keys():
    config = f"""
    [profile reader]
    role_arn = {ROLE}
    source_profile = base
    role_session_name = nightly
    external_id = ext-1
    duration_seconds = 3600
    """
    source = resolve(config, CREDENTIALS_FILE, profile="reader")
    assert isinstance(source, AssumeRole)
    assert source.method == "assume-role"
    assert source.role_arn == ROLE
    assert (source.role_session_name, source.external_id, source.duration_seconds) == (
        "nightly",
        "ext-1",
        3600,
    )
    assert isinstance(source.source, ProfileKeys)
    assert source.source.profile == "base"
    assert source.describe() == (
        f"profile `reader` (role {ROLE}, assumed with profile `base` "
        f"(aws_access_key_id in {CREDS}))"
    )


def test_assume_role_wins_over_the_environments_web_identity_and_the_profiles_keys():
    config = f"[profile reader]\nrole_arn = {ROLE}\nsource_profile = base\n"
    credentials = (
        CREDENTIALS_FILE + "\n[reader]\naws_access_key_id = K\naws_secret_access_key = S\n"
    )
    source = resolve(config, credentials, environ=WEB_ENV, profile="reader")
    assert isinstance(source, AssumeRole)


def test_the_default_profile_may_assume_a_role():
    config = f"[default]\nrole_arn = {ROLE}\nsource_profile = base\n"
    assert isinstance(resolve(config, CREDENTIALS_FILE), AssumeRole)


def test_roles_chain_through_source_profiles():
    config = """
    [profile a]
    role_arn = arn:aws:iam::1:role/a
    source_profile = b
    [profile b]
    role_arn = arn:aws:iam::1:role/b
    source_profile = base
    """
    source = resolve(config, CREDENTIALS_FILE, profile="a")
    assert isinstance(source, AssumeRole)
    inner = source.source
    assert isinstance(inner, AssumeRole)
    assert inner.role_arn == "arn:aws:iam::1:role/b"
    assert isinstance(inner.source, ProfileKeys)
    assert "profile `a`" in source.describe()
    assert "profile `b`" in source.describe()
    assert "profile `base`" in source.describe()


def test_a_source_profile_with_keys_and_a_role_gives_its_keys():
    config = """
    [profile a]
    role_arn = arn:aws:iam::1:role/a
    source_profile = b
    [profile b]
    role_arn = arn:aws:iam::1:role/b
    source_profile = base
    aws_access_key_id = BKEY
    aws_secret_access_key = S
    """
    source = resolve(config, CREDENTIALS_FILE, profile="a")
    assert isinstance(source, AssumeRole)
    assert isinstance(source.source, ProfileKeys)
    assert source.source.credentials.access_key == "BKEY"


def test_a_profile_may_assume_its_role_with_its_own_keys():
    config = f"""
    [profile self]
    role_arn = {ROLE}
    source_profile = self
    aws_access_key_id = SELFKEY
    aws_secret_access_key = S
    """
    source = resolve(config, profile="self")
    assert isinstance(source, AssumeRole)
    assert isinstance(source.source, ProfileKeys)
    assert source.source.profile == "self"


def test_a_profile_naming_itself_without_keys_is_a_cycle():
    with pytest.raises(ConfigError, match="cycle: `self` -> `self`"):
        resolve(f"[profile self]\nrole_arn = {ROLE}\nsource_profile = self\n", profile="self")


def test_a_cycle_of_source_profiles_is_an_error_naming_the_chain():
    config = """
    [profile a]
    role_arn = arn:aws:iam::1:role/a
    source_profile = b
    [profile b]
    role_arn = arn:aws:iam::1:role/b
    source_profile = c
    [profile c]
    role_arn = arn:aws:iam::1:role/c
    source_profile = a
    """
    with pytest.raises(ConfigError, match="cycle: `a` -> `b` -> `c` -> `a`"):
        resolve(config, profile="a")


def test_a_missing_source_profile_is_an_error_naming_both_profiles():
    with pytest.raises(ConfigError, match="profile `r` names source_profile `gone`"):
        resolve(f"[profile r]\nrole_arn = {ROLE}\nsource_profile = gone\n", profile="r")


def test_a_source_profile_without_credentials_is_an_error():
    config = (
        f"[profile r]\nrole_arn = {ROLE}\nsource_profile = empty\n[profile empty]\nregion = x\n"
    )
    with pytest.raises(ConfigError, match="source_profile `empty`, which gives no credentials"):
        resolve(config, profile="r")


@pytest.mark.parametrize(
    ("source_section", "kind"),
    [
        ("credential_process = get-creds", CredentialProcess),
        ("web_identity_token_file = /token\nrole_arn = arn:aws:iam::1:role/w", WebIdentity),
        (
            "sso_start_url = https://x/start\nsso_region = us-east-1\n"
            "sso_account_id = 1\nsso_role_name = R",
            SSO,
        ),
    ],
)
def test_a_source_profile_may_use_any_of_a_profiles_own_sources(source_section, kind):
    config = (
        f"[profile r]\nrole_arn = {ROLE}\nsource_profile = src\n[profile src]\n{source_section}\n"
    )
    source = resolve(config, profile="r")
    assert isinstance(source, AssumeRole)
    assert isinstance(source.source, kind)


def test_a_source_profile_ignores_the_environments_web_identity():
    config = f"[profile r]\nrole_arn = {ROLE}\nsource_profile = base\n"
    source = resolve(config, CREDENTIALS_FILE, environ=WEB_ENV, profile="r")
    assert isinstance(source, AssumeRole)
    assert isinstance(source.source, ProfileKeys)


def test_credential_source_environment():
    config = f"[profile r]\nrole_arn = {ROLE}\ncredential_source = Environment\n"
    source = resolve(config, environ=ENV_KEYS, profile="r")
    assert isinstance(source, AssumeRole)
    assert source.source == EnvironmentKeys(Credentials("ENVKEY", SECRET))


def test_credential_source_ecs_container():
    config = f"[profile r]\nrole_arn = {ROLE}\ncredential_source = EcsContainer\n"
    environ = {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/abc"}
    source = resolve(config, environ=environ, profile="r")
    assert isinstance(source, AssumeRole)
    assert source.source == ContainerEndpoint("http://169.254.170.2/v2/credentials/abc")


def test_credential_source_instance_metadata_uses_the_clients_profile_settings():
    config = f"""
    [profile r]
    role_arn = {ROLE}
    credential_source = Ec2InstanceMetadata
    metadata_service_timeout = 3
    """
    source = resolve(config, profile="r", imds=True)
    assert isinstance(source, AssumeRole)
    assert source.source == InstanceMetadata(timeout=3.0)


@pytest.mark.parametrize(
    ("credential_source", "message"),
    [
        ("Environment", "AWS_ACCESS_KEY_ID is not set"),
        ("EcsContainer", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"),
        ("Ec2InstanceMetadata", "AWS_EC2_METADATA_DISABLED"),
    ],
)
def test_a_credential_source_that_has_nothing_is_an_error_saying_why(credential_source, message):
    config = f"[profile r]\nrole_arn = {ROLE}\ncredential_source = {credential_source}\n"
    with pytest.raises(ConfigError, match=message):
        resolve(config, profile="r")


@pytest.mark.parametrize("value", ["environment", "SharedConfig", "Nope"])
def test_an_unknown_credential_source_is_an_error_listing_the_valid_ones(value):
    config = f"[profile r]\nrole_arn = {ROLE}\ncredential_source = {value}\n"
    with pytest.raises(ConfigError, match="Environment, EcsContainer, Ec2InstanceMetadata"):
        resolve(config, environ=ENV_KEYS, profile="r")


def test_both_source_profile_and_credential_source_is_an_error():
    config = (
        f"[profile r]\nrole_arn = {ROLE}\nsource_profile = base\ncredential_source = Environment\n"
    )
    with pytest.raises(ConfigError, match="both source_profile and credential_source"):
        resolve(config, CREDENTIALS_FILE, profile="r")


def test_a_role_with_neither_source_is_an_error():
    with pytest.raises(ConfigError, match="neither source_profile nor credential_source"):
        resolve(f"[profile r]\nrole_arn = {ROLE}\n", profile="r")


def test_mfa_profiles_are_refused_because_nothing_can_prompt():
    config = f"""
    [profile r]
    role_arn = {ROLE}
    source_profile = base
    mfa_serial = arn:aws:iam::123456789012:mfa/me
    """
    with pytest.raises(ConfigError, match=r"`r` needs an MFA code.*export-credentials --profile r"):
        resolve(config, CREDENTIALS_FILE, profile="r")


@pytest.mark.parametrize("value", ["an hour", "899", "43201", "-1", "3600.5"])
def test_a_duration_outside_stss_bounds_is_an_error_naming_the_profile(value):
    config = f"[profile r]\nrole_arn = {ROLE}\nsource_profile = base\nduration_seconds = {value}\n"
    with pytest.raises(ConfigError, match="duration_seconds of profile `r`"):
        resolve(config, CREDENTIALS_FILE, profile="r")


def test_the_assume_role_request_carries_the_profiles_parameters():
    role = AssumeRole(
        "r",
        ROLE,
        ProfileKeys("base", CREDS, True, Credentials("K", SECRET)),
        role_session_name="nightly",
        external_id="ext-1",
        duration_seconds=900,
    )
    request = role.request("https://sts.eu-west-1.amazonaws.com", "eu-west-1", NOW)
    assert request.signed
    assert request.region == "eu-west-1"
    assert request.service == "sts"
    assert parse_qsl(request.body.decode()) == [
        ("Action", "AssumeRole"),
        ("Version", "2011-06-15"),
        ("RoleArn", ROLE),
        ("RoleSessionName", "nightly"),
        ("DurationSeconds", "900"),
        ("ExternalId", "ext-1"),
    ]
    assert_no_secret(role, request)


def test_an_assume_role_request_without_session_name_or_region_uses_the_defaults():
    role = AssumeRole("r", ROLE, EnvironmentKeys(Credentials("K", SECRET)))
    request = role.request("https://sts.amazonaws.com", None, NOW)
    fields = dict(parse_qsl(request.body.decode()))
    assert fields["RoleSessionName"] == default_session_name(NOW) == "objsdk-session-1714564800"
    assert "DurationSeconds" not in fields
    assert "ExternalId" not in fields
    assert request.region == "us-east-1"


# --- step 4: the container endpoint -------------------------------------------------------------


def test_the_container_endpoint_comes_after_the_profile():
    environ = {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/abc"}
    assert isinstance(resolve(credentials=CREDENTIALS_FILE, environ=environ), ProfileKeys)
    source = resolve(environ=environ, imds=True)
    assert source == ContainerEndpoint("http://169.254.170.2/v2/credentials/abc")
    assert isinstance(source, ContainerEndpoint)
    assert source.method == "container-role"


def test_a_relative_uri_wins_over_a_full_uri():
    endpoint = container_endpoint(
        {
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/rel",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://localhost:8080/full",
        }
    )
    assert endpoint is not None
    assert endpoint.url == "http://169.254.170.2/rel"


@pytest.mark.parametrize(
    "url",
    [
        "https://creds.example.com/role",
        "http://127.0.0.1:8080/creds",
        "http://127.1.2.3/creds",
        "http://[::1]:8080/creds",
        "http://localhost/creds",
        "http://169.254.170.2/creds",
        "http://169.254.170.23/v1/credentials",
        "http://[fd00:ec2::23]/v1/credentials",
    ],
)
def test_a_full_uri_over_https_or_to_a_local_or_container_host_is_accepted(url):
    endpoint = container_endpoint({"AWS_CONTAINER_CREDENTIALS_FULL_URI": url})
    assert endpoint is not None
    assert endpoint.url == url
    assert endpoint.variable == "AWS_CONTAINER_CREDENTIALS_FULL_URI"


@pytest.mark.parametrize(
    "url",
    ["http://creds.example.com/role", "http://10.0.0.1/creds", "ftp://localhost/x", "localhost"],
)
def test_a_full_uri_that_could_leak_the_token_is_refused(url):
    with pytest.raises(ConfigError, match="AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        container_endpoint({"AWS_CONTAINER_CREDENTIALS_FULL_URI": url})


def test_the_container_authorization_token_and_its_file():
    environ = {
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN": TOKEN,
    }
    endpoint = container_endpoint(environ)
    assert endpoint is not None
    assert endpoint.headers() == {"Accept": "application/json", "Authorization": TOKEN}
    assert_no_secret(endpoint)
    with_file = container_endpoint({**environ, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "/tok"})
    assert with_file is not None
    assert with_file.auth_token is None
    assert with_file.auth_token_file == "/tok"
    assert with_file.headers("rotated-token\n")["Authorization"] == "rotated-token"
    with pytest.raises(ConfigError, match="/tok"):
        with_file.headers()


def test_a_container_token_with_a_line_break_is_refused_without_showing_it():
    endpoint = ContainerEndpoint("http://localhost/c", auth_token=f"{TOKEN}\r\nX-Evil: 1")
    with pytest.raises(ConfigError, match="line break") as caught:
        endpoint.headers()
    assert_no_secret(caught.value)


def test_the_container_answer_gives_expiring_credentials():
    endpoint = ContainerEndpoint("http://169.254.170.2/creds")
    body = json.dumps(
        {
            "AccessKeyId": "ASIAC",
            "SecretAccessKey": SECRET,
            "Token": TOKEN,
            "Expiration": "2024-05-01T12:00:00Z",
            "RoleArn": ROLE,
        }
    ).encode()
    assert endpoint.parse_answer(body) == Credentials("ASIAC", SECRET, TOKEN, NOW)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"AccessKeyId": "A", "SecretAccessKey": SECRET, "Expiration": "2024-05-01T12:00:00Z"},
            "no Token",
        ),
        ({"AccessKeyId": "A", "SecretAccessKey": SECRET, "Token": TOKEN}, "no Expiration"),
        ({"code": "InvalidToken", "message": "nope"}, "no AccessKeyId, SecretAccessKey"),
        (
            {"AccessKeyId": "A", "SecretAccessKey": SECRET, "Token": TOKEN, "Expiration": "later"},
            "Expiration",
        ),
        (
            {
                "AccessKeyId": 5,
                "SecretAccessKey": SECRET,
                "Token": TOKEN,
                "Expiration": "2024-05-01T12:00:00Z",
            },
            "AccessKeyId is a int",
        ),
    ],
)
def test_a_malformed_container_answer_is_a_protocol_error_naming_the_field(document, message):
    endpoint = ContainerEndpoint("http://169.254.170.2/creds")
    with pytest.raises(ProtocolError, match=message) as caught:
        endpoint.parse_answer(json.dumps(document))
    assert_no_secret(caught.value)


def test_a_container_answer_that_is_not_json_is_described_by_its_size_only():
    with pytest.raises(ProtocolError, match=r"not JSON \(\d+ bytes\)") as caught:
        ContainerEndpoint("http://x/").parse_answer(f"AccessKeyId={SECRET}".encode())
    assert_no_secret(caught.value)


# --- step 5: the instance metadata service --------------------------------------------------------


def test_the_metadata_service_is_the_last_resort():
    source = resolve(imds=True)
    assert source == InstanceMetadata()
    assert isinstance(source, InstanceMetadata)
    assert source.method == "iam-role"
    assert source.base_url == "http://169.254.169.254/"


def test_disabled_metadata_service_and_nothing_else_is_no_source():
    assert resolve(environ={"AWS_EC2_METADATA_DISABLED": "TRUE"}, imds=True) is None


def test_a_named_profile_that_gives_nothing_is_an_error_with_the_remedies():
    with pytest.raises(ConfigError) as caught:
        resolve("[profile dev]\nregion = eu-west-1\n", profile="dev")
    text = str(caught.value)
    assert "profile `dev`" in text
    assert CONFIG in text
    assert "aws_access_key_id" in text
    assert "aws sso login --profile dev" in text
    assert "credential_process" in text


def test_a_named_profile_that_gives_nothing_falls_back_to_the_metadata_service_as_botocore():
    source = resolve("[profile dev]\nregion = eu-west-1\n", profile="dev", imds=True)
    assert isinstance(source, InstanceMetadata)
    assert source.fallback_for == "dev"
    assert str(no_credentials_error("dev", shared("[profile dev]\n"))).startswith("profile `dev`")


def test_metadata_settings_come_from_the_environment_else_the_profile():
    settings = {
        "ec2_metadata_service_endpoint": "http://profile-imds/",
        "metadata_service_timeout": "5",
        "metadata_service_num_attempts": "3",
        "ec2_metadata_v1_disabled": "true",
    }
    assert instance_metadata({}, settings) == InstanceMetadata(
        "http://profile-imds/", timeout=5.0, attempts=3, v1_disabled=True
    )
    environ = {
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://env-imds:1338",
        "AWS_METADATA_SERVICE_TIMEOUT": "0.5",
        "AWS_METADATA_SERVICE_NUM_ATTEMPTS": "2",
        "AWS_EC2_METADATA_V1_DISABLED": "false",
    }
    assert instance_metadata(environ, settings) == InstanceMetadata(
        "http://env-imds:1338", timeout=0.5, attempts=2, v1_disabled=False
    )


@pytest.mark.parametrize(
    ("environ", "settings", "base_url"),
    [
        ({"AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "IPv6"}, {}, "http://[fd00:ec2::254]/"),
        ({}, {"ec2_metadata_service_endpoint_mode": "ipv6"}, "http://[fd00:ec2::254]/"),
        ({"AWS_IMDS_USE_IPV6": "true"}, {}, "http://[fd00:ec2::254]/"),
        (
            {"AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "ipv4", "AWS_IMDS_USE_IPV6": "true"},
            {},
            "http://169.254.169.254/",
        ),
        (
            {
                "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "ipv6",
                "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://custom/",
            },
            {},
            "http://custom/",
        ),
    ],
)
def test_the_metadata_endpoint_mode_picks_the_address(environ, settings, base_url):
    found = instance_metadata(environ, settings)
    assert found is not None
    assert found.base_url == base_url


@pytest.mark.parametrize(
    ("environ", "name"),
    [
        (
            {"AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "ipv5"},
            "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
        ),
        (
            {"AWS_EC2_METADATA_SERVICE_ENDPOINT": "169.254.169.254"},
            "AWS_EC2_METADATA_SERVICE_ENDPOINT",
        ),
        ({"AWS_METADATA_SERVICE_TIMEOUT": "soon"}, "AWS_METADATA_SERVICE_TIMEOUT"),
        ({"AWS_METADATA_SERVICE_TIMEOUT": "0"}, "AWS_METADATA_SERVICE_TIMEOUT"),
        ({"AWS_METADATA_SERVICE_NUM_ATTEMPTS": "1.5"}, "AWS_METADATA_SERVICE_NUM_ATTEMPTS"),
    ],
)
def test_a_malformed_metadata_setting_is_an_error_naming_it(environ, name):
    with pytest.raises(ConfigError, match=name):
        instance_metadata(environ, {})


def test_the_metadata_requests():
    imds = InstanceMetadata("http://169.254.169.254")
    assert imds.token_request() == (
        "http://169.254.169.254/latest/api/token",
        {"x-aws-ec2-metadata-token-ttl-seconds": "21600"},
    )
    assert imds.role_request("tok") == (
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        {"x-aws-ec2-metadata-token": "tok"},
    )
    assert imds.credentials_request("reader", None) == (
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/reader",
        {},
    )


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, TokenOutcome.TOKEN),
        (403, TokenOutcome.WITHOUT_TOKEN),
        (404, TokenOutcome.WITHOUT_TOKEN),
        (405, TokenOutcome.WITHOUT_TOKEN),
        (500, TokenOutcome.RETRY),
        (503, TokenOutcome.RETRY),
    ],
)
def test_what_a_token_answer_means(status, outcome):
    assert InstanceMetadata().token_outcome(status) is outcome


def test_a_refused_token_request_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="HTTP 400"):
        InstanceMetadata().token_outcome(400)


def test_with_imdsv1_disabled_a_service_without_tokens_is_an_error():
    imds = InstanceMetadata(v1_disabled=True)
    with pytest.raises(ConfigError, match="IMDSv1 is disabled"):
        imds.token_outcome(404)
    with pytest.raises(ConfigError, match="IMDSv1 is disabled"):
        imds.role_request(None)


def test_the_role_listing_names_the_first_role():
    assert InstanceMetadata().parse_role(b"reader\nother\n") == "reader"
    with pytest.raises(ProtocolError, match="no IAM role"):
        InstanceMetadata().parse_role(b"\n")


def test_the_metadata_answer_gives_expiring_credentials():
    body = json.dumps(
        {
            "Code": "Success",
            "LastUpdated": "2024-05-01T06:00:00Z",
            "Type": "AWS-HMAC",
            "AccessKeyId": "ASIAI",
            "SecretAccessKey": SECRET,
            "Token": TOKEN,
            "Expiration": "2024-05-01T12:00:00Z",
        }
    )
    assert InstanceMetadata().parse_answer(body) == Credentials("ASIAI", SECRET, TOKEN, NOW)


def test_a_metadata_answer_with_an_error_code_names_it():
    body = json.dumps({"Code": "AssumeRoleUnauthorizedAccess", "Message": "EC2 cannot assume"})
    with pytest.raises(ProtocolError, match=r"AssumeRoleUnauthorizedAccess.*EC2 cannot assume"):
        InstanceMetadata().parse_answer(body)


def test_stale_metadata_credentials_are_kept_a_few_minutes_more():
    jitter = timedelta(minutes=5)
    # Far from expiry: unchanged.
    assert extend_stale_expiry(NOW + timedelta(hours=6), NOW, jitter) == NOW + timedelta(hours=6)
    # Already expired, or within the window: now + 15 min + jitter.
    assert extend_stale_expiry(NOW - timedelta(hours=1), NOW, jitter) == NOW + timedelta(minutes=20)
    assert extend_stale_expiry(NOW + timedelta(minutes=19), NOW, jitter) == NOW + timedelta(
        minutes=20
    )
    assert extend_stale_expiry(None, NOW, jitter) is None


# --- SSO ------------------------------------------------------------------------------------------

SSO_CONFIG = """
[profile dev]
sso_session = corp
sso_account_id = 123456789012
sso_role_name = Reader
region = eu-west-1

[profile legacy]
sso_start_url = https://legacy.awsapps.com/start
sso_region = us-east-2
sso_account_id = 210987654321
sso_role_name = Admin

[sso-session corp]
sso_start_url = https://corp.awsapps.com/start
sso_region = eu-west-1
sso_registration_scopes = sso:account:access
"""


def test_an_sso_session_profile():
    source = resolve(SSO_CONFIG, profile="dev")
    assert isinstance(source, SSO)
    assert source.method == "sso"
    assert (source.start_url, source.region, source.account_id, source.role_name) == (
        "https://corp.awsapps.com/start",
        "eu-west-1",
        "123456789012",
        "Reader",
    )
    assert source.session_name == "corp"
    assert source.cache_path == sso_cache_file(HOME, "corp")
    assert source.describe() == "profile `dev` (SSO, sso-session `corp`)"


def test_a_legacy_sso_profile_caches_its_token_under_the_start_url():
    source = resolve(SSO_CONFIG, profile="legacy")
    assert isinstance(source, SSO)
    assert source.session_name is None
    assert source.cache_path == sso_cache_file(HOME, "https://legacy.awsapps.com/start")


def test_the_sso_cache_file_is_the_sha1_of_the_session_name_under_the_home():
    digest = hashlib.sha1(b"corp").hexdigest()
    assert sso_cache_file("/home/u", "corp") == f"/home/u/.aws/sso/cache/{digest}.json"


def test_an_sso_session_that_does_not_exist_is_an_error_naming_it():
    config = "[profile dev]\nsso_session = gone\nsso_account_id = 1\nsso_role_name = R\n"
    with pytest.raises(ConfigError, match=r"sso_session `gone`.*\[sso-session gone\]"):
        resolve(config, profile="dev")


def test_a_value_the_profile_and_the_sso_session_give_differently_is_an_error():
    config = SSO_CONFIG.replace(
        "sso_role_name = Reader", "sso_region = us-east-1\nsso_role_name = R"
    )
    with pytest.raises(ConfigError, match="different values of sso_region"):
        resolve(config, profile="dev")


def test_missing_sso_settings_are_named():
    config = "[profile dev]\nsso_account_id = 1\n"
    with pytest.raises(ConfigError, match="sso_start_url, sso_region, sso_role_name"):
        resolve(config, profile="dev")


def cache(expires: datetime, **extra: str) -> str:
    return json.dumps(
        {
            "startUrl": "https://corp.awsapps.com/start",
            "region": "eu-west-1",
            "accessToken": TOKEN,
            "expiresAt": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
            **extra,
        }
    )


def sso() -> SSO:
    source = resolve(SSO_CONFIG, profile="dev")
    assert isinstance(source, SSO)
    return source


def test_a_valid_cached_token_is_returned():
    token = sso().token(cache(NOW + timedelta(hours=1)), NOW)
    assert token.access_token == TOKEN
    assert token.expires_at == NOW + timedelta(hours=1)
    assert_no_secret(token)


def test_a_missing_sso_token_says_to_log_in():
    with pytest.raises(ConfigError, match=r"not logged in.*`aws sso login --profile dev`"):
        sso().token(None, NOW)


def test_an_expired_sso_token_says_to_log_in_again():
    with pytest.raises(ConfigError, match=r"expired at .*`aws sso login --profile dev`") as caught:
        sso().token(cache(NOW - timedelta(seconds=1)), NOW)
    assert_no_secret(caught.value)


def test_a_naive_sso_expiry_is_refused():
    with pytest.raises(InvalidArgument, match="expires_at"):
        SsoToken("t", datetime(2024, 5, 1))


def test_the_login_command_quotes_an_awkward_profile_name():
    assert SSO("my profile", "u", "r", "1", "R", None, "/c").login_command() == (
        "aws sso login --profile 'my profile'"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not JSON"),
        ("[]", "not an object"),
        (json.dumps({"expiresAt": "2024-05-01T12:00:00Z"}), "no accessToken"),
        (json.dumps({"accessToken": TOKEN, "expiresAt": "tomorrow"}), "expiresAt"),
        (
            json.dumps({"accessToken": TOKEN, "expiresAt": "2024-05-01T12:00:00Z", "clientId": 3}),
            "clientId is not a string",
        ),
    ],
)
def test_a_malformed_sso_cache_is_an_error_naming_the_file_and_field(text, message):
    with pytest.raises(ConfigError, match=message) as caught:
        parse_sso_token(text, "/c.json")
    assert "/c.json" in str(caught.value)
    assert_no_secret(caught.value)


def test_the_old_cli_utc_suffix_in_an_sso_cache_is_read():
    token = parse_sso_token(
        json.dumps({"accessToken": "t", "expiresAt": "2024-05-01T12:00:00UTC"}), "c"
    )
    assert token.expires_at == NOW


def test_an_sso_token_is_renewed_within_15_minutes_of_expiry_when_it_can_be():
    renewable = parse_sso_token(
        cache(
            NOW + timedelta(minutes=10),
            refreshToken=TOKEN + "r",
            clientId="client",
            clientSecret=SECRET,
            registrationExpiresAt="2024-08-01T00:00:00Z",
        ),
        "c",
    )
    assert renewable.renewable(NOW)
    assert renewable.renewal_due(NOW)
    assert not renewable.renewal_due(NOW - timedelta(minutes=10))
    assert not renewable.renewable(datetime(2024, 9, 1, tzinfo=timezone.utc))
    plain = parse_sso_token(cache(NOW + timedelta(minutes=10)), "c")
    assert not plain.renewable(NOW)
    assert not plain.renewal_due(NOW)
    assert_no_secret(renewable)


def test_an_sso_renewal_request_and_its_answer():
    source = sso()
    token = parse_sso_token(
        cache(
            NOW + timedelta(minutes=5),
            refreshToken="refresh-1",
            clientId="client",
            clientSecret=SECRET,
            registrationExpiresAt="2024-08-01T00:00:00Z",
        ),
        "c",
    )
    url, body = source.renewal_request(token, NOW)
    assert url == "https://oidc.eu-west-1.amazonaws.com/token"
    assert json.loads(body) == {
        "grantType": "refresh_token",
        "clientId": "client",
        "clientSecret": SECRET,
        "refreshToken": "refresh-1",
    }
    renewed = source.renewed(token, json.dumps({"accessToken": "new", "expiresIn": 3600}), NOW)
    assert renewed.access_token == "new"
    assert renewed.expires_at == NOW + timedelta(hours=1)
    assert renewed.refresh_token == "refresh-1"
    assert renewed.client_secret == SECRET
    assert parse_sso_token(renewed.cache_text(), "c") == renewed
    with pytest.raises(ConfigError, match=r"cannot be renewed.*aws sso login --profile dev"):
        source.renewal_request(parse_sso_token(cache(NOW), "c"), NOW)
    with pytest.raises(ProtocolError, match="no expiresIn"):
        source.renewed(token, json.dumps({"accessToken": "new"}), NOW)


def test_the_sso_role_credentials_request_and_answer():
    source = sso()
    token = SsoToken(TOKEN, NOW + timedelta(hours=1))
    url, headers = source.role_credentials_request(token)
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == (
        "https",
        "portal.sso.eu-west-1.amazonaws.com",
        "/federation/credentials",
    )
    assert parse_qs(parts.query) == {"role_name": ["Reader"], "account_id": ["123456789012"]}
    assert headers == {"x-amz-sso_bearer_token": TOKEN}
    body = json.dumps(
        {
            "roleCredentials": {
                "accessKeyId": "ASIAS",
                "secretAccessKey": SECRET,
                "sessionToken": TOKEN,
                "expiration": int(NOW.timestamp() * 1000),
            }
        }
    )
    assert source.parse_role_credentials(body) == Credentials("ASIAS", SECRET, TOKEN, NOW)
    with pytest.raises(ProtocolError, match="no roleCredentials"):
        source.parse_role_credentials("{}")
    with pytest.raises(ProtocolError, match="epoch milliseconds"):
        source.parse_role_credentials(json.dumps({"roleCredentials": {"expiration": "soon"}}))
    assert "aws sso login --profile dev" in str(source.unauthorized())


def test_sso_in_china_uses_the_china_domain():
    source = SSO("p", "u", "cn-north-1", "1", "R", None, "/c")
    url, _ = source.role_credentials_request(SsoToken("t", NOW))
    assert urlsplit(url).netloc == "portal.sso.cn-north-1.amazonaws.com.cn"


# --- credential_process ------------------------------------------------------------------------


def test_the_process_line_is_split_as_a_shell_would_without_running_one():
    process = CredentialProcess("ml", "get-creds --name 'a b' \"c d\" e\\ f")
    assert process.args(windows=False) == ["get-creds", "--name", "a b", "c d", "e f"]
    assert process.args(windows=True) == process.command


@pytest.mark.parametrize("command", ["get-creds 'unclosed", "   "])
def test_a_process_line_that_cannot_be_run_is_an_error_naming_the_profile(command):
    with pytest.raises(ConfigError, match="profile `ml`"):
        CredentialProcess("ml", command).args(windows=False)


def test_the_process_output_with_and_without_expiry():
    process = CredentialProcess("ml", "get-creds")
    full = {
        "Version": 1,
        "AccessKeyId": "ASIAP",
        "SecretAccessKey": SECRET,
        "SessionToken": TOKEN,
        "Expiration": "2024-05-01T12:00:00Z",
    }
    assert process.parse_output(json.dumps(full).encode()) == Credentials(
        "ASIAP", SECRET, TOKEN, NOW
    )
    static = {"Version": 1, "AccessKeyId": "AKIAP", "SecretAccessKey": SECRET}
    assert process.parse_output(json.dumps(static)) == Credentials("AKIAP", SECRET)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"Version": 2, "AccessKeyId": "A", "SecretAccessKey": SECRET}, "Version 2"),
        ({"AccessKeyId": "A", "SecretAccessKey": SECRET}, "Version None"),
        ({"Version": True, "AccessKeyId": "A", "SecretAccessKey": SECRET}, "Version True"),
        ({"Version": 1, "AccessKeyId": "A"}, "no SecretAccessKey"),
        (
            {"Version": 1, "AccessKeyId": "A", "SecretAccessKey": SECRET, "Expiration": "soon"},
            "Expiration",
        ),
        (
            {"Version": 1, "AccessKeyId": "A", "SecretAccessKey": SECRET, "SessionToken": 7},
            "SessionToken is a int",
        ),
    ],
)
def test_process_output_not_in_version_1_is_an_error_naming_the_profile(document, message):
    with pytest.raises(ConfigError, match=message) as caught:
        CredentialProcess("ml", "get-creds").parse_output(json.dumps(document))
    assert "profile `ml` (credential_process)" in str(caught.value)
    assert_no_secret(caught.value)


def test_a_failed_process_is_described_by_its_status_and_the_end_of_its_stderr():
    process = CredentialProcess("ml", "get-creds")
    assert str(process.failure(2, b"token expired: run login\n")) == (
        "profile `ml` (credential_process) exited with status 2: token expired: run login"
    )
    assert "wrote nothing" in str(process.failure(1, b""))
    long = process.failure(1, b"x" * 5000 + b"the end")
    assert str(long).endswith("the end")
    assert len(str(long)) < 1200


# --- STS ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "config", "region", "endpoint"),
    [
        ({}, "", "eu-west-1", "https://sts.eu-west-1.amazonaws.com"),
        ({}, "", "cn-north-1", "https://sts.cn-north-1.amazonaws.com.cn"),
        ({}, "", None, "https://sts.amazonaws.com"),
        (
            {"AWS_ENDPOINT_URL_STS": "http://sts.local:9000"},
            "",
            "eu-west-1",
            "http://sts.local:9000",
        ),
        (
            {},
            "[default]\nservices = s\n[services s]\nsts =\n  endpoint_url = http://svc:1\n",
            "eu-west-1",
            "http://svc:1",
        ),
        # For objsdk the global endpoint URL names the S3 server, not STS.
        (
            {"AWS_ENDPOINT_URL": "http://minio:9000"},
            "[default]\nendpoint_url = http://m:9000\n",
            "eu-west-1",
            "https://sts.eu-west-1.amazonaws.com",
        ),
        (
            {
                "AWS_ENDPOINT_URL_STS": "http://sts.local:9000",
                "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true",
            },
            "",
            "eu-west-1",
            "https://sts.eu-west-1.amazonaws.com",
        ),
    ],
)
def test_the_sts_endpoint(environ, config, region, endpoint):
    assert sts_endpoint(environ, shared(config), "default", region) == endpoint


ASSUME_ROLE_ANSWER = f"""<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <SourceIdentity>me</SourceIdentity>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/reader/nightly</Arn>
      <AssumedRoleId>ARO123EXAMPLE123:nightly</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>
      <SecretAccessKey>{SECRET}</SecretAccessKey>
      <SessionToken>{TOKEN}</SessionToken>
      <Expiration>2024-05-01T12:00:00.000Z</Expiration>
    </Credentials>
    <PackedPolicySize>6</PackedPolicySize>
  </AssumeRoleResult>
  <ResponseMetadata><RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ResponseMetadata>
</AssumeRoleResponse>""".encode()


def test_an_assume_role_answer_gives_expiring_credentials():
    assert parse_sts_credentials(ASSUME_ROLE_ANSWER, "AssumeRole") == Credentials(
        "ASIAIOSFODNN7EXAMPLE", SECRET, TOKEN, NOW
    )


def test_a_web_identity_answer_gives_expiring_credentials():
    body = ASSUME_ROLE_ANSWER.replace(
        b"AssumeRoleResponse", b"AssumeRoleWithWebIdentityResponse"
    ).replace(b"AssumeRoleResult", b"AssumeRoleWithWebIdentityResult")
    creds = parse_sts_credentials(body, "AssumeRoleWithWebIdentity")
    assert creds == Credentials("ASIAIOSFODNN7EXAMPLE", SECRET, TOKEN, NOW)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<AssumeRoleResponse/>", "no AssumeRoleResult/Credentials"),
        (
            ASSUME_ROLE_ANSWER.replace(b"<SessionToken>", b"<Other>").replace(
                b"</SessionToken>", b"</Other>"
            ),
            "no SessionToken",
        ),
        (ASSUME_ROLE_ANSWER.replace(b"2024-05-01T12:00:00.000Z", b"later"), "Expiration"),
        (b"<AssumeRoleResponse><unclosed>", "malformed XML"),
    ],
)
def test_a_malformed_sts_answer_is_an_xml_parse_error_naming_the_element(body, message):
    with pytest.raises(XMLParseError, match=message) as caught:
        parse_sts_credentials(body, "AssumeRole")
    assert_no_secret(caught.value)


def test_an_sts_error_answer():
    body = b"""<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
      <Error><Type>Sender</Type><Code>AccessDenied</Code>
      <Message>User is not authorized to perform: sts:AssumeRole</Message></Error>
      <RequestId>4e1c3a5b</RequestId></ErrorResponse>"""
    error = parse_sts_error(body)
    assert error is not None
    assert (error.code, error.request_id) == ("AccessDenied", "4e1c3a5b")
    assert "not authorized" in error.message
    assert not error.retryable
    idp = body.replace(b"AccessDenied", b"IDPCommunicationError")
    retryable = parse_sts_error(idp)
    assert retryable is not None
    assert retryable.retryable
    assert parse_sts_error(b"") is None
    assert parse_sts_error(b"<html>bad gateway</html>") is None
    assert parse_sts_error(ASSUME_ROLE_ANSWER) is None


# --- no secret anywhere ---------------------------------------------------------------------------


def every_source() -> list[object]:
    keys = Credentials("AKID", SECRET, TOKEN, NOW)
    environ = {
        "AWS_ACCESS_KEY_ID": "AKID",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": TOKEN,
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://localhost/c",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN": TOKEN,
    }
    config = f"""
    [profile role]
    role_arn = {ROLE}
    source_profile = base
    [profile env-role]
    role_arn = {ROLE}
    credential_source = Environment
    [profile ecs-role]
    role_arn = {ROLE}
    credential_source = EcsContainer
    [profile cfg]
    aws_access_key_id = AKID
    aws_secret_access_key = {SECRET}
    aws_session_token = {TOKEN}
    """
    files = shared(config + SSO_CONFIG, CREDENTIALS_FILE)
    found: list[object] = [files, keys]
    for profile in (None, "role", "env-role", "ecs-role", "cfg", "base", "dev", "legacy"):
        found.append(resolve_credential_source(environ, files, profile))
    found.append(container_endpoint(environ))
    found.append(WebIdentity(ROLE, "/token").request(WEB_TOKEN, "https://sts", None, NOW))
    found.append(SsoToken(TOKEN, NOW, TOKEN, "client", SECRET, NOW))
    return found


def test_no_source_repr_or_description_shows_a_secret():
    sources = every_source()
    assert len(sources) == 13
    assert_no_secret(*sources)


def test_no_error_shows_a_secret():
    errors: list[ObjsdkError] = []
    attempts = [
        lambda: resolve(credentials=f"[dev]\naws_access_key_id = {SECRET}\n", profile="dev"),
        lambda: CredentialProcess("p", "c").parse_output(json.dumps({"Version": SECRET})),
        lambda: CredentialProcess("p", "c").parse_output(SECRET),
        lambda: InstanceMetadata().parse_answer(json.dumps({"AccessKeyId": SECRET})),
        lambda: ContainerEndpoint("http://x", auth_token=TOKEN + "\n").headers(),
        lambda: parse_sts_credentials(f"<AssumeRoleResponse>{SECRET}".encode(), "AssumeRole"),
        lambda: parse_sso_token(json.dumps({"accessToken": TOKEN}), "c"),
        lambda: resolve(environ={"AWS_ACCESS_KEY_ID": SECRET}),
    ]
    for attempt in attempts:
        with pytest.raises(ObjsdkError) as caught:
            attempt()
        errors.append(caught.value)
    assert_no_secret(*errors)
