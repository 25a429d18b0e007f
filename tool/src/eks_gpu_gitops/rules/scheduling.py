"""Scheduling rules: taints and tolerations, device plugins, requests and shared memory."""

from __future__ import annotations

from ..model import EFA, GPU, MPIJOB, NodeGroup, PodTemplate, Scope, mapping, plural, selects, sequence, untolerated
from ..model.placement import builtin_plugin_serves, largest, placement_known, unknown_label_keys
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


# The objects eksctl names its device plugins (v0.230.0, pkg/addons/assets/*-device-plugin.yaml): a GitOps copy
# of the same name replaces eksctl's.
_EKSCTL_PLUGINS = {
    GPU: ("kube-system", "nvidia-device-plugin-daemonset"),
    EFA: ("kube-system", "aws-efa-k8s-device-plugin"),
}
# What also deploys the NVIDIA device plugin: NVIDIA's GPU operator, as a chart.
_NVIDIA_PROVIDERS = (*NVIDIA_PLUGIN, "gpu-operator")


def _taints(group: NodeGroup, template: PodTemplate) -> str:
    return ", ".join(str(t) for t in untolerated(template, group))


def _plugin_kinds(scope: Scope):
    """(markers, resource, node groups it serves) of the NVIDIA and the EFA device plugin."""
    return ((NVIDIA_PLUGIN, GPU, gpu_groups(scope)), (EFA_PLUGIN, EFA, efa_groups(scope)))


def _replaces_eksctl_copy(manifest, resource: str) -> bool:
    return (manifest.kind, manifest.namespace, manifest.name) == ("DaemonSet", *_EKSCTL_PLUGINS[resource])


def _served_elsewhere(scope: Scope, plugin: PodTemplate, group: NodeGroup, resource: str, markers) -> bool:
    """Whether a plugin other than `plugin` advertises `resource` on the group's nodes: another copy in the
    environment, the one eksctl installed (unless `plugin` replaces it), or Bottlerocket's own."""
    others = [t for t in plugin_daemonsets(scope, markers) if t is not plugin]
    if any(selects(t, group) and not untolerated(t, group) for t in others):
        return True
    if not builtin_plugin_serves(group, resource):
        return False
    bottlerocket = str(group.doc.get("amiFamily", "")).startswith("Bottlerocket")
    return (resource == GPU and bottlerocket) or not _replaces_eksctl_copy(plugin.owner, resource)


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
      (a data-preparation Job with `nodeSelector: {role: gpu}`) still do. A device plugin is reported only
      where no other plugin serves those nodes: eksctl (v0.230.0) installs its own NVIDIA plugin for GPU
      groups of AmazonLinux2 and AmazonLinux2023 (tolerating their taints) and its own EFA plugin for
      efaEnabled groups (tolerating only CriticalAddonsOnly and aws.amazon.com/efa), unless a copy in the
      repository of the same name replaces it; Bottlerocket runs the NVIDIA plugin itself. Skipped for pods
      where Karpenter, Fargate or EKS Auto Mode can add other nodes.""",
    premise="The ClusterConfig lists the node groups a GPU pod (or a pod selecting only GPU nodes) can run on, "
    "or the node groups a device plugin is the only one to serve, and the pod or plugin tolerates none of "
    "their taints after EKS's ExtendedResourceToleration.",
    consequence="job",
)
def gpu_taint_not_tolerated(scope: Scope):
    gpu_group_names = {g.name for g in gpu_groups(scope)}
    for template in scope.pod_templates:
        if template.owner.kind == "DaemonSet" or not placement_known(scope, template):
            continue
        if template.request(GPU) > 0:
            selected = [g for g in gpu_groups(scope) if selects(template, g)]
            what = "requests GPUs"
        elif template.node_selector or template.required_terms:
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
    for markers, resource, groups in _plugin_kinds(scope):
        for template in plugin_daemonsets(scope, markers):
            for group in groups:
                if not selects(template, group) or not untolerated(template, group):
                    continue
                if _served_elsewhere(scope, template, group, resource, markers):
                    continue
                yield Finding(
                    template.owner,
                    f"device plugin {template.owner.name} does not tolerate "
                    f"{_taints(group, template)} of {group.describe()}, and no other plugin serves those "
                    f"nodes, so they advertise no {resource}",
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
      needs node-feature-discovery labels, for example, which EKS nodes have only where node-feature-discovery
      (or NVIDIA's GPU feature discovery or GPU operator) runs. Reported only where no other plugin serves
      those nodes (see `gpu-taint-not-tolerated`: eksctl's own copies, unless this DaemonSet has their name
      and so replaces them; Bottlerocket's), and only for selectors on node labels the ClusterConfig fixes,
      or on labels of a labeller the whole visible environment does not run.""",
    premise="The ClusterConfig lists the GPU (or efaEnabled) node groups and fixes the node labels the plugin "
    "selects on, and no other device plugin serves the groups it misses.",
    consequence="job",
)
def device_plugin_misses_gpu_nodes(scope: Scope):
    for markers, resource, groups in _plugin_kinds(scope):
        for template in plugin_daemonsets(scope, markers) if groups else []:
            if unknown_label_keys(scope, template, groups) or any(selects(template, g) for g in groups):
                continue
            unserved = [g for g in groups if not _served_elsewhere(scope, template, g, resource, markers)]
            if unserved:
                names = ", ".join(g.describe() for g in unserved)
                yield Finding(
                    template.owner,
                    f"device plugin {template.owner.name} selects none of the node groups it serves ({names}), "
                    f"and no other plugin advertises {resource} there",
                    (*template.path, "nodeSelector" if template.node_selector else "affinity"),
                )


