"""The server's share of a loader's work, without the loader: objects read at a set rate.

perf/bench_datasets.py runs this beside webdataset reading the shards from /dev/shm, to
measure the DataLoader's ceiling on a machine whose cores the server shares: the same
bytes served, at the rate ShardDataset read them, to a process that only receives.

Commands, one per line on standard input:
  ``<bytes per second> <total bytes>``  start reading ``argv[2:]`` (keys of bucket
                                        ``argv[1]``) in turn, one stream each, 4 MiB at a
                                        time, paced to the rate; answers ``started``
  ``stop``                              stop; answers ``<bytes read> <CPU seconds>``
End of input exits. The endpoint and keys come from ``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` (never the command line: other
users can read it).

    python perf/paced_read.py BUCKET KEY [KEY ...]
"""

from __future__ import annotations

import os
import sys
import threading
import time

from objsdk import Client

CHUNK = 4 << 20


def paced(
    client: Client,
    bucket: str,
    keys: list[str],
    rate: float,
    total: int,
    stop: threading.Event,
    read: list[int],
) -> None:
    """Read ``total`` bytes of ``keys`` in turn at ``rate`` bytes/s until ``stop``."""
    buf = memoryview(bytearray(CHUNK))
    start = time.perf_counter()
    i = 0
    while read[0] < total and not stop.is_set():
        with client.open(bucket, keys[i % len(keys)], readahead=0) as f:
            while read[0] < total and not stop.is_set():
                n = f.readinto(buf[: min(CHUNK, total - read[0])])
                if not n:
                    break
                read[0] += n
                ahead = read[0] / rate - (time.perf_counter() - start)
                if ahead > 0:
                    stop.wait(ahead)
        i += 1


def main() -> None:
    bucket, keys = sys.argv[1], sys.argv[2:]
    env = os.environ
    client = Client(env["AWS_ENDPOINT_URL"], env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])
    for line in sys.stdin:
        rate, total = (float(x) for x in line.split())
        stop, read = threading.Event(), [0]
        cpu = time.process_time()
        worker = threading.Thread(
            target=paced, args=(client, bucket, keys, rate, int(total), stop, read)
        )
        worker.start()
        print("started", flush=True)
        if sys.stdin.readline().strip() != "stop":
            stop.set()
            worker.join()
            return
        stop.set()
        worker.join()
        print(read[0], round(time.process_time() - cpu, 3), flush=True)


if __name__ == "__main__":
    main()
