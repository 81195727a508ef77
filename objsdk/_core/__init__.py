"""The sans-IO core: pure functions and values, no sockets, no HTTP library.

Signing, addressing, byte ranges, S3 XML, resume checks, checksums, part planning,
header mapping, the adaptive level and the configuration chain. Everything here is
tested without a network.
"""
