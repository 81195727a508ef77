"""The transport seam: send one signed request, get a response whose body streams.

Every request goes through one pipeline (:mod:`.pipeline`): signed by one
:class:`~objsdk._core.signing.Signer`, its checksum headers chosen by the client's
:class:`~.dialect.ChecksumDialect`, retried in one loop under one classifier
(:mod:`.retry`). The transports (:mod:`.http`, the sendfile PUT in :mod:`.sendfile`,
:mod:`.mock`) only send one attempt. Only this package imports ``requests``, ``urllib3``
or ``http.client``.
"""
