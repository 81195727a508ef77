"""download/get_into without a server: part planning, the state record, the decision to
resume or start over, argument checks, and releasing the caller's buffer after errors.

Transfers against a real MinIO (and through network faults) are in test_download_minio.py.
"""

from __future__ import annotations

import itertools
import json
import mmap
import os
import traceback

import pytest

import objsdk
from objsdk import Client
from objsdk._core.adaptive import Adaptive
from objsdk._core.checksums import crc32c_b64
from objsdk._core.parts import Part, adaptive_part_size, part_count, plan_parts
from objsdk._core.sizes import ADAPTIVE_CAP, ADAPTIVE_PART_SIZE, DEFAULT_PART_SIZE, MiB
from objsdk._io.shared_level import SharedLevel
from objsdk._transfer.download import download, get_into
from objsdk._transfer.download_engine import MAX_RUN, _runs, drop_frame_locals
from objsdk._transfer.download_state import DownloadState, load_state, reusable_parts, save_state
from objsdk._transport.mock import MockResponse, MockTransport, Request

STATE = DownloadState(
    bucket="b",
    key="k",
    etag='"e1"',
    version_id=None,
    size=1000,
    part_size=100,
    dest="/data/out/k",
    done=frozenset({0, 1, 2, 5, 9}),
)


@pytest.fixture
def offline(unused_port):
    """A client for a port nothing listens on: any request sent would fail to connect."""
    with Client(f"http://127.0.0.1:{unused_port}", "ak", "sk", retries=0) as c:
        yield c


def head_only(size: int) -> MockTransport:
    """A transport whose only answer is a HEAD of ``size`` bytes."""

    def answer(request: Request) -> MockResponse:
        assert request.method == "HEAD"
        return MockResponse(200, {"Content-Length": str(size), "ETag": '"e1"'})

    return MockTransport(answer)


# -- planning ------------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "part_size"), [(1, 100), (99, 100), (100, 100), (101, 100)])
def test_parts_cover_the_object_back_to_back_with_a_shorter_last_part(size, part_size):
    parts = plan_parts(0, size, part_size)
    assert parts[0].start == 0
    assert parts[-1].stop == size
    assert all(a.stop == b.start for a, b in itertools.pairwise(parts))
    assert all(p.length == part_size for p in parts[:-1])
    assert 0 < parts[-1].length <= part_size
    assert [p.index for p in parts] == list(range(len(parts)))


def test_an_empty_object_has_no_parts():
    assert plan_parts(0, 0, 100) == []


def test_a_window_is_planned_at_its_own_offsets():
    assert plan_parts(250, 460, 100) == [Part(0, 250, 350), Part(1, 350, 450), Part(2, 450, 460)]


def test_part_count_rounds_up():
    assert [part_count(n, 100) for n in (0, 1, 100, 101, 1000)] == [0, 1, 1, 2, 10]


def test_a_part_size_below_one_is_refused():
    with pytest.raises(objsdk.InvalidArgument, match="part_size"):
        plan_parts(0, 10, 0)


def test_adaptive_parts_are_the_default_size_where_the_cap_has_a_part_each():
    assert adaptive_part_size(ADAPTIVE_CAP * DEFAULT_PART_SIZE) == DEFAULT_PART_SIZE
    assert adaptive_part_size(10 * ADAPTIVE_CAP * DEFAULT_PART_SIZE) == DEFAULT_PART_SIZE


def test_adaptive_parts_shrink_in_whole_mib_so_the_cap_still_finds_parts():
    span = ADAPTIVE_CAP * 12 * MiB + 5
    assert adaptive_part_size(span) == 12 * MiB
    assert len(plan_parts(0, span, adaptive_part_size(span))) >= ADAPTIVE_CAP


def test_adaptive_parts_are_never_below_the_least_adaptive_size():
    assert [adaptive_part_size(n) for n in (0, 1, ADAPTIVE_CAP * ADAPTIVE_PART_SIZE - 1)] == [
        ADAPTIVE_PART_SIZE
    ] * 3


def run_lengths(parts: list[Part], level: SharedLevel | None, workers: int = 16) -> list[int]:
    return [len(run) for run in _runs(parts, level, workers)]


def settled_at(n: int) -> SharedLevel:
    return SharedLevel(Adaptive(cap=n, start=n), cpu=None)


