"""Which samples each rank reads in an epoch, and how many steps that takes. Pure Python.

Choice: contiguous sample-level blocks over the concatenated shards.

* Whole files per rank (`files[rank::size]`) cannot be balanced when the file count is not a multiple
  of the world size, and unequal shares mean unequal step counts, which deadlocks Horovod.
* Per-sample striding (`Dataset.shard(size, rank)`) balances perfectly but makes every rank read every
  file, i.e. the whole data set crosses the network `size` times.

A contiguous block of `ceil(N/size)` or `floor(N/size)` samples per rank gets both: shares differ by at
most one sample, and a rank opens only the shards that overlap its block (reading past the records
before its start in at most the first one). Every sample belongs to exactly one rank.

Every rank runs the same number of steps (Horovod deadlocks when one rank runs more allreduces than
the others). Two ways to get there, `LAST_BATCH`:

* "pad": `steps = ceil(ceil(N/size) / batch)`; a rank whose share does not fill that many batches is
  topped up with copies of its own samples carrying weight 0 (see input_pipeline). Every sample is
  trained on exactly once per epoch. Right for models without batch normalisation only: a weight-0
  sample adds nothing to the loss, but in training mode it still enters the batch's mean and
  variance, and the moving averages used at evaluation.
* "drop": `steps = floor(floor(N/size) / batch)`; each epoch, each rank leaves out
  `share - steps * batch` of its samples, chosen at random (input_pipeline._leave_out). No filler exists,
  so batch statistics see only real samples. A rank leaves out fewer than `batch + 1` samples per
  epoch, a different random few every epoch, so over a run every sample is used; this is what the
  reference ImageNet recipes do (a global batch of 8192 over 1.28M images leaves out under 0.7%).

Evaluation always pads: it runs in inference mode, where batch norm uses its moving averages, so the
weight-0 filler is harmless there and the accuracy is exact.
"""

import dataclasses
import math
from collections.abc import Sequence

LAST_BATCH = ("pad", "drop")


@dataclasses.dataclass(frozen=True)
class Segment:
    """Read `take` records of shard `shard_index` after skipping the first `skip`."""

    shard_index: int
    skip: int
    take: int


@dataclasses.dataclass(frozen=True)
class RankPlan:
    rank: int
    size: int
    first_sample: int  # global index of this rank's first sample
    num_samples: int  # real samples of this rank
    steps_per_epoch: int  # identical on every rank
    batch_size: int
    segments: tuple[Segment, ...]
    last_batch: str = "pad"

    @property
    def trained_samples(self) -> int:
        """Real samples this rank trains on per epoch."""
        return min(self.num_samples, self.steps_per_epoch * self.batch_size)

    @property
    def padded_samples(self) -> int:
        """Weight-0 filler samples this rank adds to reach steps_per_epoch full batches ("pad")."""
        return max(0, self.steps_per_epoch * self.batch_size - self.num_samples)

    @property
    def dropped_samples(self) -> int:
        """Samples of this rank's share left out of each epoch ("drop"); which ones changes per epoch."""
        return self.num_samples - self.trained_samples


def rank_range(total, size, rank) -> tuple[int, int]:
    """[start, stop) of the global sample indices owned by rank; shares differ by at most one."""
    base, extra = divmod(total, size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def steps_per_epoch(total, size, batch_size, last_batch="pad") -> int:
    if last_batch == "drop":
        return (total // size) // batch_size
    largest_share = math.ceil(total / size)
    return math.ceil(largest_share / batch_size)


def plan_rank(shard_sizes: Sequence[int], size: int, rank: int, batch_size: int, last_batch="pad") -> RankPlan:
    total = sum(shard_sizes)
    if last_batch not in LAST_BATCH:
        raise ValueError(f"last_batch must be one of {', '.join(LAST_BATCH)} (got {last_batch!r})")
    if not 0 <= rank < size:
        raise ValueError(f"rank {rank} outside world size {size}")
    if total < size:
        raise ValueError(f"{total} samples cannot be split over {size} ranks")
    steps = steps_per_epoch(total, size, batch_size, last_batch)
    if steps == 0:
        raise ValueError(
            f"{total} samples over {size} ranks leave {total // size} per rank, less than one batch of "
            f"{batch_size}; lower --batch-size"
        )
    start, stop = rank_range(total, size, rank)
    segments: list[Segment] = []
    shard_start = 0
    for index, shard_size in enumerate(shard_sizes):
        shard_stop = shard_start + shard_size
        low, high = max(start, shard_start), min(stop, shard_stop)
        if low < high:
            segments.append(Segment(index, low - shard_start, high - low))
        shard_start = shard_stop
    return RankPlan(
        rank=rank,
        size=size,
        first_sample=start,
        num_samples=stop - start,
        steps_per_epoch=steps,
        batch_size=batch_size,
        segments=tuple(segments),
        last_batch=last_batch,
    )
