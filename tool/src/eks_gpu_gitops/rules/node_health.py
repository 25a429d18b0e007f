"""Node health rules: node auto repair and the EKS node monitoring agent on GPU node groups."""

from __future__ import annotations

from ..model import Scope, plural
from ..model.node_health import AGENT, agent_addon, dcgm_tolerations, repair_enabled
from ..model.nodes import blocking_taints
from ..model.placement import other_capacity
from ..model.plugins import gpu_groups, plugin_installed
from .registry import Finding, category

rule = category("Node health")


@rule(
    "node-repair-without-monitoring-agent",
    "warning",
    requires=("cluster", "environment"),
    description="A GPU node group has node auto repair on, but nothing reports its GPUs' health",
    remediation=f"Add the EKS add-on {AGENT} to the ClusterConfig's addons (overlays/base/eksctl in this template), "
    "tolerating the GPU groups' taints for its dcgm-server (configurationValues dcgmAgent.tolerations).",
    docs=f"""EKS node auto repair (a managed node group's `nodeRepairConfig`, eksctl v0.230.0
      `pkg/apis/eksctl.io/v1alpha5/types.go`) acts on node conditions. The GPU, EFA and kernel ones
      (`AcceleratedHardwareReady`, `NetworkingReady`, `KernelReady`, ...) are set by the EKS node monitoring agent
      (aws/eks-node-monitoring-agent v1.7.0, `pkg/conditions/conditions.go`); eksctl accepts repair without the
      agent, and then only a node whose kubelet stops reporting Ready is repaired. A GPU with XID errors or a lost
      EFA interface stays in the group, and every MPI job that lands on it stalls or fails. Silent where the
      ClusterConfig's addons include `{AGENT}`, where the environment installs the agent itself (its DaemonSet
      image or its chart), and under EKS Auto Mode, which runs the agent.""",
    premise=f"The whole environment and its ClusterConfig are visible, a managed GPU node group has "
    f"nodeRepairConfig.enabled true, EKS Auto Mode is off, and neither the ClusterConfig's addons nor the "
    f"environment install {AGENT}.",
    consequence="risk",
)
def node_repair_without_monitoring_agent(scope: Scope):
    doc = scope.cluster_config.doc
    if agent_addon(doc) or plugin_installed(scope, (AGENT,)) or other_capacity(scope) == "EKS Auto Mode":
        return
    for group in gpu_groups(scope):
        if group.managed and repair_enabled(group.doc):
            yield Finding(
                scope.cluster_config,
                f"{group.describe()} has node auto repair on, but no {AGENT} reports its GPUs' or network's "
                "health, so repair acts only when a node stops being Ready",
                (*group.path, "nodeRepairConfig", "enabled"),
            )


@rule(
    "node-monitoring-gpu-taint-not-tolerated",
    "warning",
    requires=("cluster",),
    description="The node monitoring agent's DCGM host engine cannot run on a tainted GPU node group",
    remediation="Give the add-on's dcgm-server the GPU groups' tolerations: configurationValues "
    '{"dcgmAgent": {"tolerations": [{"key": "<taint key>", "operator": "Exists", "effect": "NoSchedule"}]}}.',
    docs="""On NVIDIA nodes the EKS node monitoring agent reads GPU health from an `nv-hostengine` that its
      `dcgm-server` DaemonSet runs (aws/eks-node-monitoring-agent v1.7.0, `charts/eks-node-monitoring-agent/README.md`,
      "DCGM host engine"). That DaemonSet has no tolerations unless the add-on's `configurationValues` give
      `dcgmAgent.tolerations` (`values.yaml`; the agent's own DaemonSet tolerates every taint), so it never runs on
      a GPU group tainted `NoSchedule` or `NoExecute`. The agent then reports `DCGMError`, a fatal reason
      (`pkg/reasons/reasons.yaml`), as `AcceleratedHardwareReady` False on every node of the group (the agent's
      e2e test `e2e/suites/monitors/nvidia_monitor.go` provokes it by unscheduling dcgm-server): GPU faults go
      unseen, and with `nodeRepairConfig` on EKS reboots or replaces healthy GPU nodes, and the jobs on them, again
      and again. Silent when the add-on's configurationValues cannot be read (eksctl refuses them).""",
    premise=f"The ClusterConfig installs the {AGENT} add-on, and a GPU node group has a NoSchedule or NoExecute "
    "taint that the add-on's dcgmAgent tolerations (configurationValues) do not tolerate.",
    consequence="risk",
)
def node_monitoring_gpu_taint_not_tolerated(scope: Scope):
    found = agent_addon(scope.cluster_config.doc)
    if not found:
        return
    index, addon = found
    tolerations = dcgm_tolerations(addon)
    if tolerations is None:
        return
    path = ("addons", index, "configurationValues") if addon.get("configurationValues") else ("addons", index)
    for group in gpu_groups(scope):
        taints = blocking_taints(group, tolerations)
        if not taints:
            continue
        repair = "; node auto repair is on, so EKS repairs healthy nodes" if repair_enabled(group.doc) else ""
        yield Finding(
            scope.cluster_config,
            f"{AGENT}'s dcgm-server does not tolerate {plural(len(taints), 'taint')} of {group.describe()} "
            f"({', '.join(str(t) for t in taints)}), so the agent reports AcceleratedHardwareReady False "
            f"(DCGMError) on its nodes{repair}",
            path,
        )
