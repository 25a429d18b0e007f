"""MPIJob rules: the shape the MPI operator accepts, and a launch that matches the workers."""

from __future__ import annotations

import re

from ..model import GPU, Scope, mapping, plural
from ..model.mpi import launch_tokens, mpijobs, parse_launch, process_count, replica_templates, slots_per_worker
from .registry import Finding, category

rule = category("MPIJob")

_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@rule(
    "launcher-requests-gpu",
    "error",
    description="The MPIJob launcher requests GPUs, which it cannot use",
    remediation="Remove nvidia.com/gpu from the Launcher's resources; only Worker pods need GPUs.",
    docs="""Unless `runLauncherAsWorker` is true, the MPI operator sets `NVIDIA_VISIBLE_DEVICES` and
      `NVIDIA_DRIVER_CAPABILITIES` to empty on the launcher, so GPUs it requests stay idle for the whole run
      and take a worker's place on a GPU node. See the MPI operator's `mpi_job_controller.go`.""",
)
def launcher_requests_gpu(scope: Scope):
    for job in mpijobs(scope.objects):
        if mapping(job.doc, "spec").get("runLauncherAsWorker") is True:
            continue
        launcher = replica_templates(job).get("Launcher")
        for container in (launcher.containers + launcher.init_containers) if launcher else []:
            if container.request(GPU) > 0:
                yield Finding(
                    job,
                    f"{launcher.container_label(container)} requests "
                    f"{plural(container.request(GPU), 'GPU')} that the operator hides from it",
                    (*container.path, "resources"),
                )


@rule(
    "gpu-slots-mismatch",
    "error",
    description="Worker GPUs differ from the MPIJob's slotsPerWorker",
    remediation="Set spec.slotsPerWorker to the nvidia.com/gpu each worker requests (one MPI rank per GPU).",
    docs="""The operator writes `slots=<slotsPerWorker>` for every worker into the hostfile, and mpirun starts
      that many ranks per worker. With fewer slots than GPUs some GPUs idle; with more, ranks share a GPU and
      run out of memory or slow each other down.""",
)
def gpu_slots_mismatch(scope: Scope):
    for job in mpijobs(scope.objects):
        worker = replica_templates(job).get("Worker")
        gpus = worker.request(GPU) if worker else 0
        slots = slots_per_worker(job)
        if gpus > 0 and gpus != slots:
            yield Finding(
                job,
                f"each worker requests {plural(gpus, 'GPU')} but slotsPerWorker is {slots}",
                ("spec", "slotsPerWorker"),
            )


@rule(
    "mpirun-np-mismatch",
    "error",
    description="A hard-coded mpirun or horovodrun -np differs from workers x slotsPerWorker",
    remediation="Set -np to Worker.replicas x slotsPerWorker (plus slotsPerWorker with runLauncherAsWorker), "
    "or leave -np out so Open MPI starts one rank per hostfile slot.",
    docs="""The operator does not compute `-np`. Fewer ranks than slots leave GPUs idle; more ranks than slots
      make mpirun refuse to start ("not enough slots") or oversubscribe the workers. The rule reads the
      launcher's command and args, and a `sh -c` script.""",
)
def mpirun_np_mismatch(scope: Scope):
    for job in mpijobs(scope.objects):
        templates = replica_templates(job)
        launcher, worker = templates.get("Launcher"), templates.get("Worker")
        if not launcher or not launcher.containers:
            continue
        slots = slots_per_worker(job)
        workers = worker.replicas if worker else 0
        expected = workers * slots
        if mapping(job.doc, "spec").get("runLauncherAsWorker") is True:
            expected += slots
        tokens, path_of = launch_tokens(launcher.containers[0])
        found = process_count(tokens)
        if found is None or not found[0].isdigit():
            continue
        if int(found[0]) != expected:
            yield Finding(
                job,
                f"-np {found[0]} but {plural(workers, 'worker')} x {plural(slots, 'slot')} give {expected} ranks",
                path_of(found[1]),
            )


@rule(
    "mpijob-name-invalid",
    "error",
    description="The MPIJob's worker pod names would not be valid DNS labels",
    remediation="Shorten the MPIJob name so <name>-worker-<replicas-1> is at most 63 characters of "
    "lower-case letters, digits and dashes, starting with a letter.",
    docs="""Workers are reached by their host names, `<name>-worker-<index>`, which must be DNS-1035 labels;
      the operator rejects a job whose last worker name is not one.""",
)
def mpijob_name_invalid(scope: Scope):
    for job in mpijobs(scope.objects):
        worker = replica_templates(job).get("Worker")
        last = f"{job.name}-worker-{max((worker.replicas if worker else 1) - 1, 0)}"
        if len(last) > 63 or not _DNS_1035.match(last):
            yield Finding(
                job, f"worker host name {last!r} is not a DNS-1035 label of at most 63 characters", ("metadata", "name")
            )


