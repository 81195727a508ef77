"""fsspec's own abstract test suite (copy, get, put, open, pipe) on objsdk against MinIO."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Any

import fsspec.tests.abstract as abstract
import pytest

from objsdk.filesystem import ObjsdkFileSystem

pytestmark = pytest.mark.integration


class ObjsdkFixtures(abstract.AbstractFixtures):  # type: ignore[misc]
    @pytest.fixture
    def fs(self, s3_server: Any) -> ObjsdkFileSystem:
        return ObjsdkFileSystem(
            endpoint_url=s3_server.endpoint,
            key=s3_server.access_key,
            secret=s3_server.secret_key,
            skip_instance_cache=True,
        )

    @pytest.fixture
    def fs_path(self, bucket: str) -> str:
        return bucket

    @pytest.fixture
    def fs_join(self) -> Callable[..., str]:
        return posixpath.join

    @pytest.fixture
    def supports_empty_directories(self) -> bool:
        return False


class TestObjsdkCopy(abstract.AbstractCopyTests, ObjsdkFixtures):  # type: ignore[misc]
    pass


class TestObjsdkGet(abstract.AbstractGetTests, ObjsdkFixtures):  # type: ignore[misc]
    pass


class TestObjsdkPut(abstract.AbstractPutTests, ObjsdkFixtures):  # type: ignore[misc]
    pass


class TestObjsdkOpen(abstract.AbstractOpenTests, ObjsdkFixtures):  # type: ignore[misc]
    pass


class TestObjsdkPipe(abstract.AbstractPipeTests, ObjsdkFixtures):  # type: ignore[misc]
    pass
