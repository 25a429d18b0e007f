"""Scheduling rules: taints and tolerations, device plugins, requests and shared memory."""

from __future__ import annotations

from ..model import EFA, GPU, MPIJOB, NodeGroup, PodTemplate, Scope, mapping, plural, selects, sequence, untolerated
from ..model.plugins import (
    EFA_PLUGIN,
    NVIDIA_PLUGIN,
    efa_groups,
    gpu_groups,
    plugin_daemonsets,
    plugin_installed,
    plugin_releases,
)
from ..model.pods import selector_matches
from .registry import Finding, category

rule = category("Scheduling")


def _taints(group: NodeGroup, template: PodTemplate) -> str:
    return ", ".join(str(t) for t in untolerated(template, group))


@rule(
    "gpu-taint-not-tolerated",
    "error",
    requires=("cluster",),
    description="A GPU pod or device plugin does not tolerate the taints of the GPU node group it targets",
    remediation="Add a toleration for the node group's taint (for example key dedicated, operator Exists, "
    "effect NoSchedule) to the pod template.",
    docs="""GPU node groups are usually tainted so that only GPU work lands there. Pods that request GPUs,
      and the NVIDIA and EFA device-plugin DaemonSets, must tolerate that taint: without the plugin nodes
      advertise no GPUs, and without the toleration the workers stay Pending. EKS enables the
      ExtendedResourceToleration admission plugin on every platform version: a pod that requests an extended
      resource (`nvidia.com/gpu`, `vpc.amazonaws.com/efa`) is given a toleration of that name, operator
      Exists, effect NoSchedule, so the usual `nvidia.com/gpu:NoSchedule` taint needs no written toleration.
      Other keys, NoExecute taints, the device plugins, and pods that select GPU nodes without requesting a GPU
      (a data-preparation Job with `nodeSelector: {role: gpu}`) still do.""",
)
def gpu_taint_not_tolerated(scope: Scope):
    gpu_group_names = {g.name for g in gpu_groups(scope)}
    for template in scope.pod_templates:
        if template.request(GPU) > 0:
            selected = [g for g in gpu_groups(scope) if selects(template, g)]
            what = "requests GPUs"
        elif template.owner.kind != "DaemonSet" and (template.node_selector or template.required_terms):
            # A pod without GPUs that selects only GPU nodes gets no toleration from the admission plugin.
            selected = [g for g in scope.node_groups if selects(template, g)]
            if any(g.name not in gpu_group_names for g in selected):
                continue
            what = "requests no GPU (so EKS adds no toleration) but selects only GPU nodes"
        else:
            continue
        if selected and all(untolerated(template, g) for g in selected):
            group = selected[0]
            yield Finding(
                template.owner,
                f"{template.label} {what} and does not tolerate {_taints(group, template)} of {group.describe()}",
                (*template.path, "tolerations"),
            )
    for markers, groups in ((NVIDIA_PLUGIN, gpu_groups(scope)), (EFA_PLUGIN, efa_groups(scope))):
        for template in plugin_daemonsets(scope, markers):
            for group in groups:
                if selects(template, group) and untolerated(template, group):
                    yield Finding(
                        template.owner,
                        f"device plugin {template.owner.name} does not tolerate "
                        f"{_taints(group, template)} of {group.describe()}, so those nodes "
                        "advertise no devices",
                        (*template.path, "tolerations"),
                    )


@rule(
    "device-plugin-misses-gpu-nodes",
    "error",
    requires=("cluster",),
    description="A device-plugin DaemonSet's selectors match none of the node groups it serves",
    remediation="Make the DaemonSet's nodeSelector or node affinity match the GPU (or efaEnabled) node "
    "group's labels or instance type.",
    docs="""A device plugin that runs on no GPU node leaves `nvidia.com/gpu` (or `vpc.amazonaws.com/efa`)
      unadvertised, and every pod that requests it stays Pending. The NVIDIA Helm chart's default affinity
      needs node-feature-discovery labels that EKS nodes do not have, for example.""",
)
def device_plugin_misses_gpu_nodes(scope: Scope):
    for markers, groups, what in (
        (NVIDIA_PLUGIN, gpu_groups(scope), "GPU"),
        (EFA_PLUGIN, efa_groups(scope), "efaEnabled"),
    ):
        for template in plugin_daemonsets(scope, markers) if groups else []:
            if not any(selects(template, g) for g in groups):
                names = ", ".join(g.describe() for g in groups)
                yield Finding(
                    template.owner,
                    f"device plugin {template.owner.name} selects none of the {what} node groups ({names})",
                    (*template.path, "nodeSelector" if template.node_selector else "affinity"),
                )


