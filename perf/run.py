"""The perf suite's entry point: ``.venv/bin/python perf/run.py --quick``.

Everything lives in :mod:`objsdk.bench` (also ``python -m objsdk.bench``); see
``--help`` and docs/perf-suite.md.
"""

import sys

from objsdk.bench import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
