"""``get``, ``put``, ``copy``, ``cat`` and ``pipe`` of many files at once (a base of
ObjsdkFileSystem).

fsspec's own ``get``, ``put`` and ``copy`` decide which file goes where (globs,
``recursive``, ``maxdepth``, a trailing ``/``, lists): that is run unchanged, with
``get_file``, ``put_file`` and ``cp_file`` recording their calls instead of sending
anything (:func:`recording`). The recorded files are then transferred
:data:`FILES_AT_ONCE` at a time (``batch_size=`` sets it, as in s3fs), each with at
most :data:`PARTS_PER_FILE` parts in flight unless the filesystem's ``parallel`` says
otherwise: one file alone keeps the adaptive defaults.

Objects the listing showed to be small (up to
:data:`~objsdk._transfer.smallfile.SMALL_OBJECT`) are fetched by one verified GET each
and made durable together, as ``objsdk cp --recursive`` does it
(:mod:`objsdk._transfer.smallfile`: a temporary name, one ``syncfs`` per batch, then the
final name): a ``get`` that returns has every file on disk under its name, and none
ever holds a partial file. Larger ones go through ``Client.download``.

The first failure (or a KeyboardInterrupt) cancels the files not yet started and stops
those under way at their next progress report; it is raised once they have ended (an S3
error as the OSError :mod:`objsdk.filesystem.oserrors` decides).

``cat`` and ``pipe`` run ``cat_file`` and ``pipe_file`` :data:`FILES_AT_ONCE` at a
time, as s3fs gathers them (fsspec's own loops send one after another). A path naming
one version (``?versionId=``) is that file, never a glob (:meth:`ManyFiles.expand_path`).
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fsspec.callbacks import (  # type: ignore[import-untyped,unused-ignore]
    DEFAULT_CALLBACK,
    Callback,
)

from objsdk import errors
from objsdk._transfer.download_file import make_directory
from objsdk._transfer.download_stream import is_stream_file
from objsdk._transfer.smallfile import SMALL_OBJECT, Batch, download_small
from objsdk.filesystem.oserrors import translated

if TYPE_CHECKING:
    from objsdk import Client

__all__ = ["FILES_AT_ONCE", "PARTS_PER_FILE", "ManyFiles", "Plan", "recording"]

# Files in flight at once, as `objsdk cp --recursive` runs them (its --jobs default).
FILES_AT_ONCE = 16
# Parts in flight per file when several files share the connections: each file's own
# climb would only take bandwidth from the others.
PARTS_PER_FILE = 4


@dataclass
class Plan:
    """What fsspec's ``get``/``put``/``copy`` asked for: ``(source, destination,
    kwargs)`` per file, and what the listings along the way found, by name."""

    calls: list[tuple[str, Any, dict[str, Any]]] = field(default_factory=list)
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Directories a whole listing found, and whether each has a marker object (``key/``).
    folders: dict[str, bool] = field(default_factory=dict)


# Set only in the thread planning a get/put/copy (a thread starts with no context
# variables set): the workers' own calls run for real.
_PLAN: contextvars.ContextVar[Plan | None] = contextvars.ContextVar("objsdk_plan", default=None)


def recording() -> Plan | None:
    """The plan being recorded in this thread, if any (``get_file``, ``put_file``,
    ``cp_file`` and listings report to it)."""
    return _PLAN.get()


@contextmanager
def _planning() -> Iterator[Plan]:
    plan = Plan()
    token = _PLAN.set(plan)
    try:
        yield plan
    finally:
        _PLAN.reset(token)


class ManyFiles:
    """``get``, ``put`` and ``copy`` that run their files at once (see the module
    docstring); ``mv`` is fsspec's ``copy`` then ``rm``."""

    client: Client
    parallel: int | None

    if TYPE_CHECKING:

        def split_path(self, path: str) -> tuple[str, str, str | None]: ...
        def get_file(self, rpath: str, lpath: Any, **kwargs: Any) -> None: ...
        def put_file(self, lpath: str, rpath: str, **kwargs: Any) -> None: ...
        def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None: ...
        def isdir(self, path: str) -> bool: ...
        def cat_file(self, path: str, **kwargs: Any) -> bytes: ...
        def pipe_file(self, path: str, value: bytes, **kwargs: Any) -> dict[str, Any]: ...
        def _copy_sized(self, path1: str, path2: str, size: int) -> None: ...
        def _copy_marker(self, path1: str, path2: str) -> None: ...
        def _strip_protocol(self, path: Any) -> Any: ...
        def _get_object(self, rpath: str, lpath: str, callback: Any, parallel: Any) -> None: ...

    def get(
        self,
        rpath: Any,
        lpath: Any,
        recursive: bool = False,
        callback: Any = DEFAULT_CALLBACK,
        maxdepth: int | None = None,
        batch_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Copy files to local paths, as fsspec's ``get`` names them; ``batch_size``
        files at once (default :data:`FILES_AT_ONCE`)."""
        with _planning() as plan:
            if (version := self._version_named(rpath)) is not None:
                loc = _into(lpath, version, os.path.isdir)
                plan.calls.append((rpath, loc, kwargs))
            else:
                super().get(  # type: ignore[misc]
                    rpath, lpath, recursive=recursive, maxdepth=maxdepth, **kwargs
                )
        batch = Batch()
        # One file alone keeps the adaptive download; several share the connections.
        parallel = self.parallel or (PARTS_PER_FILE if len(plan.calls) > 1 else None)

        def one(r: str, loc: Any, kw: dict[str, Any], child: Any) -> None:
            entry = plan.entries.get(self._strip_protocol(r))
            if entry is None or kw or not isinstance(loc, (str, os.PathLike)):
                self.get_file(r, loc, callback=child, **kw)  # nothing known: as asked
            elif entry["type"] == "directory":
                bucket, key, _ = self.split_path(r)
                make_directory(os.fspath(loc), bucket, key)
            elif entry["size"] <= SMALL_OBJECT and not is_stream_file(os.fspath(loc)):
                bucket, key, version_id = self.split_path(r)
                with translated(r):
                    download_small(
                        self.client, bucket, key, os.fspath(loc), None, batch, version_id=version_id
                    )
            else:
                self._get_object(r, os.fspath(loc), child, parallel)

        try:
            if len(plan.calls) == 1:  # in this thread: nothing to run beside it
                [(r, loc, kw)] = plan.calls
                callback.set_size(1)
                with callback.branched(r, loc) as child:
                    one(r, loc, kw, child)
                callback.relative_update(1)
            else:
                _run(plan.calls, one, callback, batch_size)
        finally:
            batch.flush()
        if batch.failures:
            raise batch.failures[0][1]

    def expand_path(
        self, path: Any, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any
    ) -> list[str]:
        """fsspec's, but a path naming one version (``?versionId=``) is that file: fsspec
        would take its ``?`` for a glob and find nothing (as s3fs does), so ``cat``,
        ``rm``, ``get`` and ``copy`` of a version work as of any file."""
        given = [path] if isinstance(path, (str, os.PathLike)) else list(path)
        stripped = [self._strip_protocol(p) for p in given]
        versions = [p for p in stripped if self.split_path(p)[2]]
        if len(versions) == len(stripped):
            return sorted(set(versions))
        others = [p for p in stripped if p not in versions]
        found = super().expand_path(  # type: ignore[misc]
            others, recursive=recursive, maxdepth=maxdepth, **kwargs
        )
        return sorted(set(found) | set(versions))

    def _version_named(self, path: Any) -> str | None:
        """The key's last name if ``path`` names one version of an object
        (``?versionId=``), else None. fsspec would take its ``?`` for a glob and find
        nothing (as s3fs does): such a path is one file, taken as it is."""
        if not isinstance(path, str):
            return None
        _, key, version_id = self.split_path(path)
        return key.rsplit("/", 1)[-1] if version_id and key else None

    def cat(
        self,
        path: Any,
        recursive: bool = False,
        on_error: str = "raise",
        batch_size: int | None = None,
        **kwargs: Any,
    ) -> Any:
        """fsspec's ``cat``, the files fetched ``batch_size`` at a time (default
        :data:`FILES_AT_ONCE`) as in s3fs: ``{path: bytes}`` in the order fsspec expands
        the paths (directories left out), or the bytes of one path given as it is.
        ``on_error``: ``"raise"`` (the first failure, in that order, once the files
        under way have ended; none starts after it), ``"omit"``, or ``"return"`` (the
        exception in place)."""
        with _planning() as plan:
            paths = self.expand_path(path, recursive=recursive)
        # A directory the listing found holds no bytes: fsspec (and s3fs) would fail
        # its cat_file, so a recursive cat of a folder could never succeed.
        paths = [p for p in paths if plan.entries.get(p, {}).get("type") != "directory"]
        one = len(paths) == 1 and not isinstance(path, list)
        if one and paths[0] == self._strip_protocol(path):
            return self.cat_file(paths[0], **kwargs)
        stop = on_error == "raise"
        got = _each(paths, lambda p: self.cat_file(p, **kwargs), batch_size, stop)
        out: dict[str, Any] = {}
        for p, value in zip(paths, got, strict=True):
            if isinstance(value, Exception) and on_error != "return":
                continue  # "omit" (a "raise" has raised)
            out[p] = value
        return out

    def pipe(
        self, path: Any, value: bytes | None = None, batch_size: int | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """Store ``value`` at ``path``, or each value of a ``{path: bytes}`` dict,
        ``batch_size`` at a time (default :data:`FILES_AT_ONCE`) as in s3fs; return
        what ``pipe_file`` returned for each (``ETag``, ``VersionId``). The first
        failure is raised once the files under way have ended; none is started after."""
        if isinstance(path, str):
            path = {path: value}
        if not isinstance(path, dict):
            raise ValueError(f"path must be str or dict, got {type(path).__name__}")
        items = [(self._strip_protocol(k), v) for k, v in path.items()]
        return _each(items, lambda kv: self.pipe_file(kv[0], kv[1], **kwargs), batch_size, True)

    def put(
        self,
        lpath: Any,
        rpath: Any,
        recursive: bool = False,
        callback: Any = DEFAULT_CALLBACK,
        maxdepth: int | None = None,
        batch_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Copy local files to objects, as fsspec's ``put`` names them; ``batch_size``
        files at once (default :data:`FILES_AT_ONCE`)."""
        with _planning() as plan:
            super().put(  # type: ignore[misc]
                lpath, rpath, recursive=recursive, maxdepth=maxdepth, **kwargs
            )
        several = len(plan.calls) > 1

        def one(loc: str, r: str, kw: dict[str, Any], child: Any) -> None:
            if several and "max_concurrency" not in kw:
                kw = {**kw, "max_concurrency": self.parallel or PARTS_PER_FILE}
            self.put_file(loc, r, callback=child, **kw)

        _run(plan.calls, one, callback, batch_size if several else 1)

    def copy(
        self,
        path1: Any,
        path2: Any,
        recursive: bool = False,
        maxdepth: int | None = None,
        on_error: str | None = None,
        batch_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Copy objects on the server, as fsspec's ``copy`` names them (``on_error``:
        ``"ignore"`` skips sources not found, the default with ``recursive``);
        ``batch_size`` copies at once (default :data:`FILES_AT_ONCE`)."""
        if on_error is None:
            on_error = "ignore" if recursive else "raise"
        with _planning() as plan:
            if (version := self._version_named(path1)) is not None:
                plan.calls.append((path1, _into(path2, version, self.isdir), kwargs))
            else:
                super().copy(  # type: ignore[misc]
                    path1, path2, recursive=recursive, maxdepth=maxdepth, on_error="raise", **kwargs
                )

        def one(source: str, dest: str, kw: dict[str, Any], child: Any) -> None:
            name = self._strip_protocol(source)
            entry = plan.entries.get(name)
            try:
                if entry is not None and entry["type"] == "file" and not kw:
                    self._copy_sized(source, dest, entry["size"])  # no HEAD: listed
                elif name in plan.folders and not kw:
                    if plan.folders[name]:  # its marker, so an empty folder survives
                        self._copy_marker(source, dest)
                else:
                    self.cp_file(source, dest, **kw)
            except FileNotFoundError:
                if on_error == "raise":
                    raise

        _run(plan.calls, one, DEFAULT_CALLBACK, batch_size)


def _each(
    items: list[Any], fn: Callable[[Any], Any], batch_size: int | None, stop: bool
) -> list[Any]:
    """``fn(item)`` for every item, ``batch_size`` at a time (default
    :data:`FILES_AT_ONCE`); the results in the items' order, an ``Exception`` in place
    of a result where one was raised. With ``stop``, the first failure (in the items'
    order) is raised instead, once the calls under way have ended; no call starts after
    a failure."""
    if not items:
        return []
    failed = threading.Event()

    def run(item: Any) -> Any:
        if stop and failed.is_set():
            raise errors.Cancelled("not started: another file failed")
        try:
            return fn(item)
        except Exception:
            failed.set()
            raise

    workers = max(1, min(batch_size or FILES_AT_ONCE, len(items)))
    with ThreadPoolExecutor(workers, thread_name_prefix="objsdk-files") as pool:
        futures = [pool.submit(run, item) for item in items]
        try:
            wait(futures)
        except BaseException:  # Ctrl-C: nothing more starts
            failed.set()
            for future in futures:
                future.cancel()
            raise
    out: list[Any] = []
    for future in futures:
        error = future.exception()
        if error is None:
            out.append(future.result())
        elif not isinstance(error, Exception) or (stop and not isinstance(error, errors.Cancelled)):
            raise error
        else:
            out.append(error)
    return out


def _into(dest: Any, name: str, is_dir: Callable[[str], bool]) -> Any:
    """Where one file goes, as fsspec names it: into ``dest`` as ``name`` if ``dest``
    ends with a separator or is a directory, else ``dest`` itself."""
    if not isinstance(dest, (str, os.PathLike)):
        return dest
    path = os.fspath(dest)
    if path.endswith(("/", os.sep)) or is_dir(path):
        return os.path.join(path, name)
    return path


def _run(
    calls: list[tuple[str, Any, dict[str, Any]]],
    one: Callable[[Any, Any, dict[str, Any], Any], None],
    callback: Any,
    batch_size: int | None,
) -> None:
    """``one(source, destination, kwargs, child_callback)`` for every call, ``batch_size``
    at a time; ``callback`` counts the files done. The first failure (or a
    KeyboardInterrupt while waiting) cancels the calls not started and stops those under
    way at their next progress report (a download keeps its resumable temp file, an
    upload aborts its multipart upload); it is raised once they have ended."""
    callback.set_size(len(calls))
    if not calls:
        return
    workers = max(1, min(batch_size or FILES_AT_ONCE, len(calls)))
    stop = threading.Event()

    def run(source: Any, dest: Any, kw: dict[str, Any]) -> None:
        if stop.is_set():
            raise errors.Cancelled("not started: another file failed")
        with callback.branched(source, dest) as child:
            one(source, dest, kw, _Stoppable(child, stop))

    pool = ThreadPoolExecutor(workers, thread_name_prefix="objsdk-files")
    try:
        pending = {pool.submit(run, *call) for call in calls}
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for future in done:
                future.result()  # the first failure leaves here
                callback.relative_update(1)
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class _Stoppable(Callback):  # type: ignore[misc]
    """A file's progress callback that stops its transfer once ``stop`` is set."""

    def __init__(self, inner: Any, stop: threading.Event) -> None:
        super().__init__()
        self._inner = inner
        self._stop = stop

    def set_size(self, size: Any) -> None:
        self._inner.set_size(size)

    def absolute_update(self, value: Any) -> None:
        if self._stop.is_set():
            raise errors.Cancelled("stopped: another file failed")
        self._inner.absolute_update(value)

    def relative_update(self, inc: int = 1) -> None:
        if self._stop.is_set():
            raise errors.Cancelled("stopped: another file failed")
        self._inner.relative_update(inc)
