"""pandas, pyarrow and Dask on objsdk:// URLs, against a local MinIO this script starts.

    python examples/pandas_dask.py

Needs the ``fsspec`` extra plus pandas, pyarrow, dask[dataframe] and distributed (all in
the ``dev`` extra). Writes a hive-partitioned Parquet dataset with pandas, reads it back
with pandas, with pyarrow.dataset (a filtered scan) and with Dask on two worker
processes, and checks every result against the original frame.
"""

from __future__ import annotations

import os
import time

import dask.dataframe as dd
import pandas as pd
import pyarrow.dataset as ds
from dask.distributed import Client as DaskClient
from dask.distributed import LocalCluster

from objsdk import LocalMinio
from objsdk.filesystem import ObjsdkFileSystem


def main() -> None:
    with LocalMinio() as minio, minio.client() as client:
        bucket = "example-" + os.urandom(4).hex()
        client.create_bucket(bucket)
        options = {
            "endpoint_url": minio.endpoint,
            "key": minio.access_key,
            "secret": minio.secret_key,
        }

        n = 200_000
        frame = pd.DataFrame(
            {
                "id": range(n),
                "amount": [(i * 37) % 1000 / 10 for i in range(n)],
                "region": [("north", "south", "east", "west")[i % 4] for i in range(n)],
            }
        )

        # pandas: one file, then a partitioned dataset (region=north/..., ...).
        t = time.perf_counter()
        frame.to_parquet(f"objsdk://{bucket}/sales.parquet", storage_options=options)
        frame.to_parquet(
            f"objsdk://{bucket}/sales", partition_cols=["region"], storage_options=options
        )
        print(f"pandas wrote {n} rows twice in {time.perf_counter() - t:.2f} s")

        back = pd.read_parquet(f"objsdk://{bucket}/sales.parquet", storage_options=options)
        pd.testing.assert_frame_equal(back, frame)
        print("pandas read_parquet: identical to the original frame")

        # pyarrow: a filtered scan of the partitioned dataset.
        fs = ObjsdkFileSystem(**options)
        dataset = ds.dataset(
            f"{bucket}/sales", filesystem=fs, format="parquet", partitioning="hive"
        )
        north = dataset.to_table(filter=ds.field("region") == "north").to_pandas()
        assert len(north) == n // 4
        print(f"pyarrow.dataset: {len(dataset.files)} files, {len(north)} rows in region=north")

        # Dask: the same dataset on two worker processes. The filesystem reaches them
        # pickled without its secret (as a Client is): they find it in their environment,
        # as on a real cluster (or pass pickle_credentials=True in the storage options).
        os.environ.update(minio.env())
        with (
            LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster,
            DaskClient(cluster),
        ):
            ddf = dd.read_parquet(f"objsdk://{bucket}/sales", storage_options=options)
            by_region = ddf.groupby("region")["amount"].sum().compute()
        expected = frame.groupby("region")["amount"].sum()
        for region, total in expected.items():
            assert abs(by_region[str(region)] - total) < 1e-6
        print(f"dask on 2 worker processes: {ddf.npartitions} partitions, sums match pandas")

        for key in [e.key for e in client.list_objects(bucket)]:
            client.delete_object(bucket, key)
        client.delete_bucket(bucket)


if __name__ == "__main__":
    main()