@rule(
    "nvidia-device-plugin-missing",
    "error",
    requires=("environment",),
    description="Pods request nvidia.com/gpu but the environment installs no NVIDIA device plugin",
    remediation="Add overlays/base/device-plugins/nvidia to the environment's infrastructure overlay.",
    docs="""Nodes advertise `nvidia.com/gpu` only where the NVIDIA device plugin runs. eksctl installs its own
      copy when it creates a GPU node group (unless told not to), but that copy is outside GitOps: it is
      neither upgraded nor restored by Flux. If you rely on it on purpose, suppress this rule on the
      workload with a reason.""",
)
def nvidia_device_plugin_missing(scope: Scope):
    if plugin_installed(scope, NVIDIA_PLUGIN):
        return
    for template in scope.pod_templates:
        if template.request(GPU) > 0:
            yield Finding(
                template.owner,
                f"{template.label} requests nvidia.com/gpu, which nothing in this environment advertises",
                (*template.containers[0].path, "resources"),
            )


@rule(
    "worker-resources-unset",
    "warning",
    description="MPIJob workers do not request CPU and memory",
    remediation="Set resources.requests.cpu and resources.requests.memory on the Worker container, sized to "
    "the node (leave room for the kubelet and DaemonSets).",
    docs="""Without requests, other pods can be packed next to a worker and starve the data pipeline or
      trigger out-of-memory kills mid-run; the scheduler also cannot tell that a worker needs a whole
      node.""",
)
def worker_resources_unset(scope: Scope):
    for template in scope.pod_templates:
        if (
            (template.owner.group, template.owner.kind) != MPIJOB
            or template.role != "Worker"
            or not template.containers
        ):
            continue
        container = template.containers[0]
        missing = [r for r in ("cpu", "memory") if container.request(r) <= 0]
        if missing:
            yield Finding(
                template.owner,
                f"{template.container_label(container)} requests no {' or '.join(missing)}",
                (*container.path, "resources"),
            )


def _capacity(group: NodeGroup, resource: str) -> float | None:
    """The least CPU (cores) or memory (bytes) of one node of the group; None for unknown types."""
    instances = group.instances
    if not instances:
        return None
    return min(i.vcpus if resource == "cpu" else i.memory_gib * 2**30 for i in instances)


def _amount(resource: str, value: float) -> str:
    return plural(value, "CPU") if resource == "cpu" else f"{value / 2**30:g} GiB of memory"


@rule(
    "pod-request-exceeds-node",
    "error",
    requires=("cluster",),
    description="A pod requests more CPU or memory than one node of its node group has",
    remediation="Lower the pod's CPU or memory requests below the instance type's size (leave room for the kubelet, "
    "system reservations and DaemonSets), or choose a larger instance type.",
    docs="""The scheduler places a pod only on a node whose allocatable CPU and memory cover the sum of its
      containers' requests; allocatable is a little less than the instance's vCPUs and memory. A worker sized
      from another instance type, or a memory request in the wrong unit, leaves the pod Pending and the GPU
      nodes billed. Sizes come from the instance catalogue; the rule compares with the whole instance, so a
      request it passes can still be too big for allocatable.""",
)
def pod_request_exceeds_node(scope: Scope):
    for template in scope.pod_templates:
        selected, tolerated = scope.placement(template)
        groups = tolerated or selected  # gpu-taint-not-tolerated reports the taint; size is checked anyway
        for resource in ("cpu", "memory"):
            wanted = template.request(resource)
            capacities = [_capacity(g, resource) for g in groups]
            if not wanted or not capacities or None in capacities or wanted <= max(capacities):
                continue
            sizes = ", ".join(
                f"{g.describe()} has {_amount(resource, c)}" for g, c in zip(groups, capacities, strict=True)
            )
            yield Finding(
                template.owner,
                f"{template.label} requests {_amount(resource, wanted)} but {sizes}",
                (*template.containers[0].path, "resources"),
            )


def _memory_backed_shm(template: PodTemplate, container) -> bool:
    volumes = template.volumes
    for mount in sequence(container.spec, "volumeMounts"):
        if isinstance(mount, dict) and mount.get("mountPath") == "/dev/shm":
            _, volume = volumes.get(str(mount.get("name")), (0, {}))
            if (
                mapping(volume, "emptyDir").get("medium") == "Memory"
                or mapping(volume, "hostPath").get("path") == "/dev/shm"
            ):
                return True
    return False


@rule(
    "shm-not-memory-backed",
    "warning",
    description="A GPU worker has no memory-backed /dev/shm for NCCL",
    remediation="Mount an emptyDir volume with medium Memory (and a sizeLimit) at /dev/shm in the worker container.",
    docs="""NCCL passes data between GPUs of one node through shared memory. A container's default /dev/shm
      is 64 MiB, and NCCL then fails with "unhandled system error" or falls back to slower paths.""",
)
def shm_not_memory_backed(scope: Scope):
    for template in scope.pod_templates:
        if (template.owner.group, template.owner.kind) != MPIJOB or template.request(GPU) <= 0:
            continue
        container = next(c for c in template.containers if c.request(GPU) > 0)
        if not _memory_backed_shm(template, container):
            yield Finding(
                template.owner,
                f"{template.label} uses {plural(template.request(GPU), 'GPU')} without a memory-backed /dev/shm",
                (*container.path, "volumeMounts"),
            )


