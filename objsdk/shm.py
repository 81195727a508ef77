"""NumPy arrays loaded from a bucket straight into shared memory.

::

    with load_shared(client, "models", "embeddings.npy") as shared:
        pool.map(work, [(shared.name, i) for i in range(8)])  # workers: SharedArray.attach

:func:`load_shared` creates a :class:`multiprocessing.shared_memory.SharedMemory` block the
size of the object and has :meth:`objsdk.Client.download` receive the object's bytes into
it, in parallel parts, straight from the sockets: no copy in between. The block holds a
complete ``.npy`` image (header, then data; for raw objects a header is written in front),
so :meth:`SharedArray.attach` needs nothing but the name.

Lifecycle: the creating process owns the block and unlinks it on :meth:`SharedArray.close`,
when its context ends, when the :class:`SharedArray` is collected, and at interpreter exit;
attachers never unlink. A creator killed with SIGKILL leaves its block to Python's resource
tracker, which unlinks it once the creator's process tree has gone; if the tracker died too,
:func:`sweep` removes blocks whose creating process is gone. Block names carry the creator's
pid namespace, pid and start time (``objsdk_<ns>_<pid>_<start>_<random>``), so a sweep never
touches a block of a process that is still running, whoever started it.

Linux only (blocks are mapped through ``/dev/shm``). Needs the ``numpy`` extra.
"""

from __future__ import annotations

import ast
import contextlib
import io
import mmap
import os
import secrets
import weakref
from collections.abc import Callable
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import errors
from ._extras import needs_extra

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .client import Client

__all__ = ["PREFIX", "SharedArray", "load_shared", "sweep"]

PREFIX = "objsdk_"
SHM_DIR = Path("/dev/shm")
_MAGIC = b"\x93NUMPY"
_FIRST_READ = 4096


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(needs_extra("objsdk.shm needs numpy", "numpy")) from None
    return numpy


