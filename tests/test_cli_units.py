"""Pure parts of the command line: s3:// paths, sizes, exit codes, output, bench hand-off."""

from __future__ import annotations

import os
import sys
import threading
import types
from typing import Any

import pytest

from objsdk import errors
from objsdk._core.config import ConfigError
from objsdk.cli import main
from objsdk.cli.errors import exit_code_for
from objsdk.cli.output import Output, human_size
from objsdk.cli.parser import parse_size
from objsdk.cli.paths import LocalPath, RemotePath, parse_location, parse_remote, safe_relative


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("s3://b", RemotePath("b", "")),
        ("s3://b/", RemotePath("b", "")),
        ("s3://b/k", RemotePath("b", "k")),
        ("s3://b/dir/", RemotePath("b", "dir/")),
        ("s3://b/a b/ü?#", RemotePath("b", "a b/ü?#")),
        ("local/file", LocalPath("local/file")),
        ("-", LocalPath("-")),
    ],
)
def test_locations_parse(text: str, expected: Any) -> None:
    assert parse_location(text) == expected


@pytest.mark.parametrize("text", ["s3://", "s3:///key", "gs://b/k", "http://h/b", ""])
def test_bad_locations_are_invalid_arguments_quoting_the_input(text: str) -> None:
    with pytest.raises(errors.InvalidArgument):
        parse_location(text)


def test_parse_remote_refuses_local_paths() -> None:
    with pytest.raises(errors.InvalidArgument, match="'bucket/key'"):
        parse_remote("bucket/key")


def test_remote_join_and_prefix() -> None:
    assert RemotePath("b", "d").join("x/y") == RemotePath("b", "d/x/y")
    assert RemotePath("b", "").join("x") == RemotePath("b", "x")
    assert RemotePath("b", "d/").is_prefix
    assert RemotePath("b", "d").as_prefix() == RemotePath("b", "d/")
    assert str(RemotePath("b", "k")) == "s3://b/k"


@pytest.mark.parametrize(
    ("key", "prefix", "expected"),
    [
        ("p/a/b.txt", "p/", "a/b.txt"),
        ("p/./a", "p/", "a"),
        ("p/a/../../x", "p/", None),
        ("p/../x", "p/", None),
        ("p//abs", "p/", "abs"),
        ("p/dir/", "p/", None),
        ("p/", "p/", None),
    ],
)
def test_safe_relative_never_leaves_the_destination(
    key: str, prefix: str, expected: str | None
) -> None:
    assert safe_relative(key, prefix) == expected


@pytest.mark.parametrize(
    ("text", "n"),
    [("10", 10), ("8MiB", 8 << 20), ("5MB", 5_000_000), ("1 GiB", 1 << 30), ("2TiB", 2 << 40)],
)
def test_sizes_parse(text: str, n: int) -> None:
    assert parse_size(text) == n


def test_human_sizes() -> None:
    # As the aws CLI's --human-readable prints them (awscli.customizations.s3.utils).
    assert human_size(0) == "0 Bytes"
    assert human_size(1) == "1 Byte"
    assert human_size(5) == "5 Bytes"
    assert human_size(1023) == "1023 Bytes"
    assert human_size(1536) == "1.5 KiB"
    assert human_size(3 << 30) == "3.0 GiB"


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (KeyboardInterrupt(), 130),
        (errors.InvalidArgument("x"), 252),
        (ConfigError("x"), 253),
        (errors.NoSuchBucket(404, "NoSuchBucket"), 254),
        (errors.AccessDenied(403, "AccessDenied"), 254),
        (errors.ResumeLimitError("x"), 1),
        (errors.ConnectError("x"), 255),
        (RuntimeError("x"), 255),
    ],
)
def test_exit_codes(exc: BaseException, code: int) -> None:
    assert exit_code_for(exc) == code


