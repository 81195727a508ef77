"""``cp``: which objects and files one copy means, as a list of :class:`~.jobs.Job`."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .._core.wildcards import has_wildcard
from .errors import EXIT_BAD_ARGS, CliError
from .jobs import Job, Kind, Outcome, PlanOptions
from .listing import (
    leave_archived,
    list_objects,
    local_target,
    new_plan,
    safe_local_name,
    walk_files,
)
from .output import Output
from .paths import LocalPath, Location, RemotePath, parse_location

if TYPE_CHECKING:
    from objsdk import Client

__all__ = ["plan_cp"]


def _local_target(dst: LocalPath, name: str) -> str:
    path = dst.path
    if path.endswith(("/", os.sep)) or os.path.isdir(path):
        return os.path.join(path, name)
    return path


def plan_cp(
    client: Client,
    source: str,
    dest: str,
    *,
    recursive: bool,
    out: Output,
    outcome: Outcome,
    opts: PlanOptions | None = None,
) -> list[Job]:
    """The jobs ``cp source dest`` means (raises CliError for impossible combinations).

    A source key with wildcards (``s3://b/logs/*.gz``) means the objects it matches, as
    if ``--recursive`` from the prefix before the first wildcard.
    """
    new_plan()
    opts = opts or PlanOptions()
    src, dst = parse_location(source), parse_location(dest)
    if isinstance(src, LocalPath) and isinstance(dst, LocalPath):
        raise CliError("cp needs at least one s3:// location (for local copies use cp(1))", 252)
    if recursive or (isinstance(src, RemotePath) and has_wildcard(src.key)):
        return _plan_recursive(client, src, dst, out, outcome, opts)

    if isinstance(src, LocalPath):
        assert isinstance(dst, RemotePath)
        if src.is_stdio:
            if dst.is_prefix:
                raise CliError(f"give a full key to upload standard input to, not {dst}", 252)
            return [Job("stdin", src, dst)]
        if os.path.isdir(src.path):
            raise CliError(f"{src.path} is a directory (use --recursive)", EXIT_BAD_ARGS)
        if not os.path.exists(src.path):
            raise CliError(f"no such file: {src.path}", EXIT_BAD_ARGS)
        target = dst.join(os.path.basename(src.path)) if dst.is_prefix else dst
        return [Job("upload", src, target, os.path.getsize(src.path))]

    if src.is_prefix:
        raise CliError(f"{src} is a prefix, not an object (use --recursive)", EXIT_BAD_ARGS)
    if isinstance(dst, LocalPath):
        if dst.is_stdio:
            return [Job("stdout", src, dst)]
        return [Job("download", src, LocalPath(_local_target(dst, src.name)))]
    target = dst.join(src.name) if dst.is_prefix else dst
    return [Job("copy", src, target)]


def _plan_recursive(
    client: Client,
    src: Location,
    dst: Location,
    out: Output,
    outcome: Outcome,
    opts: PlanOptions,
) -> list[Job]:
    accepts = opts.filters.accepts
    if isinstance(src, LocalPath):
        assert isinstance(dst, RemotePath)
        if src.is_stdio or not os.path.isdir(src.path):
            raise CliError(f"--recursive needs a local directory, got {src.path}", EXIT_BAD_ARGS)
        return [
            Job("upload", LocalPath(os.path.join(src.path, rel)), dst.join(rel), st.st_size)
            for rel, st in walk_files(src.path, out, outcome, symlinks=opts.symlinks)
            if accepts(rel)
        ]
    if isinstance(dst, LocalPath) and dst.is_stdio:
        raise CliError("--recursive cannot write to standard output", EXIT_BAD_ARGS)
    jobs: list[Job] = []
    # Folder markers (empty keys ending in "/") are copied between prefixes, as aws
    # copies them (a mv leaves no folder behind); a download has no file to make of one.
    remote = isinstance(dst, RemotePath)
    action = "copy" if remote else "download"
    for rel, summary in list_objects(client, src, markers=remote):
        if not accepts(rel) or (isinstance(dst, RemotePath) and not dst.join(rel).key):
            continue
        if leave_archived(summary, src.bucket, action, opts.archived, out, outcome):
            continue
        if isinstance(dst, LocalPath):
            safe = safe_local_name(src, summary.key, out, outcome)
            if safe is None:
                continue
            where = f"s3://{src.bucket}/{summary.key}"
            path = local_target(dst.path, safe, opts.symlinks, where, out, outcome)
            if path is None:
                continue
            target: Location = LocalPath(path)
            kind: Kind = "download"
        else:
            target = dst.join(rel)
            kind = "copy"
        jobs.append(
            Job(
                kind,
                RemotePath(src.bucket, summary.key),
                target,
                summary.size,
                summary.last_modified,
                listed=True,
            )
        )
    return jobs
