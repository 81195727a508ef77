"""A big NumPy array loaded from a bucket into shared memory and used by worker processes.

Starts a throw-away local MinIO, stores a 256 MiB float64 array as ``.npy``, loads it with
:func:`objsdk.shm.load_shared` (network straight into a shared-memory block, no second
copy), and lets 4 worker processes sum slices of it through ``SharedArray.attach``: the
workers receive only the block's name. One worker writes a value the parent then sees.
When the ``with`` block ends the block is unlinked; nothing is left in /dev/shm.

    python examples/shared_array.py [MiB]
"""

from __future__ import annotations

import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from objsdk import LocalMinio
from objsdk.shm import SharedArray, load_shared


def partial_sum(shared: SharedArray, lo: int, hi: int) -> float:
    # ``shared`` arrived pickled as its name and attached here: no data was copied.
    return float(shared.array[lo:hi].sum())


def mark(name: str) -> None:
    SharedArray.attach(name).array[0] = 42.0


def main() -> None:
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    array = np.random.default_rng(0).random(mib * (1 << 20) // 8)
    with LocalMinio() as minio, tempfile.TemporaryDirectory() as tmp:
        client = minio.client()
        client.create_bucket("arrays")
        path = Path(tmp) / "a.npy"
        np.save(path, array)
        client.upload("arrays", "embeddings.npy", path)

        t = time.perf_counter()
        with load_shared(client, "arrays", "embeddings.npy") as shared:
            print(
                f"loaded {shared.nbytes / 2**20:.0f} MiB into {shared.name} "
                f"in {time.perf_counter() - t:.2f} s"
            )
            n = shared.array.shape[0]
            bounds = [(i * n // 4, (i + 1) * n // 4) for i in range(4)]
            with ProcessPoolExecutor(4) as pool:
                total = sum(pool.map(partial_sum, [shared] * 4, *zip(*bounds, strict=True)))
                assert np.isclose(total, array.sum())
                print(f"4 workers summed it: {total:.3f}")
                pool.submit(mark, shared.name).result()
            assert shared.array[0] == 42.0
            print("a worker's write is visible here:", shared.array[0])
        print("block unlinked:", not Path("/dev/shm", shared.name).exists())


if __name__ == "__main__":
    main()
