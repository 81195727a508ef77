"""LocalMinio and the supervisor that keeps local servers from outliving their owner."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from s3_helpers import boto3_client

from objsdk.errors import LocalMinioError
from objsdk.testing.gobuild import minio_binary
from objsdk.testing.local_minio import LocalMinio
from objsdk.testing.supervisor import Supervised, SupervisorError, http_ok, tail

REPO = Path(__file__).resolve().parents[1]
SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no procfs: fall back to signal 0
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def fake_binary(path: Path, script: str) -> Path:
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


@pytest.fixture
def own_minio() -> Iterator[LocalMinio]:
    """A private server, for tests that restart or stop it."""
    with LocalMinio() as minio:
        yield minio


# ----------------------------------------------------------------------------- LocalMinio


def test_repr_never_shows_the_secret_key() -> None:
    minio = LocalMinio(access_key="visible-key", secret_key="hidden-secret-123")

    assert "visible-key" in repr(minio)
    assert "hidden-secret-123" not in repr(minio)


def test_credentials_are_fresh_and_random_by_default() -> None:
    first, second = LocalMinio(), LocalMinio()

    assert first.access_key != second.access_key
    assert first.secret_key != second.secret_key
    assert len(first.secret_key) >= 32


def test_startup_failure_reports_the_server_log_without_the_secret(tmp_path: Path) -> None:
    broken = fake_binary(tmp_path / "minio", 'echo "FATAL disk on fire ($MINIO_ROOT_PASSWORD)"\n')
    minio = LocalMinio(binary=broken, secret_key="do-not-print-me")

    with pytest.raises(LocalMinioError, match="disk on fire") as info:
        minio.start()

    assert "do-not-print-me" not in str(info.value)
    assert not minio.data_dir.exists()


# A server that starts as MinIO does: HTTP first, and /minio/health/live and /ready
# answer 200 at once (only a header, x-minio-server-status: offline, says otherwise),
# while every S3 request gets 503 XMinioServerNotInitialized with a Retry-After until the
# object layer, bucket metadata and IAM are up (/minio/health/cluster answers 503 until
# then). Seen with the pinned MinIO: ready 200 at 0.48 s, S3 answered at 0.49 s, the
# cluster check at 0.61 s; a loaded machine stretches that window.
_STARTING_MINIO = """
import argparse, http.server, time

parser = argparse.ArgumentParser()
parser.add_argument("command")
parser.add_argument("data")
parser.add_argument("--address")
parser.add_argument("--console-address")
parser.add_argument("--certs-dir")
args = parser.parse_args()
host, port = args.address.rsplit(":", 1)
UP = time.monotonic() + SECONDS
LIST = (
    b'<?xml version="1.0" encoding="UTF-8"?><ListAllMyBucketsResult '
    b'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner><ID>x</ID></Owner>'
    b"<Buckets></Buckets></ListAllMyBucketsResult>"
)
NOT_YET = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>XMinioServerNotInitialized'
    b"</Code><Message>Server not initialized yet, please try again.</Message></Error>"
)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        up = time.monotonic() >= UP
        if self.path in ("/minio/health/live", "/minio/health/ready"):
            status, body = 200, b""
        elif self.path == "/minio/health/cluster":
            status, body = (200 if up else 503), b""
        else:
            status, body = (200, LIST) if up else (503, NOT_YET)
        self.send_response(status)
        if not up:
            self.send_header("x-minio-server-status", "offline")
            if status == 503:
                self.send_header("Retry-After", "120")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


