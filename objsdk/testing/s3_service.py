"""What tests use of an S3 service, whoever runs it (a :class:`~objsdk.testing.LocalMinio`,
a :class:`~objsdk.testing.LocalMoto`, a user's :class:`~objsdk.testing.S3Endpoint`): an
objsdk client for it, and the environment that points AWS-style tools at it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from objsdk.client import Client

__all__ = ["S3Service", "service_client", "service_env"]


class S3Service(Protocol):
    """An S3 service reached at ``endpoint`` with the given keys, in ``region``."""

    access_key: str
    secret_key: str
    region: str

    @property
    def endpoint(self) -> str: ...


def service_client(service: S3Service, **kwargs: Any) -> Client:
    """An objsdk client for ``service``, in its region unless ``kwargs`` say otherwise;
    ``kwargs`` go to :class:`objsdk.client.Client`."""
    from objsdk.client import Client

    kwargs.setdefault("region", service.region)
    return Client(service.endpoint, service.access_key, service.secret_key, **kwargs)


def service_env(service: S3Service, ca_bundle: str | None = None) -> dict[str, str]:
    """Environment variables pointing AWS-style tools at ``service``, trusting the CA
    in the PEM file ``ca_bundle`` when given."""
    env = {
        "AWS_ENDPOINT_URL": service.endpoint,
        "AWS_ACCESS_KEY_ID": service.access_key,
        "AWS_SECRET_ACCESS_KEY": service.secret_key,
        "AWS_REGION": service.region,
    }
    if ca_bundle:
        env["AWS_CA_BUNDLE"] = ca_bundle
    return env