def test_a_fixed_parallelism_takes_a_share_of_what_is_left_so_requests_shrink_to_the_end():
    # A request per part paid a request (and, before parts were recorded in groups, a
    # flush) per part: parallel=1 read 1 GiB in 128 requests.
    assert run_lengths(plan_parts(0, 1000, 100), None, workers=1) == [10]
    assert run_lengths(plan_parts(0, 1600, 100), None, workers=4) == [4, 3, 2, 1, 1, 1, 1, 1, 1, 1]


def test_a_level_settled_at_one_reads_the_rest_in_one_request():
    assert run_lengths(plan_parts(0, 1000, 100), settled_at(1)) == [10]


def test_where_connections_share_the_parts_a_run_ends_by_128_mib():
    # ... so what is left is shared out again at least that often.
    parts = plan_parts(0, 4 << 30, 16 * MiB)
    assert run_lengths(parts, settled_at(2))[:4] == [8, 8, 8, 8]
    assert run_lengths(parts, None, workers=2)[:4] == [8, 8, 8, 8]
    assert all(len(run) * 16 * MiB <= MAX_RUN for run in _runs(parts, settled_at(2), 2))


def test_one_connection_reads_the_rest_in_one_request_however_large():
    parts = plan_parts(0, 4 << 30, 16 * MiB)
    assert run_lengths(parts, settled_at(1)) == [256]
    assert run_lengths(parts, None, workers=1) == [256]


def test_a_settled_level_takes_a_share_of_what_is_left_so_requests_shrink_to_the_end():
    assert run_lengths(plan_parts(0, 1600, 100), settled_at(4)) == [4, 3, 2, 1, 1, 1, 1, 1, 1, 1]


def test_one_stream_still_climbing_doubles_its_requests():
    climbing = SharedLevel(Adaptive(cap=16), cpu=None)
    assert run_lengths(plan_parts(0, 1600, 100), climbing) == [1, 1, 2, 4, 8]


def test_the_level_holds_once_the_last_run_is_handed_out():
    climbing = SharedLevel(Adaptive(cap=16), cpu=None)
    runs = _runs(plan_parts(0, 1600, 100), climbing, 16)
    for _ in range(4):
        next(runs)
    assert not climbing.settled
    next(runs)  # the last: what runs now runs to the end
    assert climbing.settled


def test_a_held_level_is_the_parts_that_were_running_not_a_later_judgement():
    # Sixteen parts, all started at level 16; they then share the link, and a window
    # judged afterwards would step "down" to a level that changes nothing.
    level = SharedLevel(Adaptive(cap=16, window=MiB, min_seconds=1e-6), cpu=None)
    level.observe(MiB)
    level.observe(MiB)  # level 1 judged: up to 16
    assert level.current() == 16
    runs = _runs(plan_parts(0, 16 * MiB, MiB), level, 16)
    assert len(list(runs)) == 16
    for _ in range(64):
        level.observe(MiB)
    assert level.current() == 16


def test_runs_never_join_parts_that_are_not_consecutive():
    parts = [Part(0, 0, 100), Part(1, 100, 200), Part(3, 300, 400), Part(4, 400, 500)]
    runs = list(_runs(parts, settled_at(1), 1))
    assert [[p.index for p in run] for run in runs] == [[0, 1], [3, 4]]


# -- the state record ----------------------------------------------------------------------


def test_the_state_record_survives_a_json_round_trip():
    assert DownloadState.from_json(STATE.to_json()) == STATE


def test_done_parts_are_recorded_as_inclusive_runs():
    assert json.loads(STATE.to_json())["done"] == [[0, 2], [5, 5], [9, 9]]


def test_the_state_record_names_the_object_version_layout_and_destination():
    record = json.loads(STATE.to_json())
    assert record == {
        "format": 2,
        "bucket": "b",
        "key": "k",
        "etag": '"e1"',
        "version_id": None,
        "size": 1000,
        "part_size": 100,
        "dest": "/data/out/k",
        "done": [[0, 2], [5, 5], [9, 9]],
    }


def _record(**changes: object) -> str:
    record = json.loads(STATE.to_json())
    record.update(changes)
    return json.dumps(record)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{not json",
        "[]",
        '{"format": 2}',
        _record(format=1),
        _record(format=3),
        _record(dest=None),
        _record(size=True),
        _record(size=-1),
        _record(part_size=0),
        _record(etag=5),
        _record(done=[[3, 1]]),
        _record(done=[[-1, 0]]),
        _record(done=[[0, 10]]),  # part 10 does not exist in a 10-part object
        _record(done=[1, 2]),
        _record(done=[[0, "1"]]),
    ],
)
def test_a_state_record_that_cannot_be_trusted_is_ignored(text):
    assert DownloadState.from_json(text) is None


