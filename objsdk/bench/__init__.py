"""objsdk's perf suite: objsdk and its peers on named network profiles.

Run it with ``python -m objsdk.bench`` (or ``perf/run.py``), or from code with
``objsdk.bench.main(["--quick"])``. Development tooling like :mod:`objsdk.testing`:
``import objsdk`` does not import it, and the optional packages it measures or plots
with (the ``perf`` extra) are imported only when used. See docs/perf-suite.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from objsdk._core.client_config import ClientConfig

__all__ = ["main"]


def main(
    argv: Sequence[str] | None = None,
    *,
    config: ClientConfig | None = None,
    prog: str | None = None,
) -> int:
    """Run the suite with command-line arguments (default ``sys.argv[1:]``); the exit
    status (0 when every benchmark produced results). ``config``: the endpoint,
    credentials and region to measure when no flag gives them (``objsdk bench`` passes
    what its configuration chain resolved); ``prog``: the command its usage names."""
    from objsdk.bench.cli import main as cli_main

    return cli_main(argv, config=config, prog=prog)
