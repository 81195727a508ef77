"""``FileWriter``: the :class:`~objsdk.ObjectWriter` that fsspec files are, storing the
object only on a clean close.

fsspec and the tools on it close files without saying why: ``TextIOWrapper.__exit__``,
``OpenFile.__exit__``, compression wrappers and pandas' handles all call ``close()``
whether the block that wrote succeeded or raised. So the writer asks Python: a
``close()`` that runs while an exception is propagating (``sys.exc_info()`` during a
``with`` exit or a ``finally``) that was not already being handled when the file was
opened aborts the upload, and nothing is stored. A file opened inside an ``except`` block
(writing an error report) still stores on its clean close.

In an fsspec transaction (``with fs.transaction:``, or ``autocommit=False``) a clean
``close()`` only holds the upload; the transaction's ``commit()`` stores it and its
``discard()`` aborts it.
"""

from __future__ import annotations

import sys
from typing import Any

from objsdk import errors
from objsdk._transfer.writer import ObjectWriter
from objsdk.filesystem.fileattrs import FileAttrs
from objsdk.filesystem.oserrors import as_oserror, translated

__all__ = ["FileWriter", "raising_since"]


def raising_since(handled_before: BaseException | None) -> bool:
    """True while an exception other than ``handled_before`` is propagating or handled."""
    current = sys.exc_info()[1]
    return current is not None and current is not handled_before


class FileWriter(ObjectWriter, FileAttrs):
    """An :class:`~objsdk.ObjectWriter` that commits only on a clean close (see the
    module docstring). ``autocommit=False`` holds the upload at ``close()`` until
    :meth:`commit` or :meth:`discard`. fsspec's file attributes: ``path``, ``fs``,
    ``mode``, ``blocksize``, ``loc`` (bytes written) and ``full_name``."""

    path: str
    fs: Any
    mode: str = "wb"

    def __init__(
        self, client: Any, bucket: str, key: str, *, autocommit: bool = True, **kw: Any
    ) -> None:
        super().__init__(client, bucket, key, **kw)
        self.autocommit = autocommit
        self._handled_at_open = sys.exc_info()[1]
        self._held = False  # closed by the caller, waiting for commit() or discard()

    @property
    def closed(self) -> bool:
        return self._held or super().closed

    def close(self) -> None:
        """Store the object, unless an exception raised since the file was opened is
        propagating (then abort), or the file is in a transaction (then hold)."""
        if self.closed:
            return
        if raising_since(self._handled_at_open):
            self.abort()
        elif self.autocommit:
            with translated(f"{self.bucket}/{self.key}"):
                super().close()
        else:
            self._held = True

    @property
    def blocksize(self) -> int:
        """The part size (fsspec's name for it)."""
        return self.part_size

    @property
    def version_id(self) -> str | None:
        """The stored object's version, once closed in a versioned bucket."""
        return self.info.version_id if self.info is not None else None

    def write(self, b: Any) -> int:
        try:
            return super().write(b)
        except errors.S3Error as err:
            raise as_oserror(err, f"{self.bucket}/{self.key}") from err

    def commit(self) -> None:
        """Store the upload, held or still open (called by fsspec's transaction); one
        already stored or discarded has nothing to commit (ValueError)."""
        if self.closed and not self._held:
            raise ValueError(f"nothing to commit for {self.bucket}/{self.key}: already closed")
        self._held = False
        with translated(f"{self.bucket}/{self.key}"):
            super().close()

    def discard(self) -> None:
        """Abort the upload, held or still open (called by fsspec's transaction)."""
        self._held = False
        self.abort()

    def __del__(self) -> None:
        # A held upload never committed is aborted like an unclosed one, never stored.
        self.__dict__["_held"] = False
        super().__del__()


def copy_existing(fs: Any, path: str, writer: FileWriter) -> None:
    """Start ``writer`` (opened with ``"ab"``) with the object's current bytes, if any.

    S3 cannot append: the appended object is a new one, the old bytes streamed in from a
    pinned read (so a concurrent replacement fails the append instead of mixing two
    versions), then what the caller writes. Nothing changes until the writer's clean
    close; a failure aborts it.
    """
    try:
        source = fs._open(path, "rb")
    except FileNotFoundError:
        return  # appending to nothing: a new object
    try:
        with source:
            while chunk := source.read(8 << 20):
                writer.write(chunk)
    except BaseException:
        writer.abort()
        raise
