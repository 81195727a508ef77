"""Run s3fs's own test module (s3fs/tests/test_s3fs.py, from the s3fs sdist) against
ObjsdkFileSystem, through the thin adapter in s3fs_adapter.py, on a local MinIO.

    python tests/s3fs_suite/run.py [--json results.json] [-k EXPR]

The sdist is fetched with pip (``pip download --no-binary :all: --no-deps s3fs==<the
installed version>``) into ~/.cache/objsdk/s3fs-sdist; its test module is copied into a
temporary directory with four textual substitutions (moto's server and s3fs's class
become the adapter's, the endpoint is the MinIO's) and run with pytest. Tests whose
semantics are not meant to match are skipped with the reason in SKIPS; docs/fsspec.md
lists what passes, what is skipped and why.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = Path.home() / ".cache" / "objsdk" / "s3fs-sdist"

# The copied module's text: what it says, what the adapter makes of it (each exactly once).
SUBSTITUTIONS = [
    ("import moto\n", "from s3fs_adapter import moto\n"),
    (
        "from moto.moto_server.threaded_moto_server import ThreadedMotoServer\n",
        "from s3fs_adapter import ThreadedMotoServer\n",
    ),
    (
        "from s3fs.core import MAX_UPLOAD_PARTS, S3FileSystem, calculate_chunksize\n",
        "from s3fs.core import MAX_UPLOAD_PARTS, calculate_chunksize\n"
        "from s3fs_adapter import S3FileSystem\n",
    ),
    (
        'endpoint_uri = "http://127.0.0.1:%s/" % port\n',
        'endpoint_uri = os.environ["AWS_ENDPOINT_URL"] + "/"\n',
    ),
]

# Tests whose semantics are not meant to match, by name (prefix before "[" for
# parametrized ones), with the reason.
SKIPS: dict[str, str] = {}


def sdist_tests() -> str:
    """The text of test_s3fs.py from the sdist of the installed s3fs."""
    wanted = version("s3fs")
    CACHE.mkdir(parents=True, exist_ok=True)
    archive = CACHE / f"s3fs-{wanted}.tar.gz"
    if not archive.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-binary",
                ":all:",
                "--no-deps",
                f"s3fs=={wanted}",
                "-d",
                str(CACHE),
            ],
            check=True,
        )
    with tarfile.open(archive) as tar:
        member = tar.extractfile(f"s3fs-{wanted}/s3fs/tests/test_s3fs.py")
        assert member is not None
        return member.read().decode()


def adapted(text: str) -> str:
    for old, new in SUBSTITUTIONS:
        if text.count(old) != 1:
            raise SystemExit(f"s3fs's test module changed: {old!r} found {text.count(old)} times")
        text = text.replace(old, new)
    return text


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--json", type=Path, help="write every test's outcome here")
    p.add_argument("-k", default=None, help="pytest -k expression")
    args = p.parse_args()
    from objsdk.testing.local_minio import LocalMinio

    with tempfile.TemporaryDirectory() as tmp, LocalMinio() as minio:
        work = Path(tmp)
        (work / "test_s3fs.py").write_text(adapted(sdist_tests()))
        shutil.copy(HERE / "s3fs_adapter.py", work / "s3fs_adapter.py")
        shutil.copy(HERE / "conftest_template.py", work / "conftest.py")
        (work / "skips.json").write_text(json.dumps(SKIPS))
        (work / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
            **minio.env(),
            "PYTHONPATH": str(work),
        }
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "--timeout=120",
            f"--junitxml={work / 'out.xml'}",
        ]
        if args.k:
            command += ["-k", args.k]
        proc = subprocess.run(command, cwd=work, env=env, check=False)
        outcomes = outcomes_of(work / "out.xml")
    counts: dict[str, int] = {}
    for outcome, _ in outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    print(json.dumps(counts))
    if args.json:
        args.json.write_text(json.dumps(outcomes, indent=1, sort_keys=True))
    sys.exit(0 if proc.returncode in (0, 1) else proc.returncode)


def outcomes_of(junit: Path) -> dict[str, tuple[str, str]]:
    """Each test's outcome (passed, failed, skipped) and message, from pytest's junit XML."""
    out: dict[str, tuple[str, str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                outcome = "skipped" if tag == "skipped" else "failed"
                message = (
                    (el.get("message") or "").splitlines()[0][:200] if el.get("message") else ""
                )
                break
        out[name] = (outcome, message)
    return out


if __name__ == "__main__":
    main()