def _unserved_groups(scope: Scope, template: PodTemplate, resource: str) -> list[NodeGroup]:
    """The node groups the pod can run on where no device plugin outside the environment advertises
    `resource` (the environment has none of its own)."""
    _, groups = scope.placement(template)
    return [g for g in groups if not builtin_plugin_serves(g, resource)]


@rule(
    "nvidia-device-plugin-missing",
    "error",
    requires=("environment", "cluster"),
    description="Pods request nvidia.com/gpu on nodes no NVIDIA device plugin serves",
    remediation="Deploy the NVIDIA device plugin in the environment (overlays/base/device-plugins/nvidia in "
    "this template), tolerating the GPU node groups' taints.",
    docs="""Nodes advertise `nvidia.com/gpu` only where the NVIDIA device plugin runs; a pod that requests it
      anywhere else stays Pending. eksctl (v0.230.0, `pkg/eks/tasks.go`) installs its own copy,
      `kube-system/nvidia-device-plugin-daemonset`, when it creates a GPU node group of AmazonLinux2 or
      AmazonLinux2023 (the default), unless told not to with `--install-nvidia-plugin=false`, and
      Bottlerocket's NVIDIA variants run the plugin themselves; that copy is outside GitOps (neither upgraded
      nor restored by Flux), which `device-plugin-duplicate` describes. So the rule reports GPU pods whose
      node groups use another AMI family (Ubuntu, a custom AMI) in an environment that deploys no plugin
      (a DaemonSet of the plugin's image, or a HelmRelease of its chart or of NVIDIA's GPU operator).""",
    premise="The whole environment and its ClusterConfig are visible, the environment deploys no NVIDIA device "
    "plugin, and a pod requesting nvidia.com/gpu can only run on node groups whose AMI family gets none from "
    "eksctl or the OS.",
    consequence="job",
)
def nvidia_device_plugin_missing(scope: Scope):
    if plugin_installed(scope, _NVIDIA_PROVIDERS):
        return
    for template in scope.pod_templates:
        if template.request(GPU) <= 0 or not placement_known(scope, template):
            continue
        _, groups = scope.placement(template)
        unserved = _unserved_groups(scope, template, GPU)
        if groups and len(unserved) == len(groups):
            families = ", ".join(f"{g.describe()} ({g.doc.get('amiFamily')})" for g in unserved)
            yield Finding(
                template.owner,
                f"{template.label} requests nvidia.com/gpu, which nothing advertises on {families}: the "
                "environment deploys no NVIDIA device plugin, and eksctl installs none for that AMI family",
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
      node. The job itself starts and runs.""",
    premise="An MPIJob Worker's first container requests (or limits) no CPU or no memory.",
    consequence="risk",
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
    """The most CPU (cores) or memory (bytes) one node of the group can have; None for unknown types."""
    figure = largest(group, "vcpus" if resource == "cpu" else "memory_gib")
    return figure if figure is None or resource == "cpu" else figure * 2**30


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
      nodes billed. Sizes come from the instance catalogue; the rule compares with the whole instance (the
      largest type of the group), so a request it passes can still be too big for allocatable. Skipped where
      Karpenter, Fargate or EKS Auto Mode can add other nodes, or the pod selects on a node label the
      ClusterConfig does not set.""",
    premise="The ClusterConfig lists every node the pod can run on (no Karpenter, Fargate or Auto Mode), fixes "
    "the node labels it selects on, and the node groups it admits are of known instance types.",
    consequence="job",
)
def pod_request_exceeds_node(scope: Scope):
    for template in scope.pod_templates:
        if not placement_known(scope, template):
            continue
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
    if template.spec.get("hostIPC") is True:
        return True  # the container runtime mounts the host's /dev/shm
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
    docs="""NCCL passes data between GPUs of one node through shared memory, and data loaders pass batches
      between processes through it. A container's default /dev/shm is 64 MiB: NCCL then fails with
      "unhandled system error" or falls back to slower paths, and a loader dies with a bus error. A
      memory-backed emptyDir, the host's /dev/shm (hostPath), or `hostIPC: true` avoid it.""",
    premise="An MPIJob pod requests GPUs and neither mounts a memory-backed volume at /dev/shm nor shares the "
    "host's IPC namespace.",
    consequence="risk",
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
      to) of AmazonLinux2 and AmazonLinux2023 and always installs `kube-system/aws-efa-k8s-device-plugin`
      for efaEnabled groups (v0.230.0, `pkg/eks/tasks.go`). A GitOps copy under another name, or a Helm
      release of the same plugin, runs a second plugin on each node that registers the same resource: the
      kubelet keeps the last one to register, and the two replace each other on every restart. A copy named
      like eksctl's is adopted by Flux, which also upgrades and restores it (eksctl's own copy is never
      upgraded).""",
    premise="The environment deploys two device plugins for one resource, or one under another name than the "
    "copy eksctl installs for the ClusterConfig's node groups.",
    consequence="risk",
)
def device_plugin_duplicate(scope: Scope):
    for markers, eksctl_name, resource, groups in (
        (NVIDIA_PLUGIN, "nvidia-device-plugin-daemonset", GPU, _eksctl_nvidia_groups(scope)),
        (EFA_PLUGIN, "aws-efa-k8s-device-plugin", EFA, efa_groups(scope)),
    ):
        plugins = _plugins(scope, markers)
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


def _eksctl_nvidia_groups(scope: Scope) -> list[NodeGroup]:
    """GPU node groups eksctl installs its NVIDIA device plugin for (not Bottlerocket's, which is the OS's)."""
    return [
        g
        for g in gpu_groups(scope)
        if builtin_plugin_serves(g, GPU) and not str(g.doc.get("amiFamily", "")).startswith("Bottlerocket")
    ]


def _plugins(scope: Scope, markers) -> list:
    """The plugin DaemonSets, and the HelmReleases of the plugin whose DaemonSet is not among them (not
    rendered), each counted once."""
    daemonsets = [t.owner for t in plugin_daemonsets(scope, markers)]
    shown = {id(m) for m in daemonsets}
    rendering = {r.manifest.resource for r in scope.releases if any(id(m) in shown for m in r.objects)}
    return daemonsets + [m for m in plugin_releases(scope, markers) if m.resource not in rendering]


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


def _means_own_pods(template: PodTemplate, selector) -> bool:
    """Whether a label selector evidently aims at the workload's own pods: it names the MPIJob's job name,
    or only labels the workload object itself carries."""
    if not isinstance(selector, dict):
        return True
    labels = mapping(selector, "matchLabels")
    job_name = "training.kubeflow.org/job-name"
    named = [labels.get(job_name)] + [
        value
        for e in sequence(selector, "matchExpressions")
        if isinstance(e, dict) and e.get("key") == job_name and e.get("operator") == "In"
        for value in sequence(e, "values")
    ]
    if template.owner.name in map(str, named):
        return True
    own = {str(k): str(v) for k, v in template.owner.labels.items()}
    return bool(labels) and all(own.get(str(k)) == str(v) for k, v in labels.items())


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
      name other namespaces or use matchLabelKeys are not checked. Where the whole environment is not
      visible (files, a folder), other workloads of the namespace may be missing, so only a selector that
      evidently means the workload's own pods (its job name, or labels of the workload object itself) is
      judged.""",
    premise="A pod template has a required pod anti-affinity term on its own namespace, and either the whole "
    "environment is visible or the term's selector names the workload itself.",
    consequence="risk",
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
            if not scope.complete and not _means_own_pods(template, selector):
                continue
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
