"""GPU node health as a ClusterConfig sets it up: the EKS node monitoring agent add-on and node auto repair.

Facts from aws/eks-node-monitoring-agent v1.7.0: the agent sets the node conditions of pkg/conditions/conditions.go;
on NVIDIA nodes it reads GPU health from an `nv-hostengine` that the chart's `dcgm-server` DaemonSet runs
(charts/eks-node-monitoring-agent/README.md, "DCGM host engine"), a DaemonSet with no tolerations unless
`dcgmAgent.tolerations` gives some (values.yaml). Without it the agent reports `DCGMError`, a fatal reason
(pkg/reasons/reasons.yaml), as AcceleratedHardwareReady False (e2e/suites/monitors/nvidia_monitor.go unschedules
dcgm-server to provoke exactly that). Node repair is a managed node group's `nodeRepairConfig` (eksctl v0.230.0,
pkg/apis/eksctl.io/v1alpha5/types.go); eksctl accepts it with or without the agent.
"""

from __future__ import annotations

import json

import yaml

from .fields import mapping, sequence

AGENT = "eks-node-monitoring-agent"  # the EKS add-on's name, and its chart's and image's
# The node conditions the agent sets, one per enabled monitor (pkg/conditions/conditions.go,
# cmd/eks-node-monitoring-agent/main.go): True while healthy, False with the monitor's reason and message on a fatal
# issue (pkg/manager/node_exporter.go Fatal).
AGENT_CONDITIONS = (
    "AcceleratedHardwareReady",
    "ContainerRuntimeReady",
    "KernelReady",
    "NetworkingReady",
    "StorageReady",
)
# How long a condition stays False before EKS node auto repair acts, by default: 10 minutes for GPU faults
# (also the agent's docs/node-health-issues.adoc), 30 for the others (EKS User Guide, "Automatically repair nodes").
REPAIR_AFTER_MINUTES = dict.fromkeys(AGENT_CONDITIONS, 30) | {"AcceleratedHardwareReady": 10}


def agent_addon(cluster_doc: dict) -> tuple[int, dict] | None:
    """(index, add-on) of the node monitoring agent among the ClusterConfig's addons, None without it."""
    for index, addon in enumerate(sequence(cluster_doc, "addons")):
        if isinstance(addon, dict) and addon.get("name") == AGENT:
            return index, addon
    return None


def configuration_values(addon: dict) -> dict | None:
    """The add-on's configurationValues as a mapping ({} when it sets none), None when unreadable: eksctl takes
    JSON or YAML there (v0.230.0 pkg/apis/eksctl.io/v1alpha5/addon.go, convertConfigurationValuesToJSON)."""
    text = addon.get("configurationValues")
    if text is None or text == "":
        return {}
    if not isinstance(text, str):
        return None
    try:
        values = json.loads(text)
    except ValueError:
        try:
            values = yaml.safe_load(text)
        except yaml.YAMLError:
            return None
    return values if isinstance(values, dict) else None


def dcgm_tolerations(addon: dict) -> list[dict] | None:
    """The tolerations the add-on gives its dcgm-server DaemonSet, None when its configuration is unreadable."""
    values = configuration_values(addon)
    if values is None:
        return None
    return [t for t in sequence(values, "dcgmAgent", "tolerations") if isinstance(t, dict)]


def repair_enabled(group: dict) -> bool:
    """Whether a node group of a ClusterConfig has node auto repair on (a managed group's field only)."""
    return mapping(group, "nodeRepairConfig").get("enabled") is True


def repair_override(group: dict, condition: str, reason: str) -> dict | None:
    """The group's nodeRepairConfigOverrides entry for a condition and reason (eksctl v0.230.0
    NodeRepairConfigOverride: nodeMonitoringCondition, nodeUnhealthyReason, minRepairWaitTimeMins, repairAction)."""
    for override in sequence(group, "nodeRepairConfig", "nodeRepairConfigOverrides"):
        if (
            isinstance(override, dict)
            and override.get("nodeMonitoringCondition") == condition
            and override.get("nodeUnhealthyReason") == reason
        ):
            return override
    return None
