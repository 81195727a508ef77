"""Full-object checksums verified incrementally."""

import base64
import hashlib
import os
import subprocess
import sys
import zlib

import pytest

from objsdk._core.checksums import (
    CRC_ALGORITHMS,
    RangeCrc,
    RangeCrc32c,
    StreamChecksum,
    checksum_from_headers,
    crc32c,
    crc32c_b64,
    crc_function,
    full_object_checksum,
)
from objsdk._core.crc import CRC32, CRC32C, CRC64NVME, crc_combine


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


# -- every S3 algorithm ----------------------------------------------------------------------


def crc64nvme_reference(data: bytes) -> int:
    """Bit by bit, from the NVMe spec's parameters (reflected 0x9A6C9329AC4BC9B5, all-ones
    initial value and final XOR): slow, for checking the fast one."""
    crc = (1 << 64) - 1
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x9A6C9329AC4BC9B5 if crc & 1 else crc >> 1
    return crc ^ ((1 << 64) - 1)


@pytest.mark.parametrize(
    ("algorithm", "check"),
    [("crc32", 0xCBF43926), ("crc32c", 0xE3069283), ("crc64nvme", 0xAE8B14860A799888)],
)
def test_each_crc_gives_its_catalogued_check_value(algorithm, check):
    # The CRC RevEng catalogue's check values: the CRC of b"123456789".
    assert crc_function(algorithm)(b"123456789", 0) == check


def test_crc64nvme_hashes_as_the_nvme_spec_defines_it():
    data = os.urandom(3000)
    assert crc_function("crc64nvme")(data, 0) == crc64nvme_reference(data)


@pytest.mark.parametrize("algorithm", ["crc32", "crc32c", "crc64nvme"])
def test_each_crc_reads_chunks_in_place_as_it_would_the_whole(algorithm):
    data = os.urandom(100_000)
    view, crc, fn = memoryview(data), 0, crc_function(algorithm)
    for i in range(0, len(data), 7_777):
        crc = fn(view[i : i + 7_777], crc)
    assert crc == fn(data, 0)


def b64_of(algorithm: str, data: bytes) -> str:
    if algorithm in CRC_ALGORITHMS:
        width = CRC_ALGORITHMS[algorithm].width // 8
        return base64.b64encode(crc_function(algorithm)(data, 0).to_bytes(width, "big")).decode()
    return base64.b64encode(hashlib.new(algorithm, data).digest()).decode()


@pytest.mark.parametrize("algorithm", ["crc32", "crc32c", "crc64nvme", "sha1", "sha256"])
def test_every_s3_algorithm_is_verified_and_catches_one_flipped_bit(algorithm):
    data = bytearray(os.urandom(5000))
    stored = b64_of(algorithm, bytes(data))
    checker = StreamChecksum(algorithm, stored)
    checker.update(data)
    assert checker.matches()
    data[2500] ^= 0x10
    checker = StreamChecksum(algorithm, stored)
    checker.update(data)
    assert not checker.matches()


@pytest.mark.parametrize("algorithm", ["crc32", "crc32c", "crc64nvme"])
def test_range_crcs_of_each_crc_combine_to_the_crc_of_the_whole(algorithm):
    data = os.urandom(10_000)
    fn = crc_function(algorithm)
    crcs = RangeCrc(algorithm)
    for start, stop in [(9000, 10_000), (0, 1), (1, 4096), (4097, 9000), (4096, 4097)]:
        crcs.add(start, stop, fn(data[start:stop], 0))
    assert crcs.value(len(data)) == fn(data, 0)
    assert crcs.encoded(len(data)) == b64_of(algorithm, data)


