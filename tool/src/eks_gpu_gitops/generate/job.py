"""A new MPIJob for an environment, modelled on the environment's rendered horovod-train job.

Containers and volumes are found by name (launcher, worker, dshm), and the launcher's command is
written by `mpirun_command` from named settings, like the environment's own job.
"""

from __future__ import annotations

import copy
import shlex
from dataclasses import dataclass, field

from ..core.errors import InputError
from ..facts import catalog, nccl_tests
from ..model import MPIJOB
from ..model.mpi import mpirun_command
from .environment import JOB, SETTINGS_KIND, launcher_exports, shm_size, worker_resources

# What overlays/base/training/mpijob.yaml writes too; in a new job, the replacement below sets the real image.
IMAGE_PLACEHOLDER = "trainer"
LAUNCHER, WORKER, SHARED_MEMORY, FSX = "launcher", "worker", "dshm", "fsx"
# The trainer's entry point of each kind of job (trainer/horovod_trainer/<module>.py).
KIND_MODULES = {"train": "train", "benchmark": "synthetic_benchmark"}
# Every kind: the trainer's, and nccl-tests, the fabric's acceptance test (docs/operations.md, "Acceptance test").
KINDS = (*KIND_MODULES, "nccl-tests")
# Where the image keeps nccl-tests (trainer/Dockerfile), and the run: all-reduce from 8 B to 8 GiB,
# doubling, one GPU per rank, checking results, 20 timed iterations per size.
NCCL_TESTS = "/opt/nccl-tests/build/all_reduce_perf"
NCCL_TESTS_ARGS = ("-b", "8", "-e", "8G", "-f", "2", "-g", "1", "-c", "1", "-n", "20")
# Its NCCL log: INFO for the start-up and network lines only (which transport, which EFA provider).
NCCL_TESTS_LOG = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
# What reads its table and passes or fails the job (trainer/horovod_trainer/fabric_check.py, in the image).
FABRIC_CHECK = ("python", "-m", "horovod_trainer.fabric_check")


@dataclass(frozen=True)
class JobSpec:
    name: str
    env: str
    workers: int
    gpus_per_worker: int
    image: str | None  # None: whatever image the environment's horovod-train job has
    trainer_flags: dict[str, str] = field(default_factory=dict)  # e.g. {"epochs": "30"}
    kind: str = "train"  # a key of KIND_MODULES
    switches: tuple[str, ...] = ()  # trainer switches, e.g. ("mixed-precision",)
    data_format: str = "features"  # "imagenet": TFRecords already on FSx, indexed by the init container
    floor: float | None = None  # nccl-tests: --floor GB/s; None: the instance type's published floor, if any


def _set_flag(args: list[str], flag: str, value: str) -> None:
    prefix = f"--{flag}="
    for index, arg in enumerate(args):
        if arg.startswith(prefix):
            args[index] = prefix + value
            return
    args.append(prefix + value)


def _named(items: list, name: str, what: str) -> dict:
    for item in items:
        if isinstance(item, dict) and item.get("name") == name:
            return item
    raise InputError(f"{JOB} has no {what} named {name!r} to model a new job on")


