"""Every sample is read by exactly one rank per epoch, and all ranks run the same number of steps."""

import collections

import numpy as np
import pytest

from horovod_trainer import input_pipeline, sharding

WORLD_SIZES = (1, 2, 3, 4, 5, 7, 8)


@pytest.mark.parametrize(
    "shard_sizes",
    [[10], [288, 288, 288, 287, 287], [1, 0, 5, 3], [7] * 9, [1000, 1]],
    ids=["one-file", "five-files", "tiny-and-empty-files", "nine-files", "lopsided"],
)
@pytest.mark.parametrize("batch_size", [1, 4, 32])
def test_plans_cover_every_sample_exactly_once(shard_sizes, batch_size):
    total = sum(shard_sizes)
    starts = np.cumsum([0] + shard_sizes[:-1])
    for size in [s for s in WORLD_SIZES if s <= total]:
        owners = collections.Counter()
        plans = [sharding.plan_rank(shard_sizes, size, rank, batch_size) for rank in range(size)]
        for plan in plans:
            read = []
            for segment in plan.segments:
                assert segment.skip + segment.take <= shard_sizes[segment.shard_index]
                first = starts[segment.shard_index] + segment.skip
                read.extend(range(first, first + segment.take))
            assert len(read) == plan.num_samples
            owners.update(read)
        assert sorted(owners) == list(range(total)) and set(owners.values()) == {1}, (size, owners)
        assert len({plan.steps_per_epoch for plan in plans}) == 1
        assert max(p.num_samples for p in plans) - min(p.num_samples for p in plans) <= 1
        assert all(0 <= plan.padded_samples <= batch_size for plan in plans)


def test_too_many_ranks_is_an_error():
    with pytest.raises(ValueError):
        sharding.plan_rank([2, 1], 4, 0, 8)


def rank_ids(data, plan, seed, epoch=0):
    """Sample ids with weight 1, and the number of examples, that the pipeline yields for one epoch."""
    examples = input_pipeline.rank_examples(data, "train", plan, input_pipeline.epoch_seed(seed, epoch, plan.rank))
    ids, count = [], 0
    for example in examples.as_numpy_iterator():
        count += 1
        if example["weight"] == 1.0:
            ids.append(int(example["id"]))
    return ids, count


@pytest.mark.parametrize("world_size", [2, 3, 7])
def test_pipeline_reads_each_tfrecord_sample_once_across_ranks(data, world_size):
    batch_size = 32
    sizes = [shard.samples for shard in data.shards("train")]
    seen = collections.Counter()
    batch_counts = set()
    for rank in range(world_size):
        plan = sharding.plan_rank(sizes, world_size, rank, batch_size)
        ids, count = rank_ids(data, plan, seed=3)
        assert count == plan.steps_per_epoch * batch_size
        seen.update(ids)
        batches = input_pipeline.train_batches(data, plan, 3, 0, 1)
        weights = [w.sum() for _, _, w in batches.as_numpy_iterator()]
        batch_counts.add(len(weights))
        assert sum(weights) == plan.num_samples
    assert sorted(seen) == list(range(data.num_samples("train")))
    assert set(seen.values()) == {1}
    assert len(batch_counts) == 1  # same number of steps on every rank


def test_each_epoch_has_its_own_order_and_the_same_samples(data):
    plan = sharding.plan_rank([shard.samples for shard in data.shards("train")], 2, 1, 32)
    first, _ = rank_ids(data, plan, seed=0, epoch=0)
    second, _ = rank_ids(data, plan, seed=0, epoch=1)
    assert first != second and sorted(first) == sorted(second)


def test_skipping_steps_continues_the_same_epoch_sequence(data):
    plan = sharding.plan_rank([shard.samples for shard in data.shards("train")], 3, 0, 16)
    full = list(input_pipeline.train_batches(data, plan, 5, 2, 4).as_numpy_iterator())
    resumed = list(input_pipeline.train_batches(data, plan, 5, 2, 4, skip_steps=7).as_numpy_iterator())
    assert len(full) == 2 * plan.steps_per_epoch and len(resumed) == len(full) - 7
    for (images_a, labels_a, _), (images_b, labels_b, _) in zip(full[7:], resumed, strict=False):
        np.testing.assert_array_equal(labels_a, labels_b)
        np.testing.assert_array_equal(images_a, images_b)


# ----- last_batch="drop": what batch-normalisation models train with


@pytest.mark.parametrize(
    "shard_sizes",
    [[288, 288, 288, 287, 287], [1, 0, 5, 3, 40], [7] * 9, [1000, 1]],
    ids=["five-files", "tiny-and-empty-files", "nine-files", "lopsided"],
)
@pytest.mark.parametrize("batch_size", [1, 4, 32])
def test_drop_plans_have_equal_steps_and_no_filler(shard_sizes, batch_size):
    total = sum(shard_sizes)
    for size in [s for s in WORLD_SIZES if total // s >= batch_size]:
        plans = [sharding.plan_rank(shard_sizes, size, rank, batch_size, "drop") for rank in range(size)]
        assert {plan.steps_per_epoch for plan in plans} == {(total // size) // batch_size}
        assert all(plan.padded_samples == 0 for plan in plans)
        assert all(plan.trained_samples == plan.steps_per_epoch * batch_size for plan in plans)
        # Shares differ by at most one sample, so a rank leaves out at most one batch's worth.
        assert all(0 <= plan.dropped_samples <= batch_size for plan in plans), [p.dropped_samples for p in plans]
        # The blocks still cover every sample exactly once; dropping happens per epoch, after the shuffle.
        assert sum(plan.num_samples for plan in plans) == total


def test_drop_refuses_a_batch_larger_than_a_share():
    with pytest.raises(ValueError, match="less than one batch"):
        sharding.plan_rank([10, 10], 4, 0, 8, "drop")


def epoch_examples(data, plan, seed, epoch, shuffle_buffer):
    seed = input_pipeline.epoch_seed(seed, epoch, plan.rank)
    return list(input_pipeline.rank_examples(data, "train", plan, seed, shuffle_buffer).as_numpy_iterator())


# 3 ranks of 479-480 samples with batch 32 leave out 31-32 each. A window of 112 leaves a last partial
# window of exactly that size, which taking the first samples after the shuffle would drop every epoch.
@pytest.mark.parametrize("world_size, shuffle_buffer", [(3, 10_000), (7, 10_000), (3, 112)])
def test_drop_feeds_only_real_samples_and_leaves_out_different_ones_each_epoch(data, world_size, shuffle_buffer):
    batch_size = 32
    sizes = [shard.samples for shard in data.shards("train")]
    left_out = collections.defaultdict(list)
    for rank in range(world_size):
        plan = sharding.plan_rank(sizes, world_size, rank, batch_size, "drop")
        assert plan.dropped_samples > 0  # 1438 samples over 3 or 7 ranks do not fill whole batches
        own = set(range(plan.first_sample, plan.first_sample + plan.num_samples))
        for epoch in range(3):
            examples = epoch_examples(data, plan, seed=3, epoch=epoch, shuffle_buffer=shuffle_buffer)
            ids = [int(example["id"]) for example in examples]
            assert len(ids) == plan.steps_per_epoch * batch_size
            assert all(example["weight"] == 1.0 for example in examples)  # no weight-0 filler reaches a batch
            assert len(set(ids)) == len(ids) and set(ids) <= own
            left_out[rank].append(frozenset(own - set(ids)))
    for rank, sets in left_out.items():
        assert len(set(sets)) == 3, rank  # a different few every epoch
