"""``ObjsdkFileSystem``: the fsspec filesystem for ``objsdk://bucket/key`` URLs.

Installed with the ``fsspec`` extra and registered for the ``objsdk`` protocol through
the ``fsspec.specs`` entry point, so ``pandas.read_parquet("objsdk://bucket/data.parquet")``
just works. ``s3://`` belongs to s3fs and is never claimed here; call
:func:`register_s3_alias` to send ``s3://`` URLs to this class in your own process.

* Reads return objsdk's resilient :class:`~objsdk.ObjectFile` (seekable; a broken stream
  resumes from the next byte, pinned to the ETag seen when the file was opened).
* Writes go through :class:`~objsdk.filesystem.FileWriter` (bounded memory, multipart,
  stored only on a clean close: a failed write never leaves a partial object).
* ``cat_ranges`` fetches its ranges in parallel; ``put``/``get`` use the parallel,
  resumable upload and download.
* Storage options: ``endpoint_url``, ``key``, ``secret``, ``token``, ``region``,
  ``profile``, ``anon``, ``client_kwargs`` (for :class:`~objsdk.Client`; s3fs's
  ``client_kwargs={"endpoint_url": ..., "region_name": ...}`` is understood too),
  ``readahead``, ``parallel``, ``part_size``. Without them the usual chain applies: environment
  (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``...), then the AWS shared files.

Directories are implied by keys, as in s3fs: there are no empty directories, ``mkdir``
of a bare bucket name creates the bucket and is otherwise a no-op.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import fsspec  # type: ignore[import-untyped,unused-ignore]
from fsspec.callbacks import DEFAULT_CALLBACK  # type: ignore[import-untyped,unused-ignore]

from objsdk import Client, ObjectSummary, Prefix, errors
from objsdk._core.config import credentials_for, resolve_config
from objsdk._io.objectfile import open_pinned
from objsdk.filesystem.oserrors import as_oserror, translated
from objsdk.filesystem.writer import FileWriter

__all__ = ["ObjsdkFileSystem", "register_s3_alias"]

_PROTOCOLS = ("objsdk", "s3", "s3a")
MAX_COPY = 5 << 30


def _secret_for(endpoint_url: str | None, key: str) -> tuple[str, str | None]:
    """The secret (and token) this process has for access key ``key``."""
    try:
        return credentials_for(
            endpoint_url or "the endpoint", key, os.environ, home=os.path.expanduser("~")
        )
    except errors.InvalidArgument:
        shown = key[:4] + "..." if len(key) > 4 else "..."
        raise errors.InvalidArgument(
            f"the storage options name access key {shown} without its secret (an "
            "ObjsdkFileSystem is pickled without it unless made with pickle_credentials=True) "
            "and this process has none for that key: pass secret=..., or set "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or an AWS profile)"
        ) from None


def register_s3_alias() -> None:
    """Serve ``s3://`` (and ``s3a://``) URLs with :class:`ObjsdkFileSystem` in this process.

    Opt-in on purpose: the ``s3`` protocol is s3fs's, and this replaces it (clobber).
    """
    fsspec.register_implementation("s3", ObjsdkFileSystem, clobber=True)
    fsspec.register_implementation("s3a", ObjsdkFileSystem, clobber=True)


# Storage options that hold a secret: left out of pickles and to_dict()/to_json() unless
# pickle_credentials=True, as a pickled Client leaves out its secret key.
_SECRET_OPTIONS = ("secret", "password", "token")
_SECRET_CLIENT_KWARGS = (
    "secret_key",
    "session_token",
    "aws_secret_access_key",
    "aws_session_token",
)
# Cat_ranges' ranges in flight when the storage options set no ``parallel``.
CAT_RANGES_PARALLEL = 8


class ObjsdkFileSystem(fsspec.AbstractFileSystem):  # type: ignore[misc]
    """fsspec filesystem over objsdk (see the module docstring)."""

    protocol = ("objsdk",)
    root_marker = ""

    def __init__(
        self,
        endpoint_url: str | None = None,
        key: str | None = None,
        secret: str | None = None,
        token: str | None = None,
        region: str | None = None,
        profile: str | None = None,
        client_kwargs: dict[str, Any] | None = None,
        readahead: int | None = None,
        parallel: int | None = None,
        part_size: int | None = None,
        anon: bool = False,
        pickle_credentials: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # s3fs spells the endpoint and region inside client_kwargs (boto3's names).
        extra = dict(client_kwargs or {})
        endpoint_url = endpoint_url or extra.pop("endpoint_url", None)
        region = region or extra.pop("region_name", None)
        key = key or extra.pop("aws_access_key_id", None)
        secret = secret or extra.pop("aws_secret_access_key", None)
        token = token or extra.pop("aws_session_token", None)
        if anon:
            key = secret = token = None
        elif key is not None and secret is None:
            # Unpickled without its secret (the default): this process's own, for that key.
            secret, token = _secret_for(endpoint_url, key)
        cfg = resolve_config(
            os.environ,
            endpoint=endpoint_url,
            access_key=key,
            secret_key=secret,
            session_token=token,
            region=region,
            profile=profile,
        )
        if not cfg.endpoint:
            raise errors.InvalidArgument(
                "no endpoint: pass endpoint_url in the storage options, set "
                "AWS_ENDPOINT_URL, or put endpoint_url in ~/.aws/config"
            )
        self.endpoint_url = cfg.endpoint
        # None: the client's own defaults (adaptive read-ahead and parts in flight).
        self.readahead = readahead
        self.parallel = parallel
        self.part_size = part_size
        self.pickle_credentials = pickle_credentials
        options: dict[str, Any] = {**cfg.client_kwargs(), **extra}
        if anon:  # unsigned requests, for public buckets
            options.update(access_key=None, secret_key=None, session_token=None)
        self.client = Client(cfg.endpoint, pickle_credentials=pickle_credentials, **options)

    def __repr__(self) -> str:
        # The storage options hold the secret: show the endpoint only.
        return f"<ObjsdkFileSystem endpoint_url={self.endpoint_url!r}>"

    __str__ = __repr__

    # -- pickling and to_json(): no secret unless pickle_credentials=True ----------------

    def _shared_options(self) -> dict[str, Any]:
        options = dict(self.storage_options)
        if not self.pickle_credentials:
            for name in _SECRET_OPTIONS:
                options.pop(name, None)
            if isinstance(options.get("client_kwargs"), dict):
                options["client_kwargs"] = {
                    k: v
                    for k, v in options["client_kwargs"].items()
                    if k not in _SECRET_CLIENT_KWARGS
                }
        return options

    def __reduce__(self) -> tuple[Any, ...]:
        return fsspec.spec.make_instance, (type(self), self.storage_args, self._shared_options())

    def to_dict(self, *, include_password: bool = True) -> dict[str, Any]:
        """fsspec's JSON-able description: without the secret unless the filesystem was
        made with ``pickle_credentials=True``."""
        from fsspec.json import FilesystemJSONEncoder  # type: ignore[import-untyped,unused-ignore]

        out: dict[str, Any] = super().to_dict(include_password=include_password)
        for name in self.storage_options:
            out.pop(name, None)
        shared = self._shared_options()
        if not include_password:
            shared.pop("password", None)
        out.update(FilesystemJSONEncoder().make_serializable(shared))
        return out

    # -- paths ---------------------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = fsspec.utils.stringify_path(path)
        for protocol in _PROTOCOLS:
            if path.startswith(protocol + "://"):
                path = path[len(protocol) + 3 :]
                break
        return path.rstrip("/")

    def unstrip_protocol(self, name: str) -> str:
        return name if "://" in name else f"objsdk://{name}"

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> dict[str, Any]:
        return {}

    def split_path(self, path: str) -> tuple[str, str]:
        """``"bucket/dir/key"`` -> ``("bucket", "dir/key")``."""
        path = self._strip_protocol(path)
        bucket, _, key = path.partition("/")
        if not bucket:
            raise errors.InvalidArgument(f"no bucket in path {path!r}")
        return bucket, key

    # -- metadata ------------------------------------------------------------------------

    @staticmethod
    def _file_entry(bucket: str, obj: ObjectSummary) -> dict[str, Any]:
        return {
            "name": f"{bucket}/{obj.key}",
            "size": obj.size,
            "type": "file",
            "ETag": obj.etag,
            "LastModified": obj.last_modified,
            "mtime": obj.last_modified,
        }

    @staticmethod
    def _dir_entry(name: str) -> dict[str, Any]:
        return {"name": name.rstrip("/"), "size": 0, "type": "directory"}

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        if not path:
            entries = [
                {**self._dir_entry(b.name), "CreationDate": b.creation_date}
                for b in self.client.list_buckets()
            ]
        else:
            bucket, key = self.split_path(path)
            prefix = key + "/" if key else ""
            entries = []
            try:
                for e in self.client.list_objects(bucket, prefix=prefix, delimiter="/"):
                    if isinstance(e, Prefix):
                        entries.append(self._dir_entry(f"{bucket}/{e.prefix}"))
                    elif isinstance(e, ObjectSummary) and e.key != prefix:
                        entries.append(self._file_entry(bucket, e))
            except errors.S3Error as err:
                raise as_oserror(err, path) from err
            if not entries and key:
                info = self.info(path)  # a file lists as itself; raises if missing
                if info["type"] == "file":
                    entries = [info]
        return entries if detail else sorted(e["name"] for e in entries)

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        if not path:
            return self._dir_entry("")
        bucket, key = self.split_path(path)
        if not key:
            try:
                exists = self.client.bucket_exists(bucket)
            except errors.AccessDenied:
                exists = True  # it exists, we just may not HEAD it
            if not exists:
                raise FileNotFoundError(errno.ENOENT, f"no bucket {bucket!r}", path)
            return self._dir_entry(bucket)
        try:
            head = self.client.head_object(bucket, key)
        except (errors.NoSuchKey, errors.InvalidObjectName) as err:
            missing = err
        except errors.S3Error as err:
            raise as_oserror(err, path) from err
        else:
            return {
                "name": path,
                "size": head.size or 0,
                "type": "file",
                "ETag": head.etag,
                "LastModified": head.last_modified,
                "mtime": head.last_modified,
                "ContentType": head.content_type,
                "VersionId": head.version_id,
                "checksums": dict(head.checksums),
            }
        try:
            for _ in self.client.list_objects(bucket, prefix=key + "/", page_size=1):
                return self._dir_entry(path)
        except errors.S3Error as err:
            raise as_oserror(err, path) from err
        # Neither an object nor a prefix: the HEAD's answer says why.
        raise as_oserror(missing, path) from missing

    def find(
        self,
        path: str,
        maxdepth: int | None = None,
        withdirs: bool = False,
        detail: bool = False,
        **kwargs: Any,
    ) -> Any:
        path = self._strip_protocol(path)
        if maxdepth is not None or not path:
            return super().find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs)
        bucket, key = self.split_path(path)
        prefix = key + "/" if key else ""
        out: dict[str, dict[str, Any]] = {}
        try:
            for e in self.client.list_objects(bucket, prefix=prefix):
                if not isinstance(e, ObjectSummary):
                    continue
                if withdirs:
                    # Every "directory" between the path and the object.
                    parts = e.key[len(prefix) :].split("/")[:-1]
                    for i in range(1, len(parts) + 1):
                        d = f"{bucket}/{prefix}{'/'.join(parts[:i])}"
                        out.setdefault(d, self._dir_entry(d))
                if e.key.endswith("/"):
                    continue  # a directory marker object
                entry = self._file_entry(bucket, e)
                out[entry["name"]] = entry
        except errors.NoSuchBucket:
            return {} if detail else []
        if out and withdirs:
            out.setdefault(path, self._dir_entry(path))
        if not out and key:
            try:
                info = self.info(path)
            except FileNotFoundError:
                info = None
            if info is not None and info["type"] == "file":
                out[path] = info
        names = sorted(out)
        return {n: out[n] for n in names} if detail else names

    def created(self, path: str) -> Any:
        return self.info(path).get("LastModified")

    def modified(self, path: str) -> Any:
        return self.info(path).get("LastModified")

    def invalidate_cache(self, path: str | None = None) -> None:
        pass  # nothing is cached: every listing asks the server

    # -- directories (buckets) -----------------------------------------------------------

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        bucket, key = self.split_path(path)
        with translated(path):
            if not key or (create_parents and not self.client.bucket_exists(bucket)):
                self.client.create_bucket(bucket)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        bucket, key = self.split_path(path)
        with translated(path):
            if not self.client.bucket_exists(bucket):
                self.client.create_bucket(bucket)
            elif not key and not exist_ok:
                raise FileExistsError(errno.EEXIST, "bucket already exists", path)

    def rmdir(self, path: str) -> None:
        bucket, key = self.split_path(path)
        if not key:
            try:
                self.client.delete_bucket(bucket)
            except errors.S3Error as err:
                raise as_oserror(err, path) from err

    # -- reading -------------------------------------------------------------------------

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        bucket, key = self.split_path(path)
        if not key:
            raise IsADirectoryError(f"{path} is a bucket, not a file")
        if "r" in mode:
            try:
                head = self.client.head_object(bucket, key)
            except errors.S3Error as err:
                raise as_oserror(err, path) from err
            # Pinned to the version just seen: its ETag and size, no second HEAD.
            options: dict[str, Any] = {"readahead": kwargs.get("readahead", self.readahead)}
            if self.part_size:
                options["part_size"] = self.part_size
            return open_pinned(self.client, head, **options)
        if "a" in mode:
            raise NotImplementedError("objects cannot be appended to: write a new object")
        if "x" in mode and self.exists(path):
            # Checked, then written: not atomic against a concurrent writer.
            raise FileExistsError(f"{path} already exists")
        options = {} if self.parallel is None else {"parallel": self.parallel}
        if self.part_size:
            options["part_size"] = self.part_size
        if kwargs.get("content_type"):
            options["content_type"] = kwargs["content_type"]
        return FileWriter(self.client, bucket, key, autocommit=autocommit, **options)

    def cat_file(
        self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any
    ) -> bytes:
        bucket, key = self.split_path(path)
        try:
            if (start is not None and start < 0) or (end is not None and end < 0):
                size = self.client.head_object(bucket, key).size or 0
                start = None if start is None else (start if start >= 0 else max(0, size + start))
                end = None if end is None else (end if end >= 0 else max(0, size + end))
            offset = start or 0
            if end is not None and end <= offset:
                self.client.head_object(bucket, key)  # still report a missing file
                return b""
            length = None if end is None else end - offset
            return self.client.get_object(bucket, key, offset=offset, length=length)
        except errors.InvalidRange:
            return b""
        except errors.S3Error as err:
            raise as_oserror(err, path) from err

    def cat_ranges(
        self,
        paths: list[str],
        starts: Any,
        ends: Any,
        max_gap: int | None = None,
        on_error: str = "return",
        **kwargs: Any,
    ) -> list[Any]:
        """Fetch the byte ranges in parallel (one ranged GET each, ``parallel`` at once)."""
        if not isinstance(paths, list):
            raise TypeError("paths must be a list")
        if not isinstance(starts, list):
            starts = [starts] * len(paths)
        if not isinstance(ends, list):
            ends = [ends] * len(paths)
        if len(starts) != len(paths) or len(ends) != len(paths):
            raise ValueError("paths, starts and ends must have the same length")

        def one(args: tuple[str, int | None, int | None]) -> Any:
            try:
                return self.cat_file(*args)
            except Exception as e:
                if on_error == "return":
                    return e
                raise

        parallel = self.parallel or CAT_RANGES_PARALLEL
        with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(paths)))) as pool:
            return list(pool.map(one, zip(paths, starts, ends, strict=True)))

    def get_file(
        self,
        rpath: str,
        lpath: Any,
        callback: Any = DEFAULT_CALLBACK,
        outfile: Any = None,
        **kwargs: Any,
    ) -> None:
        bucket, key = self.split_path(rpath)
        if outfile is None and fsspec.utils.isfilelike(lpath):
            outfile = lpath
        if outfile is None and (not key or self.isdir(rpath)):
            os.makedirs(lpath, exist_ok=True)
            return
        try:
            if outfile is not None:
                with self._open(rpath, "rb") as f:
                    callback.set_size(f.size)
                    while chunk := f.read(1 << 20):
                        outfile.write(chunk)
                        callback.relative_update(len(chunk))
                return
            parent = os.path.dirname(os.fspath(lpath))
            if parent:
                os.makedirs(parent, exist_ok=True)
            self.client.download(
                bucket, key, os.fspath(lpath), parallel=self.parallel, progress=_progress(callback)
            )
        except errors.S3Error as err:
            raise as_oserror(err, rpath) from err

    # -- writing -------------------------------------------------------------------------

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        if mode == "create" and self.exists(path):
            raise FileExistsError(f"{path} already exists")
        bucket, key = self.split_path(path)
        try:
            self.client.upload(bucket, key, value, parallel=self.parallel)
        except errors.S3Error as err:
            raise as_oserror(err, path) from err

    def put_file(
        self,
        lpath: str,
        rpath: str,
        callback: Any = DEFAULT_CALLBACK,
        mode: str = "overwrite",
        **kwargs: Any,
    ) -> None:
        if mode == "create" and self.exists(rpath):
            raise FileExistsError(f"{rpath} already exists")
        if os.path.isdir(lpath):
            return  # directories are implied by keys
        bucket, key = self.split_path(rpath)
        if not key:
            raise IsADirectoryError(f"{rpath} is a bucket; give a key to upload to")
        try:
            self.client.upload(
                bucket, key, os.fspath(lpath), parallel=self.parallel, progress=_progress(callback)
            )
        except errors.S3Error as err:
            raise as_oserror(err, rpath) from err

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        b1, k1 = self.split_path(path1)
        b2, k2 = self.split_path(path2)
        if not k1 or self.isdir(path1):
            return  # directories are implied by keys
        try:
            size = self.client.head_object(b1, k1).size or 0
            if size <= MAX_COPY:
                self.client.copy_object(b1, k1, b2, k2)
                return
            with self._open(path1, "rb") as r, self.client.open_write(b2, k2) as w:
                while chunk := r.read(8 << 20):
                    w.write(chunk)
        except errors.S3Error as err:
            raise as_oserror(err, path1) from err

    def rm_file(self, path: str) -> None:
        bucket, key = self.split_path(path)
        if key:
            self.client.delete_object(bucket, key)

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        """Delete files (``delete_objects``, 1000 per request); with ``recursive``, a bare
        bucket name also deletes the bucket once it is empty."""
        paths = self.expand_path(path, recursive=recursive, maxdepth=maxdepth)
        by_bucket: dict[str, list[str]] = {}
        buckets: list[str] = []
        for p in paths:
            bucket, key = self.split_path(p)
            if key:
                by_bucket.setdefault(bucket, []).append(key)
            else:
                buckets.append(bucket)
        for bucket, keys in by_bucket.items():
            failed = self.client.delete_objects(bucket, keys)
            if failed:
                first = failed[0]
                raise OSError(
                    f"could not delete {len(failed)} of {len(keys)} keys in bucket {bucket!r}, "
                    f"e.g. {first.key!r}: {first.code}"
                )
        for bucket in buckets:
            self.rmdir(bucket)

    def sign(self, path: str, expiration: int = 100, **kwargs: Any) -> str:
        bucket, key = self.split_path(path)
        return self.client.presign(kwargs.get("method", "GET"), bucket, key, expires=expiration)


def _progress(callback: Any) -> Callable[[int, Any], None]:
    """An objsdk ``progress(done, total)`` reporting to an fsspec callback."""
    sized = False

    def report(done: int, total: Any) -> None:
        nonlocal sized
        if not sized and total is not None:
            callback.set_size(total)
            sized = True
        callback.absolute_update(done)

    return report
