"""What users hit when a credential source misbehaves: the metadata service inside a
container, one that does not answer at all (a laptop), a container endpoint that fails
or is refused its token, a credential_process that fails, an SSO login that is missing,
expired or due for renewal. Each is a clear error naming the source and the remedy,
raised before any request reaches the S3 service, or is overcome as botocore does."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import COMMAND
from credential_helpers import MachineFactory, bare_env, machine_factory, write_sso_cache
from forwarding_proxy import ForwardingProxy

import objsdk
from objsdk import Client
from objsdk.filesystem import ObjsdkFileSystem
from objsdk.testing import LocalMinio
from objsdk.testing.credential_servers import (
    ContainerCredentialsServer,
    InstanceMetadataServer,
    SsoPortal,
)
from objsdk.testing.faultproxy import FaultProxy
from objsdk.testing.temporary_credentials import TemporaryCredentials

pytestmark = pytest.mark.minio_only


@pytest.fixture
def keys(local_minio: LocalMinio) -> TemporaryCredentials:
    return TemporaryCredentials.of(local_minio, lifetime=900)


@pytest.fixture
def machines(
    tmp_path: Path, local_minio: LocalMinio, keys: TemporaryCredentials
) -> Iterator[MachineFactory]:
    yield from machine_factory(tmp_path, local_minio, keys)


@pytest.fixture
def proxy(local_minio: LocalMinio) -> Iterator[FaultProxy]:
    """A proxy in front of MinIO whose log shows whether any request reached it."""
    with FaultProxy(local_minio.endpoint) as p:
        yield p


@pytest.fixture
def stored(local_minio: LocalMinio, bucket: str) -> str:
    with local_minio.client() as root:
        root.put_object(bucket, "k", b"data")
    return bucket


def _environ(monkeypatch: pytest.MonkeyPatch, home: Path, endpoint: str, **env: str) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    for name, value in {**bare_env(home, endpoint), **env}.items():
        monkeypatch.setenv(name, value)


# -- the instance metadata service -----------------------------------------------------------


def test_imds_token_request_timing_out_in_a_container_says_to_raise_the_hop_limit(
    keys: TemporaryCredentials,
    proxy: FaultProxy,
    stored: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with InstanceMetadataServer(keys, hop_limit_exceeded=True, v2_only=True) as imds:
        _environ(
            monkeypatch,
            tmp_path,
            proxy.endpoint,
            AWS_EC2_METADATA_DISABLED="false",
            AWS_EC2_METADATA_SERVICE_ENDPOINT=imds.endpoint,
            AWS_METADATA_SERVICE_TIMEOUT="0.5",
        )
        with Client.from_env() as client, pytest.raises(objsdk.CredentialsError) as e:
            client.get_object(stored, "k")
        assert "hop limit" in str(e.value)
        assert "--http-put-response-hop-limit 2" in str(e.value)
        assert imds.endpoint in str(e.value)
        # With IMDSv1 disabled the service is not even asked without a token.
        monkeypatch.setenv("AWS_EC2_METADATA_V1_DISABLED", "true")
        asked = len(imds.requests)
        with Client.from_env() as client, pytest.raises(objsdk.CredentialsError) as e:
            client.get_object(stored, "k")
        assert "hop limit" in str(e.value)
        assert "IMDSv1 is disabled" in str(e.value)
        assert len(imds.requests) == asked  # the token request is never answered
    assert proxy.requests(settle=0) == []


def test_imds_without_a_token_falls_back_to_imdsv1_unless_it_is_disabled(
    keys: TemporaryCredentials, stored: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with InstanceMetadataServer(keys, hop_limit_exceeded=True, v2_only=False) as imds:
        _environ(
            monkeypatch,
            tmp_path,
            keys.endpoint,
            AWS_EC2_METADATA_DISABLED="false",
            AWS_EC2_METADATA_SERVICE_ENDPOINT=imds.endpoint,
            AWS_METADATA_SERVICE_TIMEOUT="0.5",
        )
        with Client.from_env() as client:
            assert client.get_object(stored, "k") == b"data"
        assert all(r.method == "GET" for r in imds.requests)  # asked without a token


def test_imds_attempts_are_honoured(
    keys: TemporaryCredentials, stored: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with InstanceMetadataServer(keys, failures=2) as imds:
        _environ(
            monkeypatch,
            tmp_path,
            keys.endpoint,
            AWS_EC2_METADATA_DISABLED="false",
            AWS_EC2_METADATA_SERVICE_ENDPOINT=imds.endpoint,
        )
        with Client.from_env() as client, pytest.raises(objsdk.CredentialsError, match="500"):
            client.get_object(stored, "k")  # one attempt by default
        imds.failures = 2
        monkeypatch.setenv("AWS_METADATA_SERVICE_NUM_ATTEMPTS", "3")
        with Client.from_env() as client:
            assert client.get_object(stored, "k") == b"data"


def test_a_machine_with_no_source_at_all_fails_in_about_two_seconds(
    proxy: FaultProxy, stored: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A metadata address that takes the connection and never answers, as a laptop's
    # network drops packets to 169.254.169.254.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        _environ(
            monkeypatch,
            tmp_path,
            proxy.endpoint,
            AWS_EC2_METADATA_DISABLED="false",
            AWS_EC2_METADATA_SERVICE_ENDPOINT=f"http://127.0.0.1:{silent.getsockname()[1]}",
        )
        started = time.monotonic()
        with Client.from_env() as client, pytest.raises(objsdk.CredentialsError) as e:
            client.get_object(stored, "k")
        elapsed = time.monotonic() - started
    assert 1.5 < elapsed < 4
    assert str(e.value).startswith("no credentials:")
    assert "docs/credentials.md" in str(e.value)
    assert proxy.requests(settle=0) == []


def test_no_source_with_the_metadata_service_disabled_is_refused_when_the_client_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _environ(monkeypatch, tmp_path, "http://127.0.0.1:9")
    with pytest.raises(objsdk.ConfigError, match=r"no credentials.*anonymous=True"):
        Client.from_env()
    with pytest.raises(objsdk.ConfigError, match="no credentials"):
        Client("http://127.0.0.1:9")
    with Client("http://127.0.0.1:9", anonymous=True) as anonymous:
        assert anonymous.credentials is None


# -- the container endpoint ------------------------------------------------------------------


def test_the_container_endpoint_is_asked_three_times_and_its_refusal_is_named(
    keys: TemporaryCredentials,
    proxy: FaultProxy,
    stored: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first-token")
    with ContainerCredentialsServer(keys, token="first-token", failures=2) as server:
        _environ(
            monkeypatch,
            tmp_path,
            keys.endpoint,
            AWS_CONTAINER_CREDENTIALS_FULL_URI=server.url,
            AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(token_file),
        )
        with Client.from_env() as client:
            assert client.get_object(stored, "k") == b"data"
        assert [r.status for r in server.requests] == [500, 500, 200]
        # The token file is read again for every fetch (EKS rotates it).
        server.token = "second-token"
        token_file.write_text("second-token\n")
        with Client.from_env() as client:
            assert client.get_object(stored, "k") == b"data"
        server.token = "third-token"
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        with Client.from_env() as client, pytest.raises(objsdk.CredentialsError) as e:
            client.get_object(stored, "k")
        assert "container credentials endpoint" in str(e.value)
        assert "HTTP 403" in str(e.value)
        assert "second-token" not in str(e.value)
    assert proxy.requests(settle=0) == []


def test_a_full_uri_to_another_host_over_plain_http_is_refused_before_anything_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _environ(
        monkeypatch,
        tmp_path,
        "http://127.0.0.1:9",
        AWS_CONTAINER_CREDENTIALS_FULL_URI="http://attacker.example/creds",
        AWS_CONTAINER_AUTHORIZATION_TOKEN="never-sent-there",
    )
    with pytest.raises(objsdk.ConfigError, match="plain http") as e:
        Client.from_env()
    assert "never-sent-there" not in str(e.value)


# -- credential_process ----------------------------------------------------------------------


def test_a_failing_credential_process_gives_its_status_and_stderr_never_its_stdout(
    proxy: FaultProxy, stored: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "fails.py"
    script.write_text(
        "import sys\n"
        'print(\'{"Version": 1, "AccessKeyId": "AK", "SecretAccessKey": "STDOUT-SECRET"}\')\n'
        "sys.stderr.write('x' * 5000 + 'token expired: run corp-login')\n"
        "sys.exit(3)\n"
    )
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "config").write_text(
        f"[profile ml]\ncredential_process = {sys.executable} {script}\n"
    )
    _environ(monkeypatch, tmp_path, proxy.endpoint, AWS_PROFILE="ml")
    with Client.from_env() as client, pytest.raises(objsdk.ConfigError) as e:
        client.get_object(stored, "k")
    message = str(e.value)
    assert "profile `ml` (credential_process) exited with status 3" in message
    assert message.endswith("token expired: run corp-login")
    assert len(message) < 1200  # the tail of stderr, not all of it
    assert "STDOUT-SECRET" not in message
    assert proxy.requests(settle=0) == []


# -- SSO ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sso", "sso_legacy"])
def test_an_sso_profile_not_logged_in_says_to_run_aws_sso_login_before_any_request(
    kind: str,
    machines: MachineFactory,
    proxy: FaultProxy,
    stored: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    machine = machines(kind, endpoint=proxy.endpoint)
    for path in (machine.home / ".aws" / "sso" / "cache").iterdir():
        path.unlink()
    machine.apply(monkeypatch)
    with Client.from_env() as client, pytest.raises(objsdk.ConfigError) as e:
        client.get_object(stored, "k")
    assert "run `aws sso login --profile ml`" in str(e.value)
    done = subprocess.run(
        [*COMMAND, "ls", f"s3://{stored}/"],
        env=machine.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 253
    assert "aws sso login --profile ml" in done.stderr
    assert proxy.requests(settle=0) == []


@pytest.mark.parametrize("kind", ["sso", "sso_legacy"])
def test_an_expired_sso_login_that_cannot_be_renewed_says_to_log_in_again(
    kind: str,
    keys: TemporaryCredentials,
    machines: MachineFactory,
    proxy: FaultProxy,
    stored: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    machine = machines(kind, endpoint=proxy.endpoint)
    portal = machine.server
    assert isinstance(portal, SsoPortal)
    (cache,) = (machine.home / ".aws" / "sso" / "cache").iterdir()  # aws sso login's
    login = json.loads(cache.read_text())
    text = portal.cache(
        start_url=login["startUrl"], region="us-east-1", expires_in=-60, renewable=False
    )
    cache.write_text(text)
    machine.apply(monkeypatch)
    with Client.from_env() as client, pytest.raises(objsdk.ConfigError) as e:
        client.get_object(stored, "k")
    assert "expired" in str(e.value)
    assert "aws sso login --profile ml" in str(e.value)
    assert portal.access_token not in str(e.value)
    assert proxy.requests(settle=0) == []


@pytest.mark.parametrize("kind", ["sso", "sso_legacy"])
def test_an_sso_login_the_portal_no_longer_accepts_says_to_log_in_again(
    kind: str,
    machines: MachineFactory,
    proxy: FaultProxy,
    stored: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cached token that has not expired but was revoked (signed out in the portal):
    the portal answers 401, and that is the remedy, before any request to S3."""
    machine = machines(kind, endpoint=proxy.endpoint)
    portal = machine.server
    assert isinstance(portal, SsoPortal)
    revoked = portal.access_token
    portal.access_token = "another-login"
    machine.apply(monkeypatch)
    with Client.from_env() as client, pytest.raises(objsdk.ConfigError) as e:
        client.get_object(stored, "k")
    assert "the SSO portal refused the login" in str(e.value)
    assert "aws sso login --profile ml" in str(e.value)
    assert revoked not in str(e.value)
    assert proxy.requests(settle=0) == []


