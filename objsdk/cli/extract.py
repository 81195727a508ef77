"""``extract``: a remote tar archive unpacked into a local directory as it streams, with
objsdk's own check that no member lands outside it.

``tarfile``'s ``data`` filter resolves paths with ``os.path.realpath``, which before
Python 3.11.13 / 3.12.11 / 3.13.4 stops expanding symlinks once a path passes PATH_MAX
(CVE-2025-4517): nested long folder names reached through short symlinks let a member
escape. So each member is checked here first, on every Python: its path is resolved
component by component against what is on disk (symlinks followed, at most
:data:`MAX_LINKS` of them; a component that cannot be looked up, such as one past
PATH_MAX, refuses the member), and it must stay inside the destination, as must the
target of every link. The ``data`` filter still applies where Python has it.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import secrets
import stat
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from objsdk._transfer.download_file import creation_error, make_directory, make_folder

from .errors import EXIT_BAD_ARGS, EXIT_FAILED, EXIT_OK, CliError

if TYPE_CHECKING:
    import argparse

    from .commands import Context
    from .paths import RemotePath

__all__ = ["MAX_LINKS", "UnsafeMember", "check_member", "cmd_extract", "resolve_inside"]

MAX_LINKS = 40  # as Linux's path resolution (ELOOP)
READ_BUFFER = 1 << 20  # bytes between the reader and tarfile's small reads


class UnsafeMember(Exception):
    """An archive member that would be written, or would point, outside the destination."""


def resolve_inside(root: str, parts: list[str], *, follow_last: bool = True) -> list[str]:
    """The components, relative to ``root``, that ``parts`` reach once every symlink on
    the way that exists now is followed; raises :class:`UnsafeMember` if the path leaves
    ``root``, is absolute, loops, or cannot be looked up (too long, unreadable).

    A component that does not exist yet is taken as written (extraction will create a
    real directory there), but ``..`` after one is refused: what it climbs out of is not
    known until later members make it.
    """
    done: list[str] = []
    todo = list(reversed(parts))
    links = 0
    pending_new = False  # a component in done does not exist on disk
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if pending_new:
                raise UnsafeMember("'..' after a path that does not exist yet")
            if not done:
                raise UnsafeMember("it leads outside the destination")
            done.pop()
            continue
        if pending_new or (not todo and not follow_last):
            done.append(part)
            continue
        path = os.path.join(root, *done, part)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            done.append(part)
            pending_new = True
            continue
        except OSError as e:
            why = "the path is too long to check" if e.errno == errno.ENAMETOOLONG else e.strerror
            raise UnsafeMember(f"cannot check it: {why}") from None
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > MAX_LINKS:
                raise UnsafeMember("too many symlinks on the way")
            target = os.readlink(path)
            if target.startswith("/"):
                raise UnsafeMember(f"the symlink {part!r} on the way is absolute")
            todo.extend(reversed(target.split("/")))
            continue
        done.append(part)
    return done


def _parts(name: str, what: str) -> list[str]:
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UnsafeMember(f"{what} is absolute")
    return name.split("/")


def check_member(root: str, member: tarfile.TarInfo) -> None:
    """Raise :class:`UnsafeMember` unless ``member``, and what a link member points to,
    resolve inside ``root`` as the disk is now."""
    if not member.name or "\0" in member.name:
        raise UnsafeMember("empty name")
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        raise UnsafeMember("not a file, directory or link")
    parts = _parts(member.name, "its name")
    is_link = member.issym() or member.islnk()
    # A link member replaces what is at its name, so its last component is not followed;
    # a file is written through a link there, so it is.
    where = resolve_inside(root, parts, follow_last=not is_link)
    if not where and not member.isdir():
        raise UnsafeMember("it names the destination itself")
    if is_link:
        existing = os.path.join(root, *where)
        if os.path.islink(existing):
            raise UnsafeMember("it would replace a symlink already extracted")
    if member.issym():
        resolve_inside(root, [*where[:-1], *_parts(member.linkname, "its link target")])
    elif member.islnk():
        # Hard link targets are archive paths, relative to the destination.
        resolve_inside(root, _parts(member.linkname, "its link target"))


@dataclass(frozen=True)
class _Into:
    """An extraction: the archive (``where``) into ``root``, the destination resolved;
    ``dest`` as the user named it, for messages."""

    where: RemotePath
    root: str
    dest: str

    def target(self, member: tarfile.TarInfo) -> str:
        """Where ``member`` is written."""
        return os.path.join(self.root, *_names(member))

    @contextlib.contextmanager
    def writing(self, member: tarfile.TarInfo) -> Iterator[None]:
        """What goes wrong writing ``member`` (or a temporary file beside it), told as
        a download tells it: a fault of the path is Python's own error, a filesystem
        that will not take it a ``LocalWriteError`` naming the archive; either naming
        the member's path under ``dest``, never a temporary file."""
        try:
            yield
        except OSError as e:
            shown = os.path.join(self.dest, *_names(member))
            raise creation_error(e, shown, self.where.bucket, self.where.key) from e


