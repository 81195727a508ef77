"""The ``objsdk`` command line: ``ls``, ``cp``, ``sync``, ``cat``... on ``s3://`` paths.

Run as ``objsdk`` (console script) or ``python -m objsdk.cli``. See docs/cli.md.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from collections.abc import Sequence

__all__ = ["main"]


_VALUED = {"--endpoint-url", "--region", "--profile"}


def _split_bench(argv: list[str]) -> tuple[list[str], list[str]]:
    """``[global options] bench ARGS...``: ARGS go to the suite untouched, in order."""
    for i, arg in enumerate(argv):
        if arg == "bench" and (i == 0 or argv[i - 1] not in _VALUED):
            return argv[: i + 1], argv[i + 1 :]
        if not arg.startswith("-") and (i == 0 or argv[i - 1] not in _VALUED):
            break  # another command
    return argv, []


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (never raises, except SystemExit from --help)."""
    from .commands import COMMANDS, Context
    from .errors import EXIT_INTERRUPTED, error_record, exit_code_for, message_for
    from .output import LibraryWarnings, terminal_safe
    from .parser import GLOBAL_DEFAULTS, build_parser
    from .signals import Terminated, terminating_signals

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    ctx: Context | None = None
    library_log = logging.getLogger("objsdk")
    warnings: LibraryWarnings | None = None
    try:
        own, passed = _split_bench(argv)
        args = build_parser().parse_args(own)
        if args.command == "bench":
            args.full = "--full" in passed
            args.bench_args = [a for a in passed if a != "--full"]
        for name, default in GLOBAL_DEFAULTS.items():
            if not hasattr(args, name):
                setattr(args, name, default)
        if args.debug:
            logging.basicConfig(
                level=logging.DEBUG, format="%(asctime)s %(name)s %(levelname)s %(message)s"
            )
        ctx = Context(args)
        if not args.debug:
            library_log.addHandler(warnings := LibraryWarnings(ctx.out))
        with terminating_signals():
            return COMMANDS[args.command](ctx, args)
    except KeyboardInterrupt as e:
        said = f"interrupted ({e})" if isinstance(e, Terminated) else "interrupted"
        print(f"objsdk: {said}", file=sys.stderr, flush=True)
        for kept in getattr(e, "kept_uploads", ()):
            advice = kept.advice("the same command")
            print(f"objsdk: {terminal_safe(advice)}", file=sys.stderr, flush=True)
        return e.exit_code if isinstance(e, Terminated) else EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``objsdk cat ... | head``): not an error. Point stdout at
        # /dev/null so the interpreter's final flush does not complain.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as e:
        if debug:
            traceback.print_exc()
        code = exit_code_for(e)
        if "--json" in argv:
            record = {"exit_code": code, **error_record(e)}
            print(json.dumps(record, sort_keys=True), file=sys.stderr, flush=True)
        else:
            print(f"objsdk: error: {terminal_safe(message_for(e))}", file=sys.stderr, flush=True)
        return code
    finally:
        if ctx is not None:
            ctx.close()
        if warnings is not None:
            library_log.removeHandler(warnings)
