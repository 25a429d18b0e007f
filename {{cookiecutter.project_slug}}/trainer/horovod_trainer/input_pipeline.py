"""tf.data input for one rank: its block of TFRecord samples, shuffled per epoch, padded, batched.

Each element the model sees is `(image, label, weight)`. Real samples have weight 1; the filler that
tops a rank up to the common number of steps (see sharding.py) has weight 0, so it changes neither the
loss nor the weighted metrics.
"""

import tensorflow as tf

from .records import decoder
from .sharding import RankPlan

AUTOTUNE = tf.data.AUTOTUNE
MAX_OPEN_FILES = 8


def _records(manifest, split, plan: RankPlan):
    shards = manifest.shards(split)
    segments = tf.data.Dataset.from_tensor_slices(
        (
            [shards[s.shard_index].path for s in plan.segments],
            tf.constant([s.skip for s in plan.segments], tf.int64),
            tf.constant([s.take for s in plan.segments], tf.int64),
        )
    )
    return segments.interleave(
        lambda path, skip, take: tf.data.TFRecordDataset(path).skip(skip).take(take),
        cycle_length=min(len(plan.segments), MAX_OPEN_FILES),
        num_parallel_calls=AUTOTUNE,
        deterministic=True,  # the same order on a rerun, so a mid-epoch resume skips the right batches
    ).map(decoder(manifest.feature_shape), num_parallel_calls=AUTOTUNE, deterministic=True)


def _with_weight(weight):
    def add(example):
        return dict(example, weight=tf.constant(weight, tf.float32))

    return add


def _window_shuffle(examples, window, seed):
    """Shuffle within consecutive windows of `window` samples, with a stateless seed.

    Dataset.shuffle() takes only a Python seed, so inside the per-epoch flat_map every epoch would get
    the same order. Stateless shuffling keyed by (seed, window index) gives each epoch its own order
    that is nevertheless identical on a rerun. Memory use equals a shuffle buffer of `window`.
    """

    def permute(index, block):
        order = tf.random.experimental.stateless_shuffle(
            tf.range(tf.shape(block["id"])[0]), seed=tf.stack([seed, index])
        )
        return {key: tf.gather(value, order) for key, value in block.items()}

    return examples.batch(window).enumerate().map(permute, num_parallel_calls=AUTOTUNE).unbatch()


def rank_examples(manifest, split, plan: RankPlan, shuffle_seed=None, shuffle_buffer=10_000):
    """This rank's samples for one epoch, unbatched: exactly steps_per_epoch * batch_size dicts."""
    records = _records(manifest, split, plan)
    real = records.map(_with_weight(1.0))
    if shuffle_seed is not None:
        real = _window_shuffle(real, min(shuffle_buffer, plan.num_samples), shuffle_seed)
    filler = records.repeat().take(plan.padded_samples).map(_with_weight(0.0))
    return real.concatenate(filler)


def _to_batches(examples, batch_size):
    return examples.batch(batch_size, drop_remainder=True).map(
        lambda batch: (batch["image"], batch["label"], batch["weight"]),
        num_parallel_calls=AUTOTUNE,
    )


def epoch_seed(seed, epoch, rank):
    return tf.cast(seed, tf.int64) * 1_000_003 + tf.cast(epoch, tf.int64) * 7919 + rank


def train_batches(manifest, plan: RankPlan, seed, first_epoch, last_epoch, skip_steps=0, shuffle_buffer=10_000):
    """Batches of epochs [first_epoch, last_epoch) back to back, the first `skip_steps` dropped.

    Each epoch is shuffled with a seed derived from (seed, epoch, rank), so epoch e is the same sequence
    whether it is run straight through or resumed from a checkpoint taken in its middle.
    """

    def one_epoch(epoch):
        examples = rank_examples(manifest, "train", plan, epoch_seed(seed, epoch, plan.rank), shuffle_buffer)
        return _to_batches(examples, plan.batch_size)

    epochs = tf.data.Dataset.range(first_epoch, last_epoch)
    return epochs.flat_map(one_epoch).skip(skip_steps).prefetch(AUTOTUNE)


def eval_batches(manifest, plan: RankPlan):
    return _to_batches(rank_examples(manifest, "eval", plan), plan.batch_size).prefetch(AUTOTUNE)
