"""The command line on an HTTPS endpoint with a private CA, as aws's global options
take it: ``--ca-bundle PATH``, ``--no-verify-ssl``, ``AWS_CA_BUNDLE`` and a profile's
``ca_bundle``."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import COMMAND, Result, Run, clean_env

from objsdk.testing import LocalMinio

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_minio() -> Iterator[LocalMinio]:
    with LocalMinio(tls=True) as minio:
        yield minio


@pytest.fixture
def cli(tls_minio: LocalMinio, tmp_path: Path) -> Run:
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **clean_env(home),
        "AWS_ENDPOINT_URL": tls_minio.endpoint,
        "AWS_ACCESS_KEY_ID": tls_minio.access_key,
        "AWS_SECRET_ACCESS_KEY": tls_minio.secret_key,
    }

    def run(*args: str, **extra: str) -> Result:
        proc = subprocess.run(
            [*COMMAND, *args], capture_output=True, env={**env, **extra}, timeout=60, check=False
        )
        return Result(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"))

    return run


def test_without_its_ca_the_endpoint_is_refused_with_the_remedy(cli: Run) -> None:
    res = cli("ls")
    assert res.code == 255
    assert "SSLCertVerificationError" in res.err
    assert "AWS_CA_BUNDLE" in res.err
    assert res.err.startswith(
        'objsdk: error: Could not connect to the endpoint URL: "https://127.0.0.1:'
    ), res.err
    assert "/\": TLS error (SSLCertVerificationError); the server's certificate" in res.err
    assert res.err.count("\n") == 1


def test_ca_bundle_flag_environment_and_profile_each_trust_the_ca(
    cli: Run,
    tls_minio: LocalMinio,
    tmp_path: Path,
) -> None:
    bundle = str(tls_minio.ca_bundle)
    assert cli("--ca-bundle", bundle, "mb", "s3://tls-cli").code == 0
    assert cli("ls", AWS_CA_BUNDLE=bundle).out.split()[-1] == "tls-cli"
    (tmp_path / "config").write_text(f"[default]\nca_bundle = {bundle}\n")
    assert cli("ls", AWS_CONFIG_FILE=str(tmp_path / "config")).code == 0


def test_no_verify_ssl_warns_once_and_transfers_both_ways(
    cli: Run,
    tmp_path: Path,
) -> None:
    src = tmp_path / "big"
    src.write_bytes(b"x" * (70 << 20))  # multipart up, parts down
    assert cli("--no-verify-ssl", "mb", "s3://tls-insecure").code == 0
    up = cli("--no-verify-ssl", "cp", str(src), "s3://tls-insecure/big")
    down = cli("--no-verify-ssl", "cp", "s3://tls-insecure/big", str(tmp_path / "back"))
    for res in (up, down):
        assert res.code == 0, res.err
        assert res.err.count("warning:") == 1, res.err
        assert "not checked" in res.err
        assert "InsecureRequestWarning" not in res.err
    assert (tmp_path / "back").read_bytes() == src.read_bytes()


def test_bad_tls_flags_are_refused_naming_them(cli: Run, tls_minio: LocalMinio) -> None:
    missing = cli("--ca-bundle", "/no/such/ca.pem", "ls")
    assert (missing.code, "--ca-bundle '/no/such/ca.pem': no such file") == (
        252,
        missing.err.strip().removeprefix("objsdk: error: "),
    )
    both = cli("--ca-bundle", str(tls_minio.ca_bundle), "--no-verify-ssl", "ls")
    assert both.code == 252
    assert "contradict" in both.err
    gone = cli("ls", AWS_CA_BUNDLE="/no/such/ca.pem")
    assert gone.code == 253
    assert "'/no/such/ca.pem' does not exist" in gone.err