# -- block names ---------------------------------------------------------------------------


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (None if no such process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def _new_name() -> str:
    pid = os.getpid()
    return f"{PREFIX}{_pid_namespace()}_{pid}_{_start_time(pid) or 0}_{secrets.token_hex(6)}"


def _creator_gone(name: str, namespace: str) -> bool:
    """True if ``name`` is one of ours whose creating process no longer runs."""
    parts = name[len(PREFIX) :].split("_")
    if not name.startswith(PREFIX) or len(parts) != 4 or parts[0] != namespace:
        return False  # not ours, or made in another pid namespace: cannot tell, keep it
    try:
        pid = int(parts[1])
    except ValueError:
        return False
    return _start_time(pid) != parts[2]  # no such process, or the pid was reused


def sweep(*, dry_run: bool = False) -> list[str]:
    """Unlink blocks this library created whose creating process is gone; return their
    names. Blocks of running processes, of other users, of other pid namespaces and
    blocks not named by this library are never touched."""
    namespace, uid = _pid_namespace(), os.getuid()
    removed = []
    try:
        entries = list(SHM_DIR.iterdir())
    except OSError:
        return []
    for entry in entries:
        try:
            if entry.stat().st_uid != uid or not _creator_gone(entry.name, namespace):
                continue
            if not dry_run:
                entry.unlink()
        except OSError:
            continue  # gone meanwhile, or not ours to remove
        removed.append(entry.name)
    return removed


# -- .npy headers -----------------------------------------------------------------------------


def _parse_header(head: bytes, where: str) -> tuple[int, dict[str, Any]] | None:
    """``(data_offset, header)`` of a .npy image, None if ``head`` is too short to tell."""
    if len(head) < 10:
        return None
    if head[:6] != _MAGIC:
        raise errors.InvalidArgument(f"{where} is not a .npy file (give dtype= for raw bytes)")
    major = head[6]
    if major == 1:
        start, length = 10, int.from_bytes(head[8:10], "little")
    elif major in (2, 3):
        start, length = 12, int.from_bytes(head[8:12], "little")
    else:
        raise errors.InvalidArgument(f"{where}: unsupported .npy version {major}")
    if len(head) < start + length:
        return None
    try:
        text = head[start : start + length].decode("utf-8" if major == 3 else "latin1")
        header = ast.literal_eval(text)
        if not isinstance(header, dict) or {"descr", "fortran_order", "shape"} - set(header):
            raise ValueError("missing keys")
    except (ValueError, SyntaxError) as e:
        raise errors.InvalidArgument(f"{where}: bad .npy header: {e}") from None
    return start + length, header


def _npy_header(dtype: np.dtype[Any], shape: tuple[int, ...]) -> bytes:
    fmt = _numpy().lib.format
    out = io.BytesIO()
    fmt.write_array_header_2_0(
        out, {"descr": fmt.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    )
    return out.getvalue()


# -- the array ---------------------------------------------------------------------------------


def _map(name: str) -> mmap.mmap:
    """A private mapping of the block, alive as long as any view of it."""
    fd = os.open(SHM_DIR / name, os.O_RDWR)
    try:
        return mmap.mmap(fd, 0)
    finally:
        os.close(fd)


def _reserve(name: str, size: int, where: str) -> None:
    """Allocate the block's pages now: a full /dev/shm is then an error here, not a
    SIGBUS in the middle of the download."""
    fd = os.open(SHM_DIR / name, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, max(size, 1))
    except OSError as e:
        raise OSError(
            e.errno, f"no room in {SHM_DIR} for {size} bytes ({where}): {e.strerror}"
        ) from None
    finally:
        os.close(fd)


def _unlink_if_creator(name: str, creator: int) -> None:
    # A forked child inherits the finalizer; only the creating process unlinks.
    if os.getpid() == creator:
        with contextlib.suppress(FileNotFoundError):
            (SHM_DIR / name).unlink()
        resource_tracker.unregister(f"/{name}", "shared_memory")


class SharedArray:
    """A NumPy array in a shared-memory block: :attr:`array` is a zero-copy view.

    Made by :func:`load_shared` (the creator, who owns the block) or
    :meth:`attach` (any process; never unlinks). Picklable as its name: unpickling
    attaches. Use as a context manager; views taken from :attr:`array` stay valid after
    :meth:`close`, until they are dropped.
    """

    def __init__(self, name: str, *, _owner: bool = False) -> None:
        self.name = name
        self.owner = _owner
        try:
            self._mmap: mmap.mmap | None = _map(name)
        except FileNotFoundError:
            raise errors.InvalidArgument(f"no shared memory block named {name!r}") from None
        parsed = _parse_header(self._mmap[: min(len(self._mmap), 1 << 16)], f"block {name!r}")
        if parsed is None:
            self._mmap.close()
            raise errors.InvalidArgument(f"block {name!r} does not hold a .npy image")
        self._offset, header = parsed
        self.dtype: np.dtype[Any] = _numpy().lib.format.descr_to_dtype(header["descr"])
        self.shape: tuple[int, ...] = tuple(header["shape"])
        self._order = "F" if header["fortran_order"] else "C"
        self._array: npt.NDArray[Any] | None = None
        self._finalizer = (
            weakref.finalize(self, _unlink_if_creator, name, os.getpid()) if _owner else None
        )

    @classmethod
    def attach(cls, name: str) -> SharedArray:
        """A view of the block ``name`` made by another process (never unlinked here)."""
        return cls(name)

    @property
    def array(self) -> npt.NDArray[Any]:
        """The data as a NumPy array over the shared memory (no copy)."""
        if self._array is None:
            if self._mmap is None:
                raise ValueError(f"shared array {self.name!r} is closed")
            self._array = _numpy().ndarray(
                self.shape,
                dtype=self.dtype,
                buffer=self._mmap,  # the array's base: the mapping lives as long as it
                offset=self._offset,
                order=self._order,
            )
        return self._array

    @property
    def nbytes(self) -> int:
        return int(self.dtype.itemsize * _prod(self.shape))

    def unlink(self) -> None:
        """Remove the block's name (the creator does this on close); mappings stay."""
        if self._finalizer is not None:
            self._finalizer()

    def close(self) -> None:
        """Drop this handle's mapping (once no view uses it); the creator also unlinks."""
        self.unlink()
        # Never mmap.close(): NumPy does not hold a buffer export, so closing would pull
        # the memory from under live views. The mapping goes with its last reference.
        self._array = None
        self._mmap = None

    def __enter__(self) -> SharedArray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        return (SharedArray.attach, (self.name,))

    def __repr__(self) -> str:
        role = "owner" if self.owner else "attached"
        return f"SharedArray({self.name!r}, shape={self.shape}, dtype={self.dtype}, {role})"


def _prod(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def load_shared(
    client: Client,
    bucket: str,
    key: str,
    *,
    name: str | None = None,
    dtype: npt.DTypeLike | None = None,
    shape: tuple[int, ...] | None = None,
    parallel: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    auto_sweep: bool = True,
) -> SharedArray:
    """Load a ``.npy`` object (or raw bytes, with ``dtype`` and optional ``shape``) into
    a new shared-memory block; return it as the creator's :class:`SharedArray`.

    The object is received by ``client.download`` straight into the block, in parallel
    parts for large objects, resuming broken parts and checking the stored checksum;
    ``progress(bytes_done, bytes_total)`` is passed on to it. ``name`` picks the block's
    name (default: a generated one that :func:`sweep` understands); ``auto_sweep`` first
    sweeps blocks of dead creators.
    """
    np = _numpy()
    where = f"bucket {bucket!r}, key {key!r}"
    if shape is not None and dtype is None:
        raise errors.InvalidArgument(f"shape needs a dtype ({where})")
    if name is not None and (not name or "/" in name):
        raise errors.InvalidArgument(f"invalid shared memory name {name!r}")
    if not SHM_DIR.is_dir():
        raise errors.InvalidArgument("objsdk.shm needs a Linux /dev/shm")
    if auto_sweep:
        sweep()
    size = client.head_object(bucket, key).size or 0
    if dtype is None:
        head = client.get_object(bucket, key, offset=0, length=min(size, _FIRST_READ))
        parsed = _parse_header(head, where)
        if parsed is None and size > len(head):
            head = client.get_object(bucket, key, offset=0, length=min(size, 1 << 20))
            parsed = _parse_header(head, where)
        if parsed is None:
            raise errors.InvalidArgument(f"{where}: truncated .npy header")
        data_offset, header = parsed
        dt = np.lib.format.descr_to_dtype(header["descr"])
        want = data_offset + dt.itemsize * _prod(tuple(header["shape"]))
        prefix = b""
    else:
        dt = np.dtype(dtype)
        if shape is None:
            if size % dt.itemsize:
                raise errors.InvalidArgument(
                    f"{where}: {size} bytes is not a whole number of {dt} items"
                )
            shape = (size // dt.itemsize,)
        prefix = _npy_header(dt, tuple(shape))
        want = dt.itemsize * _prod(tuple(shape))
        if want != size:
            raise errors.InvalidArgument(
                f"{where}: shape {tuple(shape)} of {dt} needs {want} bytes, object has {size}"
            )
    if dt.hasobject:
        raise errors.InvalidArgument(f"{where}: object arrays cannot live in shared memory")
    if dtype is None and want != size:
        raise errors.InvalidArgument(f"{where}: .npy header says {want} bytes, object has {size}")
    total = len(prefix) + size
    block = shared_memory.SharedMemory(name=name or _new_name(), create=True, size=max(total, 1))
    block_name = block.name.lstrip("/")
    try:
        block.close()  # SharedMemory keeps the name (and the resource tracker's watch)
        _reserve(block_name, total, where)
        with _map(block_name) as m:
            m[: len(prefix)] = prefix
            view = memoryview(m)
            data = view[len(prefix) : total]
            try:
                kwargs: dict[str, Any] = {"progress": progress}
                if parallel is not None:
                    kwargs["parallel"] = parallel
                got = client.download(bucket, key, data, **kwargs).info.size
            finally:
                # Released even when a traceback still refers to them, so the mapping
                # can close and the original error is the one raised.
                data.release()
                view.release()
        if got != size:
            raise errors.ReadError(
                f"object ended after {got} of {size} bytes", bucket=bucket, key=key, offset=got
            )
        # From here the SharedArray's finalizer unlinks; the resource tracker keeps
        # watching in case this process is killed.
        return SharedArray(block_name, _owner=True)
    except BaseException:
        block.unlink()
        raise