print("starting", flush=True)
http.server.ThreadingHTTPServer((host, int(port)), Handler).serve_forever()
"""


def starting_minio(tmp_path: Path, seconds: float) -> Path:
    """A stand-in MinIO binary that answers S3 requests only ``seconds`` after it
    serves HTTP (see ``_STARTING_MINIO``)."""
    script = tmp_path / "minio.py"
    script.write_text(_STARTING_MINIO.replace("SECONDS", repr(seconds)))
    return fake_binary(tmp_path / "minio", f'exec "{sys.executable}" "{script}" "$@"\n')


def test_start_returns_once_the_server_answers_s3_requests(tmp_path: Path) -> None:
    # Before: start() returned once /minio/health/ready answered 200, which MinIO does
    # before it is initialised: the first request got 503 XMinioServerNotInitialized,
    # and a client that follows its Retry-After waited 20 s.
    with (
        LocalMinio(binary=starting_minio(tmp_path, 1.5)) as minio,
        minio.client(retries=0) as client,
    ):
        assert client.list_buckets() == []


def test_a_server_that_never_initialises_fails_to_start_naming_the_check(
    tmp_path: Path,
) -> None:
    minio = LocalMinio(binary=starting_minio(tmp_path, 3600), startup_timeout=1.0)
    with pytest.raises(LocalMinioError, match=r"not ready at http://.*/minio/health/cluster"):
        minio.start()
    assert minio.pid is None


@pytest.mark.integration
def test_the_first_request_to_a_started_server_is_answered(tmp_path: Path) -> None:
    with LocalMinio() as minio, minio.client(retries=0) as client:
        client.create_bucket("first")
        assert client.bucket_exists("first")


@pytest.mark.integration
def test_started_server_is_live_on_a_loopback_endpoint(local_minio: LocalMinio) -> None:
    assert local_minio.endpoint.startswith("http://127.0.0.1:")
    assert http_ok(f"{local_minio.endpoint}/minio/health/live")


@pytest.mark.integration
def test_env_points_aws_tools_at_the_server(local_minio: LocalMinio) -> None:
    assert local_minio.env() == {
        "AWS_ENDPOINT_URL": local_minio.endpoint,
        "AWS_ACCESS_KEY_ID": local_minio.access_key,
        "AWS_SECRET_ACCESS_KEY": local_minio.secret_key,
        "AWS_REGION": "us-east-1",
    }


@pytest.mark.integration
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs procfs")
def test_env_is_the_servers_last_word_on_its_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MINIO_API_REQUESTS_MAX", "100")  # inherited settings are dropped
    with LocalMinio(env={"MINIO_API_REQUESTS_MAX": "4", "MINIO_BROWSER": "on"}) as minio:
        environ = Path(f"/proc/{minio.pid}/environ").read_bytes().split(b"\0")
    assert b"MINIO_API_REQUESTS_MAX=4" in environ
    assert b"MINIO_BROWSER=on" in environ  # over LocalMinio's own default
    assert b"MINIO_API_REQUESTS_MAX=100" not in environ


def test_server_accepts_its_credentials(local_minio: LocalMinio) -> None:
    assert boto3_client(local_minio).list_buckets()["ResponseMetadata"]["HTTPStatusCode"] == 200


@pytest.mark.integration
def test_start_is_idempotent(own_minio: LocalMinio) -> None:
    pid = own_minio.pid

    assert own_minio.start() is own_minio
    assert own_minio.pid == pid


@pytest.mark.integration
def test_restart_keeps_the_port_and_the_data(own_minio: LocalMinio) -> None:
    client = boto3_client(own_minio)
    client.create_bucket(Bucket="kept")
    client.put_object(Bucket="kept", Key="k", Body=b"survives")
    endpoint, old_pid = own_minio.endpoint, own_minio.pid

    own_minio.restart()

    assert own_minio.endpoint == endpoint
    assert own_minio.pid != old_pid
    assert old_pid is not None
    assert not alive(old_pid)
    assert client.get_object(Bucket="kept", Key="k")["Body"].read() == b"survives"


@pytest.mark.integration
def test_stop_removes_the_data_dir_and_leaves_no_process() -> None:
    minio = LocalMinio().start()
    pid, data_dir = minio.pid, minio.data_dir
    assert pid is not None

    minio.stop()

    assert not alive(pid)
    assert not data_dir.exists()
    assert minio.pid is None
    minio.stop()  # idempotent


@pytest.mark.integration
def test_a_port_in_use_fails_with_the_server_log() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        minio = LocalMinio(port=taken.getsockname()[1])

        with pytest.raises(LocalMinioError, match="already in use"):
            minio.start()


@pytest.mark.integration
def test_server_and_data_vanish_when_the_owner_is_killed() -> None:
    owner = (
        "import os, signal\n"
        "from objsdk.testing.local_minio import LocalMinio\n"
        "minio = LocalMinio().start()\n"
        "print(minio.pid, minio.data_dir, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "OBJSDK_MINIO_BINARY": str(minio_binary())}
    result = subprocess.run(
        [sys.executable, "-c", owner], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    pid_text, data_dir = result.stdout.split(maxsplit=1)
    pid = int(pid_text)

    assert eventually(lambda: not alive(pid), timeout=10)
    assert eventually(lambda: not Path(data_dir.strip()).exists(), timeout=5)


# ----------------------------------------------------------------------------- supervisor


def test_supervised_server_runs_in_its_own_process_group(tmp_path: Path) -> None:
    server = Supervised(SLEEPER, log=tmp_path / "log")
    try:
        assert server.pid is not None
        assert os.getpgid(server.pid) == server.pid
    finally:
        server.stop()


def test_supervised_stop_terminates_the_server_and_removes_directories(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    server = Supervised(SLEEPER, log=tmp_path / "log", cleanup=[scratch])
    pid = server.pid
    assert pid is not None

    server.stop()

    assert not alive(pid)
    assert not scratch.exists()


def test_sigterm_to_the_supervisor_stops_the_server_and_cleans_up(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    server = Supervised(SLEEPER, log=tmp_path / "log", cleanup=[scratch])
    pid = server.pid
    assert pid is not None
    try:
        os.kill(server.supervisor_pid, signal.SIGTERM)

        assert eventually(lambda: not alive(pid))
        assert eventually(lambda: not scratch.exists())
    finally:
        server.stop()


def test_signals_arriving_during_the_cleanup_do_not_cut_it_short(tmp_path: Path) -> None:
    # When the owner dies, stdin EOF and PDEATHSIG reach the supervisor microseconds
    # apart; a signal landing in the cleanup used to abort it and leak the directories.
    # The server ignores SIGTERM, so the cleanup includes a grace period under fire.
    scratch, log = tmp_path / "scratch", tmp_path / "log"
    scratch.mkdir()
    stubborn = [
        sys.executable,
        "-c",
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ignoring SIGTERM', flush=True)\n"
        "time.sleep(60)\n",
    ]
    server = Supervised(stubborn, log=log, cleanup=[scratch], grace=1.0)
    pid, supervisor = server.pid, server.supervisor_pid
    assert pid is not None
    try:
        assert eventually(lambda: "ignoring SIGTERM" in tail(log))
        deadline = time.monotonic() + 20
        # Until the supervisor is reaped (by server.stop below) its pid cannot be reused.
        while alive(supervisor) and time.monotonic() < deadline:
            for _ in range(100):
                for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                    os.kill(supervisor, signum)

        assert not alive(supervisor)
        assert not scratch.exists(), tail(log)
        assert not alive(pid)
    finally:
        server.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_killing_the_supervisor_kills_the_server(tmp_path: Path) -> None:
    server = Supervised(SLEEPER, log=tmp_path / "log")
    pid = server.pid
    assert pid is not None
    try:
        os.kill(server.supervisor_pid, signal.SIGKILL)

        assert eventually(lambda: not alive(pid))
    finally:
        server.stop()


def test_a_server_that_exits_is_reported_with_its_code(tmp_path: Path) -> None:
    server = Supervised([sys.executable, "-c", "raise SystemExit(3)"], log=tmp_path / "log")
    try:
        assert eventually(lambda: server.poll() is not None)
        assert server.poll() == 3
        assert server.pid is None
    finally:
        server.stop()


def test_restart_replaces_the_server_process(tmp_path: Path) -> None:
    server = Supervised(SLEEPER, log=tmp_path / "log")
    try:
        old = server.pid
        assert old is not None

        new = server.restart()

        assert new != old
        assert server.pid == new
        assert alive(new)
        assert not alive(old)
    finally:
        server.stop()


def test_an_unstartable_command_raises(tmp_path: Path) -> None:
    with pytest.raises(SupervisorError, match="cannot start"):
        Supervised([str(tmp_path / "no-such-binary")], log=tmp_path / "log")


def test_supervisor_cli_prints_the_pid_and_cleans_up_at_stdin_eof(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "objsdk.testing.supervisor",
            "--cleanup",
            str(scratch),
            "--",
            *SLEEPER,
        ],
        stdin=subprocess.DEVNULL,  # immediate EOF, as if the parent had died
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=30,
    )

    assert result.returncode == 0, result.stderr
    pid = int(result.stdout.splitlines()[0])
    assert not alive(pid)
    assert not scratch.exists()