def job_manifest(model: dict, spec: JobSpec, instance: catalog.InstanceType, efa_on_nodes: bool) -> dict:
    """`model` is the rendered horovod-train MPIJob of the environment; it is not changed."""
    job = copy.deepcopy(model)
    job["metadata"]["name"] = spec.name
    job["spec"]["slotsPerWorker"] = spec.gpus_per_worker
    replicas = job["spec"]["mpiReplicaSpecs"]
    launcher_pod = replicas["Launcher"]["template"]["spec"]
    worker_pod = replicas["Worker"]["template"]["spec"]
    replicas["Worker"]["replicas"] = spec.workers
    # A worker that takes part of a node shares the node's EFA interfaces with others: only
    # whole-node workers ask for them.
    efa = efa_on_nodes and spec.gpus_per_worker == instance.gpus
    share = catalog.InstanceType(
        instance.name,
        instance.vcpus * spec.gpus_per_worker // instance.gpus,
        instance.memory_gib * spec.gpus_per_worker // instance.gpus,
        spec.gpus_per_worker,
        instance.gpu_model,
        instance.gpu_memory_mib,
        instance.efa_interfaces,
    )
    _named(worker_pod.get("containers", []), WORKER, "worker container")["resources"] = worker_resources(
        share, spec.gpus_per_worker, efa
    )
    _named(worker_pod.get("volumes", []), SHARED_MEMORY, "worker volume")["emptyDir"]["sizeLimit"] = shm_size(share)
    for pod in (launcher_pod, worker_pod):
        for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
            container["image"] = spec.image or IMAGE_PLACEHOLDER
    launcher = _named(launcher_pod.get("containers", []), LAUNCHER, "launcher container")
    exports = launcher_exports(efa)
    if spec.kind == "nccl-tests":
        exports += [name for name in NCCL_TESTS_LOG if name not in exports]
        launcher["env"] = [e for e in launcher.get("env", []) if e.get("name") not in NCCL_TESTS_LOG]
        launcher["env"] += [{"name": name, "value": value} for name, value in NCCL_TESTS_LOG.items()]
        for pod in (launcher_pod, worker_pod):
            _without_data(pod)
        # One run, and its launcher pod kept: a failed verdict is the fabric's, a rerun would measure the same nodes
        # again, and with restartPolicy OnFailure the Job deletes the running pod, its log and its terminated
        # message (the verdict) once backoffLimit is reached (Kubernetes docs, Jobs, "Pod backoff failure policy").
        # The MPI operator copies both onto the launcher's Job (kubeflow/mpi-operator v0.8.2,
        # pkg/controller/mpi_job_controller.go, newLauncherJob and setRestartPolicy).
        replicas["Launcher"]["restartPolicy"] = "Never"
        job["spec"].setdefault("runPolicy", {})["backoffLimit"] = 0
        floor = fabric_floor(spec.workers, efa, instance.name, spec.floor)
        launcher["command"] = nccl_tests_command(spec.workers * spec.gpus_per_worker, exports, instance.name, floor)
        launcher.pop("args", None)
        return job
    launcher["command"] = mpirun_command(spec.workers * spec.gpus_per_worker, exports)
    if spec.kind == "benchmark":
        launcher["args"] = benchmark_args(spec)
        for pod in (launcher_pod, worker_pod):
            _without_data(pod)
        return job
    args = launcher.setdefault("args", [])
    if spec.data_format == "imagenet":
        data_dir = spec.trainer_flags.get("data-dir", IMAGENET_DIR)
        _set_flag(args, "data-dir", data_dir)
        _index_instead_of_prepare(launcher_pod, data_dir)
    _set_flag(args, "checkpoint-dir", f"/fsx/checkpoints/{spec.name}")
    _set_flag(args, "log-dir", f"/fsx/logs/{spec.name}")
    for flag, value in spec.trainer_flags.items():
        _set_flag(args, flag, value)
    for switch in spec.switches:
        if f"--{switch}" not in args:
            args.append(f"--{switch}")
    return job


@dataclass(frozen=True)
class FabricFloor:
    gbps: float | None  # None: the check reports the bus bandwidth and passes
    source: str  # where the figure comes from, or why there is none


def fabric_floor(workers: int, efa: bool, instance_type: str, override: float | None) -> FabricFloor:
    """The least all_reduce busbw at nccl_tests.MESSAGE_SIZE an nccl-tests job passes with.

    The published floors are two-node figures of whole nodes over EFA; a job of part-node workers, without EFA or
    on one node measures something else (NVLink, or TCP), so it gets none unless --floor sets one. Neither does a job
    of more than two nodes: two nodes can pass more than each node's network rate (NCCL's trees keep part of the
    data inside each node), but with n nodes every node sends about 2(n-1)/n of the data out, so the bus bandwidth
    is held near the network's rate (50 GB/s on p4d), below p4d's two-node floor."""
    if override is not None:
        return FabricFloor(override, "set by --floor")
    if not efa:
        return FabricFloor(None, "its workers are not whole nodes on EFA, which the published figures are")
    if workers < 2:
        return FabricFloor(None, "one worker: the run does not cross the EFA fabric")
    if workers > 2:
        return FabricFloor(
            None, f"the published figures are for 2 nodes, not {workers}; --workers 2 tests a pair against them"
        )
    published = nccl_tests.floor_for(instance_type)
    if published is None:
        return FabricFloor(None, f"no published figure for {instance_type}")
    return FabricFloor(published.gbps, published.source)


def nccl_tests_command(processes: int, exports: list[str], instance_type: str, floor: FabricFloor) -> list[str]:
    """bash running all_reduce_perf under mpirun, its table piped into the fabric check. pipefail: an mpirun that
    fails fails the job even when the check passes what it saw."""
    check = [*FABRIC_CHECK, "--size", str(nccl_tests.MESSAGE_SIZE)]
    if floor.gbps is not None:
        check += ["--floor", gbps_text(floor.gbps)]
    check += ["--instance-type", instance_type]
    run = [*mpirun_command(processes, exports), NCCL_TESTS, *NCCL_TESTS_ARGS]
    return ["bash", "-o", "pipefail", "-c", f"{shlex.join(run)} | {shlex.join(check)}"]


def gbps_text(value: float) -> str:
    """A bandwidth as written: every digit it has (60, 72.5, 1234567.5), not %g's six."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def parse_floor(text: str) -> float:
    """--floor: a positive number of GB/s."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not (0 < value < float("inf")):
        raise InputError(f"--floor: {text!r} is not a positive number of GB/s")
    return value


