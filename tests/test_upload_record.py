"""The record of a resumable upload, and what a later run may reuse of it (no network):
its format and how a torn or hostile one is read, which stored parts can be checked and
how, how the parts kept and the parts sent again make one upload, which stops keep an
upload to be resumed, and the command that discards one."""

from __future__ import annotations

import os
import shlex

import pytest

from objsdk import errors
from objsdk._core.parts import Part, covers
from objsdk._core.upload_record import (
    KeptUpload,
    ListedPart,
    StoredPart,
    UploadRecord,
    abort_command,
    check_for,
    fields_digest,
    keeps_upload,
    parse_record,
    plan_rest,
    record_tag,
)

MiB = 1 << 20
SIZE = 64 * MiB + 123

RECORD = UploadRecord(
    endpoint="http://127.0.0.1:9000",
    bucket="b",
    key="k",
    path="/data/f.bin",
    size=SIZE,
    mtime_ns=1_700_000_000_000_000_000,
    upload_id="u-1",
    part_size=8 * MiB,
    fields=fields_digest({"Content-Type": "application/octet-stream"}),
    created=1.7e9,
)
ETAG = '"0123456789abcdef0123456789abcdef"'


def stored(number: int, start: int, size: int, **kw: object) -> StoredPart:
    fields: dict[str, object] = {"crc32c": "AAAAAA==", "etag": ETAG, **kw}
    return StoredPart(number, start, size, **fields)  # type: ignore[arg-type]


# -- the record -------------------------------------------------------------------------


def test_a_record_reads_back_as_written_with_its_parts_by_number():
    parts = [stored(1, 0, 8 * MiB), stored(2, 8 * MiB, 8 * MiB, opaque=True)]
    found = parse_record(RECORD.header() + b"".join(p.line() for p in parts))
    assert found == (RECORD, {1: parts[0], 2: parts[1]})


def test_a_part_recorded_twice_is_its_last_line():
    first, again = stored(3, 16 * MiB, 8 * MiB), stored(3, 16 * MiB, 6 * MiB, etag='"x"')
    found = parse_record(RECORD.header() + first.line() + again.line())
    assert found is not None
    assert found[1] == {3: again}


def test_a_line_cut_short_by_a_crash_and_what_follows_a_bad_line_are_ignored():
    good = stored(1, 0, 8 * MiB)
    torn = stored(2, 8 * MiB, 8 * MiB).line()[:-9]  # no line feed: the write was cut
    assert parse_record(RECORD.header() + good.line() + torn) == (RECORD, {1: good})
    after = stored(3, 16 * MiB, 8 * MiB).line()
    bad = b'{"n": "two"}\n'
    assert parse_record(RECORD.header() + good.line() + bad + after) == (RECORD, {1: good})


@pytest.mark.parametrize(
    "header",
    [
        b"",
        b"not json\n",
        b"[]\n",
        b'{"format": 2}\n',
        RECORD.header().replace(b'"size":', b'"size":"'),
        RECORD.header().replace(b'"upload_id":"u-1"', b'"upload_id":""'),
        RECORD.header().replace(b'"format":1,', b""),
        RECORD.header().replace(b'"fields":', b'"extra":1,"fields":'),
        b"[" * 100_000 + b"\n",
    ],
    ids=["empty", "not-json", "list", "format-2", "size-str", "no-upload-id", "no-format",
         "extra-field", "deep"],
)  # fmt: skip
def test_a_record_that_cannot_be_trusted_is_none(header: bytes):
    assert parse_record(header) is None


def test_a_part_beyond_the_file_or_outside_s3s_numbers_ends_the_parts_read():
    for bad in (stored(1, SIZE - 5, 10), stored(0, 0, 5 * MiB), stored(10_001, 0, 5 * MiB)):
        assert parse_record(RECORD.header() + bad.line()) == (RECORD, {})


def test_a_record_too_big_to_be_one_is_not_read():
    assert parse_record(RECORD.header() + b" " * (4 * MiB)) is None


def test_the_record_holds_no_header_value_only_a_digest_of_them():
    fields = {"x-amz-meta-owner": "alice", "Content-Type": "text/plain"}
    digest = fields_digest(fields)
    assert b"alice" not in RECORD.header()
    assert digest == fields_digest({k.upper(): v for k, v in reversed(fields.items())})
    assert digest != fields_digest({**fields, "x-amz-meta-owner": "bob"})


