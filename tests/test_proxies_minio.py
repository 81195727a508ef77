"""HTTP_PROXY, HTTPS_PROXY and NO_PROXY, honoured as boto3 honours them, in front of a
real MinIO: every kind of request goes through the proxy (absolute form to an http
origin, a CONNECT tunnel to an https one) and succeeds; NO_PROXY bypasses it; the
proxy's credentials come from its URL and never show in an error."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cli_helpers import clean_env
from forwarding_proxy import ForwardingProxy

from objsdk import Client, ConnectError, ProxyError, S3Error
from objsdk.testing import LocalMinio
from objsdk.testing.tls import make_certificates

pytestmark = pytest.mark.integration

_PROXY_VARIABLES = (
    "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy",
    "ALL_PROXY", "all_proxy",
)  # fmt: skip
_BIG = 3 << 20  # above 1 MiB: streamed, and read from the socket directly on plain HTTP


@pytest.fixture(autouse=True)
def no_proxy_of_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the proxies a test sets."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def proxy() -> Iterator[ForwardingProxy]:
    with ForwardingProxy() as p:
        yield p


def _client(minio: LocalMinio, **kwargs: object) -> Client:
    return Client(minio.endpoint, minio.access_key, minio.secret_key, **kwargs)  # type: ignore[arg-type]


def _read(client: Client, path: str, key: str = "k") -> None:
    """Read an object through the wire (an answer read whole) or requests (streamed)."""
    if path == "wire":
        client.get_object("b", key)
    else:
        with client.open("b", key) as f:
            f.read()


def _send(client: Client, path: str, file: Path) -> None:
    """A request read whole (the wire), or a file body (requests, streamed)."""
    if path == "wire":
        client.get_object("b", "k")
    else:
        client.upload("b", "k", file)


def _origin(minio: LocalMinio) -> str:
    return minio.endpoint.split("://", 1)[1]


def test_http_proxy_carries_the_requests_read_whole_in_absolute_form_with_the_signed_host(
    local_minio: LocalMinio, proxy: ForwardingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """put_object, head_object, get_object, a listing and a delete (the wire's own
    connections) each go to the proxy as ``METHOD http://origin/path``, Host the
    origin's, and succeed: the signature still holds at MinIO."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    with _client(local_minio) as client:
        client.create_bucket("proxied-wire")
        client.put_object("proxied-wire", "a/k", b"through the proxy")
        assert client.head_object("proxied-wire", "a/k").size == 17
        assert client.get_object("proxied-wire", "a/k") == b"through the proxy"
        assert [o.key for o in client.list_objects("proxied-wire")] == ["a/k"]
        client.delete_object("proxied-wire", "a/k")
        client.delete_bucket("proxied-wire")
    assert proxy.methods() == ["PUT", "PUT", "HEAD", "GET", "GET", "DELETE", "DELETE"]
    origin = _origin(local_minio)
    assert all(r.target.startswith(f"http://{origin}/proxied-wire") for r in proxy.seen)
    assert {r.host for r in proxy.seen} == {origin}


