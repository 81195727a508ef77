"""LocalMinio(tls=True): MinIO serving HTTPS with a throwaway CA (objsdk.testing.tls)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from objsdk import LocalMinioError
from objsdk.testing import LocalMinio
from objsdk.testing.tls import make_certificates

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_minio() -> Iterator[LocalMinio]:
    with LocalMinio(tls=True) as minio:
        yield minio


def _get(url: str, context: ssl.SSLContext) -> int:
    with urllib.request.urlopen(url, context=context, timeout=10) as resp:
        return int(resp.status)


def test_certificates_verify_against_their_ca(tmp_path: Path) -> None:
    certs = make_certificates(tmp_path / "certs")
    assert certs.server_cert == tmp_path / "certs" / "public.crt"
    assert certs.server_key == tmp_path / "certs" / "private.key"
    assert certs.ca_cert == tmp_path / "ca.crt"
    assert certs.server_key.stat().st_mode & 0o077 == 0
    context = ssl.create_default_context(cafile=str(certs.ca_cert))
    context.load_cert_chain(certs.server_cert, certs.server_key)  # key matches the cert


def test_tls_endpoint_is_https(tls_minio: LocalMinio) -> None:
    assert tls_minio.endpoint.startswith("https://127.0.0.1:")


def test_tls_server_is_reachable_with_its_ca_bundle(tls_minio: LocalMinio) -> None:
    context = ssl.create_default_context(cafile=str(tls_minio.ca_bundle))
    assert _get(f"{tls_minio.endpoint}/minio/health/live", context) == 200


def test_tls_server_certificate_is_rejected_without_its_ca(tls_minio: LocalMinio) -> None:
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        _get(f"{tls_minio.endpoint}/minio/health/live", ssl.create_default_context())


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_tls_server_is_reachable_with_curl_cacert(tls_minio: LocalMinio) -> None:
    out = subprocess.run(
        ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--noproxy", "*",
         "--cacert", str(tls_minio.ca_bundle), f"{tls_minio.endpoint}/minio/health/ready"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert (out.returncode, out.stdout) == (0, "200"), out.stderr


def test_tls_env_names_the_ca_bundle(tls_minio: LocalMinio) -> None:
    assert tls_minio.env()["AWS_CA_BUNDLE"] == str(tls_minio.ca_bundle)


def test_tls_server_restarts_on_the_same_port(tls_minio: LocalMinio) -> None:
    port = tls_minio.port
    tls_minio.restart()
    assert tls_minio.port == port
    context = ssl.create_default_context(cafile=str(tls_minio.ca_bundle))
    assert _get(f"{tls_minio.endpoint}/minio/health/live", context) == 200


def test_ca_bundle_without_tls_is_an_error(local_minio: LocalMinio) -> None:
    with pytest.raises(LocalMinioError, match="tls=True"):
        _ = local_minio.ca_bundle