@rule(
    "device-plugin-duplicate",
    "warning",
    description="Two device plugins advertise the same resource on the same nodes",
    remediation="Keep one plugin per resource: name the GitOps copy like eksctl's (kube-system/"
    "nvidia-device-plugin-daemonset, kube-system/aws-efa-k8s-device-plugin) so Flux adopts it.",
    docs="""eksctl installs `kube-system/nvidia-device-plugin-daemonset` on GPU node groups (unless told not
      to) and always installs `kube-system/aws-efa-k8s-device-plugin` for efaEnabled groups. A GitOps
      copy under another name, or a Helm release of the same plugin, runs a second plugin on each node that
      registers the same resource.""",
)
def device_plugin_duplicate(scope: Scope):
    for markers, eksctl_name, resource, groups in (
        (NVIDIA_PLUGIN, "nvidia-device-plugin-daemonset", GPU, gpu_groups(scope)),
        (EFA_PLUGIN, "aws-efa-k8s-device-plugin", EFA, efa_groups(scope)),
    ):
        daemonsets = [t.owner for t in plugin_daemonsets(scope, markers)]
        releases = plugin_releases(scope, markers)
        plugins = daemonsets + releases
        others = [m for m in plugins if (m.kind, m.namespace, m.name) != ("DaemonSet", "kube-system", eksctl_name)]
        if len(plugins) > 1:
            for manifest in plugins[1:]:
                yield Finding(
                    manifest, f"{plural(len(plugins), 'device plugin')} for {resource} in this environment", ()
                )
        elif others and groups:
            yield Finding(
                others[0],
                f"{others[0].resource} runs next to the kube-system/{eksctl_name} that eksctl "
                f"installs; both advertise {resource}",
                ("metadata", "name"),
            )


_ANTI_AFFINITY = ("affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


def _describe_selector(selector) -> str:
    if not isinstance(selector, dict):
        return "no labelSelector"
    parts = [f"{k}={v}" for k, v in mapping(selector, "matchLabels").items()]
    parts += [
        f"{e.get('key')} {e.get('operator')} {','.join(map(str, sequence(e, 'values')))}".strip()
        for e in sequence(selector, "matchExpressions")
        if isinstance(e, dict)
    ]
    return ", ".join(parts) or "every pod"


@rule(
    "pod-anti-affinity-selects-nothing",
    "warning",
    description="A required pod anti-affinity selects no pod of its own workload, so it spreads nothing",
    remediation="Select the workload's own pods: for an MPIJob's workers, training.kubeflow.org/job-name=<job> "
    "and training.kubeflow.org/job-role=worker (the labels the operator sets), or labels you set under "
    "template.metadata.labels.",
    docs="""Required pod anti-affinity keeps a pod off nodes (or zones) that run pods its labelSelector
      selects. Meant to put one worker per node, a selector on labels the workers do not carry (a misspelt
      key, labels set on the MPIJob itself instead of its pod template) selects nothing, and workers pack
      onto the same node. The MPI operator (v0.8) labels its pods `training.kubeflow.org/operator-name`,
      `job-name`, `job-role` (launcher or worker) and `replica-index`, on top of the template's labels. A
      selector that matches another workload's pods in the namespace is taken as deliberate, and terms that
      name other namespaces or use matchLabelKeys are not checked.""",
)
def pod_anti_affinity_selects_nothing(scope: Scope):
    for template in scope.pod_templates:
        namespace = scope.namespace_of(template.owner)
        for index, term in enumerate(sequence(template.spec, *_ANTI_AFFINITY)):
            if not isinstance(term, dict) or term.get("namespaceSelector") is not None:
                continue
            if term.get("matchLabelKeys") or term.get("mismatchLabelKeys"):
                continue
            if sequence(term, "namespaces") and namespace not in map(str, sequence(term, "namespaces")):
                continue
            selector = term.get("labelSelector")
            candidates = [
                labels
                for other in scope.pod_templates
                if other.owner is template.owner or scope.namespace_of(other.owner) == namespace
                for labels in other.pod_labels
            ]
            if isinstance(selector, dict) and any(selector_matches(selector, labels) for labels in candidates):
                continue
            hint = (
                f" (the operator labels them training.kubeflow.org/job-name={template.owner.name}, "
                f"training.kubeflow.org/job-role={template.role.lower()})"
                if (template.owner.group, template.owner.kind) == MPIJOB
                else ""
            )
            yield Finding(
                template.owner,
                f"{template.label} anti-affinity term {index} selects {_describe_selector(selector)}, which no pod "
                f"of {template.owner.kind} {template.owner.name} or of another workload in {namespace} carries"
                f"{hint}, so it spreads nothing",
                (*template.path, *_ANTI_AFFINITY, index, "labelSelector"),
            )