def test_progress_bar_only_on_a_terminal_and_not_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    with Output(json_mode=False, quiet=False).progress(10, "x") as p:
        assert p._bar is not None
    with Output(json_mode=False, quiet=True).progress(10, "x") as p:
        assert p._bar is None
    with Output(json_mode=True, quiet=False).progress(10, "x") as p:
        assert p._bar is None
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    with Output(json_mode=False, quiet=False).progress(10, "x") as p:
        assert p._bar is None


def test_bench_runs_the_suite_in_quick_mode(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[list[str]] = []
    fake = types.ModuleType("objsdk.bench")
    fake.main = lambda argv, config=None, **_: seen.append(argv) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "objsdk.bench", fake)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"):
        monkeypatch.setenv(name, "x")  # restored afterwards, whatever the command sets
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    assert main(["bench", "--sizes", "1MiB"]) == 0
    assert seen == [["--quick", "--sizes", "1MiB"]]


def test_bench_gets_the_resolved_settings_as_a_value_and_the_environment_is_untouched(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from objsdk._core.client_config import ClientConfig

    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text(
        "[dev]\naws_access_key_id = DEVKEY\naws_secret_access_key = DEVSECRET\n"
    )
    (tmp_path / ".aws" / "config").write_text(
        "[profile dev]\nendpoint_url = http://127.0.0.1:1\nregion = eu-west-3\n"
    )
    for name in list(os.environ):
        if name.startswith("AWS_") and name != "AWS_EC2_METADATA_DISABLED":
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    given: list[ClientConfig | None] = []
    fake = types.ModuleType("objsdk.bench")
    fake.main = lambda argv, config=None, **_: given.append(config) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "objsdk.bench", fake)
    before = dict(os.environ)
    assert main(["--profile", "dev", "bench"]) == 0
    assert dict(os.environ) == before
    (config,) = given
    assert config is not None
    assert (config.endpoint, config.access_key, config.secret_key, config.region) == (
        "http://127.0.0.1:1",
        "DEVKEY",
        "DEVSECRET",
        "eu-west-3",
    )


def test_bench_without_an_endpoint_leaves_the_suite_to_start_its_own_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_") and name != "AWS_EC2_METADATA_DISABLED":
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    given: list[object] = []
    fake = types.ModuleType("objsdk.bench")
    fake.main = lambda argv, config=None, **_: given.append(config) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "objsdk.bench", fake)
    assert main(["bench"]) == 0
    assert given == [None]


