"""The STS calls objsdk sends, answered by a second implementation: moto's STS, in the
moto server that also serves S3. (moto checks no signature; MinIO's STS, which does, is
tests/test_credential_sources_minio.py's.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from objsdk import Client
from objsdk.testing import LocalMoto

ROLE = "arn:aws:iam::123456789012:role/objsdk-reader"


def _machine(monkeypatch: pytest.MonkeyPatch, home: Path, moto: LocalMoto) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", moto.endpoint)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", moto.region)


def test_a_role_assumed_from_a_source_profile_through_motos_sts_reads_and_writes(
    local_moto: LocalMoto, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _machine(monkeypatch, tmp_path, local_moto)
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text(
        f"[base]\naws_access_key_id = {local_moto.access_key}\n"
        f"aws_secret_access_key = {local_moto.secret_key}\n"
    )
    (tmp_path / ".aws" / "config").write_text(
        f"[profile ml]\nrole_arn = {ROLE}\nsource_profile = base\nduration_seconds = 900\n"
    )
    with Client.from_env(profile="ml") as client:
        client.create_bucket("sts-assume-role")
        client.put_object("sts-assume-role", "k", b"via moto's STS")
        assert client.get_object("sts-assume-role", "k") == b"via moto's STS"
        used = client.credentials
    assert used is not None
    assert used.access_key != local_moto.access_key
    assert used.session_token
    assert used.expiry is not None


def test_web_identity_through_motos_sts_reads_and_writes(
    local_moto: LocalMoto, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _machine(monkeypatch, tmp_path, local_moto)
    (tmp_path / "token").write_text("eyJ-a-web-identity-token")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(tmp_path / "token"))
    monkeypatch.setenv("AWS_ROLE_ARN", ROLE)
    with Client.from_env() as client:
        client.create_bucket("sts-web-identity")
        client.put_object("sts-web-identity", "k", b"via moto's STS")
        assert client.get_object("sts-web-identity", "k") == b"via moto's STS"
        used = client.credentials
    assert used is not None
    assert used.session_token
