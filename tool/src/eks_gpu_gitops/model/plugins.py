"""Device plugins: what makes nodes advertise nvidia.com/gpu and vpc.amazonaws.com/efa."""

from __future__ import annotations

from .fields import mapping
from .nodes import NodeGroup
from .pods import PodTemplate

# How a device plugin shows itself: in a container image or a Helm chart name.
NVIDIA_PLUGIN = ("nvidia/k8s-device-plugin", "nvidia-device-plugin")
EFA_PLUGIN = ("aws-efa-k8s-device-plugin",)
# The FSx for Lustre CSI driver's node plugin (public.ecr.aws/fsx-csi-driver/aws-fsx-csi-driver, in its chart's
# node DaemonSet and in its kustomize overlays).
FSX_CSI_DRIVER = ("fsx-csi-driver/aws-fsx-csi-driver", "aws-fsx-csi-driver:")


def _charts(manifest) -> list[str]:
    spec = mapping(manifest.doc, "spec")
    return [str(mapping(spec, "chart", "spec").get("chart", "")), str(spec.get("releaseName", "")), manifest.name]


def plugin_daemonsets(scope, markers: tuple[str, ...]) -> list[PodTemplate]:
    return [
        t
        for t in scope.pod_templates
        if t.owner.kind == "DaemonSet" and any(m in str(c.spec.get("image", "")) for c in t.containers for m in markers)
    ]


def plugin_releases(scope, markers: tuple[str, ...]) -> list:
    """HelmReleases whose chart, release name or name is the plugin's."""
    return [
        m
        for m in scope.objects
        if m.kind == "HelmRelease" and any(mark in chart for chart in _charts(m) for mark in markers)
    ]


def plugin_installed(scope, markers: tuple[str, ...]) -> bool:
    return bool(plugin_daemonsets(scope, markers) or plugin_releases(scope, markers))


def gpu_groups(scope) -> list[NodeGroup]:
    return [g for g in scope.node_groups if (g.smallest("gpus") or 0) > 0]


def efa_groups(scope) -> list[NodeGroup]:
    return [g for g in scope.node_groups if g.efa_enabled]
