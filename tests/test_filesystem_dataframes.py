"""pandas, pyarrow and Dask (distributed, 2 worker processes) on objsdk:// URLs.

Every result is compared with reading the same files from a local directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from objsdk.filesystem import ObjsdkFileSystem

pytestmark = pytest.mark.integration


@pytest.fixture
def options(s3_server: Any) -> dict[str, str]:
    return {
        "endpoint_url": s3_server.endpoint,
        "key": s3_server.access_key,
        "secret": s3_server.secret_key,
    }


@pytest.fixture
def frame() -> pd.DataFrame:
    n = 3000
    return pd.DataFrame(
        {
            "id": range(n),
            "value": [i * 0.5 for i in range(n)],
            "name": [f"row-{i}" for i in range(n)],
            "part": [f"p{i % 3}" for i in range(n)],
        }
    )


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["part"] = df["part"].astype(str)
    return df.sort_values("id").reset_index(drop=True)[["id", "value", "name", "part"]]


def test_pandas_csv_round_trip(
    frame: pd.DataFrame, options: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    frame.to_csv(tmp_path / "f.csv", index=False)
    frame.to_csv(f"objsdk://{bucket}/f.csv", index=False, storage_options=options)
    remote = pd.read_csv(f"objsdk://{bucket}/f.csv", storage_options=options)
    pd.testing.assert_frame_equal(remote, pd.read_csv(tmp_path / "f.csv"))


def test_pandas_parquet_round_trip(
    frame: pd.DataFrame, options: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    frame.to_parquet(tmp_path / "f.parquet", engine="pyarrow")
    frame.to_parquet(f"objsdk://{bucket}/f.parquet", engine="pyarrow", storage_options=options)
    remote = pd.read_parquet(f"objsdk://{bucket}/f.parquet", storage_options=options)
    pd.testing.assert_frame_equal(remote, pd.read_parquet(tmp_path / "f.parquet"))


@pytest.fixture
def partitioned(
    frame: pd.DataFrame, options: dict[str, str], bucket: str, tmp_path: Path
) -> tuple[str, Path]:
    """The same hive-partitioned dataset in the bucket and in a local directory."""
    local = tmp_path / "ds"
    frame.to_parquet(local, partition_cols=["part"], engine="pyarrow")
    fs = ObjsdkFileSystem(**options)
    fs.put(str(local), f"{bucket}/ds", recursive=True)
    return f"{bucket}/ds", local


def test_pyarrow_dataset_over_a_partitioned_directory(
    partitioned: tuple[str, Path], options: dict[str, str]
) -> None:
    import pyarrow.dataset as ds

    remote_path, local = partitioned
    fs = ObjsdkFileSystem(**options)
    remote = ds.dataset(remote_path, filesystem=fs, format="parquet", partitioning="hive")
    here = ds.dataset(str(local), format="parquet", partitioning="hive")
    assert remote.files
    assert len(remote.files) == len(here.files)
    pd.testing.assert_frame_equal(
        _sorted(remote.to_table().to_pandas()), _sorted(here.to_table().to_pandas())
    )
    only = remote.to_table(filter=ds.field("part") == "p1").to_pandas()
    assert set(only["part"].astype(str)) == {"p1"}


def test_dask_read_parquet_on_two_worker_processes(
    partitioned: tuple[str, Path], options: dict[str, str], frame: pd.DataFrame
) -> None:
    import dask.dataframe as dd
    from distributed import Client as DaskClient
    from distributed import LocalCluster

    remote_path, local = partitioned
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        DaskClient(cluster) as dask_client,
    ):
        ddf = dd.read_parquet(f"objsdk://{remote_path}", storage_options=options)
        assert ddf.npartitions >= 2
        remote = ddf.compute()
        here = dd.read_parquet(str(local)).compute()
        # The work ran on the worker processes, and their logs never show the secret.
        logs = dask_client.get_worker_logs()
        assert len(logs) == 2
        assert options["secret"] not in repr(logs)
    pd.testing.assert_frame_equal(_sorted(remote), _sorted(here))
    assert remote["id"].sort_values().tolist() == frame["id"].tolist()


def test_dask_counts_rows_from_the_parquet_footers(
    partitioned: tuple[str, Path], options: dict[str, str], frame: pd.DataFrame
) -> None:
    import dask.dataframe as dd

    remote_path, _ = partitioned
    # len() reads each file's footer through fs.open(path, default_cache="none").
    ddf = dd.read_parquet(f"objsdk://{remote_path}", storage_options=options)
    assert len(ddf) == len(frame)
