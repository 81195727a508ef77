"""Sizes and limits, defined once.

S3's multipart limits are from the S3 user guide ("Amazon S3 multipart upload limits"):
parts of 5 MiB to 5 GiB (the last may be smaller), at most 10,000 parts, objects of at
most 5 TiB, and a single PUT of at most 5 GiB (PutObject).
"""

from __future__ import annotations

__all__ = [
    "ADAPTIVE_CAP",
    "ADAPTIVE_FIRST_WINDOWS",
    "ADAPTIVE_PART_SIZE",
    "ADAPTIVE_PROBE",
    "ADAPTIVE_WINDOW",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MULTIPART_THRESHOLD",
    "DEFAULT_PART_SIZE",
    "DEFAULT_READAHEAD_PART_SIZE",
    "DEFAULT_WRITER_PARALLEL",
    "MAX_OBJECT_SIZE",
    "MAX_PARTS",
    "MAX_PART_SIZE",
    "MAX_SINGLE_PUT",
    "MIN_PART_SIZE",
    "RECEIVE_SLICE",
    "GiB",
    "KiB",
    "MiB",
]

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

MIN_PART_SIZE = 5 * MiB
MAX_PART_SIZE = 5 * GiB
MAX_PARTS = 10_000
MAX_OBJECT_SIZE = 5 << 40
MAX_SINGLE_PUT = 5 * GiB

# How much one network read of ObjectFile asks for.
DEFAULT_CHUNK_SIZE = 1 * MiB
# One socket read of a large receive: the checksum reads each slice while it is in the
# CPU cache, the adaptive level sees its bytes, and the kernel wakes the reader once for
# it (docs/perf.md, "Checksums: what verification costs a read", "Fewer wake-ups per
# receive").
RECEIVE_SLICE = 256 * KiB
# Parts of uploads and downloads.
DEFAULT_PART_SIZE = 16 * MiB
# Parts fetched ahead by ObjectFile's read-ahead: smaller, so the first one arrives soon.
DEFAULT_READAHEAD_PART_SIZE = 8 * MiB
# Uploads below this go as one PUT.
DEFAULT_MULTIPART_THRESHOLD = 64 * MiB
# Parts in flight for ObjectWriter: it also holds the part being filled.
DEFAULT_WRITER_PARALLEL = 2
# Adaptive parallelism (parallel=None, readahead=None): at most this many parts in flight,
# each level measured over at least this many bytes per part in flight.
ADAPTIVE_CAP = 16
ADAPTIVE_WINDOW = MiB // 2
# Reads and downloads judge their first stream over this many windows in a row, by the
# best: on a server sharing the client's cores one window in which the server stalls
# makes a stream look cheap, and a stream that already keeps a core busy climbed; one
# window is enough where it shows a stream far cheaper than any stall makes one look
# (docs/design.md, "Adaptive parallelism").
ADAPTIVE_FIRST_WINDOWS = 3
# The smallest parts of adaptive transfers (see parts.adaptive_part_size): small enough
# that levels up to the cap find parts to run in objects of 128 MiB and more.
ADAPTIVE_PART_SIZE = 8 * MiB
# The last part of an adaptive upload, sent first and alone: one connection measured
# in a fraction of a part's time (only the last part may be under 5 MiB).
ADAPTIVE_PROBE = 1 * MiB