def test_record_names_differ_with_each_of_endpoint_bucket_key_path_and_secret():
    secret = os.urandom(32)
    base = ("http://h:1", "b", "k", "/p")
    name = record_tag(secret, *base)
    assert len(name) == 32
    assert name == record_tag(secret, *base)
    for i in range(4):
        other = list(base)
        other[i] += "x"
        assert record_tag(secret, *other) != name
    # No run of names joined another way makes the same tag.
    assert record_tag(secret, "http://h:1", "b", "k/p", "") != record_tag(secret, *base)
    assert record_tag(os.urandom(32), *base) != name


# -- which stored parts can be checked ----------------------------------------------------


def test_a_part_is_checked_by_the_services_crc32c_when_it_lists_one():
    mine = stored(4, 24 * MiB, 8 * MiB, crc32c="yZRlqg==")
    assert check_for(mine, ListedPart(4, 8 * MiB, ETAG, "yZRlqg==")) == "crc32c"
    # The service holds another part under the number than the one recorded.
    assert check_for(mine, ListedPart(4, 8 * MiB, ETAG, "AAAAAA==")) is None


def test_without_a_service_checksum_an_md5_etag_is_compared_but_never_an_encrypted_parts():
    listed = ListedPart(4, 8 * MiB, ETAG, None)
    assert check_for(stored(4, 24 * MiB, 8 * MiB), listed) == "md5"
    assert check_for(stored(4, 24 * MiB, 8 * MiB, opaque=True), listed) is None
    opaque_etag = ListedPart(4, 8 * MiB, '"nomd5-0123456789abcdef"', None)
    assert check_for(stored(4, 24 * MiB, 8 * MiB, etag=opaque_etag.etag), opaque_etag) is None


def test_another_size_or_etag_than_recorded_is_never_reused():
    mine = stored(4, 24 * MiB, 8 * MiB)
    assert check_for(mine, ListedPart(4, 8 * MiB - 1, ETAG, "AAAAAA==")) is None
    assert check_for(mine, ListedPart(4, 8 * MiB, '"ffff"', "AAAAAA==")) is None


# -- the parts kept and those sent again make one upload --------------------------------


def numbered(parts: list[Part]) -> list[int]:
    return [p.number for p in parts]


def assert_one_upload(kept: list[Part], todo: list[Part], size: int) -> None:
    """What CompleteMultipartUpload accepts: numbers 1..10,000, each once, ascending in
    bytes as in numbers, every part but the last at least 5 MiB."""
    parts = sorted(kept + todo, key=lambda p: p.number)
    assert len({p.number for p in parts}) == len(parts)
    assert all(1 <= p.number <= 10_000 for p in parts)
    assert covers(parts, size)
    assert all(p.length >= 5 * MiB for p in parts[:-1])
    assert all(p.length <= 5 << 30 for p in parts)


def test_nothing_stored_is_a_whole_new_plan():
    kept, todo = plan_rest(SIZE, 8 * MiB, [])
    assert kept == []
    assert_one_upload(kept, todo, SIZE)
    assert len(todo) == 8


def test_the_missing_parts_are_planned_between_the_stored_ones_with_their_numbers():
    # An adaptive upload's layout: the last MiB as part 10,000, then parts of 9 MiB.
    size = 7 * 9 * MiB + MiB
    layout = [Part(i, i * 9 * MiB, (i + 1) * 9 * MiB) for i in range(7)]
    probe = Part(9_999, 63 * MiB, size)
    stored_parts = [probe, layout[0], layout[1], layout[4]]
    kept, todo = plan_rest(size, 9 * MiB, stored_parts)
    assert numbered(kept) == [1, 2, 5, 10_000]
    assert_one_upload(kept, todo, size)
    assert [(p.start, p.stop) for p in todo] == [
        (p.start, p.stop) for p in (layout[2], layout[3], layout[5], layout[6])
    ]


def test_a_run_with_more_numbers_free_than_bytes_for_parts_is_sent_in_fewer_parts():
    parts = [Part(0, 0, 8 * MiB), Part(99, 20 * MiB, 28 * MiB)]
    kept, todo = plan_rest(28 * MiB, 8 * MiB, parts)
    assert numbered(kept) == [1, 100]
    assert_one_upload(kept, todo, 28 * MiB)
    assert [p.length for p in todo] == [12 * MiB]


