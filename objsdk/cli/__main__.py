"""``python -m objsdk.cli``: the same as the ``objsdk`` command."""

from objsdk.cli import main

raise SystemExit(main())
