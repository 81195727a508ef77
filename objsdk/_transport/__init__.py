"""The transport seam: send one signed request, get a response whose body streams.

Only this package imports ``requests``, ``urllib3`` or ``http.client``.
"""
