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
INTERNALS = (
    "exercises s3fs internals (its aiobotocore client, event loop, sessions or S3File's part "
    "buffers), not the filesystem API"
)

UNDERSCORE_BUCKET = (
    "bucket names with '_' are invalid in S3 and refused by MinIO (moto accepts them)"
)

SYNCHRONOUS = (
    "ObjsdkFileSystem is synchronous: asynchronous=True (and aiobotocore sessions) are "
    "refused by name"
)

REFUSED_OPTION = "passes an option ObjsdkFileSystem refuses by name (see the migration table)"

NO_CACHES = (
    "inspects fsspec's listings cache (dircache) or the file's fsspec cache object: objsdk "
    "caches no listings and its files read ahead themselves"
)

FIND_WITHDIRS = (
    "find(withdirs=True) includes the directory searched, as fsspec's own find does; s3fs "
    "leaves it out"
)

BLOCKSIZE_TYPO = (
    "passes blocksize= to open(), which s3fs ignores and ObjsdkFileSystem refuses by name "
    "(its name is block_size)"
)

NO_KMS = (
    "SSE-KMS needs a KMS key, which the suite's MinIO has none of "
    "(tests/test_client_sse_minio.py runs SSE against one that has)"
)

SKIPS: dict[str, str] = {
    "test_append": INTERNALS,
    "test_async_close": SYNCHRONOUS,
    "test_async_s3": SYNCHRONOUS,
    "test_async_s3_old": SYNCHRONOUS,
    "test_async_stream": SYNCHRONOUS,
    "test_autocommit_mpu": INTERNALS,
    "test_bucket_exists": (
        "MinIO answers an anonymous HEAD of a missing bucket 403, as of a private one, so "
        "exists() cannot tell them apart"
    ),
    "test_bucket_info": ("info() of a bucket has no VersionId key"),
    "test_bucket_versioning": UNDERSCORE_BUCKET,
    "test_change_defaults_only_subsequent": INTERNALS,
    "test_checksum": INTERNALS,
    "test_client_kwargs": INTERNALS,
    "test_config_kwargs": INTERNALS,
    "test_config_kwargs_class_attributes_default": INTERNALS,
    "test_config_kwargs_class_attributes_override": INTERNALS,
    "test_copy_file_without_etag": NO_CACHES,
    "test_copy_managed": INTERNALS,
    "test_credentials": INTERNALS,
    "test_default_cache_type": NO_CACHES,
    "test_default_pars": REFUSED_OPTION,
    "test_errors": (
        "open() of a bare bucket name raises IsADirectoryError (an OSError) where s3fs raises "
        "ValueError"
    ),
    "test_errors_cause_preservings": INTERNALS,
    "test_find_missing_ls": REFUSED_OPTION,
    "test_get_directories": (
        "stores 'dir/dirkey' and 'dir/dirkey/key0' at once, which MinIO cannot (its objects "
        "are directories on its drives)"
    ),
    "test_get_file_info_with_selector": FIND_WITHDIRS,
    "test_idempotent_connect": INTERNALS,
    "test_info": NO_CACHES,
    "test_invalidate_cache": SYNCHRONOUS,
    "test_isdir": NO_CACHES,
    "test_list_del_multipart": INTERNALS,
    "test_listing_retries_transient_errors": INTERNALS,
    "test_local_expiry_check": REFUSED_OPTION,
    "test_makedirs": UNDERSCORE_BUCKET,
    "test_makedirs_existing_bucket": UNDERSCORE_BUCKET,
    "test_makedirs_pure_bucket_error_on_exist": UNDERSCORE_BUCKET,
    "test_makedirs_pure_bucket_exist_ok": UNDERSCORE_BUCKET,
    "test_merge": INTERNALS,
    "test_mkdir": UNDERSCORE_BUCKET,
    "test_mkdir_bucket_and_key_1": UNDERSCORE_BUCKET,
    "test_mkdir_bucket_and_key_2": UNDERSCORE_BUCKET,
    "test_mkdir_client_region_name": UNDERSCORE_BUCKET,
    "test_mkdir_existing_bucket": UNDERSCORE_BUCKET,
    "test_mkdir_region_name": UNDERSCORE_BUCKET,
    "test_multi_checksum": REFUSED_OPTION,
    "test_multi_find": FIND_WITHDIRS,
    "test_multipart_upload_blocksize": INTERNALS,
    "test_multiple_objects": INTERNALS,
    "test_no_connection_sharing_among_processes": INTERNALS,
    "test_normal_ls_and_find_still_populate_dircache": NO_CACHES,
    "test_not_delegate": INTERNALS,
    "test_pipe_exclusive_big": INTERNALS,
    "test_pipe_exclusive_big_after_small": INTERNALS,
    "test_put_exclusive_big": INTERNALS,
    "test_put_exclusive_big_after_small": INTERNALS,
    "test_put_exclusive_small": INTERNALS,
    "test_raise_exception_when_file_has_changed_during_reading": REFUSED_OPTION,
    "test_read_small": REFUSED_OPTION,
    "test_requester_pays": REFUSED_OPTION,
    "test_requester_pays_makedirs_uses_object_listing": REFUSED_OPTION,
    "test_requester_pays_per_file_override": INTERNALS,
    "test_rm_recursive_folder": (
        "stores 'sub' and 'sub/file' at once, which MinIO cannot (its objects are directories "
        "on its drives)"
    ),
    "test_rmdir": UNDERSCORE_BUCKET,
    "test_s3_glob": ("glob('*') at the root: s3fs refuses it, ObjsdkFileSystem lists the buckets"),
    "test_s3fs_etag_preserving_multipart_copy": (
        "expects a copy to keep the source's multipart ETag; objsdk copies up to 5 GiB in one "
        "CopyObject"
    ),
    "test_seek": (
        "seek(-5, 2) on a 3-byte file: ObjectFile clamps to 0 as io.BytesIO does; s3fs raises "
        "ValueError"
    ),
    "test_seek_reads": BLOCKSIZE_TYPO,
    "test_session_close": SYNCHRONOUS,
    "test_set_session_closed_sessions_rebuilds_once": SYNCHRONOUS,
    "test_set_session_concurrent_no_leak": SYNCHRONOUS,
    "test_set_session_preserves_injected_session": SYNCHRONOUS,
    "test_set_session_sessions_none": SYNCHRONOUS,
    "test_split_path": ("AWS access-point ARNs as bucket names: not an S3-compatible service's"),
    "test_ssl_off": INTERNALS,
    "test_upload_part_with_prime_pads": INTERNALS,
    "test_upload_parts": INTERNALS,
    "test_upload_recursive_to_bucket": (
        "put() into a missing bucket: s3fs creates the bucket, objsdk raises "
        "FileNotFoundError (buckets are made by mkdir)"
    ),
    "test_url": ("reads SigV2's Expires from the URL; objsdk presigns with SigV4 (X-Amz-Expires)"),
    "test_user_session_is_preserved": SYNCHRONOUS,
    "test_versions_dircached": NO_CACHES,
    "test_with_size": (
        "open(size=100) of a 10 MiB object: s3fs truncates to the size given, objsdk checks "
        "it against the object (ObjectChangedError)"
    ),
    "test_write_blocks": INTERNALS,
    "test_write_large_secure": NO_KMS,
    "test_write_limit": BLOCKSIZE_TYPO,
    "test_write_small_secure": NO_KMS,
    "test_write_small_with_acl": INTERNALS,  # reads the ACL back with s3.s3.get_object_acl
    "test_xattr": INTERNALS,
    "test_xattr_setxattr_in_write_mode": INTERNALS,
}


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
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith("AWS_") or k == "AWS_EC2_METADATA_DISABLED"
            },
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
