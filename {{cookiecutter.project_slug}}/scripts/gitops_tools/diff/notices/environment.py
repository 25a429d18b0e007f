"""Notices about an environment as a whole: new, removed, or asking for more GPUs than its nodes hold."""

from __future__ import annotations

from ..model import INFO, WARNING, Figure, Notice
from .catalogue import notice_kind
from .context import Context

ENVIRONMENT_ADDED = notice_kind(
    "environment-added",
    INFO,
    title="new environment",
    description="An environment appears: a cluster to create and bootstrap",
    docs="""Flux applies nothing until the cluster exists and is bootstrapped: render it, `eksctl create cluster
    -f rendered/<env>/eksctl.yaml`, then `flux bootstrap ... --path=clusters/<env>`.""",
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
    description="The environment's MPIJobs ask for more GPUs than its GPU node groups hold at maxSize",
    docs="""MPIJob GPUs (replicas x nvidia.com/gpu over every MPIJob) against GPU node capacity (maxSize x GPUs
    per instance over the eksctl node groups): workers that do not fit stay Pending, and an MPI job whose
    workers are not all running never starts. Given when either figure changes.""",
)


def capacity(context: Context, gpus: Figure, nodes: Figure) -> list[Notice]:
    if context.head is None or nodes.after is None or not (gpus.changed or nodes.changed):
        return []
    if gpus.after > nodes.after:
        return [
            GPUS_EXCEED_CAPACITY.notice(
                "GPU capacity",
                f"MPIJobs ask for {gpus.after} GPUs but the GPU node groups hold at most {nodes.after} "
                f"(maxSize x GPUs per node): workers that do not fit stay Pending.",
            )
        ]
    return []


def environment_level(context: Context) -> list[Notice]:
    if context.base is None:
        return [
            ENVIRONMENT_ADDED.notice(
                f"environment {context.name}",
                f"Create the cluster with `eksctl create cluster -f rendered/{context.name}/eksctl.yaml` "
                f"(scripts/render), then `flux bootstrap` it with `--path clusters/{context.name}`.",
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
