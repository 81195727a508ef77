"""Writes through fsspec store an object only on a clean close: every way a user meets a
writer (text mode, ``fsspec.open``, compression, pandas, transactions) leaves nothing
behind when the code writing it fails. Against MinIO."""

from __future__ import annotations

from typing import Any

import fsspec
import pandas as pd
import pytest

from objsdk import Client
from objsdk.filesystem import ObjsdkFileSystem

pytestmark = pytest.mark.integration


class Boom(Exception):
    pass


@pytest.fixture
def options(local_minio: Any) -> dict[str, str]:
    return {
        "endpoint_url": local_minio.endpoint,
        "key": local_minio.access_key,
        "secret": local_minio.secret_key,
    }


@pytest.fixture
def fs(options: dict[str, str]) -> ObjsdkFileSystem:
    return ObjsdkFileSystem(**options, skip_instance_cache=True)


def _keys(client: Client, bucket: str) -> list[str]:
    return [e.key for e in client.list_objects(bucket)]


def test_a_text_mode_write_that_raises_stores_nothing(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    def write() -> None:
        with fs.open(f"{bucket}/t.txt", "w") as f:
            f.write("half a report\n" * 1000)
            raise Boom

    with pytest.raises(Boom):
        write()
    assert _keys(client, bucket) == []


def test_fsspec_open_binary_write_that_raises_stores_nothing(
    options: dict[str, str], client: Client, bucket: str
) -> None:
    def write() -> None:
        with fsspec.open(f"objsdk://{bucket}/b.bin", "wb", **options) as f:
            f.write(b"x" * 10_000)
            raise Boom

    with pytest.raises(Boom):
        write()
    assert _keys(client, bucket) == []


def test_fsspec_open_text_and_compressed_writes_that_raise_store_nothing(
    options: dict[str, str], client: Client, bucket: str
) -> None:
    def write_text() -> None:
        with fsspec.open(f"objsdk://{bucket}/t.txt", "w", **options) as f:
            f.write("text\n" * 1000)
            raise Boom

    def write_gzip() -> None:
        with fsspec.open(f"objsdk://{bucket}/c.gz", "wb", compression="gzip", **options) as f:
            f.write(b"compressed" * 1000)
            raise Boom

    for write in (write_text, write_gzip):
        with pytest.raises(Boom):
            write()
    assert _keys(client, bucket) == []


def test_pandas_to_csv_that_fails_midway_stores_nothing(
    options: dict[str, str], client: Client, bucket: str
) -> None:
    class Cell:
        def __init__(self, i: int) -> None:
            self.i = i

        def __str__(self) -> str:
            if self.i == 900:
                raise Boom("row 900")
            return f"cell-{self.i}"

    frame = pd.DataFrame({"id": range(1000), "cell": [Cell(i) for i in range(1000)]})
    with pytest.raises(Boom):
        frame.to_csv(f"objsdk://{bucket}/f.csv", index=False, storage_options=options)
    assert _keys(client, bucket) == []


def test_clean_closes_store_the_object(
    fs: ObjsdkFileSystem, options: dict[str, str], client: Client, bucket: str
) -> None:
    with fs.open(f"{bucket}/a.txt", "w") as f:
        f.write("text")
    with fsspec.open(f"objsdk://{bucket}/b.gz", "wt", compression="gzip", **options) as f:
        f.write("zipped")
    pd.DataFrame({"x": [1, 2]}).to_csv(
        f"objsdk://{bucket}/c.csv", index=False, storage_options=options
    )
    f = fs.open(f"{bucket}/d.bin", "wb")
    f.write(b"closed by hand")
    f.close()
    assert fs.cat(f"{bucket}/a.txt") == b"text"
    with fsspec.open(f"objsdk://{bucket}/b.gz", "rt", compression="gzip", **options) as g:
        assert g.read() == "zipped"
    assert fs.cat(f"{bucket}/c.csv") == b"x\n1\n2\n"
    assert fs.cat(f"{bucket}/d.bin") == b"closed by hand"


def test_a_file_written_while_handling_an_earlier_error_is_stored(
    fs: ObjsdkFileSystem, bucket: str
) -> None:
    # The rule is about an error raised while the file is open, not one already being
    # handled when it was opened (writing an error report from an except block).
    try:
        raise Boom("earlier")
    except Boom:
        with fs.open(f"{bucket}/report.txt", "w") as f:
            f.write("what went wrong")
    assert fs.cat(f"{bucket}/report.txt") == b"what went wrong"


def test_a_write_closed_by_hand_in_a_finally_after_an_error_stores_nothing(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    def write() -> None:
        f = fs.open(f"{bucket}/f.txt", "w")
        try:
            f.write("partial")
            raise Boom
        finally:
            f.close()

    with pytest.raises(Boom):
        write()
    assert _keys(client, bucket) == []


def test_a_transaction_stores_its_files_at_its_end_and_nothing_if_it_fails(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    with fs.transaction:
        with fs.open(f"{bucket}/one", "wb") as f:
            f.write(b"1")
        with fs.open(f"{bucket}/two", "w") as g:
            g.write("2")
        assert _keys(client, bucket) == []  # nothing before the transaction ends
    assert sorted(_keys(client, bucket)) == ["one", "two"]

    def fail_in_transaction() -> None:
        with fs.transaction:
            with fs.open(f"{bucket}/three", "wb") as f:
                f.write(b"3")
            raise Boom

    with pytest.raises(Boom):
        fail_in_transaction()
    assert sorted(_keys(client, bucket)) == ["one", "two"]


def test_autocommit_false_holds_the_upload_until_commit_or_discard(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    with fs.open(f"{bucket}/kept", "wb", autocommit=False) as kept:
        kept.write(b"1")
    with fs.open(f"{bucket}/dropped", "wb", autocommit=False) as dropped:
        dropped.write(b"2")
    assert _keys(client, bucket) == []
    kept.commit()
    dropped.discard()
    assert _keys(client, bucket) == ["kept"]
    with pytest.raises(ValueError, match="nothing to commit"):
        dropped.commit()  # a discarded upload cannot come back
    with pytest.raises(ValueError, match="nothing to commit"):
        kept.commit()
