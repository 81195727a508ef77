"""An S3 service the user names, for running the integration suite against it.

The suite's ``s3_server`` fixture (:mod:`objsdk.testing.pytest_plugin`) is a
:class:`~objsdk.testing.LocalMinio` (the default), a :class:`~objsdk.testing.LocalMoto`,
or an :class:`S3Endpoint` read from the environment::

    OBJSDK_TEST_ENDPOINT=https://s3.example.com \\
    OBJSDK_TEST_ACCESS_KEY=... OBJSDK_TEST_SECRET_KEY=... \\
    OBJSDK_TEST_REGION=eu-west-1 OBJSDK_TEST_BUCKET_PREFIX=myteam-objsdk- \\
    pytest --s3-server=endpoint

The three share what tests use: ``endpoint``, ``access_key``, ``secret_key``,
``region``, ``client()`` and ``env()``. See docs/compatibility.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from objsdk.testing.features import AWS, S3Features, features_from_env
from objsdk.testing.s3_service import service_client, service_env

if TYPE_CHECKING:
    from objsdk.client import Client

__all__ = ["S3Endpoint", "S3EndpointError"]


class S3EndpointError(RuntimeError):
    """The environment does not name a usable endpoint."""


class S3Endpoint:
    """A running S3 service reached at ``endpoint`` with the given keys.

    Nothing is started or stopped: the service is the user's. The secret key never
    appears in ``repr``.
    """

    name = "endpoint"

    def __init__(
        self,
        endpoint: str,
        access_key: str,
        secret_key: str,
        *,
        region: str = "us-east-1",
        ca_bundle: str | None = None,
        features: S3Features = AWS,
    ) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise S3EndpointError(f"endpoint must be an http(s):// URL, got {endpoint!r}")
        self.endpoint = endpoint.rstrip("/")
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self.ca_bundle = ca_bundle
        #: Where the service differs (AWS's behaviour unless told otherwise).
        self.features = features

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> S3Endpoint:
        """The endpoint named by ``OBJSDK_TEST_ENDPOINT``, with ``OBJSDK_TEST_ACCESS_KEY``
        and ``OBJSDK_TEST_SECRET_KEY`` (else ``AWS_ACCESS_KEY_ID`` and
        ``AWS_SECRET_ACCESS_KEY``), ``OBJSDK_TEST_REGION`` (else ``AWS_REGION``, else
        us-east-1), ``OBJSDK_TEST_CA_BUNDLE`` (else ``AWS_CA_BUNDLE``) and
        ``OBJSDK_TEST_FEATURES`` (how the service differs from AWS: see
        :func:`~objsdk.testing.features.features_from_env`)."""
        env = os.environ if environ is None else environ
        endpoint = env.get("OBJSDK_TEST_ENDPOINT")
        if not endpoint:
            raise S3EndpointError("OBJSDK_TEST_ENDPOINT is not set")
        access = env.get("OBJSDK_TEST_ACCESS_KEY") or env.get("AWS_ACCESS_KEY_ID")
        secret = env.get("OBJSDK_TEST_SECRET_KEY") or env.get("AWS_SECRET_ACCESS_KEY")
        if not access or not secret:
            raise S3EndpointError(
                "set OBJSDK_TEST_ACCESS_KEY and OBJSDK_TEST_SECRET_KEY for "
                f"OBJSDK_TEST_ENDPOINT={endpoint}"
            )
        return cls(
            endpoint,
            access,
            secret,
            region=env.get("OBJSDK_TEST_REGION") or env.get("AWS_REGION") or "us-east-1",
            ca_bundle=env.get("OBJSDK_TEST_CA_BUNDLE") or env.get("AWS_CA_BUNDLE") or None,
            features=features_from_env(AWS, env),
        )

    def __repr__(self) -> str:
        return f"S3Endpoint({self.endpoint}, access_key={self.access_key!r})"

    def start(self) -> S3Endpoint:
        return self

    def stop(self) -> None:
        pass

    def __enter__(self) -> S3Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def client(self, **kwargs: Any) -> Client:
        """An objsdk client for this service, trusting ``ca_bundle`` when given;
        ``kwargs`` go to :class:`objsdk.client.Client`."""
        if self.ca_bundle:
            kwargs.setdefault("verify", self.ca_bundle)
        return service_client(self, **kwargs)

    def env(self) -> dict[str, str]:
        """Environment variables pointing AWS-style tools at this service."""
        return service_env(self, self.ca_bundle)
