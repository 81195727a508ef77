"""objsdk's credential chain against an independent oracle: botocore's resolver.

Each case writes a throw-away ``~/.aws/config`` and ``~/.aws/credentials`` and sets the
environment, then asks botocore (``Session(profile=...).get_component(
"credential_provider")``) and objsdk (``resolve_credential_source``) which source they
use. They must choose the same one (botocore's ``METHOD``), with the same settings;
where botocore can go further without a network (keys from the environment or the
files, a ``credential_process`` script), the keys must be the same too. For the
network sources botocore's requests are answered offline (``before-send`` handlers for
STS and SSO, stand-ins for the container and instance metadata HTTP sessions): the
requests it sends must be the ones objsdk would build, and the credentials it reads
from the answers the ones objsdk reads.

Deliberate differences are tested as such: objsdk refuses ``mfa_serial`` (it cannot
prompt), rejects a malformed ``duration_seconds`` that botocore ignores, and does not
send STS calls to the global ``AWS_ENDPOINT_URL`` (for objsdk, the S3 server).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import botocore.credentials
import botocore.exceptions
import botocore.session
import botocore.utils
import pytest
from botocore.awsrequest import AWSResponse

from objsdk import Client
from objsdk._core.container_credentials import ContainerEndpoint
from objsdk._core.credential_process import CredentialProcess
from objsdk._core.credential_sources import (
    AssumeRole,
    CredentialSource,
    EnvironmentKeys,
    ProfileKeys,
    WebIdentity,
    resolve_credential_source,
)
from objsdk._core.instance_metadata import InstanceMetadata
from objsdk._core.profiles import SharedFiles, load_shared_files, profile_name
from objsdk._core.signing import Credentials
from objsdk._core.sso import SSO, parse_sso_token
from objsdk._core.sts import parse_sts_credentials, sts_endpoint
from objsdk.errors import ConfigError

SECRET = "wJalrXUtnFEMI-SECRET-9f8e"
TOKEN = "FwoGZXIvYXdz-TOKEN-7d6c"
ROLE = "arn:aws:iam::123456789012:role/reader"
# Far enough ahead that neither side wants to refresh.
LATER = "2099-01-01T00:00:00Z"
LATER_DT = datetime(2099, 1, 1, tzinfo=timezone.utc)
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)

BotoCreds = Any  # botocore's Credentials and its refreshable subclasses


class Machine:
    """A home directory with ~/.aws files and an environment holding nothing else."""

    def __init__(self, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.home = home
        self.monkeypatch = monkeypatch
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        (home / ".aws").mkdir()
        for name in list(os.environ):
            if name.startswith(("AWS_", "BOTO_")):
                monkeypatch.delenv(name)
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("AWS_CONFIG_FILE", str(home / ".aws" / "config"))
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / ".aws" / "credentials"))
        # botocore's boto2 source would read /etc/boto.cfg; objsdk reads no boto2 file.
        monkeypatch.setenv("BOTO_CONFIG", str(home / "no-boto.cfg"))

    def config(self, text: str) -> None:
        (self.home / ".aws" / "config").write_text(textwrap.dedent(text))

    def credentials(self, text: str) -> None:
        (self.home / ".aws" / "credentials").write_text(textwrap.dedent(text))

    def env(self, **values: str) -> None:
        for name, value in values.items():
            self.monkeypatch.setenv(name, value)

    def files(self) -> SharedFiles:
        return load_shared_files(os.environ)

    def ours(self, profile: str | None = None) -> CredentialSource | None:
        return resolve_credential_source(os.environ, self.files(), profile)

    # -- botocore, offline -----------------------------------------------------------------

    def session(self, profile: str | None = None) -> botocore.session.Session:
        session = botocore.session.Session(profile=profile)
        session.register("before-send", self._answer)
        return session

    def botocore(self, profile: str | None = None) -> BotoCreds:
        session = self.session(profile)
        resolver = session.get_component("credential_provider")
        container = resolver.get_provider("container-role")
        container._fetcher = _Container(self)
        imds = resolver.get_provider("iam-role")
        imds._role_fetcher._session = _Imds(self)
        sso = resolver.get_provider("sso")
        cache = botocore.utils.JSONFileCache(str(self.home / ".aws" / "sso" / "cache"))
        sso._token_cache = cache
        sso._token_provider._token_loader = botocore.utils.SSOTokenLoader(cache=cache)
        self.resolver = resolver
        return resolver.load_credentials()

    def _answer(self, request: Any, **kwargs: Any) -> AWSResponse | None:
        """Answer botocore's STS and SSO calls with canned documents."""
        body = request.body or b""
        body = body.encode() if isinstance(body, str) else body
        self.requests.append((request.method, request.url, dict(request.headers), body))
        if "sts" in urlsplit(request.url).netloc or b"Action=" in body:
            action = parse_qs(body.decode())["Action"][0]
            return _response(request.url, _sts_answer(action).encode())
        if "/federation/credentials" in request.url:
            document = {
                "roleCredentials": {
                    "accessKeyId": "ASIASSO",
                    "secretAccessKey": SECRET,
                    "sessionToken": TOKEN,
                    "expiration": int(LATER_DT.timestamp() * 1000),
                }
            }
            return _response(request.url, json.dumps(document).encode())
        raise AssertionError(f"unexpected request {request.url}")


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self.body


