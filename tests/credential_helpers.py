"""What the credential tests share: a machine (a home directory with ~/.aws files and an
environment holding no AWS_* variable of the test process), and each credential source
set up on it against the session's MinIO, through the loopback emulators of
objsdk.testing (IMDS, container endpoint, STS, SSO portal), with real temporary
credentials from MinIO's STS."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from objsdk.testing import LocalMinio
from objsdk.testing.credential_servers import (
    ContainerCredentialsServer,
    CredentialServer,
    InstanceMetadataServer,
    SsoPortal,
    StsServer,
)
from objsdk.testing.temporary_credentials import TemporaryCredentials

ROLE = "arn:aws:iam::123456789012:role/objsdk-reader"
SOURCES = (
    "credential_process",
    "container",
    "imds",
    "web_identity",
    "assume_role",
    "sso",
    "sso_legacy",
)


@dataclass
class Machine:
    """A home directory and an environment; :meth:`apply` puts the environment into
    this process (for the library and fsspec), :attr:`env` is the subprocess's."""

    home: Path
    minio: LocalMinio
    env: dict[str, str] = field(default_factory=dict)
    #: The profile the source is configured under (None: the environment's or default).
    profile: str | None = None
    #: Every secret or token a message, log, repr or pickle must never show.
    secrets: list[str] = field(default_factory=list)
    #: The emulator serving the source (None for credential_process).
    server: CredentialServer | None = None

    def config(self, text: str) -> None:
        path = self.home / ".aws" / "config"
        path.parent.mkdir(exist_ok=True)
        path.write_text(textwrap.dedent(text))

    def credentials(self, text: str) -> None:
        path = self.home / ".aws" / "credentials"
        path.parent.mkdir(exist_ok=True)
        path.write_text(textwrap.dedent(text))

    def apply(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in list(os.environ):
            if name.startswith("AWS_"):
                monkeypatch.delenv(name)
        for name, value in self.env.items():
            monkeypatch.setenv(name, value)


def bare_env(home: Path, endpoint: str) -> dict[str, str]:
    """An environment with no AWS_* variable of this process, HOME at ``home``, the
    S3 endpoint, and the metadata service off (each source turns it on if it is
    the one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        HOME=str(home),
        AWS_ENDPOINT_URL=endpoint,
        AWS_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    return env


def set_up(
    kind: str,
    machine: Machine,
    keys: TemporaryCredentials,
    stack: ExitStack,
    tmp: Path,
) -> Machine:
    """Configure credential source ``kind`` (one of :data:`SOURCES`) on ``machine``."""
    minio = machine.minio
    if kind == "credential_process":
        issued = keys.issue()
        assert issued.expiry is not None
        document = {
            "Version": 1,
            "AccessKeyId": issued.access_key,
            "SecretAccessKey": issued.secret_key,
            "SessionToken": issued.session_token,
            "Expiration": issued.expiry.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        (tmp / "creds.json").write_text(json.dumps(document))
        script = tmp / "get-creds.py"
        source = str(tmp / "creds.json")
        script.write_text(f"import sys\nsys.stdout.write(open({source!r}).read())\n")
        machine.config(
            f"""
            [profile ml]
            credential_process = {sys.executable} {script}
            """
        )
        machine.profile = "ml"
        machine.env["AWS_PROFILE"] = "ml"
        machine.secrets += [issued.secret_key, issued.session_token or ""]
    elif kind == "container":
        token = "container-auth-" + secrets.token_hex(8)
        server = stack.enter_context(ContainerCredentialsServer(keys, token=token))
        (tmp / "container-token").write_text(token + "\n")
        machine.env.update(
            AWS_CONTAINER_CREDENTIALS_FULL_URI=server.url,
            AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(tmp / "container-token"),
        )
        machine.server = server
        machine.secrets.append(token)
    elif kind == "imds":
        server = stack.enter_context(InstanceMetadataServer(keys))
        machine.env.pop("AWS_EC2_METADATA_DISABLED", None)
        machine.env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = server.endpoint
        machine.server = server
    elif kind == "web_identity":
        web_token = "eyJ-web-identity-" + secrets.token_hex(8)
        server = stack.enter_context(StsServer(keys, web_token=web_token, role_arn=ROLE))
        (tmp / "web-token").write_text(web_token)
        machine.env.update(
            AWS_WEB_IDENTITY_TOKEN_FILE=str(tmp / "web-token"),
            AWS_ROLE_ARN=ROLE,
            AWS_ROLE_SESSION_NAME="objsdk-test",
            AWS_ENDPOINT_URL_STS=server.endpoint,
        )
        machine.server = server
        machine.secrets.append(web_token)
    elif kind == "assume_role":
        server = stack.enter_context(StsServer(keys, web_token="unused", role_arn=ROLE))
        machine.credentials(
            f"""
            [base]
            aws_access_key_id = {minio.access_key}
            aws_secret_access_key = {minio.secret_key}
            """
        )
        machine.config(
            f"""
            [profile ml]
            role_arn = {ROLE}
            source_profile = base
            role_session_name = objsdk-test
            services = here

            [services here]
            sts =
              endpoint_url = {server.endpoint}
            """
        )
        machine.profile = "ml"
        machine.env["AWS_PROFILE"] = "ml"
        machine.server = server
        machine.secrets.append(minio.secret_key)
    elif kind == "sso":
        portal = stack.enter_context(SsoPortal(keys))
        start_url = "https://objsdk-test.awsapps.com/start"
        machine.config(
            f"""
            [profile ml]
            sso_session = corp
            sso_account_id = {portal.account_id}
            sso_role_name = {portal.role_name}

            [sso-session corp]
            sso_start_url = {start_url}
            sso_region = us-east-1
            """
        )
        write_sso_cache(machine.home, "corp", portal.cache(start_url=start_url, region="us-east-1"))
        machine.env.update(
            AWS_ENDPOINT_URL_SSO=portal.endpoint, AWS_ENDPOINT_URL_SSO_OIDC=portal.endpoint
        )
        machine.profile = "ml"
        machine.env["AWS_PROFILE"] = "ml"
        machine.server = portal
        machine.secrets += [portal.access_token, portal.refresh_token, portal.client_secret]
    elif kind == "sso_legacy":
        # The profile form before sso-session: the portal's settings in the profile
        # itself, and the token aws sso login cached under the SHA-1 of the start URL
        # (as the aws CLI v2 of then wrote it: no refresh token, "UTC" for the zone).
        portal = stack.enter_context(SsoPortal(keys))
        start_url = "https://objsdk-legacy.awsapps.com/start"
        machine.config(
            f"""
            [profile ml]
            sso_start_url = {start_url}
            sso_region = us-east-1
            sso_account_id = {portal.account_id}
            sso_role_name = {portal.role_name}
            """
        )
        document = json.loads(
            portal.cache(start_url=start_url, region="us-east-1", renewable=False)
        )
        document["expiresAt"] = document["expiresAt"].replace("Z", "UTC")
        write_sso_cache(machine.home, start_url, json.dumps(document))
        machine.env["AWS_ENDPOINT_URL_SSO"] = portal.endpoint
        machine.profile = "ml"
        machine.env["AWS_PROFILE"] = "ml"
        machine.server = portal
        machine.secrets.append(portal.access_token)
    else:
        raise ValueError(kind)
    return machine


def write_sso_cache(home: Path, key: str, text: str) -> Path:
    """The token cache file ``aws sso login`` writes for session name ``key`` (the
    start URL for a legacy profile)."""
    name = hashlib.sha1(key.encode()).hexdigest() + ".json"
    path = home / ".aws" / "sso" / "cache" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def all_secrets(machine: Machine, keys: TemporaryCredentials) -> list[str]:
    """The machine's secrets and every set of temporary credentials handed out."""
    found = [s for s in machine.secrets if s]
    for issued in keys.issued:
        found += [issued.secret_key, issued.session_token or ""]
    return [s for s in found if s]


MachineFactory = Callable[..., Machine]


def machine_factory(
    tmp_path: Path, minio: LocalMinio, keys: TemporaryCredentials
) -> Iterator[MachineFactory]:
    """``make(kind)``: a machine with source ``kind`` set up (its emulator stopped at
    the end of the test)."""
    with ExitStack() as stack:

        def make(kind: str, *, endpoint: str | None = None) -> Machine:
            home = tmp_path / f"home-{kind}"
            home.mkdir()
            (home / ".aws").mkdir()
            machine = Machine(home, minio, bare_env(home, endpoint or minio.endpoint))
            return set_up(kind, machine, keys, stack, tmp_path)

        yield make
