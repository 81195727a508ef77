"""ObjsdkFileSystem where s3fs code meets it: exception texts, what a pickle or to_json()
carries, defaults, info keys. Against MinIO."""

from __future__ import annotations

import errno
import json
import pickle
from typing import Any

import fsspec
import pytest

from objsdk import Client, errors
from objsdk._core.sizes import DEFAULT_WRITER_PARALLEL
from objsdk.filesystem import ObjsdkFileSystem

pytestmark = pytest.mark.integration


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


# -- exceptions: the server's words in str(exc), the objsdk error as __cause__ ----------


def test_a_missing_key_is_file_not_found_with_the_s3_code_and_request_id(
    fs: ObjsdkFileSystem, bucket: str
) -> None:
    with pytest.raises(FileNotFoundError) as caught:
        fs.cat_file(f"{bucket}/nope")
    exc = caught.value
    assert exc.errno == errno.ENOENT
    assert exc.filename == f"{bucket}/nope"
    assert isinstance(exc.__cause__, errors.NoSuchKey)
    assert "NoSuchKey" in str(exc)
    assert "None" not in str(exc)
    assert exc.__cause__.request_id
    assert exc.__cause__.request_id in str(exc)


def test_info_and_open_of_a_missing_key_say_no_such_key(fs: ObjsdkFileSystem, bucket: str) -> None:
    for call in (fs.info, fs.open):
        with pytest.raises(FileNotFoundError) as caught:
            call(f"{bucket}/nope")
        assert "NoSuchKey" in str(caught.value)
        assert isinstance(caught.value.__cause__, errors.NoSuchKey)


def test_a_wrong_secret_is_permission_error_naming_the_signature(
    local_minio: Any, bucket: str
) -> None:
    fs = ObjsdkFileSystem(
        endpoint_url=local_minio.endpoint,
        key=local_minio.access_key,
        secret="wrong-" + local_minio.secret_key,
        skip_instance_cache=True,
    )
    with pytest.raises(PermissionError) as caught:
        fs.ls(bucket)
    assert caught.value.errno == errno.EACCES
    assert "SignatureDoesNotMatch" in str(caught.value)
    assert isinstance(caught.value.__cause__, errors.AccessDenied)
    assert local_minio.secret_key not in str(caught.value)


def test_bucket_errors_map_to_exists_and_not_empty(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    with pytest.raises(FileExistsError) as exists:
        fs.mkdir(bucket)
    assert "BucketAlreadyOwnedByYou" in str(exists.value) or "BucketAlreadyExists" in str(
        exists.value
    )
    client.put_object(bucket, "k", b"x")
    with pytest.raises(OSError, match="BucketNotEmpty") as full:
        fs.rmdir(bucket)
    assert full.value.errno == errno.ENOTEMPTY


# -- no secret in a pickle or to_json() unless asked for ---------------------------------


def test_pickle_and_to_json_carry_no_secret_by_default(
    fs: ObjsdkFileSystem, options: dict[str, str], client: Client, bucket: str
) -> None:
    client.put_object(bucket, "p", b"pickled")
    blob = pickle.dumps(fs)
    text = fs.to_json()
    assert options["secret"].encode() not in blob
    assert options["secret"] not in text
    assert json.loads(text)["key"] == options["key"]
    # The copy finds the secret for its access key in this process's environment (the
    # session sets AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, as a deployment would).
    assert pickle.loads(blob).cat_file(f"{bucket}/p") == b"pickled"
    assert fsspec.AbstractFileSystem.from_json(text).cat_file(f"{bucket}/p") == b"pickled"


def test_secrets_inside_client_kwargs_are_left_out_too(
    local_minio: Any, options: dict[str, str]
) -> None:
    fs = ObjsdkFileSystem(
        key=local_minio.access_key,
        client_kwargs={
            "endpoint_url": local_minio.endpoint,
            "aws_secret_access_key": local_minio.secret_key,
        },
        skip_instance_cache=True,
    )
    assert local_minio.secret_key.encode() not in pickle.dumps(fs)
    assert local_minio.secret_key not in fs.to_json()


def test_pickle_credentials_true_carries_the_secret(options: dict[str, str]) -> None:
    fs = ObjsdkFileSystem(**options, pickle_credentials=True, skip_instance_cache=True)
    assert options["secret"].encode() in pickle.dumps(fs)
    assert json.loads(fs.to_json())["secret"] == options["secret"]


def test_an_unpickled_filesystem_without_the_secret_anywhere_says_what_to_set(
    fs: ObjsdkFileSystem, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    blob = pickle.dumps(fs)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    ObjsdkFileSystem.clear_instance_cache()  # else an earlier copy is handed back
    with pytest.raises(ValueError, match="pickle_credentials=True") as caught:
        pickle.loads(blob)
    assert fs.storage_options["secret"] not in str(caught.value)


# -- the client's defaults unless the caller passes a value ------------------------------


def test_reads_and_writes_use_the_clients_defaults(
    fs: ObjsdkFileSystem, client: Client, bucket: str
) -> None:
    client.put_object(bucket, "d", b"defaults")
    with fs.open(f"{bucket}/d") as f:
        assert f.readahead is None  # adaptive, as Client.open
    with fs.open(f"{bucket}/w", "wb") as w:
        assert w.parallel == DEFAULT_WRITER_PARALLEL  # as Client.open_write


def test_upload_and_download_adapt_unless_parallel_is_given(
    fs: ObjsdkFileSystem, options: dict[str, str], bucket: str, tmp_path: Any
) -> None:
    seen: list[Any] = []

    def spy(real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            seen.append(kwargs.get("parallel"))
            return real(*args, **kwargs)

        return call

    src = tmp_path / "src"
    src.write_bytes(b"up and down")
    for parallel, expected in ((None, None), (3, 3)):
        given = {} if parallel is None else {"parallel": parallel}
        fs = ObjsdkFileSystem(**options, **given, skip_instance_cache=True)
        fs.client.upload = spy(fs.client.upload)  # type: ignore[method-assign]
        fs.client.download = spy(fs.client.download)  # type: ignore[method-assign]
        fs.put_file(str(src), f"{bucket}/u")
        fs.get_file(f"{bucket}/u", str(tmp_path / "back"))
        assert seen == [expected, expected]
        seen.clear()
        with fs.open(f"{bucket}/u", readahead=2) as f:
            assert f.readahead == 2
