"""``ObjsdkFileSystem``: the fsspec filesystem for ``objsdk://bucket/key`` URLs.

* Reads return a :class:`~objsdk.filesystem.reader.FileReader`, objsdk's resilient
  :class:`~objsdk.ObjectFile` (seekable; a broken stream resumes from the next byte,
  pinned to the version seen when the file was opened), which fsspec's caches can chain.
* Writes go through :class:`~objsdk.filesystem.FileWriter` (bounded memory, multipart,
  stored only on a clean close: a failed write never leaves a partial object); ``"ab"``
  stores the old bytes and the new ones as one new object.
* ``cat_ranges`` fetches its ranges in parallel; ``put``/``get`` run many files at once
  (:mod:`objsdk.filesystem.many`), each through the parallel, resumable upload and
  download.
* Storage options: objsdk's (``endpoint_url``, ``key``, ``secret``, ``token``, ``region``,
  ``profile``, ``anon``, ``client_kwargs``, ``readahead``, ``parallel``, ``part_size``,
  ``pickle_credentials``) and s3fs's, each honoured or refused by name
  (:mod:`objsdk.filesystem.options`). Without them the usual chain applies: environment
  (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``...), then the AWS shared files.
* ``version_aware=True``: paths may name a version (``bucket/key?versionId=...``), and
  ``ls``/``find`` take ``versions=True``, as in s3fs.

Directories are implied by keys, as in s3fs: there are no empty directories, ``mkdir``
of a bare bucket name creates the bucket and is otherwise a no-op.
"""

from __future__ import annotations

import errno
import mimetypes
from itertools import islice
from typing import Any

import fsspec  # type: ignore[import-untyped,unused-ignore]

from objsdk import Client, errors
from objsdk._core.metadata import standard_headers
from objsdk._core.pin import VersionPin
from objsdk.filesystem import entries
from objsdk.filesystem.extras import S3fsExtras
from objsdk.filesystem.listing import Listing
from objsdk.filesystem.many import ManyFiles
from objsdk.filesystem.options import (
    OPEN_READ_OPTIONS,
    OPEN_WRITE_OPTIONS,
    Settings,
    check_cache_type,
    client_config,
    parse_storage_options,
    sse_from_params,
    write_options,
)
from objsdk.filesystem.oserrors import translated
from objsdk.filesystem.reader import FileReader
from objsdk.filesystem.transfers import Transfers
from objsdk.filesystem.writer import FileWriter, copy_existing

__all__ = ["ObjsdkFileSystem", "register_s3_alias"]

_PROTOCOLS = ("objsdk", "s3", "s3a")
# What starts a version in a path, as in s3fs (any other "?" belongs to the key).
_VERSION = "?versionId="
# The binary modes _open is given (fsspec's open turns "r", "w", "rt"... into them): an
# object is read, or written whole; there is no update in place ("r+b") on S3.
_MODES = frozenset({"rb", "wb", "xb", "ab"})
# Storage options that hold a secret: left out of pickles and to_dict()/to_json() unless
# pickle_credentials=True, as a pickled Client leaves out its secret key.
_SECRET_OPTIONS = ("secret", "password", "token")
_SECRET_CLIENT_KWARGS = (
    "secret_key",
    "session_token",
    "aws_secret_access_key",
    "aws_session_token",
)
# The SSE-C key is never pickled, whatever pickle_credentials says (as Client's).
_NEVER_PICKLED = ("SSECustomerKey", "SSECustomerKeyMD5")
# s3fs's default block size for reads and writes (50 MiB) is not objsdk's: files read in
# parts of the client's read-ahead size unless default_block_size or block_size is given.
DEFAULT_BLOCK_SIZE = 8 << 20


def register_s3_alias() -> None:
    """Serve ``s3://`` (and ``s3a://``) URLs with :class:`ObjsdkFileSystem` in this process.

    Opt-in on purpose: the ``s3`` protocol is s3fs's, and this replaces it (clobber).
    """
    fsspec.register_implementation("s3", ObjsdkFileSystem, clobber=True)
    fsspec.register_implementation("s3a", ObjsdkFileSystem, clobber=True)


