"""MPIJob rules: the shape the MPI operator accepts, and a launch that matches the workers."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..model import GPU, Scope, mapping, plural
from ..model.mpi import (
    PROCESS_COUNT_FLAGS,
    Launch,
    basename,
    exported_variables,
    is_count,
    launch_tokens,
    mpijobs,
    parse_launch,
    replica_templates,
    slots_per_worker,
)
from .registry import Finding, category

rule = category("MPIJob")

_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# The MPI operator v0.8 serves kubeflow.org/v2beta1; its validation and launcherCreationPolicy are that API's.
_V2BETA1 = "kubeflow.org/v2beta1"


def _v2beta1_jobs(scope: Scope) -> list:
    return [job for job in mpijobs(scope.objects) if job.api_version == _V2BETA1]


@dataclass
class _Layout:
    """How Open MPI's mpirun spreads an MPIJob's ranks over its pods, as far as the launcher shows it."""

    nodes: int  # pods with slots: the workers, and the launcher with runLauncherAsWorker
    slots: int  # slotsPerWorker
    per_node_limit: int | None  # -N / --npernode / --map-by ppr:X:node
    by_node: bool  # --map-by node: ranks go round-robin over the pods
    oversubscribe: bool
    ranks: int | None  # -np, None when left out
    ranks_at: tuple  # field path of the -np operand (or of the per-node count, or slotsPerWorker)
    per_node_at: tuple  # field path of the per-node count (or slotsPerWorker)
    gpus_per_rank: int | None  # None: the program starts its own processes per node (torchrun)

    @property
    def capacity(self) -> int:
        """The ranks mpirun can place: one per slot, or the per-node count on every pod."""
        return self.nodes * (self.per_node_limit if self.per_node_limit is not None else self.slots)

    @property
    def refused(self) -> bool:
        """More ranks than slots, which mpirun refuses without --oversubscribe."""
        return self.ranks is not None and self.ranks > self.capacity and not self.oversubscribe

    @property
    def started(self) -> int:
        if self.ranks is None:
            return self.capacity
        return self.ranks if self.oversubscribe else min(self.ranks, self.capacity)

    @property
    def busiest(self) -> int:
        """The ranks on the pod that gets the most."""
        if self.started > self.capacity:  # oversubscribed: mpirun wraps around the pods
            return -(-self.started // max(self.nodes, 1))
        if self.per_node_limit is not None:
            return min(self.per_node_limit, self.started)
        if self.by_node:
            return -(-self.started // max(self.nodes, 1))
        return min(self.slots, self.started)


# Open MPI's launchers (mpirun, mpiexec and orterun are one program; prterun is Open MPI 5's).
_OPEN_MPI = ("mpirun", "mpiexec", "orterun", "prterun")
_PER_NODE = ("-N", "--N", "-npernode", "--npernode")
# Options that make mpirun read hosts and slots from elsewhere than the operator's hostfile
# (/etc/mpi/hostfile, kubeflow/mpi-operator v0.8.2 pkg/controller/mpi_job_controller.go).
_HOSTS = (
    "-H",
    "-host",
    "--host",
    "-hostfile",
    "--hostfile",
    "-machinefile",
    "--machinefile",
    "-rf",
    "--rankfile",
    "-rankfile",
    "--default-hostfile",
    "-default-hostfile",
)
_OPERATOR_HOSTFILE = "/etc/mpi/hostfile"
# Programs that start their own processes on each node, so one MPI rank may drive several GPUs.
_NODE_LAUNCHERS = ("torchrun", "deepspeed", "accelerate", "torch.distributed.run", "torch.distributed.launch")


def _gpus_per_rank(tokens: list[str], program: int) -> int | None:
    """GPUs one rank drives: nccl-tests' -t threads x -g GPUs, none known for a per-node launcher, else one."""
    words = tokens[program:]
    if any(basename(w) in _NODE_LAUNCHERS for w in words[:3]):
        return None
    if basename(words[0]).endswith("_perf"):  # nccl-tests: all_reduce_perf -g <GPUs per thread> -t <threads>
        found = {"-g": 1, "-t": 1}
        for index, word in enumerate(words[:-1]):
            if word in found and is_count(words[index + 1]):
                found[word] = int(words[index + 1])
        return found["-g"] * found["-t"]
    return 1


def _switches(tokens: list[str], launch: Launch) -> set[str]:
    return {tokens[index].partition("=")[0] for index, _ in launch.options}


