"""Run perf/bench_datasets.py with torch, webdataset and s3torchconnector importable.

The DataLoader section of ``bench_datasets.py`` needs torch, which the main venv never
gets. This builds (once) ``.venv-datasets`` in the clone: a venv whose ``torch-venv.pth``
puts the torch venv of ``tests/torch/`` on its path (built by
``tests/torch/torch_venv.py`` outside the clone and shared with ``make test-torch``), plus
``webdataset`` and AWS's ``s3torchconnector`` (its client wheel; the package itself is
published as an sdist only, built here against that torch without pulling in another).
Then it runs ``bench_datasets.py`` in it with the given arguments, objsdk coming from the
clone through ``PYTHONPATH``.

    python perf/datasets_venv.py [bench_datasets.py arguments]   # make bench-datasets
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

CLONE = Path(__file__).resolve().parents[1]
VENV = CLONE / ".venv-datasets"
# The peers the DataLoader section measures ShardDataset against.
PEERS = ("webdataset>=1.0", "s3torchconnectorclient==1.5.0")
SDIST = "s3torchconnector==1.5.0"  # torch >= 2.0.1 and the client above


def torch_site_packages() -> Path:
    """The torch venv's site-packages, building the venv first if needed."""
    sys.path.insert(0, str(CLONE / "tests" / "torch"))
    import torch_venv

    lines = torch_venv.requirements()
    return purelib(torch_venv.ensure(torch_venv.venv_dir(lines), lines))


def purelib(python: Path) -> Path:
    """The site-packages of the venv ``python`` runs in."""
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def ensure(torch_packages: Path) -> Path:
    """``.venv-datasets``'s python, with the torch venv on its path and the peers in it."""
    python = VENV / "bin" / "python"
    done = VENV / ".installed"
    if done.exists() and done.read_text() == str(torch_packages):
        return python
    venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    (purelib(python) / "torch-venv.pth").write_text(f"{torch_packages}\n")
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "setuptools", "wheel", *PEERS], check=True)
    subprocess.run([*pip, "--no-deps", "--no-build-isolation", SDIST], check=True)
    done.write_text(str(torch_packages))
    return python


def main(argv: list[str]) -> int:
    python = ensure(torch_site_packages())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CLONE), env.get("PYTHONPATH")]))
    bench = CLONE / "perf" / "bench_datasets.py"
    return subprocess.run([str(python), str(bench), *argv], cwd=bench.parent, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
