"""The cost of resuming: a sequential read while every connection is cut.

On top of the profile's toxics, a ``limit_data`` toxic on the downstream (named
``resume_cut``) closes each connection after N bytes (16, 64 and 256 MiB by default);
:class:`~objsdk.ObjectFile` resumes from where it stopped. The baseline goes through a
proxy too, with a ``limit_data`` that never fires (2^62 bytes), because Toxiproxy moves
data through a slower path once a proxy has any toxic. Every read is hashed (SHA-256,
in all cases alike) and must match the object's digest byte for byte. Cuts not smaller
than the object are skipped; the ``flaky-wan`` profile, which already cuts every 32
MiB, is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable, Iterator

from objsdk import Client
from objsdk.bench.context import Context
from objsdk.bench.output import size_label
from objsdk.bench.profiles import Profile, Toxic, proxied_endpoint
from objsdk.bench.runner import Case, Group, MiB

NAME = "resume"
NEVER = 1 << 62


def cut_toxic(nbytes: int) -> Toxic:
    return Toxic("resume_cut", "limit_data", "downstream", {"bytes": nbytes})


def groups(ctx: Context, profile: Profile) -> Iterator[Group]:
    if any(t.type == "limit_data" for t in profile.toxics):
        ctx.notes.append(f"resume: skipped on {profile.name}, which already cuts connections")
        return
    logging.getLogger("objsdk").setLevel(logging.ERROR)  # resumes are expected here
    for size in ctx.options.sizes:
        yield from _sized(ctx, profile, size)


def _sized(ctx: Context, profile: Profile, size: int) -> Iterator[Group]:
    bucket = ctx.target.bucket
    key = ctx.target.random_object(size, ctx.work)
    digest = hashlib.sha256()
    with ctx.target.client().open(bucket, key) as f:
        while chunk := f.read(8 * MiB):
            digest.update(chunk)
    expected = digest.hexdigest()
    cuts = [c for c in ctx.options.cuts if c < size]
    resumes: dict[int, set[int]] = {c: set() for c in cuts}

    def reader(client: Client, cut: int | None) -> Callable[[], int]:
        def run() -> int:
            h = hashlib.sha256()
            n = 0
            with client.open(bucket, key, max_resume=size // (cut or size) + 8) as f:
                while chunk := f.read(MiB):
                    h.update(chunk)
                    n += len(chunk)
                if cut is not None:
                    resumes[cut].add(f.stats.resumes)
            if h.hexdigest() != expected:
                raise AssertionError(f"read through cuts of {cut} bytes differs")
            return n

        return run

    with contextlib.ExitStack() as stack:
        base_ep = stack.enter_context(
            proxied_endpoint(ctx.target.endpoint, profile, ctx.toxiproxy, [cut_toxic(NEVER)])
        )
        cases = [
            Case(
                "objsdk",
                "no cut (same proxy path)",
                reader(ctx.target.client(base_ep), None),
                size,
            )
        ]
        for cut in cuts:
            ep = stack.enter_context(
                proxied_endpoint(ctx.target.endpoint, profile, ctx.toxiproxy, [cut_toxic(cut)])
            )
            label = f"cut every {size_label(cut)}"
            cases.append(Case("objsdk", label, reader(ctx.target.client(ep), cut), size))
        group = Group(
            NAME,
            profile.name,
            f"Read of {size_label(size)} through connection cuts, {profile.name}",
            cases,
            "objsdk: no cut (same proxy path)",
            size=size,
        )
        yield group
        for cut in cuts:
            seen = ", ".join(map(str, sorted(resumes[cut]))) or "none"
            group.notes.append(
                f"cut every {size_label(cut)}: byte-identical, resumes per read: {seen}"
            )