def _response(url: str, body: bytes, status: int = 200) -> AWSResponse:
    return AWSResponse(url, status, {}, _Raw(body))


def _sts_answer(action: str) -> str:
    return f"""<{action}Response xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
      <{action}Result>
        <AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/reader/s</Arn>
        <AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser>
        <Credentials>
          <AccessKeyId>ASIA{action.upper()[:12]}</AccessKeyId>
          <SecretAccessKey>{SECRET}</SecretAccessKey>
          <SessionToken>{TOKEN}</SessionToken>
          <Expiration>{LATER}</Expiration>
        </Credentials>
      </{action}Result>
      <ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata>
    </{action}Response>"""


CONTAINER_ANSWER = {
    "AccessKeyId": "ASIACONTAINER",
    "SecretAccessKey": SECRET,
    "Token": TOKEN,
    "Expiration": LATER,
}


class _Container(botocore.utils.ContainerMetadataFetcher):
    """botocore's container fetcher (its URL checks included) without the network."""

    def __init__(self, machine: Machine) -> None:
        super().__init__(sleep=lambda seconds: None)
        self.machine = machine

    def _get_response(self, full_url: str, headers: Any, timeout: Any) -> Any:
        self.machine.requests.append(("GET", full_url, dict(headers), b""))
        return dict(CONTAINER_ANSWER)


class _ImdsAnswer:
    def __init__(self, url: str, status: int, text: str) -> None:
        self.url, self.status_code, self.text = url, status, text
        self.content = text.encode()


class _Imds:
    """The instance metadata service for botocore's fetcher: a token, one role, its keys."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine

    def send(self, prepared: Any) -> _ImdsAnswer:
        url, headers = prepared.url, dict(prepared.headers)
        self.machine.requests.append((prepared.method, url, headers, b""))
        if url.endswith("/latest/api/token"):
            return _ImdsAnswer(url, 200, "imds-token")
        if url.endswith("/security-credentials/"):
            return _ImdsAnswer(url, 200, "reader")  # as IMDS answers: no newline
        document = {"Code": "Success", "Type": "AWS-HMAC", **CONTAINER_ANSWER}
        document["AccessKeyId"] = "ASIAIMDS"
        return _ImdsAnswer(url, 200, json.dumps(document))


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machine:
    return Machine(tmp_path, monkeypatch)


def frozen(creds: BotoCreds) -> Credentials:
    keys = creds.get_frozen_credentials()
    return Credentials(keys.access_key, keys.secret_key, keys.token)


def static_process(machine: Machine) -> str:
    """A credential_process line whose program prints static keys."""
    script = machine.home / "static.py"
    keys = {"Version": 1, "AccessKeyId": "PROCKEY", "SecretAccessKey": SECRET}
    script.write_text(f"print({json.dumps(keys)!r})\n")
    return f"{sys.executable} {script}"


def same_choice(machine: Machine, profile: str | None = None) -> tuple[Any, BotoCreds]:
    """Both resolve; the source objsdk chose and botocore's credentials, same METHOD."""
    ours = machine.ours(profile)
    theirs = machine.botocore(profile)
    assert (ours.method if ours else None) == (theirs.method if theirs else None)
    return ours, theirs


# --- sources botocore resolves without a network: the same keys ----------------------------


