"""A new MPIJob for an environment, modelled on the environment's rendered horovod-train job."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from .. import catalog
from .environment import JOB, LAUNCHER_PROGRAM_INDEX, shm_size, worker_resources

# What overlays/base/training/mpijob.yaml writes too; in a new job, the replacement below sets the real image.
IMAGE_PLACEHOLDER = "trainer"


@dataclass(frozen=True)
class JobSpec:
    name: str
    env: str
    workers: int
    gpus_per_worker: int
    image: str | None   # None: whatever image the environment's horovod-train job has
    trainer_flags: dict[str, str] = field(default_factory=dict)   # e.g. {"epochs": "30"}


def _set_flag(args: list[str], flag: str, value: str) -> None:
    prefix = f"--{flag}="
    for index, arg in enumerate(args):
        if arg.startswith(prefix):
            args[index] = prefix + value
            return
    args.append(prefix + value)


def job_manifest(model: dict, spec: JobSpec, instance: catalog.InstanceType, efa_on_nodes: bool) -> dict:
    """`model` is the rendered horovod-train MPIJob of the environment; it is not changed."""
    job = copy.deepcopy(model)
    job["metadata"]["name"] = spec.name
    job["spec"]["slotsPerWorker"] = spec.gpus_per_worker
    replicas = job["spec"]["mpiReplicaSpecs"]
    launcher = replicas["Launcher"]["template"]["spec"]
    worker = replicas["Worker"]
    worker["replicas"] = spec.workers
    # A worker that takes part of a node shares the node's EFA interfaces with others: only
    # whole-node workers ask for them.
    whole_node = spec.gpus_per_worker == instance.gpus
    efa = efa_on_nodes and whole_node
    share = catalog.InstanceType(instance.name, instance.vcpus * spec.gpus_per_worker // instance.gpus,
                                 instance.memory_gib * spec.gpus_per_worker // instance.gpus, spec.gpus_per_worker,
                                 instance.gpu_model, instance.gpu_memory_mib, instance.efa_interfaces)
    worker["template"]["spec"]["containers"][0]["resources"] = worker_resources(share, spec.gpus_per_worker, efa)
    for volume in worker["template"]["spec"]["volumes"]:
        if volume.get("name") == "dshm":
            volume["emptyDir"]["sizeLimit"] = shm_size(share)
    containers = [*launcher.get("initContainers", []), *launcher["containers"], *worker["template"]["spec"]["containers"]]
    for container in containers:
        container["image"] = spec.image or IMAGE_PLACEHOLDER
    args = launcher["containers"][0]["args"]
    args[args.index("-np") + 1] = str(spec.workers * spec.gpus_per_worker)
    if not efa and "FI_EFA_USE_HUGE_PAGE=0" in args:
        at = args.index("FI_EFA_USE_HUGE_PAGE=0")
        del args[at - 1:at + 1]
    _set_flag(args, "checkpoint-dir", f"/fsx/checkpoints/{spec.name}")
    _set_flag(args, "log-dir", f"/fsx/logs/{spec.name}")
    for flag, value in spec.trainer_flags.items():
        _set_flag(args, flag, value)
    assert args.index("python") >= LAUNCHER_PROGRAM_INDEX  # mpirun options stay before the program
    return job


def image_replacement(job: dict) -> dict:
    """A Kustomize replacement that gives every container of `job` the image of horovod-train's worker.

    The base's `images:` transformer (where a release bumps newTag) does not reach resources an
    environment overlay adds; this copies its result, so a new job moves with the release.
    """
    paths = [f"spec.mpiReplicaSpecs.{role}.template.spec.{key}.*.image"
             for role, replica in job["spec"]["mpiReplicaSpecs"].items()
             for key in ("initContainers", "containers") if replica["template"]["spec"].get(key)]
    return {"source": {"kind": "MPIJob", "name": JOB,
                       "fieldPath": "spec.mpiReplicaSpecs.Worker.template.spec.containers.0.image"},
            "targets": [{"select": {"kind": "MPIJob", "name": job["metadata"]["name"]}, "fieldPaths": paths}]}


def model_job(objects) -> dict | None:
    for manifest in objects:
        if manifest.kind == "MPIJob" and manifest.name == JOB:
            return manifest.doc
    return None