def test_bench_help_names_the_command_and_its_full_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # It read "usage: python -m objsdk.bench", which objsdk bench is not.
    assert main(["bench", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: objsdk bench [--full] [-h] [--quick]")


def test_bench_without_the_suite_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "objsdk.bench", None)
    assert main(["bench"]) == 253
    assert "objsdk.bench" in capsys.readouterr().err


def test_a_batch_names_its_files_only_once_flushed(tmp_path: Any) -> None:
    from objsdk._transfer.smallfile import Batch, Pending

    batch = Batch()
    tmp = tmp_path / ".objsdk-0.tmp"
    tmp.write_bytes(b"data")
    batch.add(Pending(str(tmp), str(tmp_path / "final"), 4))
    assert not (tmp_path / "final").exists()
    batch.flush()
    assert (tmp_path / "final").read_bytes() == b"data"
    assert not tmp.exists()
    assert batch.failures == []


def test_a_full_batch_flushes_itself(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from objsdk._transfer import smallfile

    monkeypatch.setattr(smallfile, "BATCH_FILES", 3)
    batch = smallfile.Batch()
    for i in range(3):
        (tmp_path / f"t{i}").write_bytes(b"x")
        batch.add(smallfile.Pending(str(tmp_path / f"t{i}"), str(tmp_path / f"f{i}"), 1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f0", "f1", "f2"]


class _SlowDisk:
    """A batch of two files whose ``syncfs`` holds until :attr:`done` is set; ``add``
    writes temporary files ``t<i>`` bound for ``f<i>``."""

    def __init__(self, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        from objsdk._transfer import smallfile

        monkeypatch.setattr(smallfile, "BATCH_FILES", 2)
        monkeypatch.setattr(smallfile, "dirty_bytes", lambda: 0)
        self.dir = tmp_path
        self.flushing, self.done = threading.Event(), threading.Event()
        self.syncs = 0
        self.batch = smallfile.Batch()
        self.batch._syncfs = self._syncfs
        self._pending = smallfile.Pending

    def _syncfs(self, fd: int) -> int:
        self.syncs += 1
        self.flushing.set()
        assert self.done.wait(10)
        return 0

    def worker(self, names: range) -> threading.Thread:
        def add() -> None:
            for i in names:
                (self.dir / f"t{i}").write_bytes(b"x")
                self.batch.add(self._pending(str(self.dir / f"t{i}"), str(self.dir / f"f{i}"), 1))

        thread = threading.Thread(target=add)
        thread.start()
        return thread

    def names(self) -> list[str]:
        return sorted(p.name for p in self.dir.iterdir())


def test_a_worker_that_fills_the_batch_during_a_flush_goes_back_to_work(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = _SlowDisk(tmp_path, monkeypatch)
    one = disk.worker(range(2))
    assert disk.flushing.wait(10)  # the first worker flushes t0 and t1, and the disk is slow
    two = disk.worker(range(2, 4))
    two.join(5)
    assert not two.is_alive()  # it filled the batch, and did not wait for the disk
    assert "f2" not in disk.names()
    disk.done.set()
    one.join(10)
    # The flush under way went on to the files that came meanwhile: one more syncfs.
    assert disk.names() == ["f0", "f1", "f2", "f3"]
    assert disk.syncs == 2


def test_a_worker_waits_for_the_disk_once_two_batches_wait(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = _SlowDisk(tmp_path, monkeypatch)
    one = disk.worker(range(2))
    assert disk.flushing.wait(10)
    two = disk.worker(range(2, 6))
    two.join(0.5)
    assert two.is_alive()  # four files wait behind the slow flush: it waits too
    disk.done.set()
    one.join(10)
    two.join(10)
    assert disk.names() == [f"f{i}" for i in range(6)]


def test_a_rename_that_fails_is_reported_and_its_temporary_file_removed(tmp_path: Any) -> None:
    from objsdk._transfer.smallfile import Batch, Pending

    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "inside").write_bytes(b"keep")
    (tmp_path / "t").write_bytes(b"x")
    batch = Batch()
    batch.add(Pending(str(tmp_path / "t"), str(tmp_path / "taken"), 1))
    batch.flush()
    [(what, e)] = batch.failures
    assert what == f"download to {tmp_path / 'taken'}"
    assert isinstance(e, IsADirectoryError)
    assert (e.strerror, e.filename) == ("a directory is there", str(tmp_path / "taken"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
    assert (tmp_path / "taken" / "inside").read_bytes() == b"keep"


def test_a_file_the_disk_fails_to_flush_is_reported_by_name_and_the_others_take_theirs(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fsync failing with EIO (a failing disk) for one file of a batch: that file is
    # reported as the object's LocalWriteError naming its destination, gets no final
    # name and leaves no temporary file; the files the disk did flush take their names.
    import errno

    from objsdk._transfer import smallfile

    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("t1"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    batch = smallfile.Batch()
    batch._syncfs = None  # one fsync per file, as where there is no syncfs
    for i in range(3):
        (tmp_path / f"t{i}").write_bytes(b"x")
        batch.add(
            smallfile.Pending(
                str(tmp_path / f"t{i}"), str(tmp_path / f"f{i}"), 1, None, "b", f"k{i}"
            )
        )
    batch.flush()
    [(what, e)] = batch.failures
    assert what == f"download: s3://b/k1 to {tmp_path / 'f1'}"
    assert isinstance(e, errors.LocalWriteError)
    assert (e.errno, e.filename, e.bucket, e.key) == (errno.EIO, str(tmp_path / "f1"), "b", "k1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f0", "f2"]


def test_names_whose_folder_the_disk_fails_to_flush_are_reported_and_a_move_keeps_its_source(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The folder's fsync failing (EIO): the new names may not survive a power cut, so
    # each file is reported, and ``after`` (a move's removal of its source) does not run.
    import errno

    from objsdk._transfer import smallfile

    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if os.path.isdir(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    removed: list[int] = []
    batch = smallfile.Batch()
    batch._syncfs = None
    (tmp_path / "t").write_bytes(b"x")
    batch.add(
        smallfile.Pending(str(tmp_path / "t"), str(tmp_path / "f"), 1, removed.append, "b", "k")
    )
    batch.flush()
    [(what, e)] = batch.failures
    assert what == f"download: s3://b/k to {tmp_path / 'f'}"
    assert isinstance(e, errors.LocalWriteError)
    assert (e.errno, e.filename) == (errno.EIO, str(tmp_path / "f"))
    assert removed == []


@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="Linux's /proc/meminfo")
def test_the_data_waiting_for_the_disk_is_read_from_the_system() -> None:
    from objsdk._transfer.smallfile import dirty_bytes

    waiting = dirty_bytes()
    assert isinstance(waiting, int)
    assert waiting >= 0


def _batch_of(paths: list[Any]) -> tuple[Any, list[int], list[str]]:
    """A batch of temporary files at ``paths`` whose flushes are recorded: the device of
    each ``syncfs`` and the path of each single-file fsync."""
    from objsdk._transfer import smallfile

    synced_devices: list[int] = []
    fsynced: list[str] = []
    batch = smallfile.Batch()
    batch._syncfs = lambda fd: synced_devices.append(os.fstat(fd).st_dev) or 0
    for i, path in enumerate(paths):
        path.write_bytes(b"x" * 10)
        batch.add(smallfile.Pending(str(path), str(path.with_name(f"final-{i}")), 10))
    return batch, synced_devices, fsynced


def test_a_batch_is_flushed_by_one_syncfs_when_little_else_is_waiting_for_the_disk(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from objsdk._transfer import smallfile

    monkeypatch.setattr(smallfile, "dirty_bytes", lambda: 4096)
    batch, synced_devices, fsynced = _batch_of([tmp_path / "a.tmp", tmp_path / "b.tmp"])
    monkeypatch.setattr(smallfile, "_fsync_path", lambda path, flags: fsynced.append(path))
    batch.flush()
    assert synced_devices == [os.stat(tmp_path).st_dev]
    assert fsynced == [str(tmp_path)]  # the directory, for the new names
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final-0", "final-1"]


def test_a_batch_fsyncs_its_own_files_rather_than_flush_others_pending_writes(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # syncfs would also wait for every other program's unwritten data on the filesystem
    # (a checkpoint being written): past SYNCFS_MAX_FOREIGN, only the batch is flushed.
    from objsdk._transfer import smallfile

    monkeypatch.setattr(smallfile, "dirty_bytes", lambda: 20 + smallfile.SYNCFS_MAX_FOREIGN + 1)
    paths = [tmp_path / "a.tmp", tmp_path / "b.tmp"]
    batch, synced_devices, fsynced = _batch_of(paths)
    monkeypatch.setattr(smallfile, "_fsync_path", lambda path, flags: fsynced.append(path))
    batch.flush()
    assert synced_devices == []
    assert fsynced == [str(paths[0]), str(paths[1]), str(tmp_path)]


@pytest.mark.skipif(
    not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat("/tmp").st_dev,
    reason="needs /dev/shm on a filesystem of its own",
)
def test_a_batch_across_a_mount_point_syncs_each_filesystem(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile
    from pathlib import Path

    from objsdk._transfer import smallfile

    monkeypatch.setattr(smallfile, "dirty_bytes", lambda: 0)
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        batch, synced_devices, _ = _batch_of([tmp_path / "a.tmp", Path(shm) / "b.tmp"])
        batch.flush()
        assert sorted(synced_devices) == sorted({os.stat(tmp_path).st_dev, os.stat(shm).st_dev})


@pytest.mark.parametrize(
    ("rules", "path", "kept"),
    [
        ((), "a/b.txt", True),
        (((False, "*"),), "a/b.txt", False),
        (((False, "*"), (True, "*.txt")), "a/b.txt", True),
        (((True, "*.txt"), (False, "*")), "a/b.txt", False),
        (((False, "a/*"),), "a/deep/c.log", False),
        (((False, "?.txt"),), "ab.txt", True),
    ],
)
def test_filters_apply_in_order_and_the_last_match_decides(
    rules: tuple[tuple[bool, str], ...], path: str, kept: bool
) -> None:
    from objsdk.cli.filters import Filters

    assert Filters(rules).accepts(path) is kept


def test_wildcard_keys_list_from_the_folder_before_the_first_wildcard() -> None:
    from objsdk._core.wildcards import has_wildcard, wildcard_base

    assert wildcard_base("logs/2024/*.gz") == "logs/2024/"
    assert wildcard_base("logs/a?/x") == "logs/"
    assert wildcard_base("*.gz") == ""
    assert not has_wildcard("plain/key.txt")


def test_the_client_pool_holds_a_connection_for_every_part_in_flight() -> None:
    import argparse

    from objsdk.cli.commands import Context
    from objsdk.cli.parser import GLOBAL_DEFAULTS

    args = argparse.Namespace(**GLOBAL_DEFAULTS, jobs=32, parallel=4)
    args.endpoint_url = "http://127.0.0.1:1"
    ctx = Context(args)
    try:
        assert ctx.client().transport.max_pool_connections == 128  # type: ignore[attr-defined]
    finally:
        ctx.close()


def test_terminating_signals_raise_terminated_and_are_restored_after() -> None:
    import os
    import signal

    from objsdk.cli.signals import Terminated, terminating_signals

    before = signal.getsignal(signal.SIGTERM)
    # A signal sent to itself is handled as os.kill returns, in the main thread.
    with terminating_signals(), pytest.raises(Terminated) as caught:
        os.kill(os.getpid(), signal.SIGTERM)
    assert caught.value.exit_code == 143
    assert isinstance(caught.value, KeyboardInterrupt)  # cleaned up as Ctrl-C is
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_pool_of_jobs_raises_the_first_failure_and_starts_nothing_after_it() -> None:
    # One job fails in a way that ends the run (stdout closed); the others in flight see
    # the cancellation and stop. The run raises that failure, not a later Cancelled, and
    # no job starts once it has happened.
    import time

    from objsdk.cli import run
    from objsdk.cli.jobs import Job, Outcome, TransferOptions
    from objsdk.cli.output import Output
    from objsdk.cli.paths import LocalPath
    from objsdk.cli.transfer import Runner

    started: list[int] = []
    failed = threading.Event()

    class Stub(Runner):
        def run_one(self, job: Job, done: Any) -> None:
            n = int(job.dst.path)
            started.append(n)
            if n == 3:
                failed.set()
                raise BrokenPipeError("stdout closed")
            while not self.cancel.is_set() and not (n > 3 and failed.is_set()):
                time.sleep(0.001)
            self.check()
            done(0)

    jobs = [Job("upload", LocalPath(str(i)), LocalPath(str(i))) for i in range(100)]
    runner = Stub(None, TransferOptions(jobs=4), Output(json_mode=False, quiet=True), Outcome())  # type: ignore[arg-type]
    with pytest.raises(BrokenPipeError):
        run._run_pool(runner, jobs)
    assert runner.cancel.is_set()
    assert sorted(started) == [0, 1, 2, 3]  # each worker's first job, none after
