"""tf.data input for one rank: its block of TFRecord samples, shuffled per epoch, decoded, batched.

Each element the model sees is `(image, label, weight)`. Real samples have weight 1; with
`last_batch="pad"` the filler that tops a rank up to the common number of steps (see sharding.py) has
weight 0, so it changes neither the loss nor the weighted metrics. With "drop" there is no filler.

The shuffle works on the serialized records; decoding (and, for JPEGs, cropping) runs after it, in
`parallel_calls` threads, so the shuffle window holds small strings rather than decoded images.
"""

import dataclasses

import tensorflow as tf

from . import images
from .records import parser
from .sharding import RankPlan

AUTOTUNE = tf.data.AUTOTUNE
MAX_OPEN_FILES = 8


@dataclasses.dataclass(frozen=True)
class Decoding:
    """How records become model inputs: the image size (imagenet layout) and the decode threads."""

    image_size: int = 224
    parallel_calls: int = AUTOTUNE


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
    )


def _with_weight(weight):
    def add(record):
        return {"record": record, "weight": tf.constant(weight, tf.float32)}

    return add


def _window_shuffle(examples, window, seed):
    """Shuffle within consecutive windows of `window` samples, with a stateless seed.

    Dataset.shuffle() takes only a Python seed, so inside the per-epoch flat_map every epoch would get
    the same order. Stateless shuffling keyed by (seed, window index) gives each epoch its own order
    that is nevertheless identical on a rerun. Memory use equals a shuffle buffer of `window`.
    """

    def permute(index, block):
        order = tf.random.experimental.stateless_shuffle(
            tf.range(tf.shape(block["record"])[0]), seed=tf.stack([seed, index])
        )
        return {key: tf.gather(value, order) for key, value in block.items()}

    return examples.batch(window).enumerate().map(permute, num_parallel_calls=AUTOTUNE).unbatch()


def _decoder(manifest, decoding: Decoding, training: bool, seed):
    """(position, {"record", "weight"}) -> {"image", "label", "id", "weight"}."""
    parse = parser(manifest)
    jpeg = manifest.layout == "imagenet"

    def decode(position, element):
        example = parse(element["record"])
        if jpeg:
            if training:
                crop_seed = tf.stack([tf.cast(seed, tf.int64), position])
                example["image"] = images.train_image(example["image"], decoding.image_size, crop_seed)
            else:
                example["image"] = images.eval_image(example["image"], decoding.image_size)
        example["weight"] = element["weight"]
        return example

    return decode


def _leave_out(examples, plan: RankPlan, seed):
    """ "drop": leave out `plan.dropped_samples` samples chosen at random for this epoch's seed.

    Taking the first samples after the window shuffle would always leave out the tail of the last
    window (the windows keep their order), i.e. the same samples every epoch.
    """
    if not plan.dropped_samples:
        return examples
    order = tf.random.experimental.stateless_shuffle(
        tf.range(plan.num_samples, dtype=tf.int64), seed=tf.stack([tf.cast(seed, tf.int64), -1])
    )
    kept = order[plan.dropped_samples :]
    keep = tf.scatter_nd(kept[:, None], tf.ones_like(kept, tf.bool), [plan.num_samples])
    return examples.enumerate().filter(lambda index, _: keep[index]).map(lambda _, example: example)


def rank_examples(
    manifest, split, plan: RankPlan, shuffle_seed=None, shuffle_buffer=10_000, decoding=Decoding(), skip_samples=0
):
    """This rank's samples for one epoch, unbatched and decoded: steps_per_epoch * batch_size dicts, less
    the first `skip_samples` (skipped before decoding; the crops of the rest do not change).

    A shuffle seed marks training data: shuffled, and JPEGs get the random training crop.
    """
    records = _records(manifest, split, plan)
    real = records.map(_with_weight(1.0))
    if shuffle_seed is not None:
        real = _window_shuffle(real, min(shuffle_buffer, plan.num_samples), shuffle_seed)
        real = _leave_out(real, plan, shuffle_seed)
    real = real.take(plan.trained_samples)
    filler = records.repeat().take(plan.padded_samples).map(_with_weight(0.0))
    training = shuffle_seed is not None
    decode = _decoder(manifest, decoding, training, shuffle_seed if training else 0)
    return (
        real.concatenate(filler)
        .enumerate()
        .skip(skip_samples)
        .map(decode, num_parallel_calls=decoding.parallel_calls, deterministic=True)
    )


def _to_batches(examples, batch_size):
    return examples.batch(batch_size, drop_remainder=True).map(
        lambda batch: (batch["image"], batch["label"], batch["weight"]),
        num_parallel_calls=AUTOTUNE,
    )


def epoch_seed(seed, epoch, rank):
    return tf.cast(seed, tf.int64) * 1_000_003 + tf.cast(epoch, tf.int64) * 7919 + rank


def train_batches(
    manifest, plan: RankPlan, seed, first_epoch, last_epoch, skip_steps=0, shuffle_buffer=10_000, decoding=Decoding()
):
    """Batches of epochs [first_epoch, last_epoch) back to back, the first `skip_steps` dropped.

    Each epoch is shuffled with a seed derived from (seed, epoch, rank), so epoch e is the same sequence
    whether it is run straight through or resumed from a checkpoint taken in its middle.
    """

    def one_epoch(epoch):
        # A resumed first epoch skips its trained samples before they are read into batches and decoded.
        skip = tf.where(epoch == first_epoch, tf.constant(skip_steps * plan.batch_size, tf.int64), 0)
        seed_of_epoch = epoch_seed(seed, epoch, plan.rank)
        examples = rank_examples(manifest, "train", plan, seed_of_epoch, shuffle_buffer, decoding, skip)
        return _to_batches(examples, plan.batch_size)

    epochs = tf.data.Dataset.range(first_epoch, last_epoch)
    return epochs.flat_map(one_epoch).prefetch(AUTOTUNE)


def eval_batches(manifest, plan: RankPlan, decoding=Decoding()):
    return _to_batches(rank_examples(manifest, "eval", plan, decoding=decoding), plan.batch_size).prefetch(AUTOTUNE)
