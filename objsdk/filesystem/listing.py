"""What is where: ``ls``, ``info``, ``isdir``, ``find``, ``du`` and the dates of objects
(a base of ObjsdkFileSystem).

Nothing is cached (as ``invalidate_cache`` says): every call asks the server, so a
listing never hides an object another client wrote a moment ago. ``find`` is one
paginated listing of the whole prefix; ``du`` adds up that listing. While ``get``,
``put`` or ``copy`` plan their files (:func:`~objsdk.filesystem.many.recording`),
``info`` and ``find`` report what they found to the plan, so the transfers need not
ask again.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Any

from objsdk import ObjectSummary, Prefix, errors
from objsdk.filesystem import entries
from objsdk.filesystem.many import recording
from objsdk.filesystem.oserrors import as_oserror, translated

if TYPE_CHECKING:
    from objsdk import Client

__all__ = ["Listing"]


class Listing:
    """``ls``, ``info``, ``isdir``, ``find``, ``du``, ``created`` and ``modified``."""

    client: Client
    version_aware: bool

    if TYPE_CHECKING:

        def _strip_protocol(self, path: Any) -> Any: ...
        def split_path(self, path: str) -> tuple[str, str, str | None]: ...
        def _check_version_aware(self, version_id: str | None) -> None: ...
        def walk(self, path: str, maxdepth: int | None = ..., **kwargs: Any) -> Any: ...

    def ls(
        self, path: str, detail: bool = False, versions: bool = False, **kwargs: Any
    ) -> list[Any]:
        """The names under ``path`` (as s3fs; ``detail=True``: the entries, with fsspec's
        and s3fs's keys, see :mod:`objsdk.filesystem.entries`); ``versions=True``
        (version-aware filesystems) lists every version of each object, with its
        ``VersionId``."""
        path = self._strip_protocol(path)
        if versions and not self.version_aware:
            raise ValueError("ls(versions=True) needs a filesystem made with version_aware=True")
        if not path:
            with translated(path):
                listed = [entries.bucket_entry(b) for b in self.client.list_buckets()]
            return listed if detail else sorted(e["name"] for e in listed)
        bucket, key, version_id = self.split_path(path)
        prefix = key + "/" if key else ""
        out: list[dict[str, Any]] = []
        marked = False  # the path's directory marker object (``key/``) was listed
        with translated(path):
            if versions:
                for v in self.client.list_object_versions(bucket, prefix):
                    rest = v.key[len(prefix) :]
                    marked = marked or (not rest and not v.delete_marker)
                    if rest and "/" not in rest and not v.delete_marker:
                        out.append(entries.version_entry(bucket, v))
                    elif "/" in rest:
                        d = entries.dir_entry(f"{bucket}/{prefix}{rest.split('/')[0]}")
                        if d not in out:
                            out.append(d)
            else:
                for e in self.client.list_objects(bucket, prefix=prefix, delimiter="/"):
                    if isinstance(e, Prefix):
                        out.append(entries.dir_entry(f"{bucket}/{e.prefix}"))
                    elif e.key != prefix:
                        out.append(entries.listed_entry(bucket, e))
                    else:
                        marked = True
        if not out and key and not marked:
            # Nothing lies under the path: a file lists as itself, else it is missing.
            with translated(path):
                head = self.client.head_object(bucket, key, version_id=version_id)
            out = [entries.head_entry(path, head)]
        if detail:
            return out
        # As s3fs: versions are named by their version-aware paths.
        return sorted(
            e["name"] + (f"?versionId={e['VersionId']}" if versions and "IsLatest" in e else "")
            for e in out
        )

    def info(self, path: str, version_id: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """The entry for ``path``: a HEAD for an object (of ``version_id``, or of the
        version the path names), else a directory if keys lie under it."""
        path = self._strip_protocol(path)
        if not path:
            return entries.dir_entry("")
        bucket, key, in_path = self.split_path(path)
        self._check_version_aware(version_id)
        version_id = version_id or in_path
        if not key:
            try:
                exists = self.client.bucket_exists(bucket)
            except errors.AccessDenied:
                exists = True  # it exists, we just may not HEAD it
            if not exists:
                raise FileNotFoundError(errno.ENOENT, f"no bucket {bucket!r}", path)
            return entries.dir_entry(bucket)
        try:
            head = self.client.head_object(bucket, key, version_id=version_id)
        except (errors.NoSuchKey, errors.InvalidObjectName, errors.AccessDenied) as err:
            # S3 answers 403 for a key the caller may not read (and for any missing key
            # when it may not list the bucket): keys it may list may still lie under it.
            missing = err
        except errors.S3Error as err:
            raise as_oserror(err, path) from err
        else:
            entry = entries.head_entry(path, head)
            plan = recording()
            if plan is not None and not version_id:  # what get/copy will find it to be
                plan.entries[path] = entry
            return entry
        if version_id:
            raise as_oserror(missing, path) from missing
        try:
            if self._keys_under(bucket, key):
                return entries.dir_entry(path)
        except errors.S3Error as err:
            refused_both = isinstance(err, errors.AccessDenied) and isinstance(
                missing, errors.AccessDenied
            )
            if not refused_both:
                raise as_oserror(err, path) from err
            # Refused both ways: the HEAD's refusal says why (below).
        # Neither an object nor a prefix: the HEAD's answer says why.
        raise as_oserror(missing, path) from missing

    def isdir(self, path: str) -> bool:
        """Whether ``path`` is a directory: the root; a bucket that exists; else a path
        that keys lie under (one listing of at most one key, as s3fs asks), whether or
        not an object has the same name. False for anything the server refuses.

        While ``get`` or ``copy`` plan their files, :meth:`info` answers instead: the
        HEAD that finds a file tells the transfer its size, which it needs anyway."""
        path = self._strip_protocol(path)
        if not path:
            return True
        bucket, key, version_id = self.split_path(path)
        try:
            if not key or recording() is not None:
                return bool(self.info(path)["type"] == "directory")
            if version_id is not None:
                return False  # a version names an object
            with translated(path):
                return self._keys_under(bucket, key)
        except OSError:
            return False

    def _keys_under(self, bucket: str, key: str) -> bool:
        """Whether any key lies under ``key/`` (a listing of at most one)."""
        listed = self.client.list_objects(bucket, prefix=key + "/", page_size=1)
        return next(iter(listed), None) is not None

    def find(
        self,
        path: str,
        maxdepth: int | None = None,
        withdirs: bool = False,
        detail: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Every object under ``path`` (one paginated listing); with s3fs's ``prefix``, only
        those whose name after ``path/`` starts with it."""
        path = self._strip_protocol(path)
        start = kwargs.pop("prefix", "") or ""
        if start and not path:
            raise ValueError("find(prefix=...) takes a bucket or directory path")
        if maxdepth is not None or not path or kwargs.get("versions"):
            found = self._walked(path, maxdepth, withdirs, **kwargs)
            head = f"{path}/{start}"
            found = {n: e for n, e in found.items() if not start or n.startswith(head)}
            _report(found)
            return found if detail else sorted(found)
        bucket, key, _ = self.split_path(path)
        prefix = (key + "/" if key else "") + start
        out: dict[str, dict[str, Any]] = {}
        markers: set[str] = set()  # directories with a marker object (``key/``)
        try:
            for e in self.client.list_objects(bucket, prefix=prefix):
                if not isinstance(e, ObjectSummary):
                    continue
                if withdirs:
                    # Every "directory" between the path and the object.
                    parts = e.key[len(prefix) :].split("/")[:-1]
                    for i in range(1, len(parts) + 1):
                        d = f"{bucket}/{prefix}{'/'.join(parts[:i])}"
                        out.setdefault(d, entries.dir_entry(d))
                if e.key.endswith("/"):
                    markers.add(f"{bucket}/{e.key[:-1]}")
                    continue  # a directory marker object
                entry = entries.listed_entry(bucket, e)
                out[entry["name"]] = entry
        except errors.NoSuchBucket:
            return {} if detail else []
        except errors.S3Error as err:
            raise as_oserror(err, path) from err
        if out and withdirs and not start:
            out.setdefault(path, entries.dir_entry(path))
        if not out and key and not start:
            try:
                info = self.info(path)
            except FileNotFoundError:
                info = None
            if info is not None and info["type"] == "file":
                out[path] = info
        names = sorted(out)
        _report(out, markers)
        return {n: out[n] for n in names} if detail else names

    def _walked(
        self, path: str, maxdepth: int | None, withdirs: bool, **kwargs: Any
    ) -> dict[str, dict[str, Any]]:
        """fsspec's find (a walk: one listing per directory, ``maxdepth`` deep). fsspec
        first asks ``isdir`` and then ``info`` of ``path`` (two HEADs and two listings
        more): when the walk lists anything under ``path``, it is a directory; else one
        ``info`` says whether it is a file (its entry, not fsspec's ``{}``) or an empty
        directory."""
        out: dict[str, dict[str, Any]] = {}
        for _, dirs, files in self.walk(path, maxdepth, detail=True, **kwargs):
            if withdirs:
                files.update(dirs)
            out.update({entry["name"]: entry for entry in files.values()})
        if any(name != path for name in out):
            if withdirs and path:
                out.setdefault(path, entries.dir_entry(path))  # glob's POSIX rules
        elif path and path not in out:  # (a file's walk lists it as itself)
            try:
                root: dict[str, Any] | None = self.info(path)
            except OSError:
                root = None  # as fsspec's isdir and isfile: neither
            if root is not None and (root["type"] == "file" or withdirs):
                out[path] = root
        return {name: out[name] for name in sorted(out)}

    def du(
        self,
        path: str,
        total: bool = True,
        maxdepth: int | None = None,
        withdirs: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Bytes under ``path``: the sum, or ``{path: size}`` with ``total=False``
        (folders as 0 with ``withdirs``), from the listing ``find`` sends, as s3fs
        adds it up (fsspec's own du sends a HEAD for every file)."""
        found = self.find(path, maxdepth=maxdepth, withdirs=withdirs, detail=True, **kwargs)
        sizes = {name: entry["size"] for name, entry in found.items()}
        return sum(sizes.values()) if total else sizes

    def created(self, path: str) -> Any:
        return self.modified(path)

    def modified(self, path: str) -> Any:
        """The object's Last-Modified (IsADirectoryError for a directory or bucket)."""
        info = self.info(path)
        if info["type"] != "file":
            raise IsADirectoryError(errno.EISDIR, "a directory has no modification time", path)
        return info["LastModified"]


def _report(found: dict[str, dict[str, Any]], markers: set[str] | None = None) -> None:
    """Tell the plan being recorded, if any, what a listing found: the entries get, put
    and copy will find the files to be, and, given the ``markers`` a listing of the whole
    tree saw, which of its directories have a marker object."""
    plan = recording()
    if plan is None:
        return
    plan.entries.update(found)
    if markers is not None:
        for name, entry in found.items():
            if entry["type"] == "directory":
                plan.folders[name] = name in markers
