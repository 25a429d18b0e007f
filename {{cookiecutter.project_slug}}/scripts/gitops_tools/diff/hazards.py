"""Notices for an environment: changes that cannot apply in place (inplace.py), deletions and
moves (deletions.py), plus environment-wide ones (a new or removed environment, more GPUs
asked for than the node groups hold). Every rule is a pure function of the two renders."""

from __future__ import annotations

from . import deletions, inplace
from .model import CHANGED, INFO, REMOVED, WARNING, Figure, Notice
from .scope import Context

__all__ = ["Context", "notices"]


def capacity(context: Context, gpus: Figure, nodes: Figure) -> list[Notice]:
    if context.head is None or nodes.after is None or not (gpus.changed or nodes.changed):
        return []
    if gpus.after > nodes.after:
        return [Notice(WARNING, "GPU capacity", "not enough GPUs",
                       f"MPIJobs ask for {gpus.after} GPUs but the GPU node groups hold at most {nodes.after} "
                       f"(maxSize x GPUs per node): workers that do not fit stay Pending.")]
    return []


def environment_level(context: Context) -> list[Notice]:
    if context.base is None:
        return [Notice(INFO, f"environment {context.name}", "new environment",
                       f"Create the cluster with `eksctl create cluster -f rendered/{context.name}/eksctl.yaml` "
                       f"(scripts/render), then `flux bootstrap` it with `--path clusters/{context.name}`.")]
    if context.head is None:
        return [Notice(WARNING, f"environment {context.name}", "environment removed",
                       f"If clusters/{context.name}/flux-system stays in Git, Flux prunes what the removed "
                       f"Kustomizations applied (see the other notices); if it goes too, Flux's sync fails on the "
                       f"missing path and changes nothing. The cluster itself stays until `eksctl delete cluster`.")]
    return []


def notices(context: Context, gpus: Figure, nodes: Figure) -> list[Notice]:
    found = environment_level(context)
    for change in context.changes:
        if change.status == CHANGED:
            found.extend(deletions.moved(change, context))
            found.extend(inplace.notices(change, context))
        elif change.status == REMOVED:
            found.extend(deletions.removed(change, context))
    found.extend(deletions.orphans(context))
    found.extend(capacity(context, gpus, nodes))
    return found
