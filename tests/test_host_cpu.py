"""The machine a server shares with the client: whether it does, and how busy it is."""

from __future__ import annotations

import os
import socket
import time

import pytest

from objsdk._core.adaptive import Preset
from objsdk._io import host_cpu
from objsdk._io.shared_level import SharedLevel

# An address reserved for documentation (RFC 5737): never this machine's.
ELSEWHERE = "http://198.51.100.7:9000"


def own_address() -> str | None:
    """The address this machine sends from on its default route, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("198.51.100.7", 9))
        except OSError:
            return None
        return str(probe.getsockname()[0])


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9000", "http://localhost:9000", "https://[::1]:443"]
)
def test_a_loopback_endpoint_is_on_this_host(url):
    assert host_cpu.server_on_this_host(url)


def test_an_endpoint_at_one_of_this_machines_addresses_is_on_this_host():
    address = own_address()
    if address is None or address.startswith("127."):
        assert not host_cpu.server_on_this_host(ELSEWHERE)
        return
    assert host_cpu.server_on_this_host(f"http://{address}:9000")


@pytest.mark.parametrize("url", [ELSEWHERE, "http://no-such-host.invalid:9000", "http://:9"])
def test_an_endpoint_elsewhere_or_unknown_is_not(url):
    assert not host_cpu.server_on_this_host(url)


def test_the_machines_busy_time_grows_as_a_cpu_works():
    before = host_cpu.busy_seconds()
    if not os.path.exists("/proc/stat"):
        assert before is None
        assert not host_cpu.measurable()
        return
    assert before is not None
    spin = time.process_time()
    while time.process_time() - spin < 0.1:
        pass
    after = host_cpu.busy_seconds()
    assert after is not None
    assert after - before >= 0.05  # this process alone was busy 0.1 s (10 ms ticks)
    assert host_cpu.host_cores() == os.cpu_count()
    assert host_cpu.measurable()


@pytest.mark.parametrize("preset", [Preset.reader(), Preset.download()])
def test_a_level_with_a_cpu_clock_weighs_the_machine_of_a_server_on_this_host(preset):
    level = SharedLevel.unless(None, preset=preset, endpoint="http://127.0.0.1:9000")
    assert level is not None
    shared = host_cpu.busy_seconds() is not None
    assert level._adaptive.host_cores == (host_cpu.host_cores() if shared else None)
    elsewhere = SharedLevel.unless(None, preset=preset, endpoint=ELSEWHERE)
    assert elsewhere is not None
    assert elsewhere._adaptive.host_cores is None


def test_an_upload_level_is_judged_by_its_rate_wherever_the_server_is():
    level = SharedLevel.unless(
        None, preset=Preset.upload(8 << 20, 1 << 20), endpoint="http://127.0.0.1:9000"
    )
    assert level is not None
    assert level._adaptive.host_cores is None


def test_a_reader_and_a_download_ask_about_their_own_endpoint(
    client, bucket, tmp_path, monkeypatch
):
    asked: list[str] = []
    real = host_cpu.server_on_this_host

    def spy(url: str) -> bool:
        asked.append(url)
        return real(url)

    monkeypatch.setattr(host_cpu, "server_on_this_host", spy)
    client.put_object(bucket, "k", os.urandom(3 << 20))
    with client.open(bucket, "k") as f:
        assert len(f.read()) == 3 << 20
        level = f._source.level
        assert level is not None
        shared = host_cpu.busy_seconds() is not None
        assert level._adaptive.host_cores == (host_cpu.host_cores() if shared else None)
    client.download(bucket, "k", tmp_path / "k", part_size=1 << 20)
    assert asked == [client.endpoint.url] * 2
