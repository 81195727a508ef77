"""Every credential source of the chain, end to end: configured as a user would (the
environment, ~/.aws files), served by the loopback emulators of objsdk.testing with real
temporary credentials from MinIO's STS, and used by the library (open().read(),
download, upload), the command line and the fsspec filesystem against MinIO, which
checks each signature: a source read wrongly fails there. No secret, session token or
authorization token shows in a message, log line, repr or pickle."""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import COMMAND
from credential_helpers import SOURCES, MachineFactory, all_secrets, machine_factory

from objsdk import AccessDenied, Client
from objsdk.filesystem import ObjsdkFileSystem
from objsdk.testing import LocalMinio
from objsdk.testing.faultproxy import Action, FaultProxy
from objsdk.testing.temporary_credentials import TemporaryCredentials

pytestmark = pytest.mark.minio_only

DATA = b"read through a credential source\n" * 100


@pytest.fixture
def keys(local_minio: LocalMinio) -> TemporaryCredentials:
    # Declared to last 15 minutes: no refresh in these tests (refresh has its own).
    return TemporaryCredentials.of(local_minio, lifetime=900)


@pytest.fixture
def machines(
    tmp_path: Path, local_minio: LocalMinio, keys: TemporaryCredentials
) -> Iterator[MachineFactory]:
    yield from machine_factory(tmp_path, local_minio, keys)


@pytest.fixture
def stored(local_minio: LocalMinio, bucket: str) -> str:
    """``bucket`` holding ``k`` = DATA, written with MinIO's own keys."""
    with local_minio.client() as root:
        root.put_object(bucket, "k", DATA)
    return bucket


@pytest.mark.parametrize("kind", SOURCES)
def test_each_source_reads_downloads_and_uploads_through_the_library(
    kind: str,
    machines: MachineFactory,
    keys: TemporaryCredentials,
    local_minio: LocalMinio,
    stored: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Through a proxy that refuses one key, for an AccessDenied naming the source.
    proxy = FaultProxy(local_minio.endpoint).start()
    proxy.add_rule(Action.ERROR, status=403, code="AccessDenied", path=r"/denied$", times=None)
    machine = machines(kind, endpoint=proxy.endpoint)
    machine.apply(monkeypatch)
    caplog.set_level(logging.DEBUG, logger="objsdk")
    with Client(proxy.endpoint) as plain:  # no keys: the chain's credentials too
        assert plain.get_object(stored, "k") == DATA
    with Client.from_env() as client:
        with client.open(stored, "k") as f:
            assert f.read() == DATA
        client.download(stored, "k", tmp_path / "copy")
        assert (tmp_path / "copy").read_bytes() == DATA
        client.upload(stored, "up", tmp_path / "copy")
        assert client.get_object(stored, "up") == DATA
        used = client.credentials
        assert used is not None
        if kind == "assume_role":  # the role's, not the source profile's keys
            assert used.access_key != machine.minio.access_key
        assert used.access_key in {c.access_key for c in keys.issued}
        with pytest.raises(AccessDenied) as denied:
            client.get_object(stored, "denied")
        source = client.config.credential_source
        assert source is not None
        assert f"signed with credentials from {source.describe()}" in str(denied.value)
        shown = [repr(client), str(client.config), repr(used), caplog.text, str(denied.value)]
        pickled = pickle.dumps(client)
    proxy.stop()
    for secret in all_secrets(machine, keys):
        assert all(secret not in text for text in shown)
        assert secret.encode() not in pickled


@pytest.mark.parametrize("kind", SOURCES)
def test_each_source_serves_the_command_line(
    kind: str, machines: MachineFactory, keys: TemporaryCredentials, stored: str
) -> None:
    machine = machines(kind)
    done = subprocess.run(
        [*COMMAND, "--debug", "cp", f"s3://{stored}/k", "-"],
        env=machine.env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == DATA
    assert b"credentials from" in done.stderr  # --debug logs where they came from
    for secret in all_secrets(machine, keys):
        assert secret.encode() not in done.stderr


@pytest.mark.parametrize("kind", SOURCES)
def test_each_source_serves_the_fsspec_filesystem_with_its_profile(
    kind: str,
    machines: MachineFactory,
    stored: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    machine = machines(kind)
    profile = machine.env.pop("AWS_PROFILE", None)  # named as profile= instead
    machine.apply(monkeypatch)
    fs = ObjsdkFileSystem(profile=profile, skip_instance_cache=True)
    assert fs.cat(f"{stored}/k") == DATA
    fs.pipe(f"{stored}/written", b"by fsspec")
    assert fs.cat(f"{stored}/written") == b"by fsspec"


@pytest.mark.parametrize("kind", ["web_identity", "assume_role", "sso", "sso_legacy"])
def test_the_environment_given_to_from_env_is_the_one_its_credentials_are_fetched_with(
    kind: str,
    machines: MachineFactory,
    keys: TemporaryCredentials,
    stored: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The STS or SSO endpoint (AWS_ENDPOINT_URL_STS, AWS_ENDPOINT_URL_SSO), the profile
    (AWS_PROFILE) and the home directory whose ~/.aws configures the source's endpoint
    are in the mapping given to Client.from_env alone: the fetches use them, not this
    process's environment, which has none of them."""
    machine = machines(kind)
    elsewhere = tmp_path / "process-home"
    elsewhere.mkdir()
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(elsewhere))
    caplog.set_level(logging.DEBUG, logger="objsdk")
    with Client.from_env(dict(machine.env)) as client:
        with client.open(stored, "k") as f:
            assert f.read() == DATA
        used = client.credentials
        assert used is not None
        assert used.access_key in {c.access_key for c in keys.issued}
        shown = [repr(client), str(client.config), repr(used), repr(client.transport)]
    assert machine.server is not None
    assert machine.server.requests  # the emulator named in the mapping handed them out
    for secret in all_secrets(machine, keys):
        assert all(secret not in text for text in [*shown, caplog.text])