def test_a_missing_state_file_means_no_state(tmp_path):
    assert load_state(str(tmp_path / "nothing.json")) is None


def test_saving_the_state_replaces_the_record_and_leaves_no_temp_file(tmp_path):
    path = str(tmp_path / "s.json")
    save_state(path, STATE)
    newer = DownloadState(**{**STATE.__dict__, "done": frozenset(range(10))})
    save_state(path, newer)
    assert load_state(path) == newer
    assert os.listdir(tmp_path) == ["s.json"]


def test_a_crash_while_saving_the_state_leaves_the_previous_record(tmp_path, monkeypatch):
    path = str(tmp_path / "s.json")
    save_state(path, STATE)

    def crash(src: str, dst: str) -> None:
        raise OSError("killed before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="killed"):
        save_state(path, DownloadState(**{**STATE.__dict__, "done": frozenset(range(10))}))
    monkeypatch.undo()
    assert load_state(path) == STATE


# -- resume or start over ------------------------------------------------------------------

WANTED = DownloadState(**{**STATE.__dict__, "done": frozenset()})


def test_the_same_object_version_and_layout_reuses_the_recorded_parts():
    assert reusable_parts(STATE, WANTED, temp_size=1000) == STATE.done


@pytest.mark.parametrize(
    "change",
    [
        {"etag": '"e2"'},
        {"version_id": "v2"},
        {"size": 1001},
        {"part_size": 50},
        {"bucket": "other"},
        {"key": "other"},
    ],
)
def test_any_other_version_or_layout_starts_over(change):
    wanted = DownloadState(**{**WANTED.__dict__, **change})
    assert reusable_parts(STATE, wanted, temp_size=wanted.size) == frozenset()


@pytest.mark.parametrize("temp_size", [None, 0, 999, 1001])
def test_a_temp_file_of_the_wrong_size_starts_over(temp_size):
    assert reusable_parts(STATE, WANTED, temp_size=temp_size) == frozenset()


def test_no_state_starts_over():
    assert reusable_parts(None, WANTED, temp_size=1000) == frozenset()


def test_an_object_without_an_etag_always_starts_over():
    saved = DownloadState(**{**STATE.__dict__, "etag": None})
    wanted = DownloadState(**{**WANTED.__dict__, "etag": None})
    assert reusable_parts(saved, wanted, temp_size=1000) == frozenset()


# -- argument checks (nothing is sent: the offline client would fail to connect) ------------


@pytest.mark.parametrize(
    "kwargs",
    [{"parallel": 0}, {"part_size": 0}, {"max_resume": -1}, {"parallel": 1.5}, {"part_size": True}],
)
def test_download_refuses_bad_tuning_before_sending_anything(offline, tmp_path, kwargs):
    with pytest.raises(objsdk.InvalidArgument, match=r"must be.*\(bucket 'b0b', key 'k0'\)"):
        download(offline.transport, "b0b", "k0", tmp_path / "out", **kwargs)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("dest", "why"),
    [
        (b"read-only", "read-only"),
        (5, "path or a writable buffer"),
        (memoryview(bytearray(10))[::2], "C-contiguous"),
    ],
)
def test_download_refuses_a_destination_it_cannot_write(offline, dest, why):
    with pytest.raises(objsdk.InvalidArgument, match=why):
        download(offline.transport, "bkt", "key", dest)


def test_download_into_a_buffer_smaller_than_the_object_names_bucket_key_and_sizes():
    with pytest.raises(objsdk.InvalidArgument) as info:
        download(head_only(1000), "bkt", "some/key", bytearray(999))
    message = str(info.value)
    assert "'bkt'" in message
    assert "'some/key'" in message
    assert "999" in message
    assert "1000" in message


@pytest.mark.parametrize("offset", [-1, 1.0, None])
def test_get_into_refuses_a_bad_offset_naming_bucket_key_and_offset(offline, offset):
    with pytest.raises(objsdk.InvalidArgument, match=rf"{offset!r}.*'bkt'.*'key'"):
        get_into(offline.transport, "bkt", "key", bytearray(10), offset=offset)


def test_get_into_refuses_a_read_only_buffer(offline):
    with pytest.raises(objsdk.InvalidArgument, match="read-only"):
        get_into(offline.transport, "bkt", "key", b"0123")