def open_mpi_layout(job) -> _Layout | None:
    """The rank layout of an MPIJob whose launcher runs Open MPI's mpirun over the operator's hostfile;
    None when the launcher shows no such mpirun, or places ranks some other way."""
    spec = mapping(job.doc, "spec")
    if spec.get("mpiImplementation", "OpenMPI") != "OpenMPI":
        return None
    templates = replica_templates(job)
    launcher, worker = templates.get("Launcher"), templates.get("Worker")
    if not launcher or not launcher.containers or not worker:
        return None
    tokens, path_of = launch_tokens(launcher.containers[0])
    launch = parse_launch(tokens)
    if (
        launch is None
        or launch.problems
        or launch.program is None
        or basename(tokens[launch.launcher]) not in _OPEN_MPI
    ):
        return None
    hosts = launch.operand(tokens, _HOSTS)
    if hosts and hosts[0] != _OPERATOR_HOSTFILE:
        return None
    ranks = launch.operand(tokens, PROCESS_COUNT_FLAGS)
    per_node = launch.operand(tokens, _PER_NODE)
    map_by = launch.operand(tokens, ("-map-by", "--map-by"))
    mapping_value = map_by[0].lower() if map_by else ""
    switches = _switches(tokens, launch)
    if mapping_value.startswith("ppr:") and mapping_value.endswith(":node"):
        per_node = (mapping_value.split(":")[1], map_by[1])
    elif mapping_value.startswith("ppr") or mapping_value.startswith("seq") or mapping_value.startswith("rankfile"):
        return None
    if {"-pernode", "--pernode"} & switches:
        per_node = ("1", launch.launcher)
    if (ranks and not is_count(ranks[0])) or (per_node and not is_count(per_node[0])):
        return None
    where = ranks or per_node
    return _Layout(
        nodes=worker.replicas + (1 if spec.get("runLauncherAsWorker") is True else 0),
        slots=slots_per_worker(job),
        per_node_limit=int(per_node[0]) if per_node else None,
        by_node=mapping_value.startswith("node") or bool({"-bynode", "--bynode"} & switches),
        oversubscribe=bool({"-oversubscribe", "--oversubscribe"} & switches),
        ranks=int(ranks[0]) if ranks else None,
        ranks_at=path_of(where[1]) if where else ("spec", "slotsPerWorker"),
        per_node_at=path_of(per_node[1]) if per_node else ("spec", "slotsPerWorker"),
        gpus_per_rank=_gpus_per_rank(tokens, launch.program),
    )


def _gpu_pods(job) -> tuple[float, float]:
    """(GPUs of one worker, GPUs of all pods that hold slots)."""
    templates = replica_templates(job)
    worker, launcher = templates.get("Worker"), templates.get("Launcher")
    per_worker = worker.request(GPU) if worker else 0
    total = per_worker * (worker.replicas if worker else 0)
    if launcher and mapping(job.doc, "spec").get("runLauncherAsWorker") is True:
        total += launcher.request(GPU)
    return per_worker, total


def exported_variables_of_launcher(job) -> dict[str, str | None]:
    launcher = replica_templates(job).get("Launcher")
    return exported_variables(launcher.containers[0]) if launcher and launcher.containers else {}


@rule(
    "launcher-requests-gpu",
    "warning",
    description="The MPIJob launcher requests GPUs, which it leaves idle for the whole run",
    remediation="Remove nvidia.com/gpu from the Launcher's resources; only Worker pods need GPUs.",
    docs="""Unless `runLauncherAsWorker` is true, the launcher only starts the ranks on the workers (over ssh)
      and waits. The MPI operator even sets `NVIDIA_VISIBLE_DEVICES` and `NVIDIA_DRIVER_CAPABILITIES` to empty
      on its first container (kubeflow/mpi-operator v0.8.2, `pkg/controller/mpi_job_controller.go`,
      `nvidiaDisableEnvVars`), so it cannot see them. The job runs, but the GPUs are billed idle, and on
      8-GPU nodes a launcher GPU can take a whole node a worker needed: `gpu-capacity-exceeded` reports the
      job that then cannot start.""",
    premise="An MPIJob without runLauncherAsWorker: true has a launcher container that requests nvidia.com/gpu.",
    consequence="cost",
)
def launcher_requests_gpu(scope: Scope):
    for job in mpijobs(scope.objects):
        if mapping(job.doc, "spec").get("runLauncherAsWorker") is True:
            continue
        launcher = replica_templates(job).get("Launcher")
        containers = (launcher.containers + launcher.init_containers) if launcher else []
        for index, container in enumerate(containers):
            if container.request(GPU) > 0:
                why = "which the operator hides from it" if index == 0 else "which stay idle while mpirun runs"
                yield Finding(
                    job,
                    f"{launcher.container_label(container)} requests {plural(container.request(GPU), 'GPU')}, {why}",
                    (*container.path, "resources"),
                )


