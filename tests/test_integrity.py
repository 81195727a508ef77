"""Full-object checksums verified incrementally."""

import base64
import hashlib
import os
import zlib

import pytest

from objsdk._core.checksums import (
    RangeCrc32c,
    StreamChecksum,
    checksum_from_headers,
    crc32c,
    crc32c_b64,
)


def b64(n: int) -> str:
    return base64.b64encode(n.to_bytes(4, "big")).decode()


def test_crc32c_of_the_standard_check_string():
    # CRC-32C check value for "123456789" (RFC 3720 appendix B.4).
    assert crc32c_b64(b"123456789") == b64(0xE3069283)


def test_crc32c_over_chunks_equals_crc32c_of_the_whole():
    data = os.urandom(100_000)
    checker = StreamChecksum("crc32c", crc32c_b64(data))
    view = memoryview(data)
    for i in range(0, len(data), 7_777):
        checker.update(view[i : i + 7_777])
    assert checker.matches()


@pytest.mark.parametrize(
    ("algorithm", "digest"),
    [
        ("crc32", lambda d: b64(zlib.crc32(d))),
        ("sha256", lambda d: base64.b64encode(hashlib.sha256(d).digest()).decode()),
    ],
)
def test_other_algorithms_verify(algorithm, digest):
    data = os.urandom(5000)
    checker = StreamChecksum(algorithm, digest(data))
    checker.update(data)
    assert checker.matches()


def test_a_changed_byte_does_not_match():
    data = bytearray(os.urandom(5000))
    checker = StreamChecksum("crc32c", crc32c_b64(data))
    data[1234] ^= 1
    checker.update(data)
    assert not checker.matches()


def test_full_object_checksum_is_picked_from_headers():
    checker = checksum_from_headers(
        {"x-amz-checksum-sha256": "abc=", "x-amz-checksum-crc32c": "AAAAAA=="}
    )
    assert checker is not None
    assert checker.algorithm == "crc32c"  # the cheapest one


def test_composite_checksums_are_not_verified():
    assert checksum_from_headers({"x-amz-checksum-crc32c": "AAAAAA==-3"}) is None
    assert (
        checksum_from_headers(
            {"x-amz-checksum-crc32c": "AAAAAA==", "x-amz-checksum-type": "COMPOSITE"}
        )
        is None
    )


def test_no_checksum_headers_means_nothing_to_verify():
    assert checksum_from_headers({"ETag": '"x"'}) is None


def test_range_crcs_added_in_any_order_combine_to_the_crc32c_of_the_whole():
    data = os.urandom(10_000)
    cuts = [(0, 1), (1, 4096), (4096, 4097), (4097, 9000), (9000, 10_000)]
    crcs = RangeCrc32c()
    for start, stop in reversed(cuts):
        crcs.add(start, stop, crc32c(data[start:stop]))
    assert crcs.gaps(len(data)) == []
    assert crcs.value(len(data)) == crc32c(data)


def test_range_crcs_name_the_ranges_still_missing():
    crcs = RangeCrc32c()
    crcs.add(100, 200, 0)
    crcs.add(300, 400, 0)
    assert crcs.gaps(500) == [(0, 100), (200, 300), (400, 500)]


def test_range_crcs_that_do_not_tile_the_object_give_no_value():
    crcs = RangeCrc32c()
    crcs.add(0, 100, 0)
    crcs.add(150, 200, 0)
    with pytest.raises(ValueError, match="offset 100"):
        crcs.value(200)
    with pytest.raises(ValueError, match="end at offset 200, not at 300"):
        _tiled(200).value(300)


def _tiled(size: int) -> RangeCrc32c:
    crcs = RangeCrc32c()
    crcs.add(0, size, 0)
    return crcs
