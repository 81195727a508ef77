"""Throwaway TLS certificates for tests: a self-signed CA and a server certificate.

::

    certs = make_certificates(tmp_path / "certs")
    # certs.server_cert / certs.server_key: what the server presents (MinIO wants them
    # as public.crt / private.key in its --certs-dir, which is what this writes);
    # certs.ca_cert: the CA bundle a client passes to trust the server.

The server certificate names ``127.0.0.1``, ``::1`` and ``localhost``. It is made with
the ``cryptography`` package when it is installed (the ``dev`` extra has it), else with
the ``openssl`` command-line tool. Nothing here is fit for anything but tests.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Certificates", "TLSSetupError", "make_certificates"]

DEFAULT_HOSTS = ("127.0.0.1", "::1", "localhost")
_DAYS = 7


class TLSSetupError(RuntimeError):
    """The certificates could not be made (neither ``cryptography`` nor ``openssl``)."""


@dataclass(frozen=True)
class Certificates:
    """Paths of the PEM files: the CA's certificate and the server's certificate and key."""

    ca_cert: Path
    server_cert: Path
    server_key: Path


def make_certificates(
    certs_dir: str | os.PathLike[str],
    *,
    hosts: Sequence[str] = DEFAULT_HOSTS,
    ca_path: str | os.PathLike[str] | None = None,
) -> Certificates:
    """Write ``public.crt`` and ``private.key`` (the server's) into ``certs_dir`` and the
    CA certificate to ``ca_path`` (default: ``ca.crt`` next to ``certs_dir``, so that a
    server reading ``certs_dir`` does not mistake it for its own)."""
    directory = Path(certs_dir)
    directory.mkdir(parents=True, exist_ok=True)
    ca = Path(ca_path) if ca_path is not None else directory.parent / "ca.crt"
    certs = Certificates(ca, directory / "public.crt", directory / "private.key")
    try:
        import cryptography  # noqa: F401
    except ImportError:
        _with_openssl(certs, hosts)
    else:
        _with_cryptography(certs, hosts)
    return certs


def _with_cryptography(certs: Certificates, hosts: Sequence[str]) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=_DAYS)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "objsdk test CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    certs.ca_cert.write_bytes(ca_cert.public_bytes(pem))
    certs.server_cert.write_bytes(cert.public_bytes(pem))
    _write_private(
        certs.server_key,
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )


def _with_openssl(certs: Certificates, hosts: Sequence[str]) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise TLSSetupError("making test certificates needs 'cryptography' or the openssl tool")
    alt = ",".join(f"IP:{h}" if _is_ip(h) else f"DNS:{h}" for h in hosts)  # subjectAltName syntax
    with tempfile.TemporaryDirectory(prefix="objsdk-tls-") as tmp:
        work = Path(tmp)
        ca_key, csr, ext = work / "ca.key", work / "server.csr", work / "server.ext"
        ext.write_text(
            "basicConstraints=critical,CA:FALSE\n"
            f"subjectAltName={alt}\n"
            "extendedKeyUsage=serverAuth\n"
            "subjectKeyIdentifier=hash\n"
            "authorityKeyIdentifier=keyid\n"
        )
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        _run(
            openssl, "req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(certs.ca_cert),
            "-days", str(_DAYS), "-subj", "/CN=objsdk test CA",
            "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        )  # fmt: skip
        _run(
            openssl, "req", *ec, "-keyout", str(certs.server_key), "-out", str(csr),
            "-subj", f"/CN={hosts[0]}",
        )  # fmt: skip
        _run(
            openssl, "x509", "-req", "-in", str(csr), "-CA", str(certs.ca_cert),
            "-CAkey", str(ca_key), "-set_serial", str(secrets.randbits(63)), "-days", str(_DAYS),
            "-extfile", str(ext), "-out", str(certs.server_cert),
        )  # fmt: skip
    certs.server_key.chmod(0o600)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _run(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise TLSSetupError(f"{' '.join(argv[:3])} failed: {proc.stderr.strip()[-500:]}")


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