def test_http_proxy_carries_streamed_reads_downloads_and_file_uploads(
    local_minio: LocalMinio, proxy: ForwardingProxy, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    """open().read() and download (requests' adapter, with direct socket reads), and the
    upload of a file (the sendfile PUT, which writes to the origin itself, is left for
    requests' proxy pool) all go through the proxy."""
    data = os.urandom(_BIG)
    source = tmp_path / "source.bin"
    source.write_bytes(data)
    with local_minio.client() as direct:
        direct.create_bucket("proxied-streams")
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    with _client(local_minio) as client:
        client.upload("proxied-streams", "big", source)
        puts = proxy.methods().count("PUT")
        with client.open("proxied-streams", "big") as f:
            assert f.read() == data
        client.download("proxied-streams", "big", tmp_path / "back.bin")
        assert (tmp_path / "back.bin").read_bytes() == data
    assert puts == 1
    assert proxy.methods().count("GET") >= 2
    origin = _origin(local_minio)
    assert all(r.target.startswith(f"http://{origin}/proxied-streams/big") for r in proxy.seen)


@pytest.mark.parametrize("path", ["wire", "streamed"])
def test_the_proxy_is_sent_the_url_as_signed_dot_segments_and_all(
    local_minio: LocalMinio, proxy: ForwardingProxy, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """A key with ``.`` and ``..`` segments reaches the proxy as it was signed, on both
    paths (urllib3 would collapse them in an absolute URL: another key than the one
    signed). MinIO refuses such keys; the point is what the proxy was sent."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    with _client(local_minio, retries=0) as client, pytest.raises(S3Error):
        _read(client, path, key="x/../y/./z")
    assert proxy.seen[0].target == f"{local_minio.endpoint}/b/x/../y/./z"


def test_a_request_sent_directly_never_goes_through_the_proxy(
    local_minio: LocalMinio, proxy: ForwardingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Wire.direct()``, the way to the instance metadata service and the container
    credentials endpoint (on loopback too), bypasses the proxy the same wire takes."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    url = f"{local_minio.endpoint}/minio/health/live"
    with _client(local_minio) as client:
        wire = client.transport.wire  # type: ignore[attr-defined]
        assert wire.direct().exchange("GET", url, {}, None).status == 200
        assert proxy.seen == []
        assert wire.exchange("GET", url, {}, None).status == 200
        assert proxy.methods() == ["GET"]


def test_no_proxy_naming_the_endpoint_host_bypasses_the_proxy(
    local_minio: LocalMinio, proxy: ForwardingProxy, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    """NO_PROXY=127.0.0.1 (and no_proxy with the host's network, lower case winning):
    every request goes directly."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    source = tmp_path / "f.bin"
    source.write_bytes(b"x" * (_BIG // 3))
    for name, value in (("NO_PROXY", "127.0.0.1"), ("no_proxy", "example.com, 127.0.0.0/8")):
        monkeypatch.setenv(name, value)
        with _client(local_minio) as client:
            client.create_bucket("bypassed")
            client.put_object("bypassed", "k", b"direct")
            assert client.get_object("bypassed", "k") == b"direct"
            client.upload("bypassed", "f", source)
            with client.open("bypassed", "f") as f:
                assert f.read() == source.read_bytes()
            client.delete_objects("bypassed", ["k", "f"])
            client.delete_bucket("bypassed")
    assert proxy.seen == []


def test_a_client_keeps_the_proxies_of_the_environment_it_was_built_in(
    local_minio: LocalMinio, proxy: ForwardingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The variables are read when the client is built, as botocore reads them."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    proxied = _client(local_minio)
    monkeypatch.delenv("HTTP_PROXY")
    direct = _client(local_minio)
    with proxied, direct:
        proxied.create_bucket("built-with")
        assert direct.bucket_exists("built-with")
        proxied.delete_bucket("built-with")
    assert proxy.methods() == ["PUT", "DELETE"]


def test_proxy_credentials_from_its_url_become_proxy_authorization_and_stay_with_the_proxy(
    local_minio: LocalMinio, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``http://user:p%40ss@proxy`` authenticates every request (wire, streamed, file
    body) to a proxy that requires it; the proxy strips the field, so MinIO still finds
    its signature valid."""
    data = os.urandom(_BIG)
    source = tmp_path / "s.bin"
    source.write_bytes(data)
    with ForwardingProxy(credentials=("user", "p@ss")) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url_with("user", "p%40ss"))
        with _client(local_minio) as client:
            client.create_bucket("proxy-auth")
            client.put_object("proxy-auth", "small", b"s")
            assert client.get_object("proxy-auth", "small") == b"s"
            client.upload("proxy-auth", "big", source)
            with client.open("proxy-auth", "big") as f:
                assert f.read() == data
            client.delete_objects("proxy-auth", ["small", "big"])
            client.delete_bucket("proxy-auth")
        assert len(proxy.seen) >= 7
        assert all(r.authorized for r in proxy.seen)


@pytest.mark.parametrize("path", ["wire", "streamed"])
def test_a_proxy_refusing_the_credentials_is_a_connect_error_naming_it_without_the_password(
    local_minio: LocalMinio, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """407 from the proxy: a ProxyError (a ConnectError) naming the proxy and the
    variable, saying the user and password were refused, never showing the password;
    neither retried nor resumed."""
    with ForwardingProxy(credentials=("user", "right")) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url_with("user", "wrongpass"))
        with _client(local_minio) as client, pytest.raises(ProxyError) as caught:
            _read(client, path)
        assert len(proxy.seen) == 1
    message = str(caught.value)
    assert proxy.url in message
    assert "407" in message
    assert "HTTP_PROXY" in message
    assert "wrongpass" not in message
    assert "wrongpass" not in repr(caught.value)


def test_a_proxy_wanting_credentials_none_were_given_for_says_where_to_give_them(
    local_minio: LocalMinio, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ForwardingProxy(credentials=("user", "right")) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        with _client(local_minio) as client, pytest.raises(ProxyError, match="407") as caught:
            client.head_object("any-bucket", "k")
    assert "http://user:password@host:port" in str(caught.value)


def test_an_unreachable_proxy_is_a_connect_error_naming_it(
    local_minio: LocalMinio, monkeypatch: pytest.MonkeyPatch, unused_port: int, tmp_path: Path
) -> None:
    """A connect error like an unreachable server's (retried as one), naming the proxy
    and not its password, for a request read whole and for a file body (streamed)."""
    monkeypatch.setenv("HTTP_PROXY", f"http://user:secretword@127.0.0.1:{unused_port}")
    (tmp_path / "f").write_bytes(b"f")
    with _client(local_minio, retries=0) as client:
        with pytest.raises(ConnectError) as wire:
            client.get_object("b", "k")
        with pytest.raises(ConnectError) as streamed:
            client.upload("b", "k", tmp_path / "f")
    for caught in (wire, streamed):
        assert not isinstance(caught.value, ProxyError)
        assert f"http://127.0.0.1:{unused_port}" in str(caught.value)
        assert "cannot be reached" in str(caught.value)
        assert "secretword" not in str(caught.value)


@pytest.mark.parametrize("path", ["wire", "streamed"])
def test_a_tunnel_the_proxy_cannot_open_is_retried_as_a_connect_error(
    proxy: ForwardingProxy,
    monkeypatch: pytest.MonkeyPatch,
    unused_port: int,
    path: str,
    tmp_path: Path,
) -> None:
    """A 502 to CONNECT (the proxy could not reach the server) is a ConnectError naming
    the proxy and the status, retried like an unreachable server: nothing reached it."""
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    (tmp_path / "f").write_bytes(b"a file body: through requests")
    client = Client(f"https://127.0.0.1:{unused_port}", "AKIAEXAMPLE", "secret", retries=1)
    with client, pytest.raises(ConnectError) as caught:
        _send(client, path, tmp_path / "f")
    assert not isinstance(caught.value, ProxyError)
    assert f"the proxy {proxy.url} (from HTTPS_PROXY) refused the tunnel: 502" in str(caught.value)
    assert proxy.methods() == ["CONNECT", "CONNECT"]


# -- HTTPS: through a CONNECT tunnel ---------------------------------------------------


@pytest.fixture(scope="module")
def tls_minio() -> Iterator[LocalMinio]:
    with LocalMinio(tls=True) as minio:
        yield minio


def test_https_proxy_tunnels_every_kind_of_request_and_sees_none_of_them(
    tls_minio: LocalMinio, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With HTTPS_PROXY, an https endpoint is reached through CONNECT tunnels only: the
    proxy relays no request in the clear, the origin's certificate is still verified
    (against the CA bundle), and the requests succeed through a proxy that wants
    credentials."""
    data = os.urandom(_BIG)
    source = tmp_path / "t.bin"
    source.write_bytes(data)
    with ForwardingProxy(credentials=("u", "pw")) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url_with("u", "pw"))
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # for http:// URLs only
        with _client(tls_minio, verify=str(tls_minio.ca_bundle)) as client:
            client.create_bucket("tunnelled")
            client.put_object("tunnelled", "small", b"tls")
            assert client.head_object("tunnelled", "small").size == 3
            assert client.get_object("tunnelled", "small") == b"tls"
            client.upload("tunnelled", "big", source)
            with client.open("tunnelled", "big") as f:
                assert f.read() == data
            client.download("tunnelled", "big", tmp_path / "back.bin")
            assert (tmp_path / "back.bin").read_bytes() == data
            assert [o.key for o in client.list_objects("tunnelled")] == ["big", "small"]
            client.delete_objects("tunnelled", ["small", "big"])
            client.delete_bucket("tunnelled")
        with (
            _client(tls_minio, verify=True, retries=0) as untrusting,
            pytest.raises(ConnectError, match="SSLCertVerificationError"),
        ):
            untrusting.get_object("tunnelled", "small")
    origin = _origin(tls_minio)
    assert set(proxy.methods()) == {"CONNECT"}
    assert {r.target for r in proxy.seen} == {origin}
    assert all(r.authorized for r in proxy.seen)


@pytest.mark.parametrize("path", ["wire", "streamed"])
def test_a_proxy_refusing_the_tunnel_is_a_connect_error_naming_it(
    tls_minio: LocalMinio, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    with ForwardingProxy(credentials=("u", "pw")) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url_with("u", "not-the-password"))
        with (
            _client(tls_minio, verify=str(tls_minio.ca_bundle)) as client,
            pytest.raises(ProxyError) as caught,
        ):
            _read(client, path)
        assert proxy.methods() == ["CONNECT"]  # refused once, not retried
    message = str(caught.value)
    assert f"{proxy.url} (from HTTPS_PROXY) refused the tunnel: 407" in message
    assert "not-the-password" not in message


@pytest.mark.parametrize("endpoint", ["http", "https"])
def test_an_https_proxy_is_reached_over_tls_and_its_certificate_checked(
    local_minio: LocalMinio,
    tls_minio: LocalMinio,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    endpoint: str,
) -> None:
    """A proxy URL ``https://...``: TLS to the proxy, checked against the CA bundle the
    client verifies with, then requests in absolute form (an http endpoint) or the
    endpoint's own TLS inside the tunnel (https), for answers read whole and streamed
    ones. Without the proxy's CA, both paths refuse it."""
    minio = tls_minio if endpoint == "https" else local_minio
    certs = make_certificates(tmp_path / "proxy-certs")
    bundle = tmp_path / "both.pem"
    bundle.write_text(certs.ca_cert.read_text() + Path(tls_minio.ca_bundle).read_text())
    data = os.urandom(_BIG)
    bucket = f"tls-proxy-{endpoint}"
    with ForwardingProxy(tls=(certs.server_cert, certs.server_key)) as proxy:
        monkeypatch.setenv(f"{endpoint.upper()}_PROXY", proxy.url)
        with _client(minio, verify=str(bundle)) as client:
            client.create_bucket(bucket)
            client.put_object(bucket, "k", data)
            assert client.get_object(bucket, "k") == data
            with client.open(bucket, "k") as f:
                assert f.read() == data
            client.delete_object(bucket, "k")
        (tmp_path / "f").write_bytes(b"f")
        with _client(minio, verify=str(tls_minio.ca_bundle), retries=0) as untrusting:
            with pytest.raises(ConnectError, match="SSLCertVerificationError") as wire:
                untrusting.get_object(bucket, "k")
            with pytest.raises(ConnectError, match="SSLCertVerificationError") as streamed:
                untrusting.upload(bucket, "f", tmp_path / "f")  # a file body: requests
        for caught in (wire, streamed):
            assert f"the proxy {proxy.url} (from {endpoint.upper()}_PROXY)" in str(caught.value)
            assert "CA bundle" in str(caught.value)
        with _client(minio, verify=str(bundle)) as client:
            client.delete_bucket(bucket)
    if endpoint == "https":
        assert set(proxy.methods()) == {"CONNECT"}
    else:
        assert proxy.methods() == ["PUT", "PUT", "GET", "GET", "DELETE", "DELETE"]


# -- the command line and fsspec --------------------------------------------------------


def _cli(
    minio: LocalMinio, home: Path, proxy_url: str
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """The command line, in a subprocess, with the MinIO's keys and HTTP_PROXY."""
    home.mkdir()
    env = {
        **clean_env(home),
        **minio.env(),
        "HTTP_PROXY": proxy_url,
        "PYTHONPATH": os.pathsep.join(sys.path),
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "objsdk.cli", *args],
            capture_output=True, text=True, env=env, timeout=60, check=False,
        )  # fmt: skip

    return cli


def test_the_command_line_goes_through_the_proxy(
    local_minio: LocalMinio, proxy: ForwardingProxy, tmp_path: Path
) -> None:
    (tmp_path / "f.txt").write_text("cli through the proxy")
    cli = _cli(local_minio, tmp_path / "home", proxy.url)
    assert cli("mb", "s3://cli-proxied").returncode == 0
    assert cli("cp", str(tmp_path / "f.txt"), "s3://cli-proxied/f.txt").returncode == 0
    out = cli("cat", "s3://cli-proxied/f.txt")
    assert out.stdout == "cli through the proxy", out.stderr
    assert cli("rb", "--force", "s3://cli-proxied").returncode == 0
    assert {"PUT", "GET", "DELETE"} <= set(proxy.methods())


def test_the_command_line_names_a_refusing_proxy_without_its_password(
    local_minio: LocalMinio, tmp_path: Path
) -> None:
    with ForwardingProxy(credentials=("u", "right")) as proxy:
        cli = _cli(local_minio, tmp_path / "home", proxy.url_with("u", "wrongpass"))
        out = cli("cat", "s3://any-bucket/k")
    assert out.returncode == 255
    assert f"the proxy {proxy.url} (from HTTP_PROXY) refused the request: 407" in out.stderr
    assert "wrongpass" not in out.stderr


def test_fsspec_goes_through_the_proxy(
    local_minio: LocalMinio, proxy: ForwardingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsspec = pytest.importorskip("fsspec")
    with local_minio.client() as direct:
        direct.create_bucket("fs-proxied")
        direct.put_object("fs-proxied", "k", b"fsspec via proxy")
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    fs = fsspec.filesystem(
        "objsdk",
        endpoint_url=local_minio.endpoint,
        key=local_minio.access_key,
        secret=local_minio.secret_key,
        skip_instance_cache=True,
    )
    assert fs.cat("fs-proxied/k") == b"fsspec via proxy"
    assert "GET" in proxy.methods()
    with local_minio.client() as direct:
        direct.delete_object("fs-proxied", "k")
        direct.delete_bucket("fs-proxied")
