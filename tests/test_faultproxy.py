"""FaultProxy: an HTTP reverse proxy in front of the local MinIO that injects faults."""

from __future__ import annotations

import http.server
import os
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import requests

from objsdk import Client, S3Error, SlowDown, TransportError
from objsdk.testing import LocalMinio
from objsdk.testing.faultproxy import Action, FaultProxy, FaultProxyError

pytestmark = pytest.mark.integration


@pytest.fixture
def proxy(local_minio: LocalMinio) -> Iterator[FaultProxy]:
    with FaultProxy(
        local_minio.endpoint, access_key=local_minio.access_key, secret_key=local_minio.secret_key
    ) as p:
        yield p


@pytest.fixture
def via(proxy: FaultProxy, local_minio: LocalMinio) -> Iterator[Client]:
    """A client that talks to MinIO through the proxy, without retries."""
    with Client(proxy.endpoint, local_minio.access_key, local_minio.secret_key, retries=0) as c:
        yield c


def _url(via: Client, bucket: str, key: str) -> str:
    return via.presign("GET", bucket, key, expires=300)


def test_forwards_requests_unchanged(via: Client, client: Client, bucket: str) -> None:
    data = os.urandom(100_000)
    via.put_object(bucket, "k", data)
    assert via.get_object(bucket, "k") == data
    assert client.get_object(bucket, "k") == data


def test_keeps_client_connections_alive(via: Client, proxy: FaultProxy, bucket: str) -> None:
    for i in range(5):
        via.put_object(bucket, f"k{i}", b"x")
        via.head_object(bucket, f"k{i}")
    assert len(proxy.requests()) == 10
    assert proxy.connections == 1


def test_streams_a_large_body_both_ways(via: Client, bucket: str) -> None:
    data = os.urandom(24 << 20)
    via.put_object(bucket, "big", data)
    assert via.get_object(bucket, "big") == data


