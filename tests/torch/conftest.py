"""tests/torch/ runs under real torch, in its own venv (``make test-torch``); the main
venv has no torch, so there these files are not collected."""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("torch") is None:
    collect_ignore_glob = ["test_*.py"]
