"""Which samples each rank reads in an epoch, and how many steps that takes. Pure Python.

Choice: contiguous sample-level blocks over the concatenated shards.

* Whole files per rank (`files[rank::size]`) cannot be balanced when the file count is not a multiple
  of the world size, and unequal shares mean unequal step counts, which deadlocks Horovod.
* Per-sample striding (`Dataset.shard(size, rank)`) balances perfectly but makes every rank read every
  file, i.e. the whole data set crosses the network `size` times.

A contiguous block of `ceil(N/size)` or `floor(N/size)` samples per rank gets both: shares differ by at
most one sample, and a rank opens only the shards that overlap its block (reading past the records
before its start in at most the first one). Every sample belongs to exactly one rank.

All ranks run `steps_per_epoch = ceil(ceil(N/size) / batch)` steps; a rank whose share does not fill
that many batches is topped up with copies of its own samples carrying weight 0 (see input_pipeline),
so no sample is skipped or counted twice and the batch shape stays fixed.
"""

import dataclasses
import math
from collections.abc import Sequence


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

    @property
    def padded_samples(self) -> int:
        """Weight-0 filler samples this rank adds to reach steps_per_epoch full batches."""
        return self.steps_per_epoch * self.batch_size - self.num_samples


def rank_range(total, size, rank) -> tuple[int, int]:
    """[start, stop) of the global sample indices owned by rank; shares differ by at most one."""
    base, extra = divmod(total, size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def steps_per_epoch(total, size, batch_size) -> int:
    largest_share = math.ceil(total / size)
    return math.ceil(largest_share / batch_size)


def plan_rank(shard_sizes: Sequence[int], size: int, rank: int, batch_size: int) -> RankPlan:
    total = sum(shard_sizes)
    if not 0 <= rank < size:
        raise ValueError(f"rank {rank} outside world size {size}")
    if total < size:
        raise ValueError(f"{total} samples cannot be split over {size} ranks")
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
        steps_per_epoch=steps_per_epoch(total, size, batch_size),
        batch_size=batch_size,
        segments=tuple(segments),
    )