def floor_line(job: dict, spec: JobSpec) -> str:
    """What new-job says of an nccl-tests job's pass mark, read from the job it wrote."""
    workers = job["spec"]["mpiReplicaSpecs"]["Worker"]
    worker = _named(workers["template"]["spec"].get("containers", []), WORKER, "worker container")
    efa = bool(worker.get("resources", {}).get("limits", {}).get("vpc.amazonaws.com/efa"))
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    script = shlex.split(_named(launcher.get("containers", []), LAUNCHER, "launcher container")["command"][-1])
    instance_type = script[script.index("--instance-type") + 1]
    floor = fabric_floor(workers["replicas"], efa, instance_type, spec.floor)
    measured = f"all_reduce busbw at {nccl_tests.MESSAGE_SIZE} B"
    if floor.gbps is None:
        return f"the job reports {measured} without a floor ({floor.source}); --floor GBPS sets one"
    return f"the job fails below {gbps_text(floor.gbps)} GB/s {measured} on {instance_type} ({floor.source})"


# Where an ImageNet-layout job reads its data unless --data-dir says otherwise.
IMAGENET_DIR = "/fsx/imagenet"
PREPARE_DATA = "prepare-data"


def _index_instead_of_prepare(pod: dict, data_dir: str) -> None:
    """The init container indexes the ImageNet TFRecords already on FSx (trainer/README.md, "ResNet-50 on
    ImageNet") instead of writing the bundled digits; `--skip-existing` makes restarts cheap."""
    container = _named(pod.get("initContainers", []), PREPARE_DATA, "launcher init container")
    container["name"] = "index-data"
    container["command"] = ["python", "-m", "horovod_trainer.index_data"]
    container["args"] = ["--data-dir", data_dir, "--skip-existing"]


# The synthetic benchmark's defaults in a job: ResNet-50 at 64 images per GPU, the usual figure.
BENCHMARK_DEFAULTS = {"model": "resnet50", "batch-size": "64"}


def benchmark_args(spec: JobSpec) -> list[str]:
    """`python -m horovod_trainer.synthetic_benchmark` with the job's settings; it reads no data."""
    flags = {**BENCHMARK_DEFAULTS, **spec.trainer_flags}
    return [
        "python",
        "-m",
        f"horovod_trainer.{KIND_MODULES['benchmark']}",
        *(f"--{flag}={value}" for flag, value in flags.items()),
        *(f"--{switch}" for switch in spec.switches),
    ]


def _without_data(pod: dict) -> None:
    """A benchmark needs neither the data set nor FSx: no prepare-data step, no FSx volume or mount,
    so it can run as soon as the GPU nodes are up."""
    pod.pop("initContainers", None)
    volumes = [v for v in pod.get("volumes", []) if v.get("name") != FSX]
    if volumes:
        pod["volumes"] = volumes
    else:
        pod.pop("volumes", None)
    for container in pod.get("containers", []):
        mounts = [m for m in container.get("volumeMounts", []) if m.get("name") != FSX]
        if mounts:
            container["volumeMounts"] = mounts
        else:
            container.pop("volumeMounts", None)


def fsx_mount(job: dict) -> str | None:
    """Where the job's workers mount the FSx volume, the only place data reaches them; None without one."""
    pod = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    for container in pod.get("containers", []):
        for mount in container.get("volumeMounts", []) if isinstance(container, dict) else []:
            if isinstance(mount, dict) and mount.get("name") == FSX and isinstance(mount.get("mountPath"), str):
                return mount["mountPath"]
    return None


def image_replacement(job: dict) -> dict:
    """A Kustomize replacement that gives every container of `job` the image of horovod-train's worker.

    The base's `images:` transformer (where a release bumps newTag) does not reach resources an
    environment overlay adds; this copies its result, so a new job moves with the release.
    """
    paths = [
        f"spec.mpiReplicaSpecs.{role}.template.spec.{key}.*.image"
        for role, replica in job["spec"]["mpiReplicaSpecs"].items()
        for key in ("initContainers", "containers")
        if replica["template"]["spec"].get(key)
    ]
    return {
        "source": {
            "kind": "MPIJob",
            "name": JOB,
            "fieldPath": f"spec.mpiReplicaSpecs.Worker.template.spec.containers.[name={WORKER}].image",
        },
        "targets": [{"select": {"kind": "MPIJob", "name": job["metadata"]["name"]}, "fieldPaths": paths}],
    }


def nccl_debug_replacement(job: dict) -> dict | None:
    """A Kustomize replacement that gives `job`'s launcher the environment's NCCL log level
    (training.ncclDebug of its settings), as horovod-train has; None when the launcher sets none."""
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    container = _named(launcher.get("containers", []), LAUNCHER, "launcher container")
    if not any(e.get("name") == "NCCL_DEBUG" for e in container.get("env", [])) or any(
        e.get("name") == "NCCL_DEBUG_SUBSYS" for e in container.get("env", [])
    ):
        return None
    return {
        "source": {"kind": SETTINGS_KIND, "fieldPath": "training.ncclDebug"},
        "targets": [
            {
                "select": {"kind": "MPIJob", "name": job["metadata"]["name"]},
                "fieldPaths": [
                    f"spec.mpiReplicaSpecs.Launcher.template.spec.containers.[name={LAUNCHER}].env.[name=NCCL_DEBUG].value"
                ],
            }
        ],
    }


def model_job(objects) -> dict | None:
    for manifest in objects:
        if manifest.group_kind == MPIJOB and manifest.name == JOB:
            return manifest.doc
    return None
