"""Building and caching the Go servers, checked against a fake ``go`` command."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import as_at_a_terminal

from objsdk.errors import LocalMinioError
from objsdk.testing import gobuild

REPO = Path(__file__).resolve().parents[1]

# Records each call, then behaves like `go install`: writes $GOBIN/<last module element>.
FAKE_GO = """\
#!{python}
import os, pathlib, sys, time
with open(os.environ["FAKE_GO_CALLS"], "a") as calls:
    calls.write(" ".join(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_GO_PIDFILE"):
    pathlib.Path(os.environ["FAKE_GO_PIDFILE"]).write_text(str(os.getpid()))
time.sleep(float(os.environ.get("FAKE_GO_SLEEP", "0")))
if os.environ.get("FAKE_GO_FAIL"):
    print("go: downloading example.com/tool v1.0.0")
    print("go: example.com/tool@v1.0.0: " + os.environ["FAKE_GO_FAIL"])
    sys.exit(1)
exe = pathlib.Path(os.environ["GOBIN"]) / sys.argv[-1].split("@")[0].rsplit("/", 1)[1]
exe.write_text("#!/bin/sh\\n")
exe.chmod(0o755)
"""


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a fake `go` alone on PATH and an empty cache in place; returns its call log."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    go = bin_dir / "go"
    go.write_text(FAKE_GO.format(python=sys.executable))
    go.chmod(0o755)
    log = tmp_path / "go-calls.txt"
    log.touch()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("FAKE_GO_CALLS", str(log))
    monkeypatch.setenv("OBJSDK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(gobuild, "GO_FALLBACKS", ())
    return log


def build_tool() -> Path:
    return gobuild.go_binary("tool", "example.com/tool", "v1.0.0", exe="tool")


def test_first_call_runs_go_install_and_returns_the_cached_binary(
    calls: Path, tmp_path: Path
) -> None:
    binary = build_tool()

    assert binary == tmp_path / "cache" / "bin" / "tool-v1.0.0" / "tool"
    assert os.access(binary, os.X_OK)
    assert calls.read_text().splitlines() == ["install -v example.com/tool@v1.0.0"]


def test_later_calls_reuse_the_cache_without_running_go(calls: Path) -> None:
    first = build_tool()

    assert build_tool() == first
    assert len(calls.read_text().splitlines()) == 1


def test_a_build_announces_itself_on_stderr(
    calls: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_tool()

    err = capsys.readouterr().err
    assert "building tool v1.0.0" in err
    assert "one-time" in err


def test_missing_go_raises_a_clear_error(
    calls: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))

    with pytest.raises(
        LocalMinioError, match=re.escape("Go toolchain not found: install Go >= 1.24")
    ):
        build_tool()


def test_failed_build_reports_the_tail_of_go_output(
    calls: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GO_FAIL", "unknown revision v1.0.0")

    with pytest.raises(LocalMinioError, match=re.escape("unknown revision v1.0.0")) as info:
        build_tool()

    assert "exited with code 1" in str(info.value)


def test_failed_build_leaves_nothing_in_the_cache(
    calls: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GO_FAIL", "boom")

    with pytest.raises(LocalMinioError):
        build_tool()

    leftovers = [p.name for p in (tmp_path / "cache" / "bin").iterdir()]
    assert leftovers == [".tool-v1.0.0.lock"]


def test_concurrent_processes_build_only_once(calls: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GO_SLEEP", "0.5")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    script = (
        "from objsdk.testing.gobuild import go_binary; "
        "print(go_binary('tool', 'example.com/tool', 'v1.0.0', exe='tool'))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        for _ in range(4)
    ]
    outputs = [proc.communicate(timeout=60)[0].decode().strip() for proc in procs]

    assert [proc.returncode for proc in procs] == [0, 0, 0, 0]
    assert len(set(outputs)) == 1
    assert len(calls.read_text().splitlines()) == 1


def test_an_interrupted_build_leaves_no_go_process_behind(
    calls: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GO_SLEEP", "60")
    monkeypatch.setenv("FAKE_GO_PIDFILE", str(tmp_path / "go.pid"))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    script = (
        "from objsdk.testing.gobuild import go_binary; "
        "go_binary('tool', 'example.com/tool', 'v1.0.0', exe='tool')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stderr=subprocess.PIPE, preexec_fn=as_at_a_terminal
    )
    deadline = time.monotonic() + 30
    while not (tmp_path / "go.pid").exists() or not (tmp_path / "go.pid").read_text():
        assert time.monotonic() < deadline, "go was never started"
        time.sleep(0.05)
    go_pid = int((tmp_path / "go.pid").read_text())

    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)

    assert proc.returncode != 0
    with pytest.raises(ProcessLookupError):
        os.kill(go_pid, 0)


def test_env_override_names_an_existing_binary_without_building(
    calls: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    minio = tmp_path / "my-minio"
    minio.write_text("#!/bin/sh\n")
    minio.chmod(0o755)
    monkeypatch.setenv("OBJSDK_MINIO_BINARY", str(minio))

    assert gobuild.minio_binary() == minio
    assert calls.read_text() == ""


def test_env_override_to_a_missing_file_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OBJSDK_TOXIPROXY_BINARY", str(tmp_path / "absent"))

    with pytest.raises(LocalMinioError, match="OBJSDK_TOXIPROXY_BINARY"):
        gobuild.toxiproxy_binary()


def test_cache_dir_prefers_objsdk_cache_dir_then_xdg_cache_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OBJSDK_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert gobuild.cache_dir() == tmp_path / "explicit"

    monkeypatch.delenv("OBJSDK_CACHE_DIR")
    assert gobuild.cache_dir() == tmp_path / "xdg" / "objsdk"

    monkeypatch.delenv("XDG_CACHE_HOME")
    assert gobuild.cache_dir() == Path.home() / ".cache" / "objsdk"
