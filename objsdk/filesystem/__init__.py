"""An fsspec filesystem on objsdk: ``objsdk://bucket/key`` for pandas, pyarrow and Dask.

Installed with the ``fsspec`` extra and registered for the ``objsdk`` protocol through
the ``fsspec.specs`` entry point (``objsdk.filesystem:ObjsdkFileSystem``), so
``pandas.read_parquet("objsdk://bucket/data.parquet")`` just works. ``s3://`` belongs to
s3fs and is never claimed here; call :func:`register_s3_alias` to send ``s3://`` URLs to
this class in your own process. See docs/fsspec.md.
"""

from objsdk.filesystem.reader import FileReader
from objsdk.filesystem.spec import ObjsdkFileSystem, register_s3_alias
from objsdk.filesystem.writer import FileWriter

__all__ = ["FileReader", "FileWriter", "ObjsdkFileSystem", "register_s3_alias"]
