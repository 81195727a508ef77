"""``objsdk uploads ls|abort``: the multipart uploads in progress, and removing them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from objsdk import errors

from .errors import EXIT_BAD_ARGS, EXIT_OK, CliError
from .output import counted, format_time
from .paths import parse_remote

if TYPE_CHECKING:
    from .commands import Context

__all__ = ["cmd_uploads"]


def cmd_uploads(ctx: Context, args: argparse.Namespace) -> int:
    """``uploads ls`` and ``uploads abort``: the multipart uploads in progress under a
    prefix (``--exact-key``: of one key; ``--upload-id``: one upload of one key), each
    with the file a run on this machine resumes it from, if any."""
    from .._transfer.upload_records import recorded_uploads

    where = parse_remote(args.path)
    upload_id: str | None = getattr(args, "upload_id", None)
    exact = args.exact_key or upload_id is not None
    if exact and not where.key:
        option = "--exact-key" if upload_id is None else "--upload-id"
        raise CliError(f"{option} needs s3://bucket/key, got {args.path}", EXIT_BAD_ARGS)
    client, out = ctx.client(), ctx.out
    resumes = recorded_uploads(client.endpoint.url, where.bucket)
    if args.uploads_command == "ls":
        for up in client.list_multipart_uploads(where.bucket, where.key, exact=exact):
            path = resumes.get(up.upload_id)
            after = f"  (resumes from {path})" if path else ""
            out.line(f"{format_time(up.initiated)} {up.upload_id} {up.key}{after}")
            out.json(
                {
                    "bucket": where.bucket,
                    "key": up.key,
                    "upload_id": up.upload_id,
                    "initiated": up.initiated,
                    "resumes_from": path,
                }
            )
        return EXIT_OK
    if upload_id is not None:
        gone = client.abort_multipart_uploads(
            where.bucket, where.key, upload_id=upload_id, dry_run=args.dry_run
        )
        if not gone:
            # As AbortMultipartUpload answers an upload id it does not have.
            raise errors.s3_error(
                404,
                "NoSuchUpload",
                f"no multipart upload {upload_id} of {where} is in progress",
                bucket=where.bucket,
                key=where.key,
            )
    else:
        gone = client.abort_multipart_uploads(
            where.bucket,
            where.key,
            older_than=None if args.all else args.older_than,
            dry_run=args.dry_run,
            exact=exact,
        )
    mark = "(dryrun) " if args.dry_run else ""
    for up in gone:
        out.note(f"{mark}abort: s3://{where.bucket}/{up.key} (upload id {up.upload_id})")
        out.json(
            {
                "action": "abort",
                "bucket": where.bucket,
                "key": up.key,
                "upload_id": up.upload_id,
                "initiated": up.initiated,
                "dryrun": args.dry_run,
            }
        )
    verb = "would abort" if args.dry_run else "aborted"
    out.summary(f"{verb} {counted(len(gone), 'multipart upload')}")
    return EXIT_OK