@rule(
    "gpu-slots-mismatch",
    "error",
    description="mpirun starts more ranks on a worker than the worker has GPUs",
    remediation="Set spec.slotsPerWorker (or mpirun's -N) to the nvidia.com/gpu each worker requests: one MPI "
    "rank per GPU.",
    docs="""The operator writes `slots=<slotsPerWorker>` for every worker into the hostfile, and Open MPI's
      mpirun fills each worker's slots in turn (or starts `-N` ranks on each). Each rank uses one GPU (the
      local rank picks it); with more ranks than GPUs two ranks share one, which NCCL refuses ("Multiple
      Ranks are using the same GPU", NVIDIA/nccl v2.30.7-1 `src/init.cc`, unless `NCCL_MULTI_RANK_GPU_ENABLE=1`),
      after the GPU nodes have started. Read from the launcher's mpirun (its `-np`, `-N`, `--map-by`);
      nccl-tests' `-g` and `-t` count as GPUs per rank, and a per-node launcher (torchrun, deepspeed) is not
      judged.""",
    premise="An MPIJob's GPU workers are started by Open MPI's mpirun over the operator's hostfile, with one GPU "
    "per rank, and the launcher's options show how many ranks land on each worker.",
    consequence="job",
)
def gpu_slots_mismatch(scope: Scope):
    for job in mpijobs(scope.objects):
        gpus, _ = _gpu_pods(job)
        layout = open_mpi_layout(job)
        if gpus <= 0 or layout is None or layout.gpus_per_rank is None:
            continue
        if exported_variables_of_launcher(job).get("NCCL_MULTI_RANK_GPU_ENABLE") == "1":
            continue
        needed = layout.busiest * layout.gpus_per_rank
        if needed > gpus:
            per_rank = f" x {plural(layout.gpus_per_rank, 'GPU')}" if layout.gpus_per_rank > 1 else ""
            yield Finding(
                job,
                f"mpirun starts {plural(layout.busiest, 'rank')}{per_rank} on a worker that requests "
                f"{plural(gpus, 'GPU')} (slotsPerWorker {layout.slots})",
                layout.per_node_at,
            )


@rule(
    "worker-gpus-idle",
    "warning",
    description="mpirun starts fewer ranks than the MPIJob's workers have GPUs",
    remediation="Start one rank per GPU: set spec.slotsPerWorker to each worker's nvidia.com/gpu and -np to "
    "Worker.replicas x slotsPerWorker (or leave -np out), or request fewer GPUs.",
    docs="""Each MPI rank drives one GPU; GPUs without a rank stay idle for the whole run and are billed all
      the same. Open MPI's mpirun starts `-np` ranks (one per slot when `-np` is left out), filling each
      worker's `slotsPerWorker` slots in turn. Read from the launcher's mpirun; nccl-tests' `-g` and `-t`
      count as GPUs per rank, and a per-node launcher (torchrun, deepspeed, accelerate), which starts its own
      process per GPU, is not judged.""",
    premise="An MPIJob's GPU workers are started by Open MPI's mpirun over the operator's hostfile, with a "
    "program that drives a known number of GPUs per rank.",
    consequence="cost",
)
def worker_gpus_idle(scope: Scope):
    for job in mpijobs(scope.objects):
        gpus, total = _gpu_pods(job)
        layout = open_mpi_layout(job)
        if gpus <= 0 or layout is None or layout.gpus_per_rank is None or layout.refused:
            continue
        if layout.busiest * layout.gpus_per_rank > gpus:
            continue  # gpu-slots-mismatch reports the opposite
        used = layout.started * layout.gpus_per_rank
        if used < total:
            yield Finding(
                job,
                f"mpirun starts {plural(layout.started, 'rank')} for {plural(total, 'GPU')} "
                f"(slotsPerWorker {layout.slots}): {plural(total - used, 'GPU')} stay idle",
                layout.ranks_at,
            )


