"""The fabric acceptance test's pass mark: all_reduce bus bandwidth at one message size, per instance type.

`scripts/new-job --kind nccl-tests` runs nccl-tests' all_reduce_perf across whole GPU nodes and pipes its table
into `python -m horovod_trainer.fabric_check`, which fails the job when the bus bandwidth at MESSAGE_SIZE is below
the floor named here (docs/operations.md of a generated repository, "Acceptance test").

Where the figures come from: AWS's published two-node all_reduce_perf results on healthy nodes
(awslabs/awsome-distributed-training at 0edaf15, micro-benchmarks/nccl-tests/README.md), busbw of the 1073741824 B
row: p4de.24xlarge 76.79 GB/s ("Results", Slurm); p5.48xlarge 436.95 GB/s ("Results", Slurm) and 313.29 GB/s (the
EKS MPIJob example, EFA installer 1.28.0 and NCCL 2.18.5). The floor is 80% of the lowest of them, rounded down to a
multiple of 10 GB/s: the spread between runs on healthy pairs is inside 20%, and taking the lowest healthy run
keeps an older software stack from failing a healthy pair, while a node that has lost EFA or NVLink bandwidth
still falls far below it (a pair runs at the pace of its slowest rank; one at a third of its neighbours' fails
every floor here).

AWS's health-check thresholds (same repository, 4.validation_and_observability/2.gpu-cluster-healthcheck/checks/
5-nccl-allreduce.sh: p4d 300 GB/s, p5, p5e and p5en 800 GB/s) are not used: they are above AWS's own published
two-node results, so a healthy pair would fail them, and that script only warns, on the largest busbw of a sweep
that stops at 128 MiB, where no two-node p4d or p5 run comes near them. A team whose healthy nodes measure
otherwise sets its own floor with `scripts/new-job --kind nccl-tests --floor GBPS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# The row the verdict reads: 1 GiB, inside the job's 8 B to 8 GiB sweep (generate/job.py, NCCL_TESTS_ARGS), and
# the size AWS's results are read at. Large enough that bandwidth, not latency, decides the time.
MESSAGE_SIZE = 1 << 30
# The share of the published bandwidth a healthy pair of nodes must reach.
FLOOR_SHARE = 0.8
PUBLISHED_RESULTS = "awslabs/awsome-distributed-training 0edaf15, micro-benchmarks/nccl-tests/README.md"


@dataclass(frozen=True)
class Floor:
    instance_type: str
    gbps: int  # the least all_reduce busbw at MESSAGE_SIZE a healthy run reaches, in GB/s
    source: str  # where the figure comes from, or how it is derived


def floor_of(published_gbps: float) -> int:
    """FLOOR_SHARE of a published bus bandwidth, rounded down to a multiple of 10 GB/s."""
    return int(math.floor(published_gbps * FLOOR_SHARE / 10) * 10)


def _measured(instance_type: str, published_gbps: float, run: str) -> Floor:
    return Floor(
        instance_type,
        floor_of(published_gbps),
        f"80% of {published_gbps} GB/s, AWS's published 2 x {instance_type} {run} ({PUBLISHED_RESULTS})",
    )


def _like(instance_type: str, measured: Floor, why: str) -> Floor:
    return Floor(instance_type, measured.gbps, f"{measured.instance_type}'s, {why}: {measured.source}")


_P4DE = _measured("p4de.24xlarge", 76.79, "run")
# The lower of AWS's two published p5 runs (436.95 GB/s under Slurm with a current stack).
_P5 = _measured("p5.48xlarge", 313.29, "run on EKS with NCCL 2.18.5")

FLOORS = {
    floor.instance_type: floor
    for floor in (
        _P4DE,
        _like("p4d.24xlarge", _P4DE, "same 4 x 100 Gbps EFA and 8 A100 on NVSwitch"),
        _P5,
        _like("p5e.48xlarge", _P5, "same 32 EFA interfaces, 3200 Gbps"),
        _like("p5en.48xlarge", _P5, "same 3200 Gbps of EFA, on 16 interfaces"),
    )
}


def floor_for(instance_type: str) -> Floor | None:
    """The published floor of `instance_type`; None for a type without one."""
    return FLOORS.get(instance_type)