@rule(
    "mpijob-replica-spec-invalid",
    "error",
    description="The MPIJob's replica specs break the MPI operator's validation",
    remediation="Give exactly one Launcher with replicas 1, at least one Worker replica, and restartPolicy "
    "Never or OnFailure on each.",
    docs="""The operator's validation (v2beta1) requires a Launcher with exactly one replica, Worker replicas
      of at least 1 when set, and a replica-level `restartPolicy` of `Never` or `OnFailure`; anything else is
      rejected and no pod starts.""",
)
def mpijob_replica_spec_invalid(scope: Scope):
    for job in mpijobs(scope.objects):
        specs = mapping(job.doc, "spec", "mpiReplicaSpecs")
        if "Launcher" not in specs:
            yield Finding(job, "no Launcher replica spec", ("spec", "mpiReplicaSpecs"))
        for role, replica_spec in specs.items():
            if not isinstance(replica_spec, dict):
                continue
            path = ("spec", "mpiReplicaSpecs", role)
            replicas = replica_spec.get("replicas")
            if role == "Launcher" and replicas not in (None, 1):
                yield Finding(job, f"Launcher replicas is {replicas}, must be 1", (*path, "replicas"))
            if role == "Worker" and isinstance(replicas, int) and replicas < 1:
                yield Finding(job, f"Worker replicas is {replicas}, must be at least 1", (*path, "replicas"))
            policy = replica_spec.get("restartPolicy")
            if policy is not None and policy not in ("Never", "OnFailure"):
                yield Finding(job, f"{role} restartPolicy {policy} is not Never or OnFailure", (*path, "restartPolicy"))


@rule(
    "launcher-command-malformed",
    "error",
    description="An mpirun or horovodrun command line is not options, then the program and its module",
    remediation="Write the launcher as mpirun, its options each with its operands (-np N, -x NAME[=value]), then "
    "the program and its module (python -m package.module) and the program's flags; the generators "
    "write it this way (mpirun_command in the tool's model/mpi.py).",
    docs="""mpirun reads its options up to the first word that is not one, and starts that word as the program
      on every rank; what follows belongs to the program. A missing operand shifts everything after it: `-x`
      without a variable takes the program's name as one, and `python -m -x ...` makes Python fail on every
      rank, after the GPU nodes have started. The rule reads the launcher's command and args (and a `sh -c`
      script) as Open MPI 4.1 and horovodrun do: each option takes its operands (`-mca` two), `-x` takes NAME
      or NAME=value, `-np` a number, and a Python program needs `-m module` or a script.""",
)
def launcher_command_malformed(scope: Scope):
    for template in scope.pod_templates:
        for container in template.containers:
            tokens, path_of = launch_tokens(container)
            launch = parse_launch(tokens)
            for index, problem in launch.problems if launch else []:
                yield Finding(template.owner, f"{template.container_label(container)}: {problem}", path_of(index))


@rule(
    "launcher-not-waiting-for-workers",
    "warning",
    description="An MPIJob with workers starts its launcher before the workers are Ready",
    remediation="Set spec.launcherCreationPolicy: WaitForWorkersReady.",
    docs="""With the default `AtStartup` the MPI operator creates the launcher at once. Worker host names
      resolve only once the workers are Ready, and on fresh GPU nodes they first pull a multi-GB image, so
      mpirun fails, the launcher restarts, and each failure counts against runPolicy.backoffLimit until the
      job is Failed. It is a warning because the launcher does retry (the operator's own examples rely on
      that) and a warm cluster may win the race. `WaitForWorkersReady` (kubeflow/mpi-operator v0.8,
      `pkg/controller/mpi_job_controller.go`) creates the launcher once every worker pod is Ready. A job with
      one worker counts too: its launcher is a pod of its own and reaches the worker by host name.""",
)
def launcher_not_waiting_for_workers(scope: Scope):
    for job in mpijobs(scope.objects):
        spec = mapping(job.doc, "spec")
        workers = mapping(spec, "mpiReplicaSpecs", "Worker").get("replicas", 0)
        if not isinstance(workers, int) or workers < 1 or spec.get("launcherCreationPolicy") == "WaitForWorkersReady":
            continue
        policy = spec.get("launcherCreationPolicy")
        where = ("spec", "launcherCreationPolicy") if policy is not None else ("spec",)
        yield Finding(
            job,
            f"launcherCreationPolicy is {policy or 'unset (AtStartup)'} with {plural(workers, 'worker')}",
            where,
        )