def test_an_sso_token_due_for_renewal_is_renewed_and_saved_for_the_aws_cli_too(
    keys: TemporaryCredentials,
    machines: MachineFactory,
    stored: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    machine = machines("sso")
    portal = machine.server
    assert isinstance(portal, SsoPortal)
    start_url = "https://objsdk-test.awsapps.com/start"
    cache = write_sso_cache(
        machine.home, "corp", portal.cache(start_url=start_url, region="us-east-1", expires_in=300)
    )
    old_token = portal.access_token
    machine.apply(monkeypatch)
    with Client.from_env() as client:
        assert client.get_object(stored, "k") == b"data"
    assert portal.renewals == 1
    saved = json.loads(cache.read_text())
    assert saved["accessToken"] == portal.access_token != old_token
    assert saved["refreshToken"] == portal.refresh_token
    assert saved["startUrl"] == start_url
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    # An expired token is renewed too, while its registration lasts.
    cache.write_text(portal.cache(start_url=start_url, region="us-east-1", expires_in=-60))
    with Client.from_env() as client:
        assert client.get_object(stored, "k") == b"data"
    assert portal.renewals == 2


def test_a_profile_that_does_not_exist_is_refused_by_the_cli_and_fsspec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = bare_env(tmp_path, "http://127.0.0.1:9")
    done = subprocess.run(
        [*COMMAND, "--profile", "nosuch", "ls"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 253
    assert "profile" in done.stderr
    assert "nosuch" in done.stderr
    _environ(monkeypatch, tmp_path, "http://127.0.0.1:9")
    with pytest.raises(objsdk.ConfigError, match="nosuch"):
        ObjsdkFileSystem(profile="nosuch", skip_instance_cache=True)


# -- proxies -----------------------------------------------------------------------------------


def test_credential_fetches_take_the_proxy_but_never_to_the_container_or_metadata_endpoint(
    machines: MachineFactory, stored: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ForwardingProxy() as forwarding:
        servers = {}
        for kind in ("web_identity", "sso", "container", "imds"):
            machine = machines(kind)
            machine.env["HTTP_PROXY"] = forwarding.url
            machine.apply(monkeypatch)
            with Client.from_env() as client:
                assert client.get_object(stored, "k") == b"data"
            assert machine.server is not None
            servers[kind] = machine.server.endpoint
        relayed = [r.target for r in forwarding.seen]
    for kind in ("web_identity", "sso"):  # STS and the SSO portal, as boto3 reaches them
        assert any(t.startswith(servers[kind]) for t in relayed), kind
    for kind in ("container", "imds"):  # local: always directly
        assert not any(t.startswith(servers[kind]) for t in relayed), kind
    assert any(f"/{stored}/k" in t for t in relayed)  # the S3 requests too
