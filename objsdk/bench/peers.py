"""Other clients, measured the same way when they are installed.

Each peer reads an object start to end in 1 MiB pieces (``read``), downloads it to a
file (``download``) and uploads a file (``upload``), at the library's defaults, where
the library has that operation. A peer whose package is missing is skipped with a note
(``pip install './objsdk[perf]'`` from the folder holding the clone installs them all;
curl is the system's).

=========== =========================================================================
peer        what is timed
=========== =========================================================================
curl        ``curl -o /dev/null`` / ``-o FILE`` / ``-T FILE`` on presigned URLs (a
            child process: its CPU is counted through ``RUSAGE_CHILDREN``)
requests    ``requests.get(presigned, stream=True).raw.read(1 MiB)``; PUT of the file
boto3       ``get_object()["Body"].read(1 MiB)``; ``download_file``; ``upload_file``
minio       minio-py ``get_object().stream(1 MiB)``; ``fget_object``; ``fput_object``
s3fs        ``S3FileSystem.open(rb).read(1 MiB)``; ``get_file``; ``put_file``
smart_open  ``smart_open.open("s3://...", "rb").read(1 MiB)``; ``open("wb")`` writes
obstore     ``obstore.get().stream(1 MiB)``; the same stream written to a file (obstore
            has no download to a path); ``obstore.put(store, key, Path)``
=========== =========================================================================
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from objsdk import Client
from objsdk._extras import needs_extra

__all__ = ["PEERS", "Peer", "PeerConfig", "make_peer"]

MiB = 1 << 20


@dataclass(frozen=True)
class PeerConfig:
    """Where the peers talk to (a profile's endpoint) and as whom."""

    endpoint: str
    access_key: str
    secret_key: str
    region: str
    bucket: str

    def objsdk(self) -> Client:
        return Client(self.endpoint, self.access_key, self.secret_key, region=self.region)


class Peer:
    """A client library; an operation it lacks is None."""

    name = "peer"
    read: Callable[[str], int] | None = None
    download: Callable[[str, Path], int] | None = None
    upload: Callable[[Path, str], int] | None = None


class Unavailable(Exception):
    """The peer cannot be measured here (the note says why)."""


def _module(name: str, package: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise Unavailable(needs_extra(f"{package} is not installed", "perf")) from None


def _drain(chunks: Any) -> int:
    n = 0
    for chunk in chunks:
        n += len(chunk)
    return n


class Curl(Peer):
    name = "curl"

    def __init__(self, cfg: PeerConfig) -> None:
        binary = shutil.which("curl")
        if binary is None:
            raise Unavailable("curl is not on PATH")
        self.binary = binary
        self.cfg = cfg
        self.presigner = cfg.objsdk()
        self.read = self._read
        self.download = self._download
        self.upload = self._upload

    def _curl(self, *args: str) -> int:
        out = subprocess.run(
            [self.binary, "-sS", "--fail", "--noproxy", "*", *args],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode:
            # Not CalledProcessError: its message would carry the presigned URL.
            raise RuntimeError(f"curl exited {out.returncode}: {out.stderr.strip()[-300:]}")
        return int(float(out.stdout.strip() or 0))

    def _read(self, key: str) -> int:
        url = self.presigner.presign("GET", self.cfg.bucket, key)
        return self._curl("-o", "/dev/null", "-w", "%{size_download}", url)

    def _download(self, key: str, path: Path) -> int:
        url = self.presigner.presign("GET", self.cfg.bucket, key)
        return self._curl("-o", str(path), "-w", "%{size_download}", url)

    def _upload(self, path: Path, key: str) -> int:
        url = self.presigner.presign("PUT", self.cfg.bucket, key)
        return self._curl("-T", str(path), "-o", "/dev/null", "-w", "%{size_upload}", url)


class Requests(Peer):
    name = "requests"

    def __init__(self, cfg: PeerConfig) -> None:
        requests = _module("requests", "requests")
        self.session = requests.Session()
        self.session.trust_env = False  # the server is local or named: no HTTP proxy
        self.cfg = cfg
        self.presigner = cfg.objsdk()
        self.read = self._read
        self.upload = self._upload

    def _read(self, key: str) -> int:
        url = self.presigner.presign("GET", self.cfg.bucket, key)
        n = 0
        with self.session.get(url, stream=True, timeout=300) as r:
            r.raise_for_status()
            while chunk := r.raw.read(MiB):
                n += len(chunk)
        return n

    def _upload(self, path: Path, key: str) -> int:
        url = self.presigner.presign("PUT", self.cfg.bucket, key)
        with path.open("rb") as f:
            self.session.put(url, data=f, timeout=300).raise_for_status()
        return path.stat().st_size


def _boto3_client(cfg: PeerConfig) -> Any:
    boto3 = _module("boto3", "boto3")
    config = importlib.import_module("botocore.config")
    return boto3.client(
        "s3",
        endpoint_url=cfg.endpoint,
        aws_access_key_id=cfg.access_key,
        aws_secret_access_key=cfg.secret_key,
        region_name=cfg.region,
        config=config.Config(s3={"addressing_style": "path"}),
    )


class Boto3(Peer):
    name = "boto3"

    def __init__(self, cfg: PeerConfig) -> None:
        self.s3 = _boto3_client(cfg)
        self.bucket = cfg.bucket
        self.read = self._read
        self.download = self._download
        self.upload = self._upload

    def _read(self, key: str) -> int:
        body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"]
        n = 0
        with body:
            while chunk := body.read(MiB):
                n += len(chunk)
        return n

    def _download(self, key: str, path: Path) -> int:
        self.s3.download_file(self.bucket, key, str(path))
        return path.stat().st_size

    def _upload(self, path: Path, key: str) -> int:
        self.s3.upload_file(str(path), self.bucket, key)
        return path.stat().st_size


class MinioPy(Peer):
    name = "minio"

    def __init__(self, cfg: PeerConfig) -> None:
        minio = _module("minio", "minio")
        url = urlsplit(cfg.endpoint)
        self.mc = minio.Minio(
            url.netloc,
            access_key=cfg.access_key,
            secret_key=cfg.secret_key,
            secure=url.scheme == "https",
            region=cfg.region,
        )
        self.bucket = cfg.bucket
        self.read = self._read
        self.download = self._download
        self.upload = self._upload

    def _read(self, key: str) -> int:
        resp = self.mc.get_object(self.bucket, key)
        try:
            return _drain(resp.stream(MiB))
        finally:
            resp.close()
            resp.release_conn()

    def _download(self, key: str, path: Path) -> int:
        self.mc.fget_object(self.bucket, key, str(path))
        return path.stat().st_size

    def _upload(self, path: Path, key: str) -> int:
        self.mc.fput_object(self.bucket, key, str(path))
        return path.stat().st_size


class S3fs(Peer):
    name = "s3fs"

    def __init__(self, cfg: PeerConfig) -> None:
        s3fs = _module("s3fs", "s3fs")
        self.fs = s3fs.S3FileSystem(
            key=cfg.access_key,
            secret=cfg.secret_key,
            endpoint_url=cfg.endpoint,
            client_kwargs={"region_name": cfg.region},
            skip_instance_cache=True,
        )
        self.bucket = cfg.bucket
        self.read = self._read
        self.download = self._download
        self.upload = self._upload

    def _read(self, key: str) -> int:
        n = 0
        with self.fs.open(f"{self.bucket}/{key}", "rb") as f:
            while chunk := f.read(MiB):
                n += len(chunk)
        return n

    def _download(self, key: str, path: Path) -> int:
        self.fs.get_file(f"{self.bucket}/{key}", str(path))
        return path.stat().st_size

    def _upload(self, path: Path, key: str) -> int:
        self.fs.put_file(str(path), f"{self.bucket}/{key}")
        self.fs.invalidate_cache()
        return path.stat().st_size


class SmartOpen(Peer):
    name = "smart_open"

    def __init__(self, cfg: PeerConfig) -> None:
        self.smart_open = _module("smart_open", "smart_open")
        self.params = {"client": _boto3_client(cfg)}
        self.bucket = cfg.bucket
        self.read = self._read
        self.upload = self._upload

    def _read(self, key: str) -> int:
        n = 0
        uri = f"s3://{self.bucket}/{key}"
        with self.smart_open.open(uri, "rb", transport_params=self.params) as f:
            while chunk := f.read(MiB):
                n += len(chunk)
        return n

    def _upload(self, path: Path, key: str) -> int:
        uri = f"s3://{self.bucket}/{key}"
        with (
            path.open("rb") as src,
            self.smart_open.open(uri, "wb", transport_params=self.params) as dst,
        ):
            shutil.copyfileobj(src, dst, MiB)
        return path.stat().st_size


class Obstore(Peer):
    name = "obstore"

    def __init__(self, cfg: PeerConfig) -> None:
        self.obstore = _module("obstore", "obstore")
        store = importlib.import_module("obstore.store")
        self.store = store.S3Store(
            cfg.bucket,
            endpoint=cfg.endpoint,
            access_key_id=cfg.access_key,
            secret_access_key=cfg.secret_key,
            region=cfg.region,
            virtual_hosted_style_request=False,
            client_options={"allow_http": True},
        )
        self.read = self._read
        self.download = self._download
        self.upload = self._upload

    def _read(self, key: str) -> int:
        return _drain(self.obstore.get(self.store, key).stream(min_chunk_size=MiB))

    def _download(self, key: str, path: Path) -> int:
        with path.open("wb") as f:
            for chunk in self.obstore.get(self.store, key).stream(min_chunk_size=MiB):
                f.write(chunk)
        return path.stat().st_size

    def _upload(self, path: Path, key: str) -> int:
        self.obstore.put(self.store, key, path)
        return path.stat().st_size


PEERS: dict[str, Callable[[PeerConfig], Peer]] = {
    "curl": Curl,
    "requests": Requests,
    "boto3": Boto3,
    "minio": MinioPy,
    "s3fs": S3fs,
    "smart_open": SmartOpen,
    "obstore": Obstore,
}


def make_peer(name: str, cfg: PeerConfig) -> Peer | str:
    """The peer, or a note saying why it is skipped."""
    try:
        return PEERS[name](cfg)
    except Unavailable as exc:
        return f"{name}: skipped, {exc}"
    except Exception as exc:
        return f"{name}: skipped, could not be set up ({type(exc).__name__}: {exc})"
