"""Notices about an environment as a whole: new, removed, GPU capacity or quota that changes, or asking for
more GPUs than its nodes hold."""

from __future__ import annotations

from ...model import MPIJOB, Environment
from ...model.queues import queue_name
from ..impact import mpijob_gpus
from ..model import INFO, WARNING, Figure, Key, Notice
from .catalogue import notice_kind
from .context import Context

ENVIRONMENT_ADDED = notice_kind(
    "environment-added",
    INFO,
    title="new environment",
    description="An environment appears: a cluster to create and bootstrap",
    docs="""Flux applies nothing until the cluster exists and is bootstrapped: render it, `eksctl create cluster
    -f rendered/<env>/eksctl.yaml`, `scripts/cluster-settings --env <env>` (the values Flux substitutes), then
    `flux bootstrap ... --path=clusters/<env>`.""",
)
ENVIRONMENT_REMOVED = notice_kind(
    "environment-removed",
    WARNING,
    title="environment removed",
    description="An environment's Flux entry points leave Git",
    docs="""If clusters/<env>/flux-system stays, Flux prunes what the removed Kustomizations applied (the other
    notices say what that deletes); if it goes too, Flux's own sync fails on the missing path and changes
    nothing. The cluster itself stays until `eksctl delete cluster`.""",
)
GPUS_EXCEED_CAPACITY = notice_kind(
    "gpus-exceed-capacity",
    WARNING,
    title="not enough GPUs",
    description="The environment's MPIJobs need more GPUs than its GPU node groups hold at maxSize",
    docs="""MPIJobs in a Kueue queue (label `kueue.x-k8s.io/queue-name`) take turns: Kueue admits one when its
    quota has room, so only each one alone must fit. MPIJobs outside a queue all run at once, so their GPUs
    (replicas x nvidia.com/gpu) add up. Either is checked against GPU node capacity (maxSize x GPUs per
    instance over the eksctl node groups): workers that do not fit stay Pending, and an MPI job whose workers
    are not all running never starts. Given when the shortfall is new or differs from the base's.""",
)
GPU_CAPACITY_CHANGED = notice_kind(
    "gpu-capacity-changed",
    INFO,
    title="GPU capacity changes",
    description="The GPU node groups' size at maxSize or the Kueue GPU quota changes",
    docs="""States GPU node capacity (maxSize x GPUs per instance over the eksctl node groups) and GPU quota
    (nvidia.com/gpu nominalQuota over the ClusterQueues) before and after, and the change in GPU-hours per day
    were the GPU node groups to run at maxSize around the clock: (capacity after - capacity before) x 24. The
    GPU node groups start empty and Cluster Autoscaler grows them up to maxSize while jobs wait, so this is
    the most the change can add or save, not what it will cost. An environment that appears counts as 0 GPUs
    before; one that goes keeps its node capacity, as its nodes run until `eksctl delete cluster`.""",
)

HOURS_PER_DAY = 24


def _number(value: int | None) -> str:
    return "unknown" if value is None else str(value)


def _span(value: Figure) -> str:
    """ "16 -> 32", or "16 (unchanged)"."""
    if not value.changed:
        return f"{_number(value.after)} (unchanged)"
    return f"{_number(value.before)} -> {_number(value.after)}"


def _gpu_hours(nodes: Figure) -> str:
    if nodes.before is None or nodes.after is None:
        return "GPU-hours per day at max size unknown (no ClusterConfig, or an instance type not in the catalog)"
    change = (nodes.after - nodes.before) * HOURS_PER_DAY
    if change == 0:
        return "no change in GPU-hours per day at max size"
    return f"{change:+d} GPU-hours per day at max size"


def capacity_changed(context: Context, quota: Figure, nodes: Figure) -> list[Notice]:
    """Also for an environment that appears (0 GPUs before) or goes (its quota goes, its nodes stay)."""
    if not (quota.changed or nodes.changed):
        return []
    return [
        GPU_CAPACITY_CHANGED.notice(
            "GPU capacity",
            f"GPU node capacity {_span(nodes)}, GPU quota {_span(quota)}: {_gpu_hours(nodes)}.",
        )
    ]


def shortfalls(environment: Environment | None, capacity: int | None) -> list[str]:
    """Why the environment's MPIJobs cannot all run on `capacity` GPUs, one sentence each."""
    if environment is None or capacity is None:
        return []
    unqueued, problems = 0, []
    for manifest in environment.objects:
        if (manifest.group, manifest.kind) != MPIJOB:
            continue
        gpus, _ = mpijob_gpus(manifest)
        if queue_name(manifest) is None:
            unqueued += gpus
        elif gpus > capacity:
            problems.append(
                f"{Key.of(manifest).resource} alone asks for {gpus} GPUs but the GPU node groups hold at most "
                f"{capacity}: Kueue runs queued jobs one after another, and this one never fits."
            )
    if unqueued > capacity:
        problems.insert(
            0,
            f"MPIJobs outside a Kueue queue ask for {unqueued} GPUs at once but the GPU node groups hold at most "
            f"{capacity} (maxSize x GPUs per node): workers that do not fit stay Pending.",
        )
    return problems


def capacity(context: Context, nodes: Figure) -> list[Notice]:
    after = shortfalls(context.head, nodes.after)
    # A shortfall the change leaves as it was is not news.
    if not after or after == shortfalls(context.base, nodes.before):
        return []
    return [GPUS_EXCEED_CAPACITY.notice("GPU capacity", " ".join(after))]


def environment_level(context: Context) -> list[Notice]:
    if context.base is None:
        return [
            ENVIRONMENT_ADDED.notice(
                f"environment {context.name}",
                f"Create the cluster with `eksctl create cluster -f rendered/{context.name}/eksctl.yaml` "
                f"(scripts/render), give Flux its values with `scripts/cluster-settings --env {context.name}`, "
                f"then `flux bootstrap` it with `--path clusters/{context.name}`.",
            )
        ]
    if context.head is None:
        return [
            ENVIRONMENT_REMOVED.notice(
                f"environment {context.name}",
                f"If clusters/{context.name}/flux-system stays in Git, Flux prunes what the removed "
                f"Kustomizations applied (see the other notices); if it goes too, Flux's sync fails on the "
                f"missing path and changes nothing. The cluster itself stays until `eksctl delete cluster`.",
            )
        ]
    return []
