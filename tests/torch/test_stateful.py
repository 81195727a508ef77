"""ShardDataset with torchdata's StatefulDataLoader: mid-epoch resume with workers, and
checkpoints at an epoch's end followed by set_epoch."""

from __future__ import annotations

import pytest
from conftest import all_keys
from torchdata.stateful_dataloader import StatefulDataLoader

from objsdk.datasets import ShardDataset

# torchdata 0.11 still calls an API torch 2.15 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")


@pytest.mark.parametrize(("workers", "context"), [(0, None), (2, "fork"), (2, "spawn")])
def test_mid_epoch_resume_gives_exactly_the_rest_of_the_epoch(client, shards, workers, context):
    def loader(ds: ShardDataset) -> StatefulDataLoader:
        return StatefulDataLoader(
            ds, batch_size=None, num_workers=workers, multiprocessing_context=context
        )

    ds = ShardDataset(client, shards, seed=7, shuffle_buffer=6)
    ds.set_epoch(1)
    full = [s["__key__"] for s in loader(ds)]
    ds = ShardDataset(client, shards, seed=7, shuffle_buffer=6)
    ds.set_epoch(1)
    dl = loader(ds)
    it = iter(dl)
    head = [next(it)["__key__"] for _ in range(57)]
    state = dl.state_dict()
    del it
    again = ShardDataset(client, shards, seed=7, shuffle_buffer=6)
    again.set_epoch(1)
    dl = loader(again)
    dl.load_state_dict(state)
    rest = [s["__key__"] for s in dl]
    assert head + rest == full
    assert sorted(full) == all_keys()


@pytest.mark.parametrize("set_epoch_first", [True, False])
def test_a_checkpoint_at_the_end_of_an_epoch_then_set_epoch_reads_the_whole_next_epoch(
    client, shards, set_epoch_first
):
    ds = ShardDataset(client, shards, seed=3)
    dl = StatefulDataLoader(ds, batch_size=None)
    ds.set_epoch(0)
    first = [s["__key__"] for s in dl]
    state = dl.state_dict()

    fresh = ShardDataset(client, shards, seed=3)
    fresh.set_epoch(1)
    expected = [s["__key__"] for s in fresh]
    assert expected != first

    again = ShardDataset(client, shards, seed=3)
    dl = StatefulDataLoader(again, batch_size=None)
    if set_epoch_first:
        again.set_epoch(1)
        dl.load_state_dict(state)
    else:
        dl.load_state_dict(state)
        again.set_epoch(1)
    assert [s["__key__"] for s in dl] == expected
