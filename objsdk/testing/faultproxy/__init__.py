"""A fault-injecting HTTP/1.1 reverse proxy for S3 tests, for faults Toxiproxy cannot do.

Toxiproxy works on TCP bytes; some faults need HTTP: answer ``503 SlowDown`` to one
request of a multipart upload, let ``CompleteMultipartUpload`` reach the server and
lose its reply, strip or weaken the ``ETag``, ignore ``Range``... ::

    with FaultProxy(local_minio.endpoint) as proxy:
        proxy.add_rule(Action.SLOW_DOWN, method="POST", query=["uploadId"], times=1)
        client = Client(proxy.endpoint, access_key, secret_key)
        ...
        assert [r.status for r in proxy.requests(method="POST")] == [200, 503, 200]

Requests that match no rule (or whose rule is used up) are forwarded unchanged; the
``Host`` header is kept, so SigV4 signatures made for the proxy's address stay valid.
Bodies are streamed both ways in small chunks (a GiB object is never held in memory),
client connections are kept alive, and each one gets its own upstream connection. Only
plain HTTP upstreams are supported. Standard library only.

The package: :mod:`.rules` (what to fault, pure data), :mod:`.http` (HTTP/1.1 messages
on a socket), :mod:`.sigv4` (re-signing a request a rule changed) and :mod:`.proxy` (the
server).
"""

from __future__ import annotations

from .proxy import FaultProxy
from .rules import Action, FaultProxyError, LoggedRequest, Rule

__all__ = ["Action", "FaultProxy", "FaultProxyError", "LoggedRequest", "Rule"]
