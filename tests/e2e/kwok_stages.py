"""kwok's pod stages for the loop: its own default ("fast") stages, except that an MPI launcher stays Running.

kwok v0.7.0 without a configuration uses the stages of sigs.k8s.io/kwok@v0.7.0 kustomize/stage/pod/fast (pod-ready,
pod-complete, pod-delete; pkg/kwok/cmd/root.go, getDefaultPodStages). pod-complete turns every Running pod owned by a
Job Succeeded at once: the MPI operator's launcher is a Job's pod, so the MPIJob would succeed the moment it started
and the operator would remove its workers (cleanPodPolicy: Running) before a test could see them. Here pod-complete
also requires the pod not to be an MPI launcher (label training.kubeflow.org/job-role, set by mpi-operator v0.8.2
pkg/controller/mpi_job_controller.go defaultLabels), so launcher and workers stay Running, as they would while a job
trains. (A missing label matches NotIn: pkg/utils/expression/selector.go, Requirement.Matches.)

kwok reads Stage documents from $KWOK_WORKDIR/kwok.yaml when no --config is given (pkg/config/flags.go InitFlags,
loadConfig; pkg/config/vars.go WorkDir = KWOK_WORKDIR; pkg/consts ConfigName). Once the configuration holds pod
stages, kwok uses those instead of its defaults; node stages stay the defaults (none are given).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import yaml

from .sources import charts

KWOK = ("sigs.k8s.io/kwok", "v0.7.0")
FAST = "kustomize/stage/pod/fast"
# The MPI operator's role label: only launchers carry job-role=launcher (workers are not a Job's pods anyway).
LAUNCHER_ROLE = '.metadata.labels["training.kubeflow.org/job-role"]'


def pod_stages() -> list[dict]:
    """kwok's fast pod stages from its module at v0.7.0, pod-complete made to pass over MPI launchers."""
    module_dir = charts.go_module_dir(*KWOK)
    if module_dir is None:
        raise RuntimeError(f"{KWOK[0]}@{KWOK[1]} could not be had from the Go module proxy (kwok's pod stages)")
    stages = [yaml.safe_load((module_dir / FAST / name).read_text()) for name in ("pod-ready.yaml", "pod-delete.yaml")]
    complete = yaml.safe_load((module_dir / FAST / "pod-complete.yaml").read_text())
    expressions = complete["spec"]["selector"]["matchExpressions"]
    expressions.append({"key": LAUNCHER_ROLE, "operator": "NotIn", "values": ["launcher"]})
    return [*stages, complete]


# kwok renews a Lease per node in kube-node-lease when nodeLeaseDurationSeconds is set (pkg/kwok/controllers/
# controller.go initNodeLeaseController). Without it (the value is 0 when no KwokConfiguration is loaded), only the
# node heartbeat stage updates the nodes, every 20 to 45 s (kustomize/stage/node/heartbeat), and kube-controller-
# manager's node lifecycle controller, missing a heartbeat within its grace period, marks the nodes NotReady and
# every pod on them Ready=False, which kwok's pod-ready stage (only for pods without a podIP) never undoes: the
# Deployments turn unavailable a minute into the run and `wait: true` Kustomizations never turn Ready again.
# 40 s: kwok's own default (pkg/apis/config/v1alpha1/zz_generated.defaults.go) and the kubelet's.
KWOK_CONFIGURATION = {
    "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
    "kind": "KwokConfiguration",
    "options": {"nodeLeaseDurationSeconds": 40},
}


def write_configuration(folder: Path) -> Path:
    """folder/kwok.yaml with node leases on and the pod stages; the folder is what KWOK_WORKDIR names."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "kwok.yaml"
    path.write_text(yaml.safe_dump_all([KWOK_CONFIGURATION, *pod_stages()], sort_keys=False))
    return path


@contextlib.contextmanager
def kwok_workdir(folder: Path):
    """KWOK_WORKDIR set while the control plane starts kwok (it inherits the environment), then as it was."""
    before = os.environ.get("KWOK_WORKDIR")
    os.environ["KWOK_WORKDIR"] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("KWOK_WORKDIR", None)
        else:
            os.environ["KWOK_WORKDIR"] = before