@pytest.mark.parametrize("poly", [CRC32, CRC32C, CRC64NVME], ids=lambda p: p.name)
def test_combining_over_ranges_of_512_mib_and_more_needs_no_second_pass(poly):
    # zlib's table wraps at k = 32 (x^(2^32) == x^(2^0) for its own polynomial only):
    # for Castagnoli's and NVMe's it gave wrong CRCs once the second range reached
    # 512 MiB. Zero bytes hash fast, so the CRC of A + 600 MiB of zeros is computed
    # outright and compared.
    fn = crc_function(poly.name)
    head = os.urandom(1000)
    zeros = memoryview(bytearray(64 << 20))
    n = 600 << 20
    crc_zeros = 0
    for _ in range(n // len(zeros)):
        crc_zeros = fn(zeros, crc_zeros)
    crc_zeros = fn(zeros[: n % len(zeros)], crc_zeros)
    whole = fn(zeros[: n % len(zeros)], fn(head, 0))
    for _ in range(n // len(zeros)):
        whole = fn(zeros, whole)
    assert crc_combine(poly, fn(head, 0), crc_zeros, n) == whole


@pytest.mark.parametrize("algorithm", ["crc32", "crc32c", "crc64nvme"])
def test_combining_agrees_with_awscrt_where_it_has_combine(algorithm):
    from awscrt import checksums

    combine = getattr(checksums, f"combine_{algorithm}", None)
    if combine is None:
        pytest.skip("this awscrt has no combine functions")
    fn = crc_function(algorithm)
    for len2 in (1, 1000, 1 << 29, 1 << 30, (1 << 40) + 7):
        a, b = fn(b"first", 0), fn(b"second", 0)
        assert crc_combine(CRC_ALGORITHMS[algorithm], a, b, len2) == combine(a, b, len2)


def test_verifying_crc32_and_crc32c_never_loads_awscrt():
    # Loading awscrt costs ~30 ms of CPU: a process that reads objects stored with the
    # common CRCs (boto3's CRC32, objsdk's CRC32C) must not pay it; CRC64NVME alone does.
    code = (
        "import sys\n"
        "from objsdk._core.checksums import StreamChecksum, crc_function\n"
        "for algorithm in ('crc32', 'crc32c'):\n"
        "    crc_function(algorithm)(memoryview(b'x' * 1000), 0)\n"
        "print('awscrt' in sys.modules)\n"
        "crc_function('crc64nvme')(b'x', 0)\n"
        "print('awscrt' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


# -- composite checksums are never taken for full-object ones --------------------------------


def test_a_bare_crc_of_a_multipart_object_with_no_type_is_taken_as_composite():
    # boto3 upload_fileobj(ChecksumAlgorithm="CRC32") read back from a service that states
    # no x-amz-checksum-type and leaves the "-<parts>" off the value.
    checker, why = full_object_checksum({"crc32": "AAAAAA=="}, None, '"d41d8cd9-3"')
    assert checker is None
    assert "composite" in why
    assert checksum_from_headers({"x-amz-checksum-crc32": "AAAAAA==", "ETag": '"abc-3"'}) is None


def test_a_stated_full_object_type_is_verified_whatever_the_etag():
    checker, _ = full_object_checksum({"crc32": "AAAAAA=="}, "FULL_OBJECT", '"abc-3"')
    assert checker is not None
    assert checker.algorithm == "crc32"


def test_a_crc64nvme_is_full_object_even_on_a_multipart_object_with_no_type():
    # S3 computes CRC64NVME only as a full-object checksum.
    checker, _ = full_object_checksum(
        {"crc64nvme": "AAAAAAAAAAA=", "crc32": "AAAAAA=="}, None, '"abc-3"'
    )
    assert checker is not None
    assert checker.algorithm == "crc64nvme"


def test_a_single_part_object_with_no_type_is_full_object():
    checker, _ = full_object_checksum({"sha1": "x"}, None, '"0123456789abcdef"')
    assert checker is not None
    assert checker.algorithm == "sha1"


@pytest.mark.parametrize(
    ("checksums", "kind", "reason"),
    [
        ({}, None, "no checksum stored"),
        ({"crc32": "AAAAAA==-4"}, None, "composite"),
        ({"crc32": "AAAAAA=="}, "COMPOSITE", "composite checksum"),
    ],
)
def test_the_reason_nothing_is_verified_is_given(checksums, kind, reason):
    checker, why = full_object_checksum(checksums, kind, '"e"')
    assert checker is None
    assert reason in why