def _names(member: tarfile.TarInfo) -> list[str]:
    return member.name.rstrip("/").split("/")


def _extract_one(
    tar: tarfile.TarFile, member: tarfile.TarInfo, into: _Into, data_filter: Any
) -> None:
    """One checked member: a regular file through a temporary name, so an interrupted
    or killed extraction never leaves a partial file under a member's name; directories
    and links by ``tarfile``."""
    root = into.root
    if data_filter is not None:
        try:
            member = data_filter(member, root)
        except tarfile.FilterError as e:
            raise CliError(
                f"refusing archive member {member.name!r} of {into.where}: {e}", 1
            ) from None
    else:  # Python without extraction filters: no owners, no special modes
        member.mode = (member.mode or 0o644) & 0o777 & ~0o022
        member.uid = member.gid = os.getuid() if hasattr(os, "getuid") else 0
        member.uname = member.gname = ""
    if member.isreg():
        _write_member(tar, member, into)
    elif data_filter is not None:
        with into.writing(member):
            tar.extract(member, root, set_attrs=not member.issym(), filter="fully_trusted")
    else:
        with into.writing(member):
            tar.extract(member, root, set_attrs=not member.issym())


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, into: _Into) -> None:
    target = into.target(member)
    folder = os.path.dirname(target)
    with into.writing(member):
        make_folder(target, into.where.bucket, into.where.key)
    source = tar.extractfile(member)
    assert source is not None  # a regular file
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    while True:
        tmp = os.path.join(folder, f".objsdk-{secrets.token_hex(8)}.tmp")
        try:
            with into.writing(member):
                fd = os.open(tmp, flags, 0o600)
            break
        except FileExistsError:
            continue
    try:
        try:
            # Reads outside writing(): only what goes wrong on the local side is the
            # member's (a broken stream is the reader's own error).
            while chunk := source.read(READ_BUFFER):
                with into.writing(member):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        with into.writing(member):
            if member.mode is not None:
                os.chmod(tmp, member.mode)
            if member.mtime is not None:
                os.utime(tmp, (member.mtime, member.mtime))
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def cmd_extract(ctx: Context, args: argparse.Namespace) -> int:
    from .paths import parse_remote

    where = parse_remote(args.source)
    if where.is_prefix:
        raise CliError(f"extract needs a tar object, got the prefix {where}", EXIT_BAD_ARGS)
    dest = args.dest
    make_directory(dest, where.bucket, where.key)
    root = os.path.realpath(dest)
    into = _Into(where, root, dest)
    data_filter = getattr(tarfile, "data_filter", None)
    client = ctx.client()
    size = client.head_object(where.bucket, where.key).size or 0
    members = 0
    with (
        ctx.out.progress(size, "extract") as progress,
        client.open(where.bucket, where.key, readahead=args.readahead) as reader,
        # tarfile reads a stream 10 KiB at a time (RECORDSIZE); a C buffer in front
        # serves those reads and fills itself by one readinto per MiB (docs/perf.md, "A
        # remote tar extracted as it streams").
        io.BufferedReader(reader, READ_BUFFER) as f,
        tarfile.open(fileobj=f, mode="r|*") as tar,
    ):
        seen = 0
        for member in tar:
            try:
                check_member(root, member)
            except UnsafeMember as e:
                raise CliError(
                    f"refusing archive member {member.name!r} of {where}: {e}", EXIT_FAILED
                ) from None
            _extract_one(tar, member, into, data_filter)
            members += 1
            pos = f.tell()
            progress.add(pos - seen)
            seen = pos
        stats = reader.stats
    ctx.out.note(f"extract: {where} to {dest} ({members} members)")
    ctx.out.json(
        {
            "source": str(where),
            "dest": dest,
            "members": members,
            "bytes": stats.bytes_delivered,
            "resumes": stats.resumes,
        }
    )
    return EXIT_OK