def test_a_stored_part_after_a_run_too_short_for_a_part_is_sent_again():
    # Bytes 8 to 10 MiB between two stored parts cannot be a part of their own.
    parts = [Part(0, 0, 8 * MiB), Part(1, 10 * MiB, 18 * MiB), Part(2, 18 * MiB, 26 * MiB)]
    kept, todo = plan_rest(26 * MiB, 8 * MiB, parts)
    assert numbered(kept) == [1, 3]
    assert_one_upload(kept, todo, 26 * MiB)


def test_a_stored_part_with_no_number_free_before_its_run_is_sent_again():
    parts = [Part(0, 0, 8 * MiB), Part(1, 16 * MiB, 24 * MiB)]
    kept, todo = plan_rest(24 * MiB, 8 * MiB, parts)
    assert numbered(kept) == [1]
    assert_one_upload(kept, todo, 24 * MiB)


def test_parts_that_overlap_or_go_down_in_bytes_are_never_kept_together():
    parts = [Part(0, 0, 8 * MiB), Part(1, 4 * MiB, 12 * MiB), Part(4, 0, 6 * MiB)]
    kept, todo = plan_rest(40 * MiB, 8 * MiB, parts)
    assert numbered(kept) == [1]
    assert_one_upload(kept, todo, 40 * MiB)


def test_a_small_stored_part_is_kept_only_at_the_end():
    parts = [Part(0, 0, 3 * MiB), Part(9_999, 37 * MiB, 40 * MiB)]
    kept, todo = plan_rest(40 * MiB, 8 * MiB, parts)
    assert numbered(kept) == [10_000]
    assert_one_upload(kept, todo, 40 * MiB)


def test_everything_stored_leaves_nothing_to_send():
    parts = [Part(i, i * 8 * MiB, (i + 1) * 8 * MiB) for i in range(4)]
    kept, todo = plan_rest(32 * MiB, 8 * MiB, parts)
    assert (numbered(kept), todo) == ([1, 2, 3, 4], [])


def test_a_huge_file_keeps_within_ten_thousand_parts():
    size = 2 << 40  # 2 TiB: parts of at least 210 MiB
    parts = [Part(0, 0, 300 * MiB)]
    kept, todo = plan_rest(size, 8 * MiB, parts)
    assert numbered(kept) == [1]
    assert_one_upload(kept, todo, size)


# -- which stops keep an upload -----------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        KeyboardInterrupt(),
        errors.Cancelled("interrupted"),
        errors.ConnectError("refused"),
        errors.Timeout("read timed out"),
        errors.ProtocolError("connection broken"),
        errors.s3_error(503, "SlowDown"),
        errors.s3_error(500, "InternalError"),
        errors.s3_error(429, "TooManyRequests"),
        errors.s3_error(400, "RequestTimeout"),
        errors.s3_error(400, "ExpiredToken"),
    ],
    ids=repr,
)
def test_a_stop_a_later_run_can_get_past_keeps_the_upload(error: BaseException):
    assert keeps_upload(error)


@pytest.mark.parametrize(
    "error",
    [
        errors.SourceChangedError("the file changed"),
        FileNotFoundError(2, "No such file"),
        errors.s3_error(403, "AccessDenied"),
        errors.s3_error(404, "NoSuchBucket"),
        errors.s3_error(404, "NoSuchUpload"),
        errors.s3_error(400, "EntityTooSmall"),
        errors.InvalidArgument("bad"),
        RuntimeError("from progress"),
    ],
    ids=repr,
)
def test_a_final_stop_aborts_the_upload(error: BaseException):
    assert not keeps_upload(error)


# -- the command that discards a kept upload ---------------------------------------------------


@pytest.mark.parametrize(
    ("key", "upload_id"),
    [("k", "2~abc"), ("a dir/it's $HOME;*`x`", "a b'c"), ("-k\twith tab", "ZDUx+/=")],
)
def test_the_abort_command_a_kept_upload_names_splits_back_into_its_key_and_upload_id(
    key: str, upload_id: str
) -> None:
    """A POSIX shell gives the command exactly this key and upload id, whatever they
    hold: ``--upload-id`` names the one upload, not a prefix."""
    command = abort_command("b", key, upload_id)
    words = ["objsdk", "uploads", "abort", f"s3://b/{key}", "--upload-id", upload_id]
    assert shlex.split(command) == words
    advice = KeptUpload("b", key, upload_id, "/data/f.bin").advice()
    assert advice.endswith(f"; `{command}` discards it")
