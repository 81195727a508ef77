"""``objsdk._transfer.sources``: which strategy reads each kind of upload source, and
what each promises before a byte is sent. What goes on the wire is test_upload.py's."""

from __future__ import annotations

import array
import io
import os
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import pytest

import objsdk
from objsdk._core.parts import Part
from objsdk._transfer.sources import (
    FileSource,
    MemorySource,
    StreamSource,
    UnsizedStreamSource,
    open_source,
    parts_until_the_end,
)
from objsdk.errors import SourceChangedError

MiB = 1 << 20


@pytest.fixture
def pipe() -> Iterator[tuple[io.BufferedReader, int]]:
    r, w = os.pipe()
    with open(r, "rb") as reader:
        yield reader, w


def test_bytes_like_data_is_a_memory_source_over_the_same_memory():
    data = bytearray(b"abcdef")
    with open_source(data, "b", "k") as src:
        assert isinstance(src, MemorySource)
        assert src.size == 6
        assert src.any_order
        data[0] = ord("z")  # a view, not a copy
        assert bytes(src.view) == b"zbcdef"


def test_a_view_of_wider_items_is_read_as_its_bytes():
    numbers = array.array("I", [1, 2, 3])
    with open_source(memoryview(numbers), "b", "k") as src:
        assert isinstance(src, MemorySource)
        assert bytes(src.view) == numbers.tobytes()


def test_a_non_contiguous_buffer_is_refused_naming_bucket_and_key():
    strided = memoryview(bytearray(8))[::2]
    with (
        pytest.raises(objsdk.InvalidArgument, match=r"contiguous.*'b'.*'k'"),
        open_source(strided, "b", "k"),
    ):
        pass


def test_a_bytesio_is_its_buffer_from_its_position_and_is_left_at_its_end():
    bio = io.BytesIO(b"0123456789")
    bio.seek(4)
    with open_source(bio, "b", "k") as src:
        assert isinstance(src, MemorySource)
        assert bytes(src.view) == b"456789"
    assert bio.tell() == 10


def test_a_path_is_a_file_source_stamped_with_size_and_mtime(tmp_path: Path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    st = path.stat()
    with open_source(path, "b", "k") as src:
        assert isinstance(src, FileSource)
        assert (src.size, src.start, src.any_order) == (100, 0, True)
        assert src.stamp == (st.st_size, st.st_mtime_ns)
        src.check_unchanged()


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("nope", FileNotFoundError),
        ("a-file/x", NotADirectoryError),
        (".", IsADirectoryError),
    ],
    ids=["missing", "parent is a file", "a directory"],
)
def test_a_path_that_cannot_be_opened_is_python_s_own_error_naming_it(
    tmp_path: Path, name: str, error: type[OSError]
):
    # A fault of the path itself, as open(path, "rb") raises it (docs/errors.md, "Not
    # objsdk errors"); before: InvalidArgument, a ValueError.
    (tmp_path / "a-file").write_bytes(b"")
    path = tmp_path / name
    with pytest.raises(error) as info, open_source(path, "b", "k"):
        pass
    assert not isinstance(info.value, ValueError)
    assert info.value.filename == str(path)


def test_a_text_or_closed_file_is_refused_naming_it_before_anything_is_read(tmp_path: Path):
    # Before: TypeError "a bytes-like object is required, not 'str'", and ValueError
    # "readinto of closed file", from inside a part.
    path = tmp_path / "f.txt"
    path.write_text("text")
    closed = open(path, "rb")  # noqa: SIM115 - closed at once
    closed.close()
    with open(path) as text:
        for source, says in [(text, "text file, open it with 'rb'"), (closed, "closed file")]:
            with (
                pytest.raises(objsdk.InvalidArgument, match=rf"{says}.*'b', key 'k'"),
                open_source(source, "b", "k"),  # type: ignore[arg-type]
            ):
                pass
    with (
        pytest.raises(objsdk.InvalidArgument, match="text file"),
        open_source(io.StringIO("x"), "b", "k"),  # type: ignore[arg-type]
    ):
        pass


def test_an_open_file_is_read_from_its_position_and_left_at_its_end(tmp_path: Path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    with open(path, "rb") as f:
        f.seek(30)
        with open_source(f, "b", "k") as src:
            assert isinstance(src, FileSource)
            assert (src.size, src.start) == (70, 30)
        assert f.tell() == 100


def test_a_file_that_grew_after_it_was_opened_is_a_source_change(tmp_path: Path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    with open_source(path, "b", "k") as src:
        with open(path, "ab") as f:
            f.write(b"more")
        with pytest.raises(SourceChangedError, match="size 100 -> 104"):
            src.check_unchanged()


def test_a_seekable_stream_without_a_file_is_read_in_order_from_its_position():
    stream = io.BufferedReader(io.BytesIO(b"0123456789"))  # type: ignore[arg-type]
    stream.seek(2)
    with open_source(stream, "b", "k") as src:
        assert isinstance(src, StreamSource)
        assert (src.size, src.start, src.any_order) == (8, 2, False)
    assert stream.tell() == 10


def test_a_stream_that_cannot_seek_has_no_size_and_is_read_in_order(pipe):
    reader, w = pipe
    os.close(w)
    with open_source(reader, "b", "k") as src:
        assert isinstance(src, UnsizedStreamSource)
        assert src.size is None
        assert not src.any_order


def test_a_stream_of_unknown_size_is_one_put_only_if_it_ends_within_its_first_part(pipe):
    reader, w = pipe
    os.write(w, b"y" * 1000)
    os.close(w)
    with open_source(reader, "b", "k") as src:
        # Whatever the threshold: only the stream's end tells.
        assert src.one_put(0, 1000 + 1)
    r2, w2 = os.pipe()
    os.write(w2, b"y" * 1000)
    os.close(w2)
    with open(r2, "rb") as reader2, open_source(reader2, "b", "k") as src2:
        assert not src2.one_put(1 << 40, 1000)


def test_sized_sources_take_one_put_below_the_threshold_and_always_when_empty():
    with open_source(b"x" * 10, "b", "k") as src:
        assert src.one_put(11, 5 * MiB)
        assert not src.one_put(10, 5 * MiB)
    with open_source(b"", "b", "k") as empty:
        assert empty.one_put(0, 5 * MiB)


def test_the_parts_of_a_stream_of_unknown_size_follow_one_another_without_end():
    parts = list(islice(parts_until_the_end(5), 3))
    assert parts == [Part(0, 0, 5), Part(1, 5, 10), Part(2, 10, 15)]