class ObjsdkFileSystem(S3fsExtras, ManyFiles, Listing, Transfers, fsspec.AbstractFileSystem):  # type: ignore[misc]
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
        fsspec_own = {k: kwargs.pop(k) for k in ("add_docs", "add_aliases") if k in kwargs}
        super().__init__(**fsspec_own)
        settings = parse_storage_options(
            key=key,
            secret=secret,
            token=token,
            endpoint_url=endpoint_url,
            region=region,
            anon=anon,
            client_kwargs=client_kwargs,
            parallel=parallel,
            s3fs=kwargs,
        )
        config = client_config(settings, profile=profile, pickle_credentials=pickle_credentials)
        self.endpoint_url = config.endpoint
        self.settings: Settings = settings
        # None: the client's own defaults (adaptive read-ahead and parts in flight).
        self.readahead = readahead
        self.parallel = settings.parallel
        self.part_size = part_size
        self.version_aware = settings.version_aware
        self.blocksize = settings.block_size or part_size or DEFAULT_BLOCK_SIZE
        self.pickle_credentials = pickle_credentials
        self.client = Client.from_config(config)

    def __repr__(self) -> str:
        # The storage options hold the secret: show the endpoint only.
        return f"<ObjsdkFileSystem endpoint_url={self.endpoint_url!r}>"

    __str__ = __repr__

    # -- pickling and to_json(): no secret unless pickle_credentials=True ----------------

    def _shared_options(self) -> dict[str, Any]:
        options = dict(self.storage_options)
        extra = options.get("s3_additional_kwargs")
        if isinstance(extra, dict):
            options["s3_additional_kwargs"] = {
                k: v for k, v in extra.items() if k not in _NEVER_PICKLED
            }
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
        made with ``pickle_credentials=True``, and never with an SSE-C key."""
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
        # "/bucket/key" names the same object, as s3fs's split_path takes it.
        return path.strip("/")

    def unstrip_protocol(self, name: str) -> str:
        return name if "://" in name else f"objsdk://{name}"

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> dict[str, Any]:
        # As s3fs: a URL naming a version makes the filesystem version aware.
        return {"version_aware": True} if _VERSION in str(path) else {}

    def split_path(self, path: str) -> tuple[str, str, str | None]:
        """``"bucket/dir/key?versionId=v"`` -> ``("bucket", "dir/key", "v")``, as s3fs:
        only ``?versionId=`` starts a version (taken as it is written), so a key may
        hold ``?`` (``q?.txt``), and every name ``find`` gives can be opened."""
        path = self._strip_protocol(path)
        path, _, version = path.partition(_VERSION)
        version_id = version or None
        self._check_version_aware(version_id)
        bucket, _, key = path.partition("/")
        if not bucket:
            raise errors.InvalidArgument(f"no bucket in path {path!r}")
        return bucket, key, version_id

    def _check_version_aware(self, version_id: str | None) -> None:
        if version_id and not self.version_aware:
            raise ValueError(
                f"version {version_id!r} given to a filesystem made without "
                "version_aware=True (as s3fs, versions need it)"
            )

    def _parent(self, path: str) -> Any:
        return super()._parent(self._strip_protocol(path).partition(_VERSION)[0])

    # -- writes and the cache -------------------------------------------------------------

    def touch(self, path: str, truncate: bool = True, **kwargs: Any) -> None:
        """Store an empty object; ``truncate=False`` on an existing one is refused (S3
        cannot change an object's date without rewriting it), as s3fs does."""
        if not truncate and self.exists(path):
            raise ValueError(f"touch(truncate=False) of the existing object {path!r}")
        with self.open(path, "wb", **kwargs):
            pass

    def invalidate_cache(self, path: str | None = None) -> None:
        pass  # nothing is cached: every listing asks the server

    # -- directories (buckets) -----------------------------------------------------------

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        bucket, key, _ = self.split_path(path)
        with translated(path):
            if not key:
                self.client.create_bucket(bucket)
            elif not self.client.bucket_exists(bucket):
                if not create_parents:
                    raise FileNotFoundError(errno.ENOENT, "no such bucket", path)
                self.client.create_bucket(bucket)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        bucket, key, _ = self.split_path(path)
        with translated(path):
            if not self.client.bucket_exists(bucket):
                self.client.create_bucket(bucket)
            elif not key and not exist_ok:
                raise FileExistsError(errno.EEXIST, "bucket already exists", path)

    def rmdir(self, path: str) -> None:
        """Remove a bucket, or a folder that holds nothing (its marker object ``key/``
        goes, if there is one). A folder that holds objects is refused with ENOTEMPTY,
        as ``os.rmdir`` refuses it; where nothing is, there is nothing to remove (a
        folder exists only through its keys: ``mkdir`` of one makes nothing)."""
        bucket, key, _ = self.split_path(path)
        with translated(path):
            if not key:
                self.client.delete_bucket(bucket)
                return
            marker = key.rstrip("/") + "/"
            # Keys list in order, the marker first: two entries say all there is to know.
            inside = islice(self.client.list_objects(bucket, prefix=marker, page_size=2), 2)
            keys = [e.key for e in inside]
            if keys and keys != [marker]:
                raise OSError(errno.ENOTEMPTY, "the folder holds objects", path)
            if keys:
                self.client.delete_object(bucket, marker)

    # -- files ---------------------------------------------------------------------------

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_options: dict[str, Any] | None = None,
        *,
        acl: Any = False,
        version_id: str | None = None,
        fill_cache: bool | None = None,
        cache_type: str | None = None,
        size: int | None = None,
        requester_pays: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """Open an object: s3fs's ``_open`` arguments are honoured or refused by name
        (see docs/fsspec.md); reads also take ``readahead`` and ``part_size``, writes
        ``content_type``, ``metadata``, the standard headers (``cache_control``...) or
        their boto3 names (``ContentType``...), ``parallel`` and ``part_size``."""
        if mode not in _MODES:
            raise ValueError(
                f"mode {mode!r} is not supported for {path!r}: an object is read ('rb', "
                "'r') or written whole ('wb', 'xb', 'ab', or their text forms)"
            )
        if acl not in (False, None, "") and "r" not in mode:
            # s3fs's canned ACL for a write (ignored on reads, as s3fs does).
            kwargs["acl"] = acl
        if fill_cache not in (None, True):
            raise ValueError("fill_cache=False is not supported: objsdk files keep no cache")
        if requester_pays:
            raise ValueError("requester_pays=True is not supported by ObjsdkFileSystem")
        if cache_options:
            raise ValueError(
                f"cache_options={cache_options!r} is not supported: objsdk files use no "
                "fsspec cache (chain one in the URL: blockcache::objsdk://...)"
            )
        if mode not in _MODES:
            raise ValueError(
                f"mode {mode!r} is not supported for {path!r}: an object is read ('rb', "
                "'r') or written whole ('wb', 'xb', 'ab', or their text forms)"
            )
        bucket, key, in_path = self.split_path(path)
        self._check_version_aware(version_id)
        version_id = version_id or in_path
        if not key:
            raise IsADirectoryError(errno.EISDIR, "a bucket, not a file", path)
        if block_size is not None and (isinstance(block_size, bool) or block_size < 1):
            raise ValueError(f"block_size must be a positive int, got {block_size!r}")
        if "r" in mode:
            # Dask opens Parquet footers with open(path, default_cache="none"), its name
            # for cache_type, which other fsspec filesystems let pass unread.
            default_cache = kwargs.pop("default_cache", None)
            cache_type = cache_type or default_cache
            unknown = set(kwargs) - OPEN_READ_OPTIONS
            if unknown:
                raise TypeError(f"open() for reading got unknown arguments: {sorted(unknown)}")
            return self._open_read(
                path, bucket, key, version_id, block_size, cache_type, size, kwargs
            )
        if version_id:
            raise ValueError(f"a version cannot be written: {path!r} names {version_id!r}")
        if cache_type is not None or size is not None:
            raise ValueError("cache_type and size apply to reading, not to mode " + repr(mode))
        return self._open_write(path, bucket, key, mode, block_size, autocommit, kwargs)

    def _open_read(
        self,
        path: str,
        bucket: str,
        key: str,
        version_id: str | None,
        block_size: int | None,
        cache_type: str | None,
        size: int | None,
        kwargs: dict[str, Any],
    ) -> FileReader:
        kind = check_cache_type("cache_type", cache_type or self.settings.cache_type)
        readahead = kwargs.get("readahead", self.readahead)
        if kind == "none":
            readahead = 0  # one stream, nothing kept
        part = kwargs.get("part_size") or block_size or self.settings.block_size or self.part_size
        options: dict[str, Any] = {"readahead": readahead}
        if part:
            options["part_size"] = part
        head = None
        if size is None:
            with translated(path):
                head = self.client.head_object(bucket, key, version_id=version_id)
            # Pinned to the version just seen: its ETag, date and size, no second HEAD.
            pin = VersionPin.of(head)
        else:  # the caller knows the size (fsspec's caches): no HEAD; pinned at first read
            pin = VersionPin(size=size, version_id=version_id)
        reader = FileReader(self.client, bucket, key, pin=pin, **options)
        if head is not None:
            reader.details = entries.head_entry(path, head)
        reader.blocksize = block_size or self.blocksize
        reader.path, reader.fs = path, self
        return reader

    def _open_write(
        self,
        path: str,
        bucket: str,
        key: str,
        mode: str,
        block_size: int | None,
        autocommit: bool,
        kwargs: dict[str, Any],
    ) -> FileWriter:
        ours = {k: kwargs.pop(k) for k in list(kwargs) if k in OPEN_WRITE_OPTIONS}
        if sse_from_params(dict(kwargs), "open()") is not None:
            raise ValueError(
                "encryption is the filesystem's: give it in s3_additional_kwargs, not to open()"
            )
        stored = {**self.settings.write, **write_options(kwargs, "open()"), **ours}
        options: dict[str, Any] = {}
        parallel = stored.pop("parallel", self.parallel)
        if parallel is not None:
            options["parallel"] = parallel
        part = stored.pop("part_size", None) or block_size or self.settings.block_size
        if part or self.part_size:
            options["part_size"] = part or self.part_size
        # As s3fs: a type guessed from the name unless one is given.
        content_type = stored.pop("content_type", None) or mimetypes.guess_type(key)[0]
        metadata = stored.pop("metadata", None)
        headers = standard_headers(bucket, key, **stored)
        if "x" in mode and self.exists(path):
            # Checked, then written: not atomic against a concurrent writer.
            raise FileExistsError(errno.EEXIST, "the object exists", path)
        writer = FileWriter(
            self.client,
            bucket,
            key,
            autocommit=autocommit,
            content_type=content_type,
            metadata=metadata,
            extra_headers=headers,
            **options,
        )
        writer.path, writer.fs, writer.mode = path, self, mode
        if "a" in mode:
            copy_existing(self, path, writer)
        return writer