def test_keys_from_the_environment(machine):
    machine.env(AWS_ACCESS_KEY_ID="ENVKEY", AWS_SECRET_ACCESS_KEY=SECRET, AWS_SESSION_TOKEN=TOKEN)
    machine.credentials(
        f"[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = {SECRET}\n"
    )
    ours, theirs = same_choice(machine)
    assert isinstance(ours, EnvironmentKeys)
    assert ours.credentials == frozen(theirs)


def test_the_environments_older_token_variable_wins_in_both(machine):
    machine.env(
        AWS_ACCESS_KEY_ID="ENVKEY",
        AWS_SECRET_ACCESS_KEY=SECRET,
        AWS_SESSION_TOKEN="newer",
        AWS_SECURITY_TOKEN="older",
    )
    ours, theirs = same_choice(machine)
    assert isinstance(ours, EnvironmentKeys)
    assert ours.credentials == frozen(theirs)


def test_expiring_keys_from_the_environment(machine):
    machine.env(
        AWS_ACCESS_KEY_ID="ENVKEY",
        AWS_SECRET_ACCESS_KEY=SECRET,
        AWS_SESSION_TOKEN=TOKEN,
        AWS_CREDENTIAL_EXPIRATION=LATER,
    )
    ours, theirs = same_choice(machine)
    assert isinstance(ours, EnvironmentKeys)
    assert ours.credentials.expiry == theirs._expiry_time == LATER_DT


@pytest.mark.parametrize("explicit", [True, False])
def test_keys_from_the_credentials_file(machine, explicit):
    machine.env(AWS_ACCESS_KEY_ID="ENVKEY", AWS_SECRET_ACCESS_KEY=SECRET)
    if not explicit:
        machine.env(AWS_PROFILE="dev")
    machine.credentials(
        f"[dev]\naws_access_key_id = DEVKEY\naws_secret_access_key = {SECRET}\n"
        f"aws_session_token = {TOKEN}\n"
    )
    ours, theirs = same_choice(machine, "dev" if explicit else None)
    # An explicit profile skips the environment's keys; AWS_PROFILE does not.
    assert ours.method == ("shared-credentials-file" if explicit else "env")
    assert ours.credentials == frozen(theirs)


def test_keys_from_the_config_file(machine):
    machine.config(f"[profile dev]\naws_access_key_id = CFGKEY\naws_secret_access_key = {SECRET}\n")
    ours, theirs = same_choice(machine, "dev")
    assert isinstance(ours, ProfileKeys)
    assert ours.credentials == frozen(theirs)


def test_the_default_profile_written_as_profile_default(machine):
    machine.config(f"[profile default]\naws_access_key_id = K\naws_secret_access_key = {SECRET}\n")
    ours, theirs = same_choice(machine)
    assert ours.credentials == frozen(theirs)


def test_aws_default_profile_wins_over_aws_profile_in_both(machine):
    machine.env(AWS_DEFAULT_PROFILE="a", AWS_PROFILE="b")
    machine.credentials(
        f"[a]\naws_access_key_id = AKEY\naws_secret_access_key = {SECRET}\n"
        f"[b]\naws_access_key_id = BKEY\naws_secret_access_key = {SECRET}\n"
    )
    assert profile_name(os.environ, None) == "a"
    ours, theirs = same_choice(machine)
    assert ours.credentials == frozen(theirs)
    assert ours.credentials.access_key == "AKEY"


PROCESS_SCRIPT = """
import json, sys
print(json.dumps({
    "Version": 1,
    "AccessKeyId": "|".join(sys.argv[1:]),
    "SecretAccessKey": %r,
    "SessionToken": %r,
    %s
}))
"""


@pytest.mark.parametrize("expiration", [None, LATER])
def test_credential_process_runs_the_same_command_and_reads_the_same_keys(machine, expiration):
    script = machine.home / "get creds.py"
    extra = f'"Expiration": "{expiration}",' if expiration else ""
    script.write_text(PROCESS_SCRIPT % (SECRET, TOKEN, extra))
    command = f"{sys.executable} '{script}' --account \"ml team\" plain"
    machine.config(f"[profile ml]\ncredential_process = {command}\n")
    ours, theirs = same_choice(machine, "ml")
    assert isinstance(ours, CredentialProcess)
    run = subprocess.run(ours.args(windows=False), capture_output=True, check=True)
    ours_keys = ours.parse_output(run.stdout)
    assert ours_keys.access_key == "--account|ml team|plain"
    assert Credentials(ours_keys.access_key, ours_keys.secret_key, ours_keys.session_token) == (
        frozen(theirs)
    )
    assert ours_keys.expiry == getattr(theirs, "_expiry_time", None)


