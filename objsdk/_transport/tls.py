"""TLS on the transport's own connections (:mod:`objsdk._transport.wire`): the context
urllib3 builds, verified against what requests verifies against, and the handshake,
failing as urllib3's does.
"""

from __future__ import annotations

import os
import socket
import ssl
from typing import cast

import urllib3.exceptions
from urllib3.util.ssl_ import create_urllib3_context

__all__ = ["context_for", "handshake"]


def context_for(verify: bool | str) -> ssl.SSLContext:
    """The context urllib3 builds (TLS 1.2 or later, its ciphers), verifying against
    the CAs requests would use for the same ``verify``: True (requests' bundle), False,
    or a CA bundle file or directory."""
    context = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED if verify else ssl.CERT_NONE)
    if verify:
        if isinstance(verify, str):
            where = verify
        else:
            # requests' bundle, the one its adapter verifies against (imported here: a
            # plain-HTTP client never needs requests).
            from requests.utils import DEFAULT_CA_BUNDLE_PATH

            where = DEFAULT_CA_BUNDLE_PATH
        if os.path.isdir(where):
            context.load_verify_locations(capath=where)
        else:
            context.load_verify_locations(cafile=where)
        context.check_hostname = True
    else:
        context.check_hostname = False
    return context


def handshake(context: ssl.SSLContext, sock: socket.socket, host: str) -> socket.socket:
    """``sock`` with TLS to ``host`` over it; urllib3's ``ConnectTimeoutError`` or
    ``SSLError`` if that fails. Over a socket that is TLS already (to an https proxy), the
    inner session runs in urllib3's ``SSLTransport``: ssl wraps only a plain socket."""
    try:
        if isinstance(sock, ssl.SSLSocket):
            from urllib3.util.ssltransport import SSLTransport

            return cast(socket.socket, SSLTransport(sock, context, server_hostname=host))
        return context.wrap_socket(sock, server_hostname=host)
    except TimeoutError as e:
        raise urllib3.exceptions.ConnectTimeoutError(
            None, f"TLS handshake with {host} timed out"
        ) from e
    except ssl.SSLError as e:
        raise urllib3.exceptions.SSLError(e) from e
