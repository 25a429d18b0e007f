"""MPIJob rules: the shape the MPI operator accepts, and a launch that matches the workers."""

from __future__ import annotations

import re
import shlex

from .model import GPU, MPIJOB, Container, Scope, mapping, plural, pod_templates
from .registry import Finding, category

rule = category("MPIJob")

_LAUNCHERS = ("mpirun", "mpiexec", "orterun", "prterun", "horovodrun")
_NP_FLAGS = ("-np", "--np", "-n", "--n", "-c", "--num-proc")
_SHELLS = ("sh", "bash", "dash", "ash", "zsh")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def mpijobs(scope: Scope):
    return [m for m in scope.objects if (m.group, m.kind) == MPIJOB]


def replica_templates(manifest):
    return {t.role: t for t in pod_templates(manifest)}


def slots_per_worker(manifest) -> int:
    slots = mapping(manifest.doc, "spec").get("slotsPerWorker", 1)
    return slots if isinstance(slots, int) and not isinstance(slots, bool) else 1


def _basename(token: str) -> str:
    return token.rsplit("/", 1)[-1]


def launch_tokens(container: Container) -> tuple[list[str], callable]:
    """The launcher's words, and the field path of each: a `sh -c "..."` script is split."""
    argv = container.argv
    if argv and _basename(argv[0]) in _SHELLS:
        for index, word in enumerate(argv[:-1]):
            if word.startswith("-") and "c" in word.lstrip("-") and not word.startswith("--"):
                try:
                    tokens = shlex.split(argv[index + 1], comments=True)
                except ValueError:
                    return [], lambda i: container.path
                return tokens, lambda i, at=index + 1: container.argv_path(at)
    return argv, container.argv_path


def process_count(tokens: list[str]) -> tuple[str, int] | None:
    """(value of -np, token index) for the first mpirun/horovodrun in `tokens`, if any."""
    start = next((i for i, t in enumerate(tokens) if _basename(t) in _LAUNCHERS), None)
    if start is None:
        return None
    for index in range(start + 1, len(tokens)):
        token = tokens[index]
        if token == "--" or token.endswith(".py") or _basename(token).startswith("python") or token in ("&&", ";", "|"):
            return None   # the program's own arguments start here
        flag, equals, value = token.partition("=")
        if flag in _NP_FLAGS:
            if equals:
                return value, index
            if index + 1 < len(tokens):
                return tokens[index + 1], index + 1
    return None


def runs_mpi(container: Container) -> bool:
    tokens, _ = launch_tokens(container)
    return any(_basename(t) in _LAUNCHERS for t in tokens)


@rule("launcher-requests-gpu", "error",
      description="The MPIJob launcher requests GPUs, which it cannot use",
      remediation="Remove nvidia.com/gpu from the Launcher's resources; only Worker pods need GPUs.",
      docs="""Unless `runLauncherAsWorker` is true, the MPI operator sets `NVIDIA_VISIBLE_DEVICES` and
      `NVIDIA_DRIVER_CAPABILITIES` to empty on the launcher, so GPUs it requests stay idle for the whole run
      and take a worker's place on a GPU node. See the MPI operator's `mpi_job_controller.go`.""")
def launcher_requests_gpu(scope: Scope):
    for job in mpijobs(scope):
        if mapping(job.doc, "spec").get("runLauncherAsWorker") is True:
            continue
        launcher = replica_templates(job).get("Launcher")
        for container in (launcher.containers + launcher.init_containers) if launcher else []:
            if container.request(GPU) > 0:
                yield Finding("launcher-requests-gpu", job,
                              f"{launcher.container_label(container)} requests "
                              f"{plural(container.request(GPU), 'GPU')} that the operator hides from it",
                              (*container.path, "resources"))


@rule("gpu-slots-mismatch", "error",
      description="Worker GPUs differ from the MPIJob's slotsPerWorker",
      remediation="Set spec.slotsPerWorker to the nvidia.com/gpu each worker requests (one MPI rank per GPU).",
      docs="""The operator writes `slots=<slotsPerWorker>` for every worker into the hostfile, and mpirun starts
      that many ranks per worker. With fewer slots than GPUs some GPUs idle; with more, ranks share a GPU and
      run out of memory or slow each other down.""")