def test_logs_method_path_query_range_and_status(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    via.put_object(bucket, "dir/a b", b"0123456789")
    via.get_object(bucket, "dir/a b", offset=2, length=3)
    put, get = proxy.requests()
    assert (put.method, put.path, put.status, put.actions) == (
        "PUT",
        f"/{bucket}/dir/a b",
        200,
        (),
    )
    assert (get.method, get.range, get.status) == ("GET", "bytes=2-4", 206)
    assert proxy.requests(method="get") == [get]


def test_logs_when_each_request_arrived_and_when_it_ended(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    via.put_object(bucket, "k", b"x")
    proxy.add_rule(Action.DELAY, method="GET", seconds=0.3)
    asked = time.time()
    via.get_object(bucket, "k")
    put, get = proxy.requests()
    # (The proxy logs an exchange a moment after the client has its reply.)
    assert put.started <= put.time
    assert put.started <= asked <= get.started <= get.time
    assert get.time - get.started >= 0.3  # in flight while the proxy held it


def test_slow_down_answers_503_without_forwarding(
    via: Client, client: Client, proxy: FaultProxy, bucket: str
) -> None:
    rule = proxy.add_rule(Action.SLOW_DOWN, method="PUT", path=r"/k$")
    with pytest.raises(SlowDown):
        via.put_object(bucket, "k", b"data")
    assert rule.hits == 1
    assert not [o.key for o in client.list_objects(bucket)]
    (entry,) = proxy.requests()
    assert (entry.status, entry.upstream_status, entry.actions) == (
        503,
        None,
        (Action.SLOW_DOWN,),
    )


def test_slow_down_body_is_an_s3_error_with_retry_after(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    via.put_object(bucket, "k", b"data")
    proxy.add_rule(Action.SLOW_DOWN, method="GET", retry_after=2)
    resp = requests.get(_url(via, bucket, "k"), timeout=10)
    assert resp.status_code == 503
    assert resp.headers["Retry-After"] == "2"
    assert "<Code>SlowDown</Code>" in resp.text


def test_a_rule_applies_only_its_number_of_times(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    rule = proxy.add_rule(Action.SLOW_DOWN, method="PUT", times=3)
    for _ in range(3):
        with pytest.raises(SlowDown):
            via.put_object(bucket, "k", b"data")
    via.put_object(bucket, "k", b"data")
    assert rule.hits == 3
    assert [r.status for r in proxy.requests()] == [503, 503, 503, 200]


def test_rules_match_on_query_parameters(via: Client, proxy: FaultProxy, bucket: str) -> None:
    via.put_object(bucket, "k", b"data")
    proxy.add_rule(Action.SLOW_DOWN, method="HEAD", query=["versionId"], times=None)
    via.head_object(bucket, "k")  # no versionId: forwarded
    with pytest.raises(SlowDown):
        via.head_object(bucket, "k", version_id="null")


def test_an_injected_error_carries_the_rules_headers_and_a_heads_has_no_body(
    proxy: FaultProxy, bucket: str
) -> None:
    where = {"x-amz-bucket-region": "eu-west-1"}
    proxy.add_rule(Action.ERROR, status=301, code="PermanentRedirect", headers=where, times=2)
    with requests.Session() as session:  # one connection: a stray body would show next
        got = session.get(f"{proxy.endpoint}/{bucket}/k", timeout=10)
        assert (got.status_code, got.headers["x-amz-bucket-region"]) == (301, "eu-west-1")
        assert b"<Code>PermanentRedirect</Code>" in got.content
        head = session.head(f"{proxy.endpoint}/{bucket}/k", timeout=10)
        assert (head.status_code, head.headers["x-amz-bucket-region"]) == (301, "eu-west-1")
        after = session.get(f"{proxy.endpoint}/{bucket}/k", timeout=10)
        assert after.status_code == 403  # forwarded, unsigned: MinIO's own answer
    assert proxy.connections == 1


def test_rules_match_on_query_values(proxy: FaultProxy) -> None:
    rule = proxy.add_rule(Action.ERROR, query={"partNumber": "2", "uploadId": None})
    assert rule.matches("PUT", "/b/k", {"partNumber": "2", "uploadId": "x"})
    assert not rule.matches("PUT", "/b/k", {"partNumber": "1", "uploadId": "x"})
    assert not rule.matches("PUT", "/b/k", {"partNumber": "2"})


def test_error_after_forward_loses_the_reply_of_a_request_that_took_effect(
    via: Client, client: Client, proxy: FaultProxy, bucket: str
) -> None:
    proxy.add_rule(Action.ERROR_AFTER_FORWARD, method="PUT", status=500, code="InternalError")
    with pytest.raises(Exception, match="InternalError"):
        via.put_object(bucket, "k", b"stored anyway")
    assert client.get_object(bucket, "k") == b"stored anyway"
    (entry,) = proxy.requests()
    assert (entry.status, entry.upstream_status) == (500, 200)


def test_drop_after_forward_closes_without_a_reply(
    via: Client, client: Client, proxy: FaultProxy, bucket: str
) -> None:
    proxy.add_rule(Action.DROP_AFTER_FORWARD, method="PUT")
    with pytest.raises(TransportError):
        via.put_object(bucket, "k", b"stored anyway")
    assert client.get_object(bucket, "k") == b"stored anyway"
    (entry,) = proxy.requests()
    assert (entry.status, entry.upstream_status) == (None, 200)


def test_drop_closes_without_forwarding(
    via: Client, client: Client, proxy: FaultProxy, bucket: str
) -> None:
    proxy.add_rule(Action.DROP, method="PUT")
    with pytest.raises(TransportError):
        via.put_object(bucket, "k", b"never stored")
    assert not [o.key for o in client.list_objects(bucket)]


def test_strip_etag_removes_the_header(via: Client, proxy: FaultProxy, bucket: str) -> None:
    via.put_object(bucket, "k", b"data")
    proxy.add_rule(Action.STRIP_ETAG, method="HEAD")
    assert via.head_object(bucket, "k").etag is None
    assert via.head_object(bucket, "k").etag is not None


def test_weak_etag_marks_the_etag_weak(via: Client, proxy: FaultProxy, bucket: str) -> None:
    via.put_object(bucket, "k", b"data")
    proxy.add_rule(Action.WEAK_ETAG, method="GET")
    resp = requests.get(_url(via, bucket, "k"), timeout=10)
    assert resp.headers["ETag"].startswith('W/"')
    assert resp.content == b"data"


def test_ignore_range_returns_the_whole_object(via: Client, proxy: FaultProxy, bucket: str) -> None:
    via.put_object(bucket, "k", b"0123456789")
    proxy.add_rule(Action.IGNORE_RANGE, method="GET")
    resp = requests.get(_url(via, bucket, "k"), headers={"Range": "bytes=2-4"}, timeout=10)
    assert (resp.status_code, resp.content) == (200, b"0123456789")
    assert proxy.requests()[-1].range == "bytes=2-4"


def test_ignore_range_re_signs_a_request_that_signed_range(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    via.put_object(bucket, "dir/k ~+=", b"0123456789")
    proxy.add_rule(Action.IGNORE_RANGE, method="GET")
    # get_object slices a 200 answer to the range asked for.
    assert via.get_object(bucket, "dir/k ~+=", offset=2, length=3) == b"234"
    get = proxy.requests(method="GET")[0]
    assert (get.range, get.upstream_status, get.body_bytes) == ("bytes=2-4", 200, 10)


def test_ignore_range_without_credentials_cannot_re_sign(
    local_minio: LocalMinio, bucket: str
) -> None:
    with FaultProxy(local_minio.endpoint) as bare, local_minio.client() as direct:
        direct.put_object(bucket, "k", b"0123456789")
        bare.add_rule(Action.IGNORE_RANGE, method="GET")
        c = Client(bare.endpoint, local_minio.access_key, local_minio.secret_key, retries=0)
        with c, pytest.raises(S3Error, match="needs access_key and secret_key"):
            c.get_object(bucket, "k", offset=2, length=3)


def test_strip_content_length_on_head(via: Client, proxy: FaultProxy, bucket: str) -> None:
    via.put_object(bucket, "k", b"0123456789")
    proxy.add_rule(Action.STRIP_CONTENT_LENGTH, method="HEAD")
    resp = requests.head(via.presign("HEAD", bucket, "k", expires=60), timeout=10)
    assert resp.status_code == 200
    assert "Content-Length" not in resp.headers


def test_strip_content_length_on_get_ends_the_body_by_closing(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    data = os.urandom(300_000)
    via.put_object(bucket, "k", data)
    proxy.add_rule(Action.STRIP_CONTENT_LENGTH, method="GET")
    resp = requests.get(_url(via, bucket, "k"), timeout=10)
    assert "Content-Length" not in resp.headers
    assert resp.content == data


def test_set_headers_adds_response_headers(via: Client, proxy: FaultProxy, bucket: str) -> None:
    via.put_object(bucket, "k", b"data")
    proxy.add_rule(Action.SET_HEADERS, method="HEAD", headers={"Content-Encoding": "gzip"})
    resp = requests.head(via.presign("HEAD", bucket, "k", expires=60), timeout=10)
    assert resp.headers["Content-Encoding"] == "gzip"


def test_answers_expect_100_continue_itself(
    via: Client, client: Client, proxy: FaultProxy, bucket: str
) -> None:
    url = via.presign("PUT", bucket, "k", expires=60)
    resp = _raw_put_expect_continue(proxy, url, b"hello")
    assert resp.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200")
    assert client.get_object(bucket, "k") == b"hello"


def _raw_put_expect_continue(proxy: FaultProxy, url: str, body: bytes) -> bytes:
    target = url.split(proxy.endpoint, 1)[1]
    assert proxy.port is not None
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(
            f"PUT {target} HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n"
            f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        first = sock.recv(25)
        sock.sendall(body)
        rest = b""
        while chunk := sock.recv(65536):
            rest += chunk
    return first + rest


def test_parallel_clients_are_served_concurrently(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    data = os.urandom(1 << 20)
    via.put_object(bucket, "k", data)
    results: list[bytes] = []

    def read() -> None:
        results.append(via.get_object(bucket, "k"))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [data] * 8


def test_stop_closes_open_connections(local_minio: LocalMinio) -> None:
    proxy = FaultProxy(local_minio.endpoint).start()
    assert proxy.port is not None
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        sock.sendall(b"GET /minio/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")  # an idle kept-alive connection
        proxy.stop()
        assert sock.recv(1) == b""


def test_rejects_a_non_http_upstream() -> None:
    with pytest.raises(FaultProxyError, match="upstream"):
        FaultProxy("https://example.invalid")


def test_endpoint_before_start_is_an_error(local_minio: LocalMinio) -> None:
    with pytest.raises(FaultProxyError, match="not been started"):
        _ = FaultProxy(local_minio.endpoint).endpoint


def test_truncate_body_cuts_the_body_and_closes(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    data = os.urandom(1 << 20)
    via.put_object(bucket, "k", data)
    proxy.add_rule(Action.TRUNCATE_BODY, method="GET", after=1000)
    reply = _raw_get(proxy, _url(via, bucket, "k"))
    head, _, body = reply.partition(b"\r\n\r\n")
    assert b"Content-Length: 1048576" in head
    assert body == data[:1000]
    assert proxy.requests()[-1].body_bytes == 1000
    assert requests.get(_url(via, bucket, "k"), timeout=10).content == data  # once only


def _raw_get(proxy: FaultProxy, url: str) -> bytes:
    """Everything the proxy sends for a GET of ``url`` until it closes the connection."""
    target = url.split(proxy.endpoint, 1)[1]
    assert proxy.port is not None
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n\r\n".encode())
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


def test_a_body_the_client_abandons_is_logged_with_the_bytes_it_got(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    via.put_object(bucket, "k", os.urandom(8 << 20))
    with socket.create_connection(("127.0.0.1", proxy.port or 0), timeout=10) as sock:
        target = _url(via, bucket, "k").split(proxy.endpoint, 1)[1]
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n\r\n".encode())
        sock.recv(1000)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    (get,) = proxy.requests(method="GET")
    # Logged all the same (how much went out before the reset depends on socket buffers).
    assert (get.status, get.body_bytes <= 8 << 20) == (200, True)


def test_delay_holds_the_request_back(via: Client, proxy: FaultProxy, bucket: str) -> None:
    via.put_object(bucket, "k", b"x")
    proxy.add_rule(Action.DELAY, method="HEAD", seconds=0.3)
    start = time.monotonic()
    via.head_object(bucket, "k")
    assert time.monotonic() - start >= 0.3


def test_logs_body_bytes_sent(via: Client, proxy: FaultProxy, bucket: str) -> None:
    via.put_object(bucket, "k", b"0123456789")
    via.get_object(bucket, "k", offset=3)
    assert proxy.requests(method="GET")[0].body_bytes == 7


def test_logs_request_body_bytes_received(via: Client, proxy: FaultProxy, bucket: str) -> None:
    via.put_object(bucket, "k", b"0123456789")
    proxy.add_rule(Action.SLOW_DOWN, method="PUT")  # answered here: the body still counts
    with pytest.raises(SlowDown):
        via.put_object(bucket, "k", b"01234")
    via.get_object(bucket, "k")
    puts = proxy.requests(method="PUT")
    assert [(r.status, r.request_bytes) for r in puts] == [(200, 10), (503, 5)]
    assert proxy.requests(method="GET")[0].request_bytes == 0


def test_a_request_body_the_client_abandons_is_logged_with_the_bytes_that_arrived(
    proxy: FaultProxy, bucket: str
) -> None:
    host, port = proxy.endpoint.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            f"PUT /{bucket}/k HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Content-Length: 1000\r\n\r\n".encode()
            + b"x" * 300
        )
        time.sleep(0.2)
    (put,) = proxy.requests(method="PUT", settle=5)
    assert (put.status, put.request_bytes) == (None, 300)


def test_several_rules_apply_to_one_request(via: Client, proxy: FaultProxy, bucket: str) -> None:
    via.put_object(bucket, "k", b"0123456789")
    strip = proxy.add_rule(Action.STRIP_ETAG, method="GET", times=None)
    ignore = proxy.add_rule(Action.IGNORE_RANGE, method="GET", times=None)
    resp = requests.get(_url(via, bucket, "k"), headers={"Range": "bytes=0-1"}, timeout=10)
    assert (resp.status_code, "ETag" in resp.headers) == (200, False)
    assert (strip.hits, ignore.hits) == (1, 1)
    assert proxy.requests()[-1].actions == (Action.STRIP_ETAG, Action.IGNORE_RANGE)


def test_an_answer_from_the_proxy_excludes_other_rules(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    strip = proxy.add_rule(Action.STRIP_ETAG, method="PUT", times=None)
    slow = proxy.add_rule(Action.SLOW_DOWN, method="PUT")
    with pytest.raises(SlowDown):
        via.put_object(bucket, "k", b"x")
    assert (strip.hits, slow.hits) == (0, 1)


class _ChunkedEcho(http.server.BaseHTTPRequestHandler):
    """Answers every request with its own body, chunked, in uneven chunks."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self._read_body()
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Request-Chunked", str("Content-Length" not in self.headers))
        self.end_headers()
        for i in range(0, len(body), 7777):
            piece = body[i : i + 7777]
            self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\nX-Trailer: yes\r\n\r\n")

    def _read_body(self) -> bytes:
        if "Content-Length" in self.headers:
            return self.rfile.read(int(self.headers["Content-Length"]))
        body = b""
        while size := int(self.rfile.readline().split(b";")[0], 16):
            body += self.rfile.read(size)
            self.rfile.readline()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
        return body

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def chunked_upstream() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ChunkedEcho)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_relays_chunked_bodies_both_ways(chunked_upstream: str) -> None:
    data = os.urandom(300_000)
    with FaultProxy(chunked_upstream) as p, requests.Session() as s:
        for _ in range(2):  # twice on one kept-alive connection
            resp = s.post(p.endpoint + "/echo", data=iter([data[:1000], data[1000:]]), timeout=10)
            assert resp.headers["X-Request-Chunked"] == "True"
            assert resp.content == data
        assert p.connections == 1
        # Counted as sent: with the chunk framing and the trailer.
        assert all(r.body_bytes > len(data) for r in p.requests())


def test_ignore_if_match_forwards_without_it(via: Client, proxy: FaultProxy, bucket: str) -> None:
    via.put_object(bucket, "k", b"0123456789")
    url = _url(via, bucket, "k")
    assert requests.get(url, headers={"If-Match": '"other"'}, timeout=10).status_code == 412
    proxy.add_rule(Action.IGNORE_IF_MATCH, method="GET")
    resp = requests.get(url, headers={"If-Match": '"other"'}, timeout=10)
    assert (resp.status_code, resp.content) == (200, b"0123456789")


def test_ignore_if_match_re_signs_a_request_that_signed_it(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    via.put_object(bucket, "k", os.urandom(1000))
    proxy.add_rule(Action.IGNORE_IF_MATCH, method="GET", times=None)
    with via.open(bucket, "k", readahead=0, chunk_size=100) as f:
        f.read(600)
        f.seek(500)  # back: reopened with If-Match (signed), re-signed without it
        assert len(f.read()) == 500
    assert [r.upstream_status for r in proxy.requests(method="GET")] == [200, 206]


def test_strip_checksums_removes_every_checksum_header(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    via.put_object(bucket, "k", b"data")  # stored with a CRC32C
    url = via.presign("HEAD", bucket, "k", expires=60)
    mode = {"x-amz-checksum-mode": "ENABLED"}
    assert "x-amz-checksum-crc32c" in requests.head(url, headers=mode, timeout=10).headers
    proxy.add_rule(Action.STRIP_CHECKSUMS, method="HEAD")
    headers = requests.head(url, headers=mode, timeout=10).headers
    assert not [h for h in headers if h.lower().startswith("x-amz-checksum")]
    assert headers["ETag"]


def test_reject_checksum_headers_answers_400_unsupported_header(
    via: Client, client: Client, proxy: FaultProxy, local_minio: LocalMinio, bucket: str
) -> None:
    rule = proxy.add_rule(Action.REJECT_CHECKSUM_HEADERS, times=None)
    url = via.presign("PUT", bucket, "k", expires=60)
    resp = requests.put(url, data=b"x", headers={"x-amz-checksum-crc32": "AAAAAA=="}, timeout=10)
    assert resp.status_code == 400
    assert "<Code>InvalidArgument</Code>" in resp.text
    assert "Unsupported header 'x-amz-checksum-crc32' received for this API call." in resp.text
    assert not list(client.list_objects(bucket))  # not forwarded
    # objsdk's own PUT carries x-amz-checksum-crc32c; told to send checksums whenever
    # it can (when_supported, set explicitly), it does not fall back, so the refusal
    # shows as the proxy gives it.
    strict = Client(
        proxy.endpoint,
        local_minio.access_key,
        local_minio.secret_key,
        retries=0,
        request_checksum_calculation="when_supported",
    )
    with strict, pytest.raises(S3Error, match="Unsupported header 'x-amz-checksum-crc32c'"):
        strict.put_object(bucket, "k", b"x")
    assert rule.hits == 2


@pytest.mark.parametrize(
    "header",
    [
        ("x-amz-checksum-mode", "ENABLED"),
        ("x-amz-sdk-checksum-algorithm", "CRC32"),
        ("x-amz-trailer", "x-amz-checksum-crc32"),
        ("X-Amz-Checksum-Sha256", "x"),
    ],
)
def test_reject_checksum_headers_refuses_every_checksum_header(
    via: Client, proxy: FaultProxy, bucket: str, header: tuple[str, str]
) -> None:
    via.put_object(bucket, "k", b"x")
    proxy.add_rule(Action.REJECT_CHECKSUM_HEADERS, times=None)
    url = _url(via, bucket, "k")
    assert requests.get(url, headers=dict([header]), timeout=10).status_code == 400


def test_reject_checksum_headers_forwards_requests_without_them(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    via.put_object(bucket, "k", b"data")
    rule = proxy.add_rule(Action.REJECT_CHECKSUM_HEADERS, times=None)
    resp = requests.get(_url(via, bucket, "k"), timeout=10)
    assert (resp.status_code, resp.content) == (200, b"data")
    assert rule.hits == 0


def test_non_md5_etag_rewrites_the_etag_and_maps_if_match_back(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    via.put_object(bucket, "k", b"0123456789")
    real = via.head_object(bucket, "k").etag
    assert real is not None
    proxy.add_rule(Action.NON_MD5_ETAG, times=None)
    url = _url(via, bucket, "k")
    shown = requests.get(url, timeout=10).headers["ETag"]
    assert shown == '"nomd5-' + real[1:]
    assert requests.get(url, headers={"If-Match": shown}, timeout=10).status_code == 200
    assert requests.get(url, headers={"If-Match": '"nomd5-0"'}, timeout=10).status_code == 412


def test_non_md5_etag_keeps_a_weak_etag_weak(via: Client, proxy: FaultProxy, bucket: str) -> None:
    via.put_object(bucket, "k", b"x")
    proxy.add_rule(Action.WEAK_ETAG, method="GET")
    proxy.add_rule(Action.NON_MD5_ETAG, method="GET")
    assert requests.get(_url(via, bucket, "k"), timeout=10).headers["ETag"].startswith('W/"nomd5-')


@pytest.mark.parametrize("times", [1, 3])
def test_slow_down_on_posts_answers_503_that_many_times(
    via: Client, client: Client, proxy: FaultProxy, bucket: str, times: int
) -> None:
    client.put_object(bucket, "k", b"x")
    rule = proxy.add_rule(Action.SLOW_DOWN, method="POST", times=times)
    # The rule answers before the service would look at a signature: none is needed.
    url = via.endpoint.build_url(bucket, "k") + "?uploads="
    statuses = [requests.post(url, timeout=10).status_code for _ in range(times)]
    assert statuses == [503] * times
    assert rule.hits == times
    assert via.head_object(bucket, "k").size == 1  # a PUT passes
    assert rule.hits == times


@pytest.mark.parametrize("at", [0, 1234, (1 << 20) - 1])
def test_flip_byte_changes_exactly_one_body_byte(
    via: Client, proxy: FaultProxy, bucket: str, at: int
) -> None:
    data = os.urandom(1 << 20)
    via.put_object(bucket, "k", data)
    proxy.add_rule(Action.FLIP_BYTE, method="GET", after=at)
    got = requests.get(_url(via, bucket, "k"), timeout=10).content
    assert len(got) == len(data)
    assert [i for i in range(len(data)) if got[i] != data[i]] == [at]
    assert got[at] == data[at] ^ 0x01
    assert requests.get(_url(via, bucket, "k"), timeout=10).content == data  # once only


def test_flip_byte_past_the_body_changes_nothing(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    via.put_object(bucket, "k", b"0123456789")
    proxy.add_rule(Action.FLIP_BYTE, method="GET", after=10)
    assert requests.get(_url(via, bucket, "k"), timeout=10).content == b"0123456789"