def test_credential_process_comes_after_credentials_file_keys_and_before_config_keys(machine):
    machine.config(
        f"[profile ml]\ncredential_process = {sys.executable} -c pass\n"
        f"aws_access_key_id = CFGKEY\naws_secret_access_key = {SECRET}\n"
    )
    ours = machine.ours("ml")
    assert isinstance(ours, CredentialProcess)
    machine.credentials(f"[ml]\naws_access_key_id = K\naws_secret_access_key = {SECRET}\n")
    ours, theirs = same_choice(machine, "ml")
    assert ours.credentials == frozen(theirs)


# --- assume-role: same role, parameters, source and STS request ----------------------------------


def sts_request(machine: Machine, action: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """The URL, headers and form of botocore's (last) call of ``action``."""
    for method, url, headers, body in reversed(machine.requests):
        fields = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        if fields.get("Action") == action:
            assert method == "POST"
            return url, headers, fields
    raise AssertionError(f"botocore sent no {action}")


def test_assume_role_with_a_source_profile(machine):
    machine.env(AWS_DEFAULT_REGION="eu-west-1")
    machine.config(
        f"""
        [profile reader]
        role_arn = {ROLE}
        source_profile = base
        role_session_name = nightly
        external_id = ext-1
        duration_seconds = 1800
        """
    )
    machine.credentials(f"[base]\naws_access_key_id = BASEKEY\naws_secret_access_key = {SECRET}\n")
    ours, theirs = same_choice(machine, "reader")
    assert isinstance(ours, AssumeRole)
    fetcher = theirs._refresh_using.__self__
    assert fetcher._role_arn == ours.role_arn == ROLE
    assert fetcher._assume_kwargs == {
        "RoleArn": ROLE,
        "RoleSessionName": "nightly",
        "ExternalId": "ext-1",
        "DurationSeconds": 1800,
    }
    assert fetcher._source_credentials.method == ours.source.method
    assert isinstance(ours.source, ProfileKeys)
    assert ours.source.credentials == frozen(fetcher._source_credentials)

    # botocore's AssumeRole call is the request objsdk builds, and the answer reads the same.
    keys = frozen(theirs)
    url, headers, form = sts_request(machine, "AssumeRole")
    region = os.environ["AWS_DEFAULT_REGION"]
    request = ours.request(sts_endpoint(os.environ, machine.files(), "reader", region), region, NOW)
    assert url.rstrip("/") == request.url
    assert form == {k: v[0] for k, v in parse_qs(request.body.decode()).items()}
    authorization = headers["Authorization"].decode()
    assert f"Credential={ours.source.credentials.access_key}/" in authorization
    assert f"/{request.region}/{request.service}/aws4_request" in authorization
    assert request.signed
    assert parse_sts_credentials(_sts_answer("AssumeRole").encode(), "AssumeRole") == Credentials(
        keys.access_key, keys.secret_key, keys.session_token, LATER_DT
    )


def test_a_chain_of_roles(machine):
    machine.config(
        f"""
        [profile a]
        role_arn = arn:aws:iam::1:role/a
        source_profile = b
        [profile b]
        role_arn = arn:aws:iam::1:role/b
        source_profile = c
        [profile c]
        credential_process = {static_process(machine)}
        """
    )
    ours, theirs = same_choice(machine, "a")
    inner = theirs._refresh_using.__self__._source_credentials
    assert isinstance(ours, AssumeRole)
    assert isinstance(ours.source, AssumeRole)
    assert inner.method == ours.source.method == "assume-role"
    assert inner._refresh_using.__self__._role_arn == ours.source.role_arn
    innermost = inner._refresh_using.__self__._source_credentials
    assert innermost.method == ours.source.source.method == "custom-process"


def test_a_profile_that_assumes_its_role_with_its_own_keys(machine):
    machine.config(
        f"""
        [profile self]
        role_arn = {ROLE}
        source_profile = self
        aws_access_key_id = SELFKEY
        aws_secret_access_key = {SECRET}
        """
    )
    ours, theirs = same_choice(machine, "self")
    source = theirs._refresh_using.__self__._source_credentials
    assert isinstance(ours, AssumeRole)
    assert ours.source.method == source.method == "config-file"
    assert ours.source.credentials == frozen(source)


def test_credential_source_environment(machine):
    machine.env(AWS_ACCESS_KEY_ID="ENVKEY", AWS_SECRET_ACCESS_KEY=SECRET)
    machine.config(f"[profile r]\nrole_arn = {ROLE}\ncredential_source = Environment\n")
    ours, theirs = same_choice(machine, "r")
    source = theirs._refresh_using.__self__._source_credentials
    assert ours.source.method == source.method == "env"
    assert ours.source.credentials == frozen(source)


def test_credential_source_ecs_container(machine):
    machine.env(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI="/v2/credentials/abc")
    machine.config(f"[profile r]\nrole_arn = {ROLE}\ncredential_source = EcsContainer\n")
    ours, theirs = same_choice(machine, "r")
    source = theirs._refresh_using.__self__._source_credentials
    assert ours.source.method == source.method == "container-role"
    assert machine.requests[-1][1] == ours.source.url


def test_credential_source_instance_metadata(machine):
    machine.config(f"[profile r]\nrole_arn = {ROLE}\ncredential_source = Ec2InstanceMetadata\n")
    ours, theirs = same_choice(machine, "r")
    source = theirs._refresh_using.__self__._source_credentials
    assert ours.source.method == source.method == "iam-role"


def test_web_identity_in_a_source_profile(machine):
    token_file = machine.home / "token"
    token_file.write_text("eyJ-web-token")
    machine.config(
        f"""
        [profile r]
        role_arn = {ROLE}
        source_profile = k8s
        [profile k8s]
        role_arn = arn:aws:iam::1:role/k8s
        web_identity_token_file = {token_file}
        """
    )
    ours, theirs = same_choice(machine, "r")
    source = theirs._refresh_using.__self__._source_credentials
    assert ours.source.method == source.method == "assume-role-with-web-identity"


def test_mfa_is_refused_where_botocore_would_prompt(machine):
    machine.config(
        f"""
        [profile r]
        role_arn = {ROLE}
        source_profile = base
        mfa_serial = arn:aws:iam::123456789012:mfa/me
        """
    )
    machine.credentials(f"[base]\naws_access_key_id = K\naws_secret_access_key = {SECRET}\n")
    theirs = machine.botocore("r")
    assert theirs.method == "assume-role"
    assert theirs._refresh_using._refresh.__self__._assume_kwargs["SerialNumber"]
    with pytest.raises(ConfigError, match="MFA"):
        machine.ours("r")


def test_a_malformed_duration_is_refused_where_botocore_ignores_it(machine):
    machine.config(f"[profile r]\nrole_arn = {ROLE}\nsource_profile = r\nduration_seconds = 1h\n")
    machine.credentials(f"[r]\naws_access_key_id = K\naws_secret_access_key = {SECRET}\n")
    theirs = machine.botocore("r")
    assert "DurationSeconds" not in theirs._refresh_using.__self__._assume_kwargs
    with pytest.raises(ConfigError, match="duration_seconds"):
        machine.ours("r")


# --- web identity -------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["environment", "profile"])
def test_web_identity(machine, where):
    token_file = machine.home / "token"
    token_file.write_text("eyJ-web-token")
    if where == "environment":
        machine.env(
            AWS_WEB_IDENTITY_TOKEN_FILE=str(token_file),
            AWS_ROLE_ARN=ROLE,
            AWS_ROLE_SESSION_NAME="pod-1",
        )
    else:
        machine.config(
            f"[default]\nweb_identity_token_file = {token_file}\nrole_arn = {ROLE}\n"
            "role_session_name = pod-1\n"
        )
    machine.env(AWS_DEFAULT_REGION="us-west-2")
    ours, theirs = same_choice(machine)
    assert isinstance(ours, WebIdentity)
    fetcher = theirs._refresh_using.__self__
    assert fetcher._role_arn == ours.role_arn
    assert fetcher._assume_kwargs["RoleSessionName"] == ours.role_session_name == "pod-1"
    assert fetcher._web_identity_token_loader._web_identity_token_path == ours.token_file

    keys = frozen(theirs)
    url, headers, form = sts_request(machine, "AssumeRoleWithWebIdentity")
    region = "us-west-2"
    request = ours.request(
        token_file.read_text(),
        sts_endpoint(os.environ, machine.files(), "default", region),
        region,
        NOW,
    )
    assert url.rstrip("/") == request.url
    assert form == {k: v[0] for k, v in parse_qs(request.body.decode()).items()}
    assert "Authorization" not in headers
    assert not request.signed
    action = "AssumeRoleWithWebIdentity"
    assert parse_sts_credentials(_sts_answer(action).encode(), action) == Credentials(
        keys.access_key, keys.secret_key, keys.session_token, LATER_DT
    )


def test_an_explicit_profile_ignores_the_environments_web_identity(machine):
    machine.env(AWS_WEB_IDENTITY_TOKEN_FILE="/token", AWS_ROLE_ARN=ROLE)
    machine.credentials(f"[dev]\naws_access_key_id = K\naws_secret_access_key = {SECRET}\n")
    ours, _ = same_choice(machine, "dev")
    assert ours.method == "shared-credentials-file"
    assert same_choice(machine)[0].method == "assume-role-with-web-identity"


# --- SSO ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("legacy", [False, True])
def test_sso_reads_the_same_cached_token_and_asks_the_same_portal(machine, legacy):
    if legacy:
        machine.config(
            """
            [profile dev]
            sso_start_url = https://corp.awsapps.com/start
            sso_region = eu-west-1
            sso_account_id = 123456789012
            sso_role_name = Reader
            """
        )
    else:
        machine.config(
            """
            [profile dev]
            sso_session = corp
            sso_account_id = 123456789012
            sso_role_name = Reader
            [sso-session corp]
            sso_start_url = https://corp.awsapps.com/start
            sso_region = eu-west-1
            """
        )
    ours, theirs = same_choice(machine, "dev")
    assert isinstance(ours, SSO)
    fetcher = theirs._refresh_using.__self__
    assert (fetcher._start_url, fetcher._sso_region, fetcher._account_id, fetcher._role_name) == (
        ours.start_url,
        ours.region,
        ours.account_id,
        ours.role_name,
    )
    assert fetcher._sso_session_name == ours.session_name

    # The token where objsdk says aws sso login caches it is the one botocore reads.
    cache = {
        "startUrl": ours.start_url,
        "region": ours.region,
        "accessToken": TOKEN,
        "expiresAt": LATER,
    }
    Path(ours.cache_path).parent.mkdir(parents=True, exist_ok=True)
    Path(ours.cache_path).write_text(json.dumps(cache))
    keys = frozen(theirs)
    method, url, headers, _ = machine.requests[-1]
    token = ours.token(Path(ours.cache_path).read_text(), NOW)
    our_url, our_headers = ours.role_credentials_request(token)
    assert (method, urlsplit(url)[:3]) == ("GET", urlsplit(our_url)[:3])
    assert parse_qs(urlsplit(url).query) == parse_qs(urlsplit(our_url).query)
    assert headers["x-amz-sso_bearer_token"].decode() == our_headers["x-amz-sso_bearer_token"]
    answer = {
        "roleCredentials": {
            "accessKeyId": "ASIASSO",
            "secretAccessKey": SECRET,
            "sessionToken": TOKEN,
            "expiration": int(LATER_DT.timestamp() * 1000),
        }
    }
    assert ours.parse_role_credentials(json.dumps(answer)) == Credentials(
        keys.access_key, keys.secret_key, keys.session_token, LATER_DT
    )
    assert parse_sso_token(json.dumps(cache), "c").access_token == TOKEN


# --- the container endpoint and the instance metadata service ----------------------------------


@pytest.mark.parametrize(
    "env",
    [
        {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/abc"},
        {
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN": TOKEN,
        },
        {
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:8080/creds",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN": "ignored",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "TOKENFILE",
        },
        {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "https://creds.example.com/role"},
    ],
)
def test_the_container_endpoint_is_asked_the_same_way(machine, env):
    token_file = machine.home / "container-token"
    token_file.write_text("rotated-token")
    machine.env(**{k: str(token_file) if v == "TOKENFILE" else v for k, v in env.items()})
    ours, theirs = same_choice(machine)
    assert isinstance(ours, ContainerEndpoint)
    _, url, headers, _ = machine.requests[-1]
    text = token_file.read_text() if ours.auth_token_file else None
    assert (url, headers) == (ours.url, ours.headers(text))
    keys = frozen(theirs)
    assert ours.parse_answer(json.dumps(CONTAINER_ANSWER)) == Credentials(
        keys.access_key, keys.secret_key, keys.session_token, LATER_DT
    )


@pytest.mark.parametrize("url", ["http://creds.example.com/role", "http://10.0.0.1/creds"])
def test_a_container_url_both_refuse(machine, url):
    machine.env(AWS_CONTAINER_CREDENTIALS_FULL_URI=url)
    with pytest.raises(ValueError, match="Unsupported host"):
        machine.botocore()
    with pytest.raises(ConfigError, match="AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        machine.ours()


@pytest.mark.parametrize(
    ("env", "config"),
    [
        ({}, ""),
        ({"AWS_METADATA_SERVICE_TIMEOUT": "3", "AWS_METADATA_SERVICE_NUM_ATTEMPTS": "2"}, ""),
        ({}, "[default]\nmetadata_service_timeout = 4\nmetadata_service_num_attempts = 3\n"),
        ({"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:1338"}, ""),
        ({"AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "ipv6"}, ""),
        ({}, "[default]\nec2_metadata_service_endpoint_mode = IPv6\n"),
        ({"AWS_IMDS_USE_IPV6": "true"}, ""),
        ({"AWS_EC2_METADATA_V1_DISABLED": "true"}, ""),
        ({}, "[default]\nec2_metadata_v1_disabled = true\nregion = eu-west-1\n"),
    ],
)
def test_the_instance_metadata_service_is_asked_the_same_way(machine, env, config):
    machine.env(**env)
    machine.config(config)
    ours, theirs = same_choice(machine)
    assert isinstance(ours, InstanceMetadata)
    fetcher = machine.resolver.get_provider("iam-role")._role_fetcher
    assert (fetcher._base_url, fetcher._timeout, fetcher._num_attempts) == (
        ours.base_url,
        ours.timeout,
        ours.attempts,
    )
    assert bool(fetcher._imds_v1_disabled) == ours.v1_disabled
    # What the HTTP layer adds (User-Agent, Content-Length) is not the source's part.
    sent = [
        (method, url, {k: v for k, v in headers.items() if k[0].islower()})
        for method, url, headers, _ in machine.requests
    ]
    token_url, token_headers = ours.token_request()
    role_url, role_headers = ours.role_request("imds-token")
    creds_url, creds_headers = ours.credentials_request("reader", "imds-token")
    assert sent == [
        ("PUT", token_url, token_headers),
        ("GET", role_url, role_headers),
        ("GET", creds_url, creds_headers),
    ]
    keys = frozen(theirs)
    document = {"Code": "Success", **CONTAINER_ANSWER, "AccessKeyId": "ASIAIMDS"}
    assert ours.parse_answer(json.dumps(document)) == Credentials(
        keys.access_key, keys.secret_key, keys.session_token, LATER_DT
    )


def test_nothing_at_all_with_the_metadata_service_disabled(machine):
    machine.env(AWS_EC2_METADATA_DISABLED="true")
    assert same_choice(machine) == (None, None)


def test_a_named_profile_without_credentials_falls_to_the_metadata_service(machine):
    machine.config("[profile dev]\nregion = eu-west-1\n")
    ours, _ = same_choice(machine, "dev")
    assert isinstance(ours, InstanceMetadata)
    assert ours.fallback_for == "dev"


# --- configurations both refuse -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "credentials", "env", "profile"),
    [
        ("", "", {}, "nope"),
        ("", "", {"AWS_PROFILE": "nope"}, None),
        (f"[profile r]\nrole_arn = {ROLE}\nsource_profile = gone\n", "", {}, "r"),
        (f"[profile r]\nrole_arn = {ROLE}\n", "", {}, "r"),
        (f"[profile r]\nrole_arn = {ROLE}\nsource_profile = r\n", "", {}, "r"),
        (
            "[profile a]\nrole_arn = arn:aws:iam::1:role/a\nsource_profile = b\n"
            "[profile b]\nrole_arn = arn:aws:iam::1:role/b\nsource_profile = a\n",
            "",
            {},
            "a",
        ),
        (
            f"[profile r]\nrole_arn = {ROLE}\nsource_profile = b\n"
            "credential_source = Environment\n",
            "[b]\naws_access_key_id = K\naws_secret_access_key = S\n",
            {},
            "r",
        ),
        (f"[profile r]\nrole_arn = {ROLE}\ncredential_source = Environment\n", "", {}, "r"),
        (f"[profile r]\nrole_arn = {ROLE}\ncredential_source = environment\n", "", {}, "r"),
        (
            f"[profile r]\nrole_arn = {ROLE}\nsource_profile = e\n[profile e]\nregion = x\n",
            "",
            {},
            "r",
        ),
        ("[profile s]\nsso_account_id = 1\nsso_role_name = R\n", "", {}, "s"),
        ("[profile s]\nsso_session = gone\nsso_account_id = 1\nsso_role_name = R\n", "", {}, "s"),
        (
            "[profile s]\nsso_session = c\nsso_account_id = 1\nsso_role_name = R\n"
            "sso_region = us-east-1\n[sso-session c]\nsso_start_url = u\nsso_region = eu-west-1\n",
            "",
            {},
            "s",
        ),
        ("", "[d]\naws_access_key_id = K\n", {}, "d"),
        ("[profile w]\nweb_identity_token_file = /t\n", "", {}, "w"),
        ("", "", {"AWS_WEB_IDENTITY_TOKEN_FILE": "/t"}, None),
        ("", "", {"AWS_ACCESS_KEY_ID": "K"}, None),
    ],
)
def test_configurations_both_refuse(machine, config, credentials, env, profile):
    machine.config(config)
    machine.credentials(credentials)
    machine.env(**env)
    with pytest.raises(botocore.exceptions.BotoCoreError):
        machine.botocore(profile)
    with pytest.raises(ConfigError):
        machine.ours(profile)


# --- the STS endpoint -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "config", "region"),
    [
        ({}, "", "eu-west-1"),
        ({}, "", "cn-north-1"),
        ({"AWS_ENDPOINT_URL_STS": "http://sts.local:9000"}, "", "eu-west-1"),
        (
            {},
            "[default]\nservices = s\n[services s]\nsts =\n  endpoint_url = http://svc:1\n",
            "eu-west-1",
        ),
        (
            {
                "AWS_ENDPOINT_URL_STS": "http://sts.local:9000",
                "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true",
            },
            "",
            "eu-west-1",
        ),
    ],
)
def test_the_sts_endpoint_is_botocores(machine, env, config, region):
    machine.env(**env)
    machine.config(config)
    client = machine.session().create_client("sts", region_name=region)
    assert sts_endpoint(os.environ, machine.files(), "default", region) == client.meta.endpoint_url


def test_the_global_endpoint_url_is_not_used_for_sts_unlike_botocore(machine):
    machine.env(AWS_ENDPOINT_URL="http://minio:9000")
    client = machine.session().create_client("sts", region_name="eu-west-1")
    assert client.meta.endpoint_url == "http://minio:9000"
    ours = sts_endpoint(os.environ, machine.files(), "default", "eu-west-1")
    assert ours == "https://sts.eu-west-1.amazonaws.com"


# --- the client: Client.from_env (the CLI and fsspec resolve the same way) ------------------

CLIENT_CASES = {
    "both token variables": (
        {"AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": SECRET,
         "AWS_SECURITY_TOKEN": "older", "AWS_SESSION_TOKEN": TOKEN},
        "", "",
    ),
    "AWS_DEFAULT_PROFILE and AWS_PROFILE": (
        {"AWS_DEFAULT_PROFILE": "first", "AWS_PROFILE": "second"},
        "",
        f"[first]\naws_access_key_id = FIRSTKEY\naws_secret_access_key = {SECRET}\n"
        f"[second]\naws_access_key_id = SECONDKEY\naws_secret_access_key = {SECRET}\n",
    ),
    "[default] and [profile default]": (
        {},
        f"[default]\naws_access_key_id = PLAINKEY\naws_secret_access_key = {SECRET}\n"
        f"[profile default]\naws_access_key_id = PROFILEKEY\naws_secret_access_key = {SECRET}\n",
        "",
    ),
    "a profile's credential_process": ({"AWS_PROFILE": "proc"}, "PROCESS", ""),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CLIENT_CASES))
def test_a_client_from_the_environment_signs_with_the_keys_botocore_resolves(
    machine: Machine, case: str
) -> None:
    env, config, credentials = CLIENT_CASES[case]
    if config == "PROCESS":
        config = f"[profile proc]\ncredential_process = {static_process(machine)}\n"
    machine.config(config)
    machine.credentials(credentials)
    machine.env(AWS_EC2_METADATA_DISABLED="true", **env)
    theirs = frozen(machine.botocore())
    with Client.from_env(endpoint="http://s3.test") as client:
        assert client.credentials == theirs