def gpu_slots_mismatch(scope: Scope):
    for job in mpijobs(scope):
        worker = replica_templates(job).get("Worker")
        gpus = worker.request(GPU) if worker else 0
        slots = slots_per_worker(job)
        if gpus > 0 and gpus != slots:
            yield Finding("gpu-slots-mismatch", job,
                          f"each worker requests {plural(gpus, 'GPU')} but slotsPerWorker is {slots}",
                          ("spec", "slotsPerWorker"))


@rule("mpirun-np-mismatch", "error",
      description="A hard-coded mpirun or horovodrun -np differs from workers x slotsPerWorker",
      remediation="Set -np to Worker.replicas x slotsPerWorker (plus slotsPerWorker with runLauncherAsWorker), "
                  "or leave -np out so Open MPI starts one rank per hostfile slot.",
      docs="""The operator does not compute `-np`. Fewer ranks than slots leave GPUs idle; more ranks than slots
      make mpirun refuse to start ("not enough slots") or oversubscribe the workers. The rule reads the
      launcher's command and args, and a `sh -c` script.""")
def mpirun_np_mismatch(scope: Scope):
    for job in mpijobs(scope):
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
            yield Finding("mpirun-np-mismatch", job,
                          f"-np {found[0]} but {plural(workers, 'worker')} x {plural(slots, 'slot')} "
                          f"give {expected} ranks", path_of(found[1]))


@rule("mpijob-name-invalid", "error",
      description="The MPIJob's worker pod names would not be valid DNS labels",
      remediation="Shorten the MPIJob name so <name>-worker-<replicas-1> is at most 63 characters of "
                  "lower-case letters, digits and dashes, starting with a letter.",
      docs="""Workers are reached by their host names, `<name>-worker-<index>`, which must be DNS-1035 labels;
      the operator rejects a job whose last worker name is not one.""")
def mpijob_name_invalid(scope: Scope):
    for job in mpijobs(scope):
        worker = replica_templates(job).get("Worker")
        last = f"{job.name}-worker-{max((worker.replicas if worker else 1) - 1, 0)}"
        if len(last) > 63 or not _DNS_1035.match(last):
            yield Finding("mpijob-name-invalid", job,
                          f"worker host name {last!r} is not a DNS-1035 label of at most 63 characters",
                          ("metadata", "name"))


@rule("mpijob-replica-spec-invalid", "error",
      description="The MPIJob's replica specs break the MPI operator's validation",
      remediation="Give exactly one Launcher with replicas 1, at least one Worker replica, and restartPolicy "
                  "Never or OnFailure on each.",
      docs="""The operator's validation (v2beta1) requires a Launcher with exactly one replica, Worker replicas
      of at least 1 when set, and a replica-level `restartPolicy` of `Never` or `OnFailure`; anything else is
      rejected and no pod starts.""")
def mpijob_replica_spec_invalid(scope: Scope):
    for job in mpijobs(scope):
        specs = mapping(job.doc, "spec", "mpiReplicaSpecs")
        if "Launcher" not in specs:
            yield Finding("mpijob-replica-spec-invalid", job, "no Launcher replica spec", ("spec", "mpiReplicaSpecs"))
        for role, replica_spec in specs.items():
            if not isinstance(replica_spec, dict):
                continue
            path = ("spec", "mpiReplicaSpecs", role)
            replicas = replica_spec.get("replicas")
            if role == "Launcher" and replicas not in (None, 1):
                yield Finding("mpijob-replica-spec-invalid", job, f"Launcher replicas is {replicas}, must be 1",
                              (*path, "replicas"))
            if role == "Worker" and isinstance(replicas, int) and replicas < 1:
                yield Finding("mpijob-replica-spec-invalid", job, f"Worker replicas is {replicas}, must be at least 1",
                              (*path, "replicas"))
            policy = replica_spec.get("restartPolicy")
            if policy is not None and policy not in ("Never", "OnFailure"):
                yield Finding("mpijob-replica-spec-invalid", job,
                              f"{role} restartPolicy {policy} is not Never or OnFailure", (*path, "restartPolicy"))
