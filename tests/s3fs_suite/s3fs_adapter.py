"""The thin adapter s3fs's own test module runs through: ``S3FileSystem`` is
ObjsdkFileSystem, the server is the runner's MinIO, and every test starts with no bucket
(where s3fs's suite resets moto). Loaded by run.py into the copied test module."""

from __future__ import annotations

from typing import Any

import fsspec

from objsdk import BucketNotEmpty, Client
from objsdk.filesystem import ObjsdkFileSystem

__all__ = ["S3FileSystem", "ThreadedMotoServer", "moto", "wipe"]


class S3FileSystem(ObjsdkFileSystem):  # type: ignore[misc]
    """ObjsdkFileSystem under s3fs's name; s3fs's constructor arguments are its own."""

    protocol = ("s3", "s3a", "objsdk")


class moto:  # the module's name in the suite
    """Stands for the moto package: the suite's "old moto" workarounds do not apply to a
    real server."""

    __version__ = "999"


class ThreadedMotoServer:
    """Stands for moto's server in the suite's fixture: the runner's MinIO is already up."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def wipe() -> None:
    """Delete every object version and bucket, as moto's reset does."""
    client = Client.from_env()
    for b in client.list_buckets():
        for _ in range(3):  # a test's last writes may still be landing
            for v in list(client.list_object_versions(b.name)):
                client.delete_object(b.name, v.key, version_id=v.version_id)
            try:
                client.delete_bucket(b.name)
                break
            except BucketNotEmpty:
                continue


# s3:// URLs (fsspec.open, url_to_fs) reach the adapter too, as they reach s3fs.
fsspec.register_implementation("s3", S3FileSystem, clobber=True)
