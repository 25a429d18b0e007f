"""Capacity rules: GPU node groups that grow from zero with Cluster Autoscaler."""

from __future__ import annotations

from ..model import EFA, Scope, mapping, plural
from ..model.nodes import NODE_TEMPLATE_TAG, NodeGroup
from ..model.plugins import gpu_groups
from .registry import Finding, category

rule = category("Capacity and queueing")

AUTOSCALER_MARKERS = ("cluster-autoscaler",)


def autoscaler_installed(scope: Scope) -> bool:
    """A Cluster Autoscaler release or Deployment among what Flux applies."""
    for manifest in scope.objects:
        if manifest.kind == "HelmRelease":
            chart = str(mapping(manifest.doc, "spec", "chart", "spec").get("chart", ""))
            if any(marker in chart for marker in AUTOSCALER_MARKERS):
                return True
        if manifest.kind == "Deployment" and any(marker in manifest.name for marker in AUTOSCALER_MARKERS):
            return True
    return False


def _starts_empty(group: NodeGroup) -> bool:
    size = group.doc.get("minSize", group.doc.get("desiredCapacity"))
    return size == 0


def _template_problems(group: NodeGroup) -> list[tuple[tuple, str]]:
    """What Cluster Autoscaler would get wrong about the group's nodes while it has none."""
    tags = {str(k): str(v) for k, v in mapping(group.doc, "tags").items()}
    propagated = group.doc.get("propagateASGTags") is True
    problems = []
    for key, value in mapping(group.doc, "labels").items():
        tag = f"{NODE_TEMPLATE_TAG}/label/{key}"
        if tags.get(tag, str(value) if propagated else None) != str(value):
            problems.append(("labels", f"label {key}={value} has no {tag} tag (or propagateASGTags)"))
    for taint in group.taints:
        tag = f"{NODE_TEMPLATE_TAG}/taint/{taint.key}"
        wanted = f"{taint.value}:{taint.effect}"
        if tags.get(tag) != wanted:
            # eksctl's propagateASGTags writes the value without the effect, which the autoscaler skips.
            problems.append(("tags", f"taint {taint} needs the tag {tag}: {wanted!r}"))
    interfaces = group.smallest("efa_interfaces") or 0
    if group.efa_enabled and interfaces:
        tag = f"{NODE_TEMPLATE_TAG}/resources/{EFA}"
        if tags.get(tag) != str(interfaces):
            problems.append(("tags", f"its {plural(interfaces, 'EFA interface')} need the tag {tag}: '{interfaces}'"))
    return problems


@rule(
    "gpu-group-cannot-scale-from-zero",
    "error",
    requires=("cluster",),
    description="A GPU node group that starts empty cannot be grown from zero by Cluster Autoscaler",
    remediation="Install Cluster Autoscaler (overlays/base/cluster-autoscaler), set propagateASGTags: true, and "
    "give the group the node-template tags its labels, taints (value:Effect) and EFA interfaces need (the "
    "environment generator writes them).",
    docs="""A group with minSize 0 has no node to copy, so Cluster Autoscaler builds one from the
      autoscaling group's tags (kubernetes/autoscaler cluster-autoscaler-1.35.2, cloudprovider/aws/README.md):
      `k8s.io/cluster-autoscaler/node-template/label/<key>`, `.../taint/<key>` with `value:Effect`, and
      `.../resources/<name>`. It knows GPUs from the instance type but not `vpc.amazonaws.com/efa`, and eksctl
      v0.230.0 propagates taints without their effect, which the autoscaler ignores. Without these, a job's
      workers stay Pending at zero nodes for ever; without an autoscaler at all, nothing grows the group.""",
)
def gpu_group_cannot_scale_from_zero(scope: Scope):
    installed = autoscaler_installed(scope)
    for group in gpu_groups(scope):
        if not _starts_empty(group):
            continue
        if scope.complete and not installed:
            yield Finding(
                scope.cluster_config,
                f"{group.describe()} starts with 0 nodes and nothing in this environment scales it up",
                (*group.path, "minSize"),
            )
            continue
        for field, problem in _template_problems(group):
            yield Finding(scope.cluster_config, f"{group.describe()} starts empty: {problem}", (*group.path, field))
