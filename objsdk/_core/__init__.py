"""The sans-IO core: pure functions and values, no sockets, no HTTP library.

Signing, addressing, byte ranges, S3 XML, resume checks, checksums, part planning and
header mapping. Everything here is tested without a network.
"""
