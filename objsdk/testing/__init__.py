"""Developer tooling, never imported by ``import objsdk``: a local MinIO (built from its
Go module by :mod:`~objsdk.testing.gobuild`, run under the crash-safe
:mod:`~objsdk.testing.supervisor`), a local moto server (a second S3 implementation), a
user-named :class:`S3Endpoint`, a Toxiproxy for network faults, an HTTP fault proxy
(:mod:`~objsdk.testing.faultproxy`), loopback stand-ins for the services that hand out
temporary credentials (:mod:`~objsdk.testing.credential_servers`: IMDS, the container
endpoint, STS, the SSO portal) with real ones from MinIO's STS
(:class:`TemporaryCredentials`), and a pytest plugin.

Enable the fixtures with ``pytest_plugins = ["objsdk.testing.pytest_plugin"]``.
"""

from __future__ import annotations

from objsdk.testing.credential_servers import (
    ContainerCredentialsServer,
    InstanceMetadataServer,
    SsoPortal,
    StsServer,
)
from objsdk.testing.endpoint import S3Endpoint, S3EndpointError
from objsdk.testing.features import S3Features
from objsdk.testing.local_minio import LocalMinio
from objsdk.testing.local_moto import LocalMoto, LocalMotoError
from objsdk.testing.temporary_credentials import TemporaryCredentials
from objsdk.testing.toxiproxy import Proxy, Toxiproxy, ToxiproxyError

__all__ = [
    "ContainerCredentialsServer",
    "InstanceMetadataServer",
    "LocalMinio",
    "LocalMoto",
    "LocalMotoError",
    "Proxy",
    "S3Endpoint",
    "S3EndpointError",
    "S3Features",
    "SsoPortal",
    "StsServer",
    "TemporaryCredentials",
    "Toxiproxy",
    "ToxiproxyError",
]