# -- the caller's buffer is released after a failure ---------------------------------------


def _fail_holding_a_slice(view: memoryview) -> None:
    part = view[10:20]  # noqa: F841 - a local the traceback keeps alive
    raise RuntimeError("failed mid-part")


def test_an_error_keeps_no_slice_of_the_callers_mmap_once_its_frames_are_dropped():
    mm = mmap.mmap(-1, 4096)
    with memoryview(mm) as view:
        try:
            _fail_holding_a_slice(view)
        except RuntimeError as e:
            error = e
    with pytest.raises(BufferError):
        mm.close()  # the failed frame still holds a slice
    drop_frame_locals(error)
    mm.close()
    assert "_fail_holding_a_slice" in "".join(traceback.format_tb(error.__traceback__))


def test_a_deeply_nested_state_record_is_ignored_not_a_recursion_error(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert load_state(str(path)) is None


def test_a_huge_state_record_is_ignored_without_reading_it_whole(tmp_path):
    path = tmp_path / "state.json"
    path.write_bytes(b" " * (2 << 20) + STATE.to_json().encode())
    assert load_state(str(path)) is None


def test_a_state_record_behind_a_symlink_is_not_followed(tmp_path):
    real = tmp_path / "elsewhere.json"
    real.write_text(STATE.to_json())
    link = tmp_path / "state.json"
    link.symlink_to(real)
    assert load_state(str(link)) is None


def test_saving_a_state_record_replaces_a_planted_link_instead_of_writing_through_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    path = tmp_path / "state.json"
    (tmp_path / "state.json.tmp").symlink_to(victim)
    save_state(str(path), STATE)
    assert victim.read_text() == "keep me"
    assert load_state(str(path)) == STATE


# -- verification from the parts' own CRC32Cs ---------------------------------------------


def ranged(stored: bytes, served: bytes) -> MockTransport:
    """A server whose HEAD describes ``stored`` (with its full-object CRC32C) and whose
    ranged GETs answer with the bytes of ``served``."""
    headers = {"ETag": '"e1"', "Last-Modified": "Mon, 23 Nov 2026 10:00:00 GMT"}

    def answer(request: Request) -> MockResponse:
        if request.method == "HEAD":
            return MockResponse(
                200,
                {
                    **headers,
                    "Content-Length": str(len(stored)),
                    "x-amz-checksum-crc32c": crc32c_b64(stored),
                    "x-amz-checksum-type": "FULL_OBJECT",
                },
            )
        first, last = (int(x) for x in request.headers["Range"].split("=")[1].split("-"))
        last = min(last, len(served) - 1)
        return MockResponse(
            206,
            {**headers, "Content-Range": f"bytes {first}-{last}/{len(served)}"},
            served[first : last + 1],
        )

    return MockTransport(answer)


@pytest.mark.parametrize("parallel", [None, 3])
def test_parts_fetched_in_any_order_verify_against_the_whole_objects_crc32c(parallel):
    data = os.urandom(10 * 1000 + 7)
    buf = bytearray(len(data))
    n = get_into(ranged(data, data), "b", "k", buf, parallel=parallel, part_size=1000)
    assert n == len(data)
    assert buf == data


@pytest.mark.parametrize("parallel", [None, 3])
def test_a_byte_changed_on_the_way_fails_the_combined_crc32c(parallel):
    data = os.urandom(10 * 1000 + 7)
    rotten = bytearray(data)
    rotten[4321] ^= 1
    with pytest.raises(objsdk.IntegrityError, match=r"crc32c mismatch: .*key 'k'"):
        get_into(
            ranged(data, bytes(rotten)),
            "b",
            "k",
            bytearray(len(data)),
            parallel=parallel,
            part_size=1000,
        )


# -- objects of one part ------------------------------------------------------------------


class StreamSpy(MockTransport):
    """A MockTransport that records, per GET, whether its answer was asked to stream."""

    def __init__(self, handler) -> None:
        super().__init__(handler)
        self.streamed: list[bool] = []

    def request(self, method, **kwargs):
        if method == "GET":
            self.streamed.append(kwargs.get("stream", False))
        return super().request(method, **kwargs)


def test_an_object_of_one_part_is_downloaded_in_the_callers_thread_with_no_record(
    tmp_path, monkeypatch
):
    import objsdk._io.pool as pool
    import objsdk._transfer.download_file as download_file

    def refused(*args, **kwargs):
        raise AssertionError("a thread pool or a resume record for one part")

    monkeypatch.setattr(pool.PartPool, "__init__", refused)
    monkeypatch.setattr(download_file, "save_state", refused)
    data = os.urandom(4096)
    dest = tmp_path / "out.bin"
    result = download(ranged(data, data), "b", "k", str(dest))
    assert dest.read_bytes() == data
    assert result.verified == "crc32c"
    assert os.listdir(tmp_path) == ["out.bin"]


def test_a_failed_download_of_one_part_leaves_no_temp_file_behind(tmp_path):
    data = os.urandom(4096)
    rotten = bytes([data[0] ^ 1]) + data[1:]
    with pytest.raises(objsdk.IntegrityError):
        download(ranged(data, rotten), "b", "k", str(tmp_path / "out.bin"))
    whole = ranged(data, data).handler

    def cut(request: Request) -> MockResponse:
        answer = whole(request)  # every GET's body breaks off before its first byte
        return MockResponse(answer.status, answer.headers, b"")

    with pytest.raises(objsdk.ResumeLimitError):
        download(MockTransport(cut), "b", "k", str(tmp_path / "out.bin"), max_resume=1)
    assert os.listdir(tmp_path) == []


def test_a_small_object_of_known_size_is_read_as_one_whole_answer():
    data = os.urandom(4096)
    spy = StreamSpy(ranged(data, data).handler)
    download(spy, "b", "k", bytearray(len(data)))
    assert spy.streamed == [False]


def test_an_object_over_whole_answer_size_is_streamed():
    from objsdk._io.range_reader import WHOLE_ANSWER

    data = os.urandom(WHOLE_ANSWER + 1)
    spy = StreamSpy(ranged(data, data).handler)
    download(spy, "b", "k", bytearray(len(data)), parallel=1)
    assert spy.streamed == [True]


def test_after_a_break_a_small_object_is_streamed_so_no_received_byte_is_lost():
    data = os.urandom(4096)
    inner = ranged(data, data).handler
    calls = itertools.count()

    def once_broken(request: Request) -> MockResponse:
        if request.method == "GET" and next(calls) == 0:
            raise objsdk.errors.ProtocolError("connection broken", operation="read")
        return inner(request)

    spy = StreamSpy(once_broken)
    buf = bytearray(len(data))
    download(spy, "b", "k", buf)
    assert buf == data
    assert spy.streamed == [False, True]


# -- a throttling server --------------------------------------------------------------------


def throttling(data: bytes, refusals: int | None, status: int = 429) -> MockTransport:
    """``ranged(data, data)`` whose first ``refusals`` ranged GETs (None: all) are refused
    with a throttling answer of ``status`` (429 TooManyRequests, as MinIO sends it, or
    503 SlowDown), with the client's default retries."""
    serve = ranged(data, data).handler
    refused = itertools.count(1)
    code = "TooManyRequests" if status == 429 else "SlowDown"
    body = f"<Error><Code>{code}</Code><Message>slow down</Message></Error>".encode()

    def answer(request: Request) -> MockResponse:
        if request.method == "GET" and (refusals is None or next(refused) <= refusals):
            return MockResponse(status, {"Retry-After": "60"}, body)
        return serve(request)

    return MockTransport(answer, retry=objsdk.default_retry())


@pytest.mark.parametrize("parallel", [None, 1, 3])
def test_parts_refused_429_are_sent_again_by_the_transport_not_resumed(monkeypatch, parallel):
    monkeypatch.setattr("time.sleep", lambda s: None)
    data = os.urandom(10 * 1000 + 7)
    buf = bytearray(len(data))
    transport = throttling(data, refusals=4)
    assert get_into(transport, "b", "k", buf, parallel=parallel, part_size=1000)
    assert buf == data


@pytest.mark.parametrize(("status", "code"), [(429, "TooManyRequests"), (503, "SlowDown")])
def test_a_part_still_throttled_after_the_retries_ends_the_download_with_slow_down_unresumed(
    monkeypatch, status, code
):
    monkeypatch.setattr("time.sleep", lambda s: None)
    data = os.urandom(2000)
    transport = throttling(data, refusals=None, status=status)
    with pytest.raises(objsdk.SlowDown, match=code):
        get_into(transport, "b", "k", bytearray(len(data)), parallel=1, part_size=1000)
    gets = [r for r in transport.requests if r.method == "GET"]
    assert len(gets) == 6  # the client's 5 retries, and no resume of the reader's