@rule(
    "mpirun-np-mismatch",
    "error",
    description="mpirun's -np asks for more ranks than the MPIJob's hostfile has slots",
    remediation="Set -np to at most Worker.replicas x slotsPerWorker (plus slotsPerWorker with "
    "runLauncherAsWorker), or leave -np out so Open MPI starts one rank per hostfile slot.",
    docs="""The operator does not compute `-np`; it writes `slots=<slotsPerWorker>` per worker into the
      hostfile. Open MPI's mpirun refuses to start more ranks than there are slots ("There are not enough
      slots available in the system"), unless `--oversubscribe` is given, so the launcher fails after the
      GPU nodes started, and retries until runPolicy.backoffLimit. With `-N` (ranks per node) the slots are
      that many per pod. Fewer ranks than slots runs, with idle GPUs: `worker-gpus-idle`. The rule reads
      the launcher's command and args, and a `sh -c` script; horovodrun, Intel MPI and MPICH place ranks
      their own way and are not judged.""",
    premise="An MPIJob's launcher runs Open MPI's mpirun over the operator's hostfile with a numeric -np and "
    "without --oversubscribe.",
    consequence="job",
)
def mpirun_np_mismatch(scope: Scope):
    for job in mpijobs(scope.objects):
        layout = open_mpi_layout(job)
        if layout is not None and layout.refused:
            per_pod = f"-N {layout.per_node_limit}" if layout.per_node_limit is not None else f"{layout.slots} slots"
            yield Finding(
                job,
                f"-np {layout.ranks} but {plural(layout.nodes, 'pod')} x {per_pod} give {layout.capacity} ranks",
                layout.ranks_at,
            )


@rule(
    "mpijob-name-invalid",
    "error",
    description="The MPIJob's worker pod names would not be valid DNS labels",
    remediation="Shorten the MPIJob name so <name>-worker-<replicas-1> is at most 63 characters of "
    "lower-case letters, digits and dashes, starting with a letter.",
    docs="""Workers are reached by their host names, `<name>-worker-<index>`, which must be DNS-1035 labels.
      The API server accepts the MPIJob, but the operator's validation (kubeflow/mpi-operator v0.8.2,
      `pkg/apis/kubeflow/validation/validation.go`) refuses a job whose last worker name is not one: it
      records a ValidationError event and creates no pod.""",
    premise="An MPIJob of kubeflow.org/v2beta1 is among the objects.",
    consequence="job",
)
def mpijob_name_invalid(scope: Scope):
    for job in _v2beta1_jobs(scope):
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
    remediation="Give exactly one Launcher with replicas 1, a Worker with replicas of at least 1 (or no Worker), "
    "and restartPolicy Never or OnFailure on each.",
    docs="""The operator's validation (kubeflow/mpi-operator v0.8.2, `pkg/apis/kubeflow/validation/
      validation.go`, after the defaults of `pkg/apis/kubeflow/v2beta1/default.go`) requires a Launcher with
      exactly one replica, Worker replicas of at least 1 (a Worker without `replicas` is defaulted to 0 and
      refused), and a replica-level `restartPolicy` of `Never` or `OnFailure`. The API server accepts the
      MPIJob; the operator records a ValidationError event and creates no pod.""",
    premise="An MPIJob of kubeflow.org/v2beta1 is among the objects.",
    consequence="job",
)
def mpijob_replica_spec_invalid(scope: Scope):
    for job in _v2beta1_jobs(scope):
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
            if role == "Worker" and replicas is None:
                yield Finding(job, "Worker has no replicas, which the operator defaults to 0 and refuses", path)
            elif role == "Worker" and isinstance(replicas, int) and replicas < 1:
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
    premise="A container's command and args (or its sh -c script) run mpirun, mpiexec, orterun, prterun or horovodrun.",
    consequence="job",
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
      one worker counts too: its launcher is a pod of its own and reaches the worker by host name. Only
      kubeflow.org/v2beta1 MPIJobs have the field.""",
    premise="An MPIJob of kubeflow.org/v2beta1 has at least one Worker replica and leaves launcherCreationPolicy "
    "at AtStartup.",
    consequence="risk",
)
def launcher_not_waiting_for_workers(scope: Scope):
    for job in _v2beta1_jobs(scope):
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
