"""Uploads of files that resume: a path upload stopped by Ctrl-C, a network failure or a
crash is kept with its parts, and the same call again sends only the parts missing,
checked against the file's bytes; a stop that is final, ``resume=False``, streams and
``open_write`` leave nothing behind. On the session's service (MinIO or moto), directly
or through the fault proxy; the records go to a private ``XDG_CACHE_HOME``.

The kills of a real process at a third of a 384 MiB upload are in
tests/test_upload_killed.py.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from s3_helpers import boto3_client

import objsdk
from objsdk import Client
from objsdk._core.upload_record import parse_record, record_tag
from objsdk._transfer import multipart as multipart_module
from objsdk._transfer import upload_records, upload_resume
from objsdk._transfer.download_state import record_key
from objsdk.testing.faultproxy import Action, FaultProxy

pytestmark = pytest.mark.integration

MiB = 1 << 20
PART = 5 * MiB
SIZE = 8 * PART  # 40 MiB: eight parts of 5 MiB
OPTIONS: dict[str, Any] = {"part_size": PART, "multipart_threshold": PART, "parallel": 2}


@pytest.fixture(autouse=True)
def records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where this test's upload records go (its own ``XDG_CACHE_HOME``)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "objsdk" / "uploads"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every part the multipart engine sends (each attempt of a call)."""
    lengths: list[int] = []
    lock = threading.Lock()
    for name in ("upload_part", "upload_part_from_file"):
        real = getattr(multipart_module, name)

        def spy(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            with lock:
                lengths.append(args[4].length)
            return _real(*args, **kwargs)

        monkeypatch.setattr(multipart_module, name, spy)
    return lengths


def source_file(tmp_path: Path, size: int = SIZE, name: str = "f.bin") -> tuple[Path, bytes]:
    data = os.urandom(size)
    path = tmp_path / name
    path.write_bytes(data)
    return path, data


def stop_after(done_at_least: int, error: BaseException) -> Callable[[int, Any], None]:
    def progress(done: int, total: Any) -> None:
        if done >= done_at_least:
            raise error

    return progress


def uploads(client: Client, bucket: str) -> list[str]:
    return [up.upload_id for up in client.list_multipart_uploads(bucket)]


def record_files(records: Path) -> list[str]:
    return sorted(p.name for p in records.glob("*.json")) if records.exists() else []


def interrupted(client: Client, bucket: str, path: Path, key: str = "k") -> str:
    """Upload ``path`` until 3 of its 8 parts are stored, then Ctrl-C: the upload id kept."""
    with pytest.raises(KeyboardInterrupt) as caught:
        client.upload(bucket, key, path, progress=stop_after(3 * PART, KeyboardInterrupt()),
                      **OPTIONS)  # fmt: skip
    kept = caught.value.kept_upload  # type: ignore[attr-defined]
    assert (kept.bucket, kept.key, kept.path) == (bucket, key, str(path))
    return str(kept.upload_id)


# -- a stop a later run can get past -------------------------------------------------------


def test_an_upload_of_a_file_stopped_by_ctrl_c_is_kept_and_the_same_call_sends_the_rest(
    client: Client, bucket: str, tmp_path: Path, records: Path, sent: list[int]
) -> None:
    path, data = source_file(tmp_path)
    upload_id = interrupted(client, bucket, path)
    assert uploads(client, bucket) == [upload_id]
    assert len(record_files(records)) == 1
    sent.clear()
    info = client.upload(bucket, "k", path, **OPTIONS)
    assert sum(sent) <= SIZE - 3 * PART  # the three parts stored are not sent again
    assert info.bytes_reused == SIZE - sum(sent)
    assert client.get_object(bucket, "k") == data
    assert info.size == SIZE
    assert uploads(client, bucket) == []
    assert record_files(records) == []


def test_a_network_failure_past_the_retries_keeps_the_upload_and_says_how_to_resume(
    s3_server: Any, client: Client, bucket: str, tmp_path: Path, sent: list[int]
) -> None:
    path, data = source_file(tmp_path)
    with FaultProxy(s3_server.endpoint) as proxy:
        # Part 5 is refused with 500 InternalError for as long as the rule stands.
        rule = proxy.add_rule(Action.ERROR, method="PUT", query={"partNumber": "5"}, times=None)
        retry = objsdk.default_retry(2).new(backoff_factor=0.001, backoff_max=0.01)
        with Client(proxy.endpoint, s3_server.access_key, s3_server.secret_key,
                    retries=retry) as via:  # fmt: skip
            with pytest.raises(objsdk.S3Error) as caught:
                via.upload(bucket, "k", path, **{**OPTIONS, "parallel": 1})
            kept = caught.value.kept_upload  # type: ignore[attr-defined]
            message = str(caught.value)
            assert kept.upload_id in message
            assert "running the same upload again resumes it" in message
            # That upload, and no other upload of k nor of a key that begins with k.
            upload_id = shlex.quote(kept.upload_id)
            named = f"objsdk uploads abort s3://{bucket}/k --upload-id {upload_id}"
            assert f"`{named}` discards it" in message
            assert uploads(client, bucket) == [kept.upload_id]
            proxy.clear_rules()
            assert rule.hits >= 3
            sent.clear()
            via.upload(bucket, "k", path, **{**OPTIONS, "parallel": 1})
    assert sent == [PART] * 4  # parts 5 to 8
    assert client.get_object(bucket, "k") == data
    assert uploads(client, bucket) == []


def test_no_thread_sending_a_part_waits_for_the_disk_and_a_kept_record_is_on_it(
    client: Client, bucket: str, tmp_path: Path, records: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each part's line is flushed (fdatasync) by the record's own thread, so a slow disk
    delays no part; once a kept upload's call returns, every line written is on disk."""
    flushes: list[tuple[str, int]] = []  # the thread of each flush, the record's size then

    def slow_flush(fd: int) -> None:
        time.sleep(0.05)
        flushes.append((threading.current_thread().name, os.fstat(fd).st_size))
        os.fsync(fd)

    monkeypatch.setattr(upload_resume, "_datasync", slow_flush)
    path, _ = source_file(tmp_path)
    interrupted(client, bucket, path)
    assert {name for name, _ in flushes} <= {"objsdk-writeback", threading.current_thread().name}
    [record] = records.glob("*.json")
    assert flushes[-1][1] == record.stat().st_size
    assert len(parse_record(record.read_bytes())[1]) >= 3  # type: ignore[index]


# -- the file changed, the upload went -----------------------------------------------------


def test_a_file_rewritten_in_place_between_runs_is_stored_as_it_is_now(
    client: Client, bucket: str, tmp_path: Path, sent: list[int]
) -> None:
    path, data = source_file(tmp_path)
    interrupted(client, bucket, path)
    changed = bytearray(data)
    changed[PART + 7] ^= 0xFF  # in part 2, which the first run stored
    path.write_bytes(changed)
    sent.clear()
    client.upload(bucket, "k", path, **OPTIONS)
    assert client.get_object(bucket, "k") == bytes(changed)
    assert PART in sent  # part 2 went again
    assert sum(sent) <= SIZE - 2 * PART  # parts 1 and 3 did not
    assert uploads(client, bucket) == []


def test_a_file_of_another_size_starts_over_and_the_earlier_upload_is_aborted(
    client: Client, bucket: str, tmp_path: Path, sent: list[int]
) -> None:
    path, data = source_file(tmp_path)
    interrupted(client, bucket, path)
    longer = data + os.urandom(MiB)
    path.write_bytes(longer)
    sent.clear()
    client.upload(bucket, "k", path, **OPTIONS)
    assert client.get_object(bucket, "k") == longer
    assert sum(sent) == len(longer)
    assert uploads(client, bucket) == []


def test_an_upload_aborted_elsewhere_starts_over_and_succeeds(
    client: Client, bucket: str, tmp_path: Path, records: Path, sent: list[int]
) -> None:
    path, data = source_file(tmp_path)
    upload_id = interrupted(client, bucket, path)
    # Another client (a lifecycle rule, an operator) aborts it; our record stays.
    other = objsdk.Client(client.endpoint.url, client.credentials.access_key,  # type: ignore[union-attr]
                          client.credentials.secret_key)  # type: ignore[union-attr]  # fmt: skip
    with other:
        other._transport.request(
            "DELETE", operation="abort", bucket=bucket, key="k",
            params=[("uploadId", upload_id)], ok=(204, 200),
        )  # fmt: skip
    assert len(record_files(records)) == 1
    sent.clear()
    client.upload(bucket, "k", path, **OPTIONS)
    assert sum(sent) == SIZE
    assert client.get_object(bucket, "k") == data
    assert uploads(client, bucket) == []
    assert record_files(records) == []


def test_other_object_fields_start_over_rather_than_store_the_earlier_ones(
    client: Client, bucket: str, tmp_path: Path, sent: list[int]
) -> None:
    path, data = source_file(tmp_path)
    interrupted(client, bucket, path)
    sent.clear()
    client.upload(bucket, "k", path, content_type="text/csv", **OPTIONS)
    assert sum(sent) == SIZE
    assert client.head_object(bucket, "k").content_type == "text/csv"
    assert client.get_object(bucket, "k") == data
    assert uploads(client, bucket) == []


# -- resume=False, final stops, streams ------------------------------------------------------


def test_resume_false_aborts_the_earlier_upload_and_starts_over(
    client: Client, bucket: str, tmp_path: Path, records: Path, sent: list[int]
) -> None:
    path, data = source_file(tmp_path)
    interrupted(client, bucket, path)
    sent.clear()
    with pytest.raises(KeyboardInterrupt):
        client.upload(bucket, "k", path, resume=False,
                      progress=stop_after(2 * PART, KeyboardInterrupt()), **OPTIONS)  # fmt: skip
    # Neither the earlier upload nor this one is left, nor any record.
    assert uploads(client, bucket) == []
    assert record_files(records) == []
    client.upload(bucket, "k", path, resume=False, **OPTIONS)
    assert client.get_object(bucket, "k") == data


@pytest.mark.parametrize(
    "error",
    [RuntimeError("from progress"), objsdk.SourceChangedError("gone")],
    ids=["progress-raised", "source-changed"],
)
def test_a_final_stop_aborts_the_upload_and_forgets_it(
    client: Client, bucket: str, tmp_path: Path, records: Path, error: Exception
) -> None:
    path, _ = source_file(tmp_path)
    with pytest.raises(type(error)) as caught:
        client.upload(bucket, "k", path, progress=stop_after(2 * PART, error), **OPTIONS)
    assert not hasattr(caught.value, "kept_upload")
    assert uploads(client, bucket) == []
    assert record_files(records) == []


@pytest.mark.parametrize("source", ["file-object", "bytes"])
def test_uploads_from_file_objects_and_memory_are_not_kept(
    client: Client, bucket: str, tmp_path: Path, records: Path, source: str
) -> None:
    path, data = source_file(tmp_path)
    stop = stop_after(2 * PART, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt), open(path, "rb") as f:
        client.upload(bucket, "k", f if source == "file-object" else data, progress=stop,
                      **OPTIONS)  # fmt: skip
    assert uploads(client, bucket) == []
    assert record_files(records) == []


def test_open_write_interrupted_is_aborted_as_ever(client: Client, bucket: str) -> None:
    def write_then_interrupt() -> None:
        with client.open_write(bucket, "k", part_size=PART) as w:
            w.write(os.urandom(2 * PART))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_then_interrupt()
    assert uploads(client, bucket) == []


# -- safety ----------------------------------------------------------------------------------


def test_a_second_upload_of_the_same_file_to_the_same_key_fails_at_once(
    client: Client, bucket: str, tmp_path: Path
) -> None:
    path, data = source_file(tmp_path)
    seen: list[BaseException] = []

    def progress(done: int, total: Any) -> None:
        if done and not seen:
            try:
                client.upload(bucket, "k", path, **OPTIONS)
            except objsdk.UploadLockedError as e:
                seen.append(e)
            # Another key is another upload: not locked.
            client.upload(bucket, "other", path, **OPTIONS)

    client.upload(bucket, "k", path, progress=progress, **OPTIONS)
    assert len(seen) == 1
    assert str(path) in str(seen[0])
    assert "'k'" in str(seen[0])
    assert client.get_object(bucket, "k") == data
    assert client.get_object(bucket, "other") == data
    assert uploads(client, bucket) == []


def test_an_upload_where_no_record_can_be_kept_still_succeeds(
    client: Client, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_bytes(b"")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    path, data = source_file(tmp_path)
    client.upload(bucket, "k", path, **OPTIONS)
    assert client.get_object(bucket, "k") == data
    # Nothing to resume from: an interrupted one is aborted, as before uploads resumed.
    with pytest.raises(KeyboardInterrupt) as caught:
        client.upload(bucket, "k2", path, progress=stop_after(2 * PART, KeyboardInterrupt()),
                      **OPTIONS)  # fmt: skip
    assert not hasattr(caught.value, "kept_upload")
    assert uploads(client, bucket) == []


def test_a_record_holds_no_credentials(
    s3_server: Any, client: Client, bucket: str, tmp_path: Path, records: Path
) -> None:
    path, _ = source_file(tmp_path)
    interrupted(client, bucket, path)
    (record,) = records.glob("*.json")
    text = record.read_bytes()
    assert s3_server.secret_key.encode() not in text
    assert s3_server.access_key.encode() not in text
    assert oct(record.stat().st_mode & 0o777) == oct(0o600)
    client.abort_multipart_uploads(bucket, older_than=None)


def test_a_record_put_under_another_uploads_name_is_not_used(
    client: Client, bucket: str, tmp_path: Path, records: Path, sent: list[int]
) -> None:
    path, data = source_file(tmp_path)
    upload_id = interrupted(client, bucket, path, key="k1")
    (record,) = records.glob("*.json")
    endpoint = client.endpoint.url
    other = records / f"{record_tag(record_key(), endpoint, bucket, 'k2', str(path))}.json"
    other.write_bytes(record.read_bytes())
    sent.clear()
    client.upload(bucket, "k2", path, **OPTIONS)
    assert sum(sent) == SIZE  # k1's parts are not k2's
    assert client.get_object(bucket, "k2") == data
    assert uploads(client, bucket) == [upload_id]  # k1's upload is left alone
    client.abort_multipart_uploads(bucket, "k1", older_than=None)


def test_records_idle_for_a_week_are_pruned(
    client: Client, bucket: str, tmp_path: Path, records: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = source_file(tmp_path)
    interrupted(client, bucket, path)
    (record,) = records.glob("*.json")
    week = 7 * 24 * 3600
    os.utime(record, (record.stat().st_atime - week - 60, record.stat().st_mtime - week - 60))
    fresh, _ = source_file(tmp_path, name="g.bin")
    monkeypatch.setattr(upload_records, "_pruned", {})
    interrupted(client, bucket, fresh, key="g")
    assert [p.name for p in records.glob("*.json")] != [record.name]
    assert not record.exists()
    assert len(record_files(records)) == 1  # g's own
    client.abort_multipart_uploads(bucket, older_than=None)


# -- through a service without checksums: the ETag is the MD5 ---------------------------------


@pytest.fixture
def checksumless(s3_server: Any) -> Iterator[tuple[FaultProxy, Client]]:
    """A client for the service through a proxy that refuses every checksum header, as
    Backblaze B2 does: the upload stores no CRC32C, and ListParts lists none."""
    with FaultProxy(s3_server.endpoint) as proxy:
        proxy.add_rule(Action.REJECT_CHECKSUM_HEADERS, times=None)
        with Client(proxy.endpoint, s3_server.access_key, s3_server.secret_key) as c:
            yield proxy, c


def test_without_checksums_stored_parts_are_checked_by_their_md5_etag(
    checksumless: tuple[FaultProxy, Client], client: Client, bucket: str, tmp_path: Path,
    sent: list[int],
) -> None:  # fmt: skip
    proxy, via = checksumless
    path, data = source_file(tmp_path)
    interrupted(via, bucket, path)
    sent.clear()
    via.upload(bucket, "k", path, **OPTIONS)
    # Through the proxy, whose refusals... (a part the Ctrl-C cut mid-body was never
    # answered: its status is None)
    assert proxy.requests(method="PUT")
    answered = [r.status for r in proxy.requests() if r.status is not None]
    assert 400 in answered
    assert set(answered) <= {200, 204, 400}
    assert client.head_object(bucket, "k").checksums == {}  # ...left no CRC32C stored
    assert sum(sent) <= SIZE - 3 * PART
    assert client.get_object(bucket, "k") == data
    assert uploads(client, bucket) == []


def test_parts_said_to_be_under_sse_kms_are_sent_again_when_only_the_etag_could_tell(
    checksumless: tuple[FaultProxy, Client], client: Client, bucket: str, tmp_path: Path,
    sent: list[int],
) -> None:  # fmt: skip
    proxy, via = checksumless
    # Every part's answer says SSE-KMS: its ETag is then not the MD5 of its bytes.
    proxy.add_rule(Action.SET_HEADERS, method="PUT", query=["partNumber"], times=None,
                   headers={"x-amz-server-side-encryption": "aws:kms"})  # fmt: skip
    path, data = source_file(tmp_path)
    interrupted(via, bucket, path)
    sent.clear()
    via.upload(bucket, "k", path, **OPTIONS)
    assert sum(sent) == SIZE
    assert client.get_object(bucket, "k") == data
    assert uploads(client, bucket) == []


# -- the uploads of a bucket -------------------------------------------------------------------


def test_abort_multipart_uploads_under_a_prefix_aborts_them_and_forgets_their_records(
    client: Client, bucket: str, tmp_path: Path, records: Path
) -> None:
    path, _ = source_file(tmp_path)
    upload_id = interrupted(client, bucket, path, key="logs/a")
    assert [up.key for up in client.list_multipart_uploads(bucket, "logs/")] == ["logs/a"]
    assert list(client.list_multipart_uploads(bucket, "other/")) == []
    assert client.abort_multipart_uploads(bucket, "other/", older_than=None) == []
    would = client.abort_multipart_uploads(bucket, "logs/", older_than=None, dry_run=True)
    assert [up.upload_id for up in would] == [upload_id]
    assert uploads(client, bucket) == [upload_id]
    gone = client.abort_multipart_uploads(bucket, "logs/", older_than=None)
    assert [(up.key, up.upload_id) for up in gone] == [("logs/a", upload_id)]
    assert uploads(client, bucket) == []
    assert record_files(records) == []
    with pytest.raises(objsdk.InvalidArgument):
        client.abort_multipart_uploads(bucket, older_than=timedelta(seconds=-1))


def other_writers(s3_server: Any, bucket: str) -> set[tuple[str, str]]:
    """Another client's uploads of ``k`` and of keys that begin with ``k``: their (key,
    upload id)."""
    s3 = boto3_client(s3_server)
    keys = ("k", "k2", "k.tmp", "k/part")
    return {(k, s3.create_multipart_upload(Bucket=bucket, Key=k)["UploadId"]) for k in keys}


def in_progress(client: Client, bucket: str) -> set[tuple[str, str]]:
    return {(up.key, up.upload_id) for up in client.list_multipart_uploads(bucket)}


def test_abort_multipart_uploads_of_an_upload_id_aborts_that_upload_and_no_other(
    s3_server: Any, client: Client, bucket: str, tmp_path: Path, records: Path
) -> None:
    """Another writer's uploads of the same key, and of keys that begin with it, go on."""
    path, _ = source_file(tmp_path)
    with pytest.raises(KeyboardInterrupt) as caught:
        client.upload(bucket, "k", path, progress=stop_after(3 * PART, KeyboardInterrupt()),
                      **OPTIONS)  # fmt: skip
    kept = caught.value.kept_upload  # type: ignore[attr-defined]
    theirs = other_writers(s3_server, bucket)
    would = client.abort_multipart_uploads(kept.bucket, kept.key, upload_id=kept.upload_id,
                                           dry_run=True)  # fmt: skip
    assert [(up.key, up.upload_id) for up in would] == [("k", kept.upload_id)]
    assert in_progress(client, bucket) == theirs | {("k", kept.upload_id)}
    gone = client.abort_multipart_uploads(kept.bucket, kept.key, upload_id=kept.upload_id)
    assert [(up.key, up.upload_id) for up in gone] == [("k", kept.upload_id)]
    assert in_progress(client, bucket) == theirs
    assert record_files(records) == []
    # Gone, or of another key: nothing to abort.
    assert client.abort_multipart_uploads(bucket, "k", upload_id=kept.upload_id) == []
    (k2,) = [upload_id for key, upload_id in theirs if key == "k2"]
    assert client.abort_multipart_uploads(bucket, "k", upload_id=k2) == []
    assert in_progress(client, bucket) == theirs


def test_exact_lists_and_aborts_the_uploads_of_one_key_only(
    s3_server: Any, client: Client, bucket: str, tmp_path: Path, records: Path
) -> None:
    path, _ = source_file(tmp_path)
    mine = interrupted(client, bucket, path)
    theirs = other_writers(s3_server, bucket)
    of_k = {("k", mine)} | {(key, u) for key, u in theirs if key == "k"}
    assert {(up.key, up.upload_id) for up in client.list_multipart_uploads(bucket, "k")} == (
        theirs | of_k
    )
    listed = client.list_multipart_uploads(bucket, "k", exact=True)
    assert {(up.key, up.upload_id) for up in listed} == of_k
    gone = client.abort_multipart_uploads(bucket, "k", exact=True, older_than=None)
    assert {(up.key, up.upload_id) for up in gone} == of_k
    assert in_progress(client, bucket) == theirs - of_k
    assert record_files(records) == []


def test_abort_multipart_uploads_needs_older_than_unless_an_upload_id_names_one(
    client: Client, bucket: str
) -> None:
    with pytest.raises(objsdk.InvalidArgument, match="older_than"):
        client.abort_multipart_uploads(bucket, "k")  # type: ignore[call-overload]
    with pytest.raises(objsdk.InvalidArgument, match="key"):
        client.abort_multipart_uploads(bucket, "", upload_id="2~x")
    with pytest.raises(objsdk.InvalidArgument, match="upload_id"):
        client.abort_multipart_uploads(bucket, "k", upload_id="")
    with pytest.raises(objsdk.InvalidArgument, match="key"):
        list(client.list_multipart_uploads(bucket, "", exact=True))


@pytest.mark.needs_feature("dates_uploads")
def test_abort_multipart_uploads_older_than_spares_younger_uploads(
    client: Client, bucket: str, tmp_path: Path
) -> None:
    path, _ = source_file(tmp_path)
    upload_id = interrupted(client, bucket, path, key="logs/a")
    assert client.abort_multipart_uploads(bucket, "logs/", older_than=timedelta(hours=1)) == []
    assert uploads(client, bucket) == [upload_id]
    time.sleep(1.1)  # the server's Date is in whole seconds: past the upload's second
    gone = client.abort_multipart_uploads(bucket, "logs/", older_than=timedelta(0))
    assert [up.upload_id for up in gone] == [upload_id]
    assert uploads(client, bucket) == []


def test_a_record_read_back_names_the_upload_kept(
    client: Client, bucket: str, tmp_path: Path, records: Path
) -> None:
    path, _ = source_file(tmp_path)
    upload_id = interrupted(client, bucket, path)
    (record,) = records.glob("*.json")
    found = parse_record(record.read_bytes())
    assert found is not None
    header, parts = found
    assert (header.bucket, header.key, header.path, header.upload_id) == (
        bucket, "k", str(path), upload_id,
    )  # fmt: skip
    assert header.size == SIZE
    assert len(parts) >= 3
    client.abort_multipart_uploads(bucket, older_than=None)
