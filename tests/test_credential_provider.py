"""The provider of a client's credentials: when it fetches new ones, what its threads do
meanwhile, and what a failure does, with a clock the tests move. The windows are the
refresh policy's (tests/test_credential_refresh.py); here credentials live 60 s, so the
advisory window opens 30 s before their expiry and the mandatory one 20 s before."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

import objsdk
from objsdk import Client, Credentials
from objsdk._transport.credential_fetch import signing_credentials
from objsdk._transport.credentials import FAILURE_HOLD, CredentialProvider
from objsdk._transport.mock import MockResponse, MockTransport, Request
from objsdk.errors import ConfigError, CredentialsError

T0 = 1_800_000_000.0
LIFETIME = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Source:
    """Hands out numbered credentials living ``lifetime`` s from the clock's now;
    ``fail`` makes the next fetches raise; ``gate`` blocks each fetch until set."""

    def __init__(self, clock: Clock, lifetime: float = LIFETIME) -> None:
        self.clock = clock
        self.lifetime = lifetime
        self.count = 0
        self.fail: Exception | None = None
        self.gate: threading.Event | None = None
        self.expiry_offset: float | None = None

    def __call__(self) -> Credentials:
        if self.gate is not None:
            assert self.gate.wait(10)
        if self.fail is not None:
            raise self.fail
        self.count += 1
        offset = self.lifetime if self.expiry_offset is None else self.expiry_offset
        expiry = datetime.fromtimestamp(self.clock.now + offset, timezone.utc)
        return Credentials(f"AK{self.count}", f"secret-{self.count}", f"token-{self.count}", expiry)


def provider(clock: Clock, source: Source) -> CredentialProvider:
    return CredentialProvider(source, "the test source", clock=clock)


def test_credentials_are_fetched_once_and_kept_until_the_advisory_window() -> None:
    clock = Clock()
    source = Source(clock)
    p = provider(clock, source)
    assert p.current().access_key == "AK1"
    clock.now += 29.9  # 30.1 s left: not yet in the advisory window (30 s)
    assert p.current().access_key == "AK1"
    assert source.count == 1
    clock.now += 0.2
    assert p.current().access_key == "AK2"
    assert source.count == 2


def test_an_advisory_refresh_that_fails_keeps_the_credentials_logs_once_and_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    source = Source(clock)
    p = provider(clock, source)
    p.current()
    clock.now += 35  # advisory: 25 s left
    source.fail = CredentialsError("STS did not answer")
    with caplog.at_level(logging.WARNING, logger="objsdk"):
        assert p.current().access_key == "AK1"
        for _ in range(100):
            assert p.current().access_key == "AK1"
    assert p.fetches == 2  # one failed attempt, not one per request
    assert len(caplog.records) == 1
    assert "the test source" in caplog.text
    assert "kept" in caplog.text
    clock.now += 2  # the retry waits a third of the time to the mandatory window
    source.fail = None
    assert p.current().access_key == "AK2"


def test_in_the_mandatory_window_a_failed_refresh_is_raised_and_held_for_a_second() -> None:
    clock = Clock()
    source = Source(clock)
    p = provider(clock, source)
    p.current()
    clock.now += 45  # 15 s left: mandatory
    source.fail = CredentialsError("STS refused")
    with pytest.raises(CredentialsError, match="STS refused"):
        p.current()
    with pytest.raises(CredentialsError, match="STS refused"):
        p.current()
    assert p.fetches == 2  # the second caller got the held error, no fetch
    clock.now += FAILURE_HOLD
    source.fail = None
    assert p.current().access_key == "AK2"


def test_expired_credentials_are_never_used_when_no_new_ones_can_be_had() -> None:
    clock = Clock()
    source = Source(clock)
    p = provider(clock, source)
    p.current()
    clock.now += 61
    source.fail = CredentialsError("down")
    with pytest.raises(CredentialsError):
        p.current()


def test_many_threads_in_the_mandatory_window_share_one_refresh() -> None:
    clock = Clock()
    source = Source(clock)
    p = provider(clock, source)
    p.current()
    clock.now += 50
    source.gate = threading.Event()
    got: list[str] = []

    def use() -> None:
        got.append(p.current().access_key)

    threads = [threading.Thread(target=use) for _ in range(16)]
    for t in threads:
        t.start()
    time.sleep(0.2)  # all of them waiting for the one fetch
    source.gate.set()
    for t in threads:
        t.join(10)
    assert got == ["AK2"] * 16
    assert source.count == 2


def test_in_the_advisory_window_other_threads_never_wait_for_the_refresh() -> None:
    clock = Clock()
    source = Source(clock)
    p = provider(clock, source)
    p.current()
    clock.now += 35
    source.gate = threading.Event()
    refresher = threading.Thread(target=p.current)
    refresher.start()
    time.sleep(0.1)  # it holds the refresh, blocked in the fetch
    started = time.monotonic()
    assert [p.current().access_key for _ in range(50)] == ["AK1"] * 50
    assert time.monotonic() - started < 1
    source.gate.set()
    refresher.join(10)
    assert p.current().access_key == "AK2"


def test_credentials_expired_on_arrival_are_fetched_once_more_then_clock_skew_is_said() -> None:
    clock = Clock()
    source = Source(clock)
    source.expiry_offset = -5  # every set arrives 5 s expired
    p = provider(clock, source)
    with pytest.raises(ConfigError, match="clock looks fast") as e:
        p.current()
    assert "the test source" in str(e.value)
    assert source.count == 2
    source.expiry_offset = None
    clock.now += FAILURE_HOLD
    assert p.current().access_key == "AK3"


def test_one_set_expired_on_arrival_is_cured_by_the_second_fetch() -> None:
    clock = Clock()
    source = Source(clock)
    source.expiry_offset = -1
    p = provider(clock, source)
    original = source.__call__

    def then_fresh() -> Credentials:
        got = original()
        source.expiry_offset = None
        return got

    p._fetch = then_fresh
    assert p.current().access_key == "AK2"


def test_expired_refreshes_once_for_the_refused_credentials_and_never_storms() -> None:
    clock = Clock()
    source = Source(clock)
    p = provider(clock, source)
    p.current()
    clock.now += 5
    assert p.expired("AK1", "token-1") is True  # refused: fetched again
    assert p.current().access_key == "AK2"
    assert p.expired("AK1", "token-1") is True  # an older set: no fetch, just retry
    assert p.expired("AK2", "token-2") is False  # just fetched and refused: no use
    assert source.count == 2


def test_a_credentials_function_signs_with_what_it_returns_now() -> None:
    calls: list[Credentials] = []

    def mine() -> Credentials:
        calls.append(Credentials(f"MINE{len(calls)}", "s3cr3t-of-mine"))
        return calls[-1]

    transport_seen: list[Request] = []

    def handler(request: Request) -> MockResponse:
        transport_seen.append(request)
        return MockResponse(200, {}, b"x")

    with Client("http://s3.test", credentials=mine) as client:
        assert client.credentials is not None
        assert client.credentials.access_key == "MINE0"
        assert len(calls) == 1  # fetched once; no expiry, never again
    # The mock transport signs with what it is given, here the same function.
    p = CredentialProvider(mine, "mine")
    MockTransport(handler, credentials=p).request("GET", operation="t", bucket="bucket", key="k")
    assert "Credential=MINE1/" in transport_seen[0].headers["Authorization"]


def test_anonymous_with_keys_or_credentials_is_refused_by_name() -> None:
    with pytest.raises(objsdk.InvalidArgument, match=r"anonymous=True .* access_key"):
        Client("http://s3.test", "AK", "SK", anonymous=True)
    with pytest.raises(objsdk.InvalidArgument, match=r"anonymous=True .* credentials"):
        Client("http://s3.test", credentials=Credentials("AK", "SK"), anonymous=True)
    with pytest.raises(objsdk.InvalidArgument, match="credentials must be"):
        Client("http://s3.test", credentials="AK:SK")  # type: ignore[arg-type]


def _expired_token(expired_times: int) -> Callable[[Request], MockResponse]:
    """Answers ExpiredToken to the first ``expired_times`` requests."""
    count = [0]

    def handler(request: Request) -> MockResponse:
        count[0] += 1
        if count[0] <= expired_times:
            body = b"<Error><Code>ExpiredToken</Code><Message>expired</Message></Error>"
            return MockResponse(400, {}, body if request.method != "HEAD" else b"")
        return MockResponse(200, {"Content-Length": "1"}, b"x")

    return handler


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_request_refused_as_expired_is_sent_once_more_with_new_credentials(method: str) -> None:
    clock = Clock()
    source = Source(clock)
    p = provider(clock, source)
    p.current()
    clock.now += 5
    transport = MockTransport(_expired_token(1), credentials=p)
    transport.request(method, operation="t", bucket="bucket", key="k")
    keys = [r.headers["Authorization"].split("Credential=")[1][:3] for r in transport.requests]
    assert keys == ["AK1", "AK2"]


def test_a_request_refused_as_expired_twice_is_raised_naming_the_source() -> None:
    clock = Clock()
    source = Source(clock)
    p = provider(clock, source)
    p.current()
    clock.now += 5
    transport = MockTransport(_expired_token(2), credentials=p)
    with pytest.raises(objsdk.AccessDenied, match="signed with credentials from the test source"):
        transport.request("GET", operation="t", bucket="bucket", key="k")
    assert len(transport.requests) == 2
    assert source.count == 2


def test_fixed_credentials_refused_as_expired_are_not_retried() -> None:
    transport = MockTransport(_expired_token(1), credentials=Credentials("AK", "SK"))
    with pytest.raises(objsdk.AccessDenied):
        transport.request("GET", operation="t", bucket="bucket", key="k")
    assert len(transport.requests) == 1


def test_access_denied_names_where_the_chain_found_static_keys(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text(
        "[dev]\naws_access_key_id = DEVKEY\naws_secret_access_key = dev-secret\n"
    )
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / ".aws" / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / ".aws" / "config"))
    config = Client.from_env(endpoint="http://s3.test", profile="dev").config
    denied = b"<Error><Code>AccessDenied</Code><Message>Access Denied.</Message></Error>"
    transport = MockTransport(
        lambda request: MockResponse(403, {}, denied),
        credentials=signing_credentials(config),
    )
    with pytest.raises(objsdk.AccessDenied) as e:
        transport.request("GET", operation="get_object", bucket="bucket", key="k")
    assert "signed with credentials from profile `dev` (aws_access_key_id in" in str(e.value)
    assert "dev-secret" not in str(e.value)


def test_a_presigned_url_lives_no_longer_than_the_temporary_credentials_signing_it() -> None:
    soon = datetime.now(timezone.utc) + timedelta(minutes=40)
    with Client("http://s3.test", credentials=Credentials("ASIA", "s3cr3t", "tok", soon)) as c:
        url = c.presign("GET", "bucket", "k", expires=7200)
        short = c.presign("GET", "bucket", "k", expires=60)
    expires = int(parse_qs(urlsplit(url).query)["X-Amz-Expires"][0])
    assert 40 * 60 - 5 <= expires <= 40 * 60
    assert parse_qs(urlsplit(short).query)["X-Amz-Expires"] == ["60"]
    with Client("http://s3.test", "AK", "SK") as static:
        url = static.presign("GET", "bucket", "k", expires=7 * 24 * 3600)
    assert parse_qs(urlsplit(url).query)["X-Amz-Expires"] == [str(7 * 24 * 3600)]


def test_keys_in_the_environment_that_expired_say_so_and_new_ones_are_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    past = "2020-01-01T00:00:00Z"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "OLDKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "old-secret")
    monkeypatch.setenv("AWS_CREDENTIAL_EXPIRATION", past)
    with Client.from_env(endpoint="http://s3.test") as client:
        with pytest.raises(ConfigError, match="expired at 2020-01-01T00:00:00Z") as e:
            _ = client.credentials
        assert "old-secret" not in str(e.value)
        time.sleep(FAILURE_HOLD)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "NEWKEY")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "new-secret")
        monkeypatch.setenv("AWS_CREDENTIAL_EXPIRATION", "2099-01-01T00:00:00Z")
        assert client.credentials is not None
        assert client.credentials.access_key == "NEWKEY"


def test_from_env_resolves_the_credentials_in_the_environment_it_is_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "PROCESSKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "process-secret")
    given = {
        "HOME": str(tmp_path),
        "AWS_ENDPOINT_URL": "http://s3.test",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    with pytest.raises(ConfigError, match="no credentials"):
        Client.from_env(given)  # never this process's keys
    with Client.from_env(
        {**given, "AWS_ACCESS_KEY_ID": "GIVEN", "AWS_SECRET_ACCESS_KEY": "s"}
    ) as c:
        assert c.credentials is not None
        assert c.credentials.access_key == "GIVEN"


def test_from_env_keeps_taking_the_expiring_keys_of_the_environment_it_is_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Keys with AWS_CREDENTIAL_EXPIRATION are read again at each refresh: from the
    mapping given to from_env, never from this process's environment."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "PROCESSKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "process-secret")
    given = {
        "HOME": str(tmp_path),
        "AWS_ENDPOINT_URL": "http://s3.test",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_ACCESS_KEY_ID": "GIVEN",
        "AWS_SECRET_ACCESS_KEY": "given-secret",
        "AWS_CREDENTIAL_EXPIRATION": "2099-01-01T00:00:00Z",
    }
    with Client.from_env(given) as c:
        assert c.credentials is not None
        assert (c.credentials.access_key, c.credentials.secret_key) == ("GIVEN", "given-secret")
