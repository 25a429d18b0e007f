"""One failing and at least one passing case per rule (tests/test_rules.py runs them; a meta-test
fails when a registered rule has no case of either kind).

A case changes the fixture environment (tests/world.py) in place, or returns {file name: text}
to validate those files instead, as a user would name them on the command line. A failing case
names every finding the rule must give, as (object, field path): the rule fires on that object,
at that field, that many times, and nowhere else.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

FAIL, PASS = "fail", "pass"

# What the failing cases name: objects of the fixture, and the pod specs of its MPIJob.
JOB = "MPIJob/training/horovod-train"
CLUSTER = "ClusterConfig/horovod-training-prod"
FSX_CLASS = "StorageClass/fsx-lustre"
CLAIM = "PersistentVolumeClaim/training/fsx-training"
NVIDIA_PLUGIN = "DaemonSet/kube-system/nvidia-device-plugin-daemonset"
WORKER = "spec.mpiReplicaSpecs.Worker.template.spec"
LAUNCHER = "spec.mpiReplicaSpecs.Launcher.template.spec"


@dataclass
class Case:
    rule: str
    outcome: str
    name: str
    change: Callable
    expect: list[tuple[str, str]]  # (resource, field path) of every finding of the rule; [] for PASS

    @property
    def id(self) -> str:
        return f"{self.rule}-{self.outcome}-{self.name}"


CASES: list[Case] = []


def case(rule: str, outcome: str, *expect: tuple[str, str]):
    """A case of `rule`; a failing one names every finding it must give: (resource, field path), where a
    finding about a file rather than an object (yamllint) is ("", "file:line")."""
    if (outcome == FAIL) != bool(expect):
        raise ValueError(f"{rule}: a failing case names its findings, a passing one none")

    def register(change):
        CASES.append(Case(rule, outcome, change.__name__, change, list(expect)))
        return change

    return register


def _custom_resource_definition(group: str, kind: str, plural: str) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                            },
                        }
                    },
                }
            ],
        },
    }


def _widget() -> dict:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "training"},
        "spec": {"size": 3},
    }


def _hpa(api_version: str, resource: str) -> dict:
    return {
        "apiVersion": api_version,
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "scale", "namespace": "training"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "serve"},
            "minReplicas": 1,
            "maxReplicas": 4,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": resource, "target": {"type": "Utilization", "averageUtilization": 80}},
                }
            ],
        },
    }


def _job(parallelism: int, command: list[str]) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "training"},
        "spec": {
            "parallelism": parallelism,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "train", "image": "trainer:1.0", "command": command}],
                }
            },
        },
    }


def _helm_release(name: str, chart: str) -> dict:
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {
            "interval": "1h",
            "chart": {
                "spec": {"chart": chart, "version": "1.0.0", "sourceRef": {"kind": "HelmRepository", "name": name}}
            },
        },
    }


def _helm_repository(name: str) -> dict:
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "HelmRepository",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {"interval": "12h", "url": f"https://example.com/{name}"},
    }


_CONFIG_MAP = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast{}\n"


# --- sources and schemas ------------------------------------------------------------------


# The files are written outside any repository: only a duplicate key counts there (style errors in a
# repository's files: test_rules.py, test_yamllint_*).
@case("yaml-lint", FAIL, ("", "settings.yaml:8"))
def duplicate_key_outside_a_repository(world):
    return {"settings.yaml": _CONFIG_MAP.format("\n  mode: slow")}


@case("yaml-lint", PASS)
def clean_file(world):
    return {"settings.yaml": _CONFIG_MAP.format("")}


@case("yaml-lint", PASS)
def trailing_spaces_outside_a_repository(world):
    return {"settings.yaml": _CONFIG_MAP.format("   ")}


@case("schema-invalid", FAIL, (JOB, "spec"))
def misspelt_mpijob_field(world):
    world.mpijob["spec"]["slotPerWorker"] = 8


@case("schema-invalid", FAIL, (JOB, f"{WORKER}.containers.0"))
def unknown_container_field(world):
    world.container("Worker")["resource"] = {}


@case("schema-invalid", FAIL, (CLUSTER, "managedNodeGroups.1"))
def eksctl_unknown_node_group_field(world):
    world.gpu_group["instancetype"] = "p4d.24xlarge"


@case("schema-invalid", PASS)
def optional_fields(world):
    world.container("Worker")["imagePullPolicy"] = "IfNotPresent"
    world.mpijob["spec"]["runPolicy"]["suspend"] = False


@case("schema-invalid", PASS)
def sops_metadata_on_secret(world):
    sops_secret(world)  # Flux decrypts and drops `sops`; it is not part of the Secret's schema


@case("schema-missing", FAIL, ("Widget/training/w", ""))
def custom_resource_without_crd(world):
    world.add("training", _widget())


@case("schema-missing", PASS)
def custom_resource_with_rendered_crd(world):
    world.add("infrastructure", _custom_resource_definition("example.com", "Widget", "widgets"))
    world.add("training", _widget())


# Kueue v0.19.2's ClusterQueue (v1beta2): "borrowingLimit must be nil when cohort is empty", a CEL rule on spec.
@case("crd-rule-violated", FAIL, ("ClusterQueue/training", "spec"))
def borrowing_limit_without_cohort(world):
    world.find("ClusterQueue")["spec"]["resourceGroups"][0]["flavors"][1]["resources"][2]["borrowingLimit"] = 8


@case("crd-rule-violated", FAIL, ("ResourceFlavor/gpu", "spec.tolerations"))
def flavor_toleration_exists_with_value(world):
    world.find("ResourceFlavor", "gpu")["spec"]["tolerations"][0]["value"] = "true"


@case("crd-rule-violated", PASS)
def borrowing_limit_with_cohort(world):
    queue = world.find("ClusterQueue")
    queue["spec"]["cohortName"] = "research"
    queue["spec"]["resourceGroups"][0]["flavors"][1]["resources"][2]["borrowingLimit"] = 8


@case("crd-rule-violated", PASS)
def custom_resource_whose_crd_has_no_rules(world):
    world.add("infrastructure", _custom_resource_definition("example.com", "Widget", "widgets"))
    world.add("training", _widget())


# --- MPIJob -------------------------------------------------------------------------------


@case("launcher-requests-gpu", FAIL, (JOB, f"{LAUNCHER}.containers.0.resources"))
def launcher_with_gpu(world):
    world.container("Launcher")["resources"]["limits"]["nvidia.com/gpu"] = 1


@case("launcher-requests-gpu", PASS)
def launcher_runs_as_worker(world):
    world.mpijob["spec"]["runLauncherAsWorker"] = True
    world.container("Launcher")["resources"]["limits"]["nvidia.com/gpu"] = 1


@case("launcher-requests-gpu", FAIL, (JOB, f"{LAUNCHER}.initContainers.0.resources"))
def launcher_init_container_with_gpu(world):
    world.pod("Launcher")["initContainers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 1


@case("gpu-slots-mismatch", FAIL, (JOB, "spec.slotsPerWorker"))
def more_slots_than_gpus(world):
    # 16 ranks on each 8-GPU worker: two ranks per GPU, which NCCL refuses.
    world.mpijob["spec"]["slotsPerWorker"] = 16
    world.launcher_command[world.launcher_command.index("-np") + 1] = "32"


@case("gpu-slots-mismatch", FAIL, (JOB, f"{LAUNCHER}.containers.0.command.9"))
def more_ranks_per_node_than_gpus(world):
    world.mpijob["spec"]["slotsPerWorker"] = 16
    world.launcher_command[8:8] = ["--npernode", "12"]
    world.launcher_command[world.launcher_command.index("-np") + 1] = "24"


@case("gpu-slots-mismatch", PASS)
def more_slots_than_gpus_in_a_script_it_cannot_read(world):
    # The old rule compared slotsPerWorker with the GPUs alone; how the script starts its ranks is not visible.
    world.mpijob["spec"]["slotsPerWorker"] = 16
    launcher = world.container("Launcher")
    launcher["command"], launcher["args"] = ["/bin/bash", "/scripts/train.sh"], []


@case("gpu-slots-mismatch", PASS)
def one_rank_per_node_each_driving_every_gpu(world):
    # nccl-tests' all_reduce_perf -g 8: one rank drives a worker's 8 GPUs.
    world.mpijob["spec"]["slotsPerWorker"] = 1
    world.launcher_command[world.launcher_command.index("-np") + 1] = "2"
    world.launcher_args[:] = ["/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "1G", "-g", "8"]


@case("worker-gpus-idle", FAIL, (JOB, f"{LAUNCHER}.containers.0.command.2"))
def fewer_slots_than_gpus(world):
    world.mpijob["spec"]["slotsPerWorker"] = 4
    world.launcher_command[world.launcher_command.index("-np") + 1] = "8"


@case("worker-gpus-idle", FAIL, (JOB, "spec.slotsPerWorker"))
def one_slot_per_worker_without_np(world):
    world.mpijob["spec"]["slotsPerWorker"] = 1
    world.remove_launcher_option("-np")


@case("worker-gpus-idle", PASS)
def nccl_tests_with_eight_gpus_per_rank(world):
    one_rank_per_node_each_driving_every_gpu(world)


@case("worker-gpus-idle", PASS)
def torchrun_per_node(world):
    world.mpijob["spec"]["slotsPerWorker"] = 1
    world.launcher_command[world.launcher_command.index("-np") + 1] = "2"
    world.launcher_args[:] = ["torchrun", "--nproc-per-node=8", "train.py"]


@case("gpu-slots-mismatch", PASS)
def cpu_only_workers(world):
    for section in ("requests", "limits"):
        del world.worker_resources[section]["nvidia.com/gpu"]
    world.mpijob["spec"]["slotsPerWorker"] = 2


@case("mpirun-np-mismatch", FAIL, (JOB, f"{LAUNCHER}.containers.0.command.2"))
def np_beyond_the_slots(world):
    world.launcher_command[world.launcher_command.index("-np") + 1] = "32"


@case("mpirun-np-mismatch", FAIL, (JOB, f"{LAUNCHER}.containers.0.args.0"))
def np_in_shell_script(world):
    launcher = world.container("Launcher")
    launcher["command"] = ["/bin/sh", "-c"]
    launcher["args"] = ["cd /fsx && mpirun --allow-run-as-root -np=24 python -m horovod_trainer.train -n 16"]


@case("mpirun-np-mismatch", PASS)
def np_below_the_slots(world):
    # Fewer ranks than slots runs (with idle GPUs: worker-gpus-idle), so it is no error of this rule.
    world.launcher_command[world.launcher_command.index("-np") + 1] = "8"


@case("mpirun-np-mismatch", PASS)
def np_beyond_the_slots_oversubscribed(world):
    world.launcher_command[world.launcher_command.index("-np") + 1] = "32"
    world.launcher_command.append("--oversubscribe")


@case("mpirun-np-mismatch", PASS)
def np_in_shell_script_matches(world):
    launcher = world.container("Launcher")
    launcher["command"] = ["bash", "-c"]
    launcher["args"] = ["mpirun -np 16 --bind-to none python train.py -np 3"]


@case("mpirun-np-mismatch", PASS)
def np_left_out(world):
    world.remove_launcher_option("-np")


@case("launcher-command-malformed", FAIL, (JOB, f"{LAUNCHER}.containers.0.command.18"))
def export_without_its_variable(world):
    world.launcher_command.remove("FI_EFA_USE_HUGE_PAGE=0")  # the last -x now takes "python" as a variable


@case("launcher-command-malformed", FAIL, (JOB, f"{LAUNCHER}.containers.0.args.2"))
def mpirun_options_shifted_into_the_program(world):
    # What a positional patch made of a hand-edited base: python -m -x FI_EFA_USE_HUGE_PAGE=0 horovod_trainer.train
    world.launcher_command[-2:] = []
    world.launcher_args[2:2] = ["-x", "FI_EFA_USE_HUGE_PAGE=0"]


@case(
    "launcher-command-malformed",
    FAIL,
    (JOB, f"{LAUNCHER}.containers.0.command.3"),
    (JOB, f"{LAUNCHER}.containers.0.command.4"),
)
def mca_with_one_operand_and_no_program(world):
    launcher = world.container("Launcher")
    launcher["command"] = ["mpirun", "-np", "16", "-mca", "pml"]
    launcher["args"] = []


@case("launcher-command-malformed", FAIL, (JOB, f"{LAUNCHER}.containers.0.command.2"))
def process_count_not_a_number(world):
    world.launcher_command[world.launcher_command.index("-np") + 1] = "all"


# str.isdigit() takes "²", which int() refuses: the rules reading -np stopped with "could not finish".
@case("launcher-command-malformed", FAIL, (JOB, f"{LAUNCHER}.containers.0.command.2"))
@case("mpirun-np-mismatch", PASS)
@case("gpu-slots-mismatch", PASS)
@case("worker-gpus-idle", PASS)
@case("efa-not-used-by-nccl", PASS)
@case("nccl-network-unavailable", PASS)
def process_count_a_superscript_digit(world):
    world.launcher_command[world.launcher_command.index("-np") + 1] = "²"


@case("gpu-slots-mismatch", PASS)
@case("worker-gpus-idle", PASS)
@case("mpirun-np-mismatch", PASS)
def nccl_tests_gpus_per_thread_a_superscript_digit(world):
    # Read as one GPU per rank, as nccl-tests' own -g default.
    world.launcher_args[:] = ["/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "1G", "-g", "²"]


@case("launcher-command-malformed", PASS)
def upstream_style_launcher(world):
    # The MPI operator's Horovod example (v0.8.0): single-dash options, -mca with two operands.
    world.launcher_command[:] = [
        "mpirun",
        "-np",
        "16",
        "--allow-run-as-root",
        "-bind-to",
        "none",
        "-map-by",
        "slot",
        "-x",
        "LD_LIBRARY_PATH",
        "-x",
        "PATH",
        "-mca",
        "pml",
        "ob1",
        "-mca",
        "btl",
        "^openib",
    ]
    world.launcher_args[:] = ["python", "/examples/tensorflow_mnist.py"]


@case("launcher-command-malformed", PASS)
def horovodrun_in_a_shell_script(world):
    launcher = world.container("Launcher")
    launcher["command"] = ["/bin/sh", "-c"]
    launcher["args"] = ["horovodrun -np 16 -H localhost:16 python -u -m horovod_trainer.train --epochs=1"]


@case("launcher-not-waiting-for-workers", FAIL, (JOB, "spec"))
def launcher_policy_left_out(world):
    del world.mpijob["spec"]["launcherCreationPolicy"]


@case("launcher-not-waiting-for-workers", FAIL, (JOB, "spec.launcherCreationPolicy"))
def launcher_at_startup(world):
    world.mpijob["spec"]["launcherCreationPolicy"] = "AtStartup"


@case("launcher-not-waiting-for-workers", PASS)
def launcher_alone_needs_no_wait(world):
    del world.mpijob["spec"]["launcherCreationPolicy"]
    del world.mpijob["spec"]["mpiReplicaSpecs"]["Worker"]


@case("mpijob-name-invalid", FAIL, ("MPIJob/training/" + "h" * 55, "metadata.name"))
def name_too_long(world):
    world.mpijob["metadata"]["name"] = "h" * 55


@case("mpijob-name-invalid", PASS)
def name_just_fits(world):
    world.mpijob["metadata"]["name"] = "h" * 54  # + "-worker-1" = 63


@case("mpijob-replica-spec-invalid", FAIL, (JOB, "spec.mpiReplicaSpecs.Launcher.replicas"))
def two_launchers(world):
    world.replica("Launcher")["replicas"] = 2


@case("mpijob-replica-spec-invalid", FAIL, (JOB, "spec.mpiReplicaSpecs.Worker.restartPolicy"))
def restart_always(world):
    world.replica("Worker")["restartPolicy"] = "Always"


@case("mpijob-replica-spec-invalid", FAIL, (JOB, "spec.mpiReplicaSpecs.Worker"))
def worker_without_replicas(world):
    del world.replica("Worker")["replicas"]  # defaulted to 0 (v0.8.0 default.go), then refused


@case("mpijob-replica-spec-invalid", PASS)
def restart_never(world):
    world.replica("Worker")["restartPolicy"] = "Never"


# --- GPUs ---------------------------------------------------------------------------------


@case("gpu-request-exceeds-node", FAIL, (JOB, f"{WORKER}.containers.0.resources"))
def eight_gpus_on_four_gpu_nodes(world):
    world.gpu_group["instanceType"] = "g5.12xlarge"


@case("gpu-request-exceeds-node", FAIL, (JOB, f"{WORKER}.containers.0.resources"))
def gpus_on_cpu_nodes_only(world):
    world.gpu_group["instanceType"] = "m6i.2xlarge"
    world.gpu_group["efaEnabled"] = False


@case("gpu-request-exceeds-node", PASS)
def eight_gpus_on_p5(world):
    world.gpu_group["instanceType"] = "p5.48xlarge"


@case("gpu-request-exceeds-node", PASS)
def eight_gpus_where_karpenter_adds_nodes(world):
    world.gpu_group["instanceType"] = "g5.12xlarge"
    world.cluster["metadata"]["tags"]["karpenter.sh/discovery"] = "horovod-training-prod"


@case("gpu-request-exceeds-node", PASS)
def eight_gpus_on_the_larger_of_two_types(world):
    del world.gpu_group["instanceType"]
    world.gpu_group["instanceTypes"] = ["g5.12xlarge", "g5.48xlarge"]


@case("gpu-capacity-exceeded", FAIL, (JOB, "spec.mpiReplicaSpecs.Worker.replicas"))
def three_workers_two_nodes(world):
    world.replica("Worker")["replicas"] = 3


@case("gpu-capacity-exceeded", FAIL, (JOB, "spec.mpiReplicaSpecs.Worker.replicas"))
def launcher_gpu_takes_a_worker_node(world):
    world.container("Launcher")["resources"]["limits"]["nvidia.com/gpu"] = 1
    world.pod("Launcher")["nodeSelector"] = {"role": "gpu"}


@case("gpu-capacity-exceeded", PASS)
def launcher_gpu_that_can_run_elsewhere(world):
    world.container("Launcher")["resources"]["limits"]["nvidia.com/gpu"] = 1
    world.cluster["managedNodeGroups"].append(
        {"name": "small-gpu", "instanceType": "g5.xlarge", "maxSize": 1, "labels": {"role": "gpu"}}
    )


@case("gpu-capacity-exceeded", PASS)
def three_workers_three_nodes(world):
    world.replica("Worker")["replicas"] = 3
    world.gpu_group["maxSize"] = 3


@case("no-node-group-matches", FAIL, (JOB, f"{WORKER}.nodeSelector"))
def selector_matches_nothing(world):
    world.pod("Worker")["nodeSelector"] = {"role": "gpus"}


@case("no-node-group-matches", PASS)
def selector_on_implicit_instance_type_label(world):
    world.pod("Worker")["nodeSelector"] = {"node.kubernetes.io/instance-type": "p4d.24xlarge"}


@case("no-node-group-matches", PASS)
def selector_on_a_zone_the_group_leaves_open(world):
    world.pod("Launcher")["nodeSelector"] = {"role": "system", "topology.kubernetes.io/zone": "us-west-2b"}


@case("no-node-group-matches", PASS)
def selector_on_a_label_a_labeller_may_set(world):
    # Folder mode: node-feature-discovery may run in the cluster, and label the GPU nodes.
    world.complete = False
    world.pod("Worker")["nodeSelector"] = {"feature.node.kubernetes.io/pci-10de.present": "true"}


@case("no-node-group-matches", FAIL, (JOB, f"{WORKER}.nodeSelector"))
def selector_on_a_labeller_label_in_an_environment_without_one(world):
    world.pod("Worker")["nodeSelector"] = {"feature.node.kubernetes.io/pci-10de.present": "true"}


@case("extended-resource-limit-mismatch", FAIL, (JOB, f"{WORKER}.containers.0.resources.requests.nvidia.com/gpu"))
def gpu_request_above_limit(world):
    world.worker_resources["limits"]["nvidia.com/gpu"] = 4


@case(
    "extended-resource-limit-mismatch", FAIL, (JOB, f"{WORKER}.containers.0.resources.requests.vpc.amazonaws.com/efa")
)
def efa_request_without_limit(world):
    del world.worker_resources["limits"]["vpc.amazonaws.com/efa"]


@case("extended-resource-limit-mismatch", PASS)
def limits_only(world):
    for name in ("nvidia.com/gpu", "vpc.amazonaws.com/efa"):
        del world.worker_resources["requests"][name]


# --- scheduling ---------------------------------------------------------------------------


@case("gpu-taint-not-tolerated", FAIL, (JOB, f"{WORKER}.tolerations"))
def worker_without_toleration_of_a_second_taint(world):
    # EKS's ExtendedResourceToleration adds nvidia.com/gpu and vpc.amazonaws.com/efa, not dedicated.
    del world.pod("Worker")["tolerations"]
    world.gpu_group["taints"].append({"key": "dedicated", "value": "training", "effect": "NoSchedule"})
    for marker in ("nvidia", "efa"):
        world.daemonset(marker)["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]


@case("gpu-taint-not-tolerated", FAIL, (JOB, f"{WORKER}.tolerations"))
def worker_without_toleration_of_a_no_execute_gpu_taint(world):
    del world.pod("Worker")["tolerations"]
    world.gpu_group["taints"][0]["effect"] = "NoExecute"
    for marker in ("nvidia", "efa"):
        world.daemonset(marker)["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]


@case("gpu-taint-not-tolerated", FAIL, ("Job/training/train", "spec.template.spec.tolerations"))
def cpu_job_pinned_to_gpu_nodes(world):
    job = _job(1, ["python", "prepare.py"])
    job["spec"]["template"]["spec"]["nodeSelector"] = {"role": "gpu"}
    world.add("training", job)


@case("gpu-taint-not-tolerated", PASS)
def cpu_job_pinned_to_gpu_nodes_with_a_toleration(world):
    job = _job(1, ["python", "prepare.py"])
    job["spec"]["template"]["spec"]["nodeSelector"] = {"role": "gpu"}
    job["spec"]["template"]["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    world.add("training", job)


@case("gpu-taint-not-tolerated", PASS)
def worker_tolerated_by_eks_admission(world):
    # The worker limits nvidia.com/gpu: the admission plugin adds nvidia.com/gpu Exists NoSchedule.
    del world.pod("Worker")["tolerations"]


@case("gpu-taint-not-tolerated", FAIL, (NVIDIA_PLUGIN, "spec.template.spec.tolerations"))
def nvidia_plugin_without_toleration(world):
    plugin = world.daemonset("nvidia")["spec"]["template"]["spec"]
    plugin["tolerations"] = [t for t in plugin["tolerations"] if t.get("key") != "nvidia.com/gpu"]


@case("gpu-taint-not-tolerated", PASS)
def worker_tolerates_everything(world):
    world.pod("Worker")["tolerations"] = [{"operator": "Exists"}]


@case("gpu-taint-not-tolerated", PASS)
def renamed_nvidia_plugin_without_toleration_beside_eksctls(world):
    # eksctl's own kube-system/nvidia-device-plugin-daemonset (AmazonLinux2023) tolerates the group's taint.
    nvidia_plugin_without_toleration(world)
    world.daemonset("nvidia")["metadata"]["name"] = "gpu-plugin"


@case("gpu-taint-not-tolerated", PASS)
def worker_without_toleration_where_karpenter_adds_nodes(world):
    worker_without_toleration_of_a_second_taint(world)
    world.cluster["karpenter"] = {"version": "1.8.1"}


def _fsx_node_plugin(tolerations: list[dict]) -> dict:
    """The FSx CSI driver's node DaemonSet as its chart (1.17.0, templates/node-daemonset.yaml) renders it."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "fsx-csi-node", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "fsx-csi-node"}},
            "template": {
                "metadata": {"labels": {"app": "fsx-csi-node"}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "tolerations": tolerations,
                    "containers": [
                        {"name": "fsx-plugin", "image": "public.ecr.aws/fsx-csi-driver/aws-fsx-csi-driver:v1.9.0"}
                    ],
                },
            },
        },
    }


# node.tolerateAllTaints: false in the chart's values: node.tolerations (its default) and the startup taint.
_FSX_NODE_DEFAULT_TOLERATIONS = [
    {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "fsx.csi.aws.com/agent-not-ready", "operator": "Exists"},
]


@case(
    "fsx-node-plugin-not-on-gpu-nodes", FAIL, ("DaemonSet/kube-system/fsx-csi-node", "spec.template.spec.tolerations")
)
def fsx_node_plugin_without_the_gpu_taint(world):
    world.add("infrastructure", _fsx_node_plugin(_FSX_NODE_DEFAULT_TOLERATIONS))


@case("fsx-node-plugin-not-on-gpu-nodes", PASS)
def fsx_node_plugin_tolerating_every_taint(world):
    world.add("infrastructure", _fsx_node_plugin([{"operator": "Exists"}]))


@case("fsx-node-plugin-not-on-gpu-nodes", PASS)
def fsx_node_plugin_where_no_gpu_pod_mounts_fsx(world):
    world.add("infrastructure", _fsx_node_plugin(_FSX_NODE_DEFAULT_TOLERATIONS))
    for role in ("Launcher", "Worker"):
        pod = world.pod(role)
        pod["volumes"] = [v for v in pod.get("volumes", []) if "persistentVolumeClaim" not in v]
        for container in pod["containers"]:
            names = {v["name"] for v in pod["volumes"]}
            container["volumeMounts"] = [m for m in container.get("volumeMounts", []) if m["name"] in names]


@case("helm-release-fails", FAIL, ("HelmRelease/flux-system/aws-fsx-csi-driver", "spec"))
def chart_version_that_does_not_exist(world):
    world.releases["aws-fsx-csi-driver"] = {
        "error": 'chart "aws-fsx-csi-driver" version "1.99.0" not found in HelmRepository flux-system/fsx (...)'
    }


@case("helm-release-fails", PASS)
def chart_that_renders(world):
    world.releases["aws-fsx-csi-driver"] = {"objects": [_fsx_node_plugin([{"operator": "Exists"}])]}


@case("crd-not-installed", PASS)
def crd_maybe_installed_by_a_chart_not_rendered(world):
    world.add("training", _widget())
    world.releases["cluster-autoscaler"] = {"note": "its chart is not in the chart cache (offline)"}


@case("crd-not-installed", FAIL, ("Widget/training/w", "apiVersion"))
def crd_not_installed_by_an_unrendered_chart_whose_crds_are_known(world):
    world.add("training", _widget())
    world.releases["kueue"] = {"note": "its chart is not in the chart cache (offline)"}  # Kueue's CRDs are listed


@case("crd-not-installed", PASS)
def crd_installed_by_a_chart(world):
    world.add("training", _widget())
    crd = _custom_resource_definition("example.com", "Widget", "widgets")
    world.releases["aws-fsx-csi-driver"] = {"objects": [crd]}


def _worker_anti_affinity(selector: dict) -> dict:
    term = {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


ANTI_AFFINITY = f"{WORKER}.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.0.labelSelector"


@case("pod-anti-affinity-selects-nothing", FAIL, (JOB, ANTI_AFFINITY))
def anti_affinity_on_a_label_only_the_mpijob_carries(world):
    world.mpijob["metadata"]["labels"]["app"] = "horovod-train"
    world.pod("Worker")["affinity"] = _worker_anti_affinity({"matchLabels": {"app": "horovod-train"}})


@case("pod-anti-affinity-selects-nothing", FAIL, (JOB, ANTI_AFFINITY))
def anti_affinity_on_the_training_operators_old_role_value(world):
    world.pod("Worker")["affinity"] = _worker_anti_affinity(
        {"matchLabels": {"training.kubeflow.org/job-name": "horovod-train", "training.kubeflow.org/job-role": "Worker"}}
    )


@case("pod-anti-affinity-selects-nothing", PASS)
def anti_affinity_on_the_operators_worker_labels(world):
    world.pod("Worker")["affinity"] = _worker_anti_affinity(
        {"matchLabels": {"training.kubeflow.org/job-name": "horovod-train", "training.kubeflow.org/job-role": "worker"}}
    )


@case("pod-anti-affinity-selects-nothing", PASS)
def anti_affinity_on_another_workload_in_a_folder(world):
    # Only some files are validated: the pods it keeps away from may be another workload's.
    world.complete = False
    world.pod("Worker")["affinity"] = _worker_anti_affinity({"matchLabels": {"app": "data-cache"}})


@case("pod-anti-affinity-selects-nothing", FAIL, (JOB, ANTI_AFFINITY))
def anti_affinity_on_its_own_job_in_a_folder(world):
    world.complete = False
    anti_affinity_on_the_training_operators_old_role_value(world)


@case("pod-anti-affinity-selects-nothing", PASS)
def anti_affinity_on_template_labels(world):
    world.replica("Worker")["template"]["metadata"] = {"labels": {"app": "horovod-worker"}}
    world.pod("Worker")["affinity"] = _worker_anti_affinity(
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["horovod-worker"]}]}
    )


@case("device-plugin-misses-gpu-nodes", FAIL, (NVIDIA_PLUGIN, "spec.template.spec.nodeSelector"))
def gpu_group_without_plugin_label(world):
    del world.gpu_group["labels"]["nvidia.com/gpu.present"]


@case("device-plugin-misses-gpu-nodes", PASS)
def plugin_on_a_label_node_feature_discovery_sets(world):
    del world.gpu_group["labels"]["nvidia.com/gpu.present"]
    world.add("infrastructure", _fsx_node_plugin([{"operator": "Exists"}]))
    nfd = world.find("DaemonSet", "fsx-csi-node")
    nfd["metadata"]["name"] = "nfd-worker"
    nfd["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.k8s.io/nfd/node-feature-discovery:v0.18.3"


@case("device-plugin-misses-gpu-nodes", PASS)
def renamed_plugin_missing_nodes_eksctls_copy_serves(world):
    del world.gpu_group["labels"]["nvidia.com/gpu.present"]
    world.daemonset("nvidia")["metadata"]["name"] = "gpu-plugin"


@case("device-plugin-misses-gpu-nodes", PASS)
def plugin_by_instance_type_affinity(world):
    spec = world.daemonset("nvidia")["spec"]["template"]["spec"]
    del spec["nodeSelector"]
    spec["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "node.kubernetes.io/instance-type",
                                "operator": "In",
                                "values": ["p4d.24xlarge", "p5.48xlarge"],
                            }
                        ]
                    }
                ]
            }
        }
    }


@case("nvidia-device-plugin-missing", FAIL, (JOB, f"{WORKER}.containers.0.resources"))
def no_nvidia_plugin_on_ubuntu_nodes(world):
    world.remove("DaemonSet", "nvidia-device-plugin-daemonset")
    world.gpu_group["amiFamily"] = "Ubuntu2204"  # eksctl installs its copy for AmazonLinux2/2023 only


@case("nvidia-device-plugin-missing", PASS)
def no_nvidia_plugin_where_eksctls_copy_serves(world):
    # The rule's old false alarm: eksctl installed kube-system/nvidia-device-plugin-daemonset (AmazonLinux2023).
    world.remove("DaemonSet", "nvidia-device-plugin-daemonset")


@case("nvidia-device-plugin-missing", PASS)
def nvidia_plugin_from_helm(world):
    world.remove("DaemonSet", "nvidia-device-plugin-daemonset")
    world.add("infrastructure", _helm_release("nvdp", "nvidia-device-plugin"), _helm_repository("nvdp"))


@case("worker-resources-unset", FAIL, (JOB, f"{WORKER}.containers.0.resources"))
def worker_without_cpu_and_memory(world):
    for section in ("requests", "limits"):
        for name in ("cpu", "memory"):
            world.worker_resources[section].pop(name, None)


@case("worker-resources-unset", PASS)
def worker_limits_only(world):
    world.worker_resources["limits"]["cpu"] = world.worker_resources["requests"].pop("cpu")
    del world.worker_resources["requests"]["memory"]


@case("pod-request-exceeds-node", FAIL, (JOB, f"{WORKER}.containers.0.resources"))
def worker_sized_for_a_bigger_instance(world):
    world.worker_resources["requests"]["cpu"] = "160"  # p4d.24xlarge has 96 vCPUs


@case("pod-request-exceeds-node", FAIL, (JOB, f"{WORKER}.containers.0.resources"))
def worker_memory_beyond_the_node(world):
    for section in ("requests", "limits"):
        world.worker_resources[section]["memory"] = "2Ti"  # p4d.24xlarge has 1152 GiB


@case("pod-request-exceeds-node", PASS)
def worker_sized_to_the_node(world):
    world.worker_resources["requests"]["cpu"] = "90"
    world.worker_resources["requests"]["memory"] = "1100Gi"
    world.worker_resources["limits"]["memory"] = "1100Gi"


@case("shm-not-memory-backed", FAIL, (JOB, f"{WORKER}.containers.0.volumeMounts"))
def shm_on_disk(world):
    dshm = next(v for v in world.pod("Worker")["volumes"] if v["name"] == "dshm")
    dshm["emptyDir"] = {}


@case("shm-not-memory-backed", PASS)
def host_ipc_namespace(world):
    shm_on_disk(world)
    mounts = world.container("Worker")["volumeMounts"]
    mounts[:] = [m for m in mounts if m["name"] != "dshm"]
    world.pod("Worker")["hostIPC"] = True


@case("shm-not-memory-backed", PASS)
def shm_from_host(world):
    dshm = next(v for v in world.pod("Worker")["volumes"] if v["name"] == "dshm")
    del dshm["emptyDir"]
    dshm["hostPath"] = {"path": "/dev/shm"}


@case("device-plugin-duplicate", FAIL, ("HelmRelease/flux-system/nvdp", ""))
def second_nvidia_plugin_from_helm(world):
    world.add("infrastructure", _helm_release("nvdp", "nvidia-device-plugin"), _helm_repository("nvdp"))


@case("device-plugin-duplicate", FAIL, ("DaemonSet/kube-system/gpu-plugin", "metadata.name"))
def plugin_named_unlike_eksctl(world):
    world.daemonset("nvidia")["metadata"]["name"] = "gpu-plugin"


@case(
    "device-plugin-duplicate",
    FAIL,
    ("DaemonSet/kube-system/aws-efa-k8s-device-plugin-daemonset", "metadata.name"),
)
def efa_plugin_named_as_before_eksctl_0_230(world):
    # The template's old name: eksctl (v0.230.0) keeps its own aws-efa-k8s-device-plugin beside it.
    world.daemonset("aws-efa")["metadata"]["name"] = "aws-efa-k8s-device-plugin-daemonset"


@case("device-plugin-duplicate", PASS)
def plugins_named_like_eksctl(world):
    pass


@case("device-plugin-duplicate", PASS)
def helm_release_and_the_daemonset_it_renders(world):
    # One plugin: the HelmRelease renders kube-system/nvidia-device-plugin-daemonset, counted once.
    plugin = world.remove("DaemonSet", "nvidia-device-plugin-daemonset")
    world.add("infrastructure", _helm_release("nvdp", "nvidia-device-plugin"), _helm_repository("nvdp"))
    world.releases["nvdp"] = {"objects": [plugin]}


# --- EFA ----------------------------------------------------------------------------------


@case("efa-without-efa-node-group", FAIL, (JOB, f"{WORKER}.containers.0.resources"))
def efa_disabled(world):
    world.gpu_group["efaEnabled"] = False


@case("efa-without-efa-node-group", PASS)
def efa_enabled(world):
    pass


@case("efa-request-exceeds-interfaces", FAIL, (JOB, f"{WORKER}.containers.0.resources"))
def eight_efa_on_p4d(world):
    for section in ("requests", "limits"):
        world.worker_resources[section]["vpc.amazonaws.com/efa"] = 8


@case("efa-request-exceeds-interfaces", PASS)
def thirty_two_efa_on_p5(world):
    world.gpu_group["instanceType"] = "p5.48xlarge"
    for section in ("requests", "limits"):
        world.worker_resources[section]["vpc.amazonaws.com/efa"] = 32


@case("efa-device-plugin-missing", FAIL, (JOB, f"{WORKER}.containers.0.resources"))
def no_efa_plugin(world):
    world.remove("DaemonSet", "aws-efa-k8s-device-plugin")


@case("efa-device-plugin-missing", PASS)
def no_efa_plugin_where_eksctls_copy_serves(world):
    # eksctl's kube-system/aws-efa-k8s-device-plugin tolerates aws.amazon.com/efa:NoSchedule, not nvidia.com/gpu.
    world.remove("DaemonSet", "aws-efa-k8s-device-plugin")
    world.gpu_group["taints"] = [{"key": "aws.amazon.com/efa", "value": "true", "effect": "NoSchedule"}]


@case("efa-device-plugin-missing", PASS)
def efa_plugin_from_helm(world):
    world.remove("DaemonSet", "aws-efa-k8s-device-plugin")
    world.add("infrastructure", _helm_release("efa", "aws-efa-k8s-device-plugin"), _helm_repository("efa"))


NODE_TEMPLATE = "k8s.io/cluster-autoscaler/node-template"


# The group's desiredCapacity 0 is what keeps it empty when nothing scales it (it was reported at minSize).
@case("gpu-group-cannot-scale-from-zero", FAIL, (CLUSTER, "managedNodeGroups.1.desiredCapacity"))
def empty_gpu_group_without_an_autoscaler(world):
    world.remove("HelmRelease", "cluster-autoscaler")


@case("gpu-group-cannot-scale-from-zero", PASS)
def empty_gpu_group_where_eksctl_installs_karpenter(world):
    """The ClusterConfig's karpenter (eksctl installs it): Karpenter adds nodes for the pending pods."""
    world.remove("HelmRelease", "cluster-autoscaler")
    world.cluster["karpenter"] = {"version": "1.8.1"}


@case("gpu-group-cannot-scale-from-zero", PASS)
def empty_gpu_group_under_eks_auto_mode(world):
    world.remove("HelmRelease", "cluster-autoscaler")
    world.cluster["autoModeConfig"] = {"enabled": True}


def _self_managed_gpu_group_without_tags(world) -> None:
    """eksctl tags a self-managed group's Auto Scaling group for the autoscaler's discovery only with its autoScaler
    addon policy (v0.230.0, pkg/cfn/builder/nodegroup.go), so no autoscaler manages this one."""
    group = world.gpu_group
    world.cluster["managedNodeGroups"].remove(group)
    world.cluster["nodeGroups"] = [group]
    group["propagateASGTags"] = False
    del group["tags"]


@case("gpu-group-cannot-scale-from-zero", PASS)
@case("gpu-group-node-template-incomplete", PASS)
def self_managed_gpu_group_the_autoscaler_does_not_discover(world):
    _self_managed_gpu_group_without_tags(world)


@case("gpu-group-cannot-scale-from-zero", PASS)
@case("gpu-group-node-template-incomplete", PASS)
def gpu_group_scaled_by_hand_in_a_folder(world):
    """AWS's p4de reference: a ClusterConfig (and jobs) outside a repository, an autoscaler policy for other groups."""
    world.remove("HelmRelease", "cluster-autoscaler")
    world.complete = world.flux = False
    _self_managed_gpu_group_without_tags(world)


def _autoscaler_policy_by_arn(world) -> None:
    """The autoscaler's Pod Identity with a policy ARN instead of eksctl's autoScaler policy: the validator
    cannot see an ARN's statements, so nothing says it may call eks:DescribeNodegroup."""
    for association in world.cluster["iam"]["podIdentityAssociations"]:
        if association["serviceAccountName"] == "cluster-autoscaler":
            del association["wellKnownPolicies"]
            association["permissionPolicyARNs"] = ["arn:aws:iam::123456789012:policy/cluster-autoscaler"]


# The workers request EFA interfaces the autoscaler's node lacks (an error); they tolerate the taint it lacks
# too, so that one is gpu-group-node-template-incomplete's.
@case("gpu-group-cannot-scale-from-zero", FAIL, (CLUSTER, "managedNodeGroups.1.tags"))
@case("gpu-group-node-template-incomplete", FAIL, (CLUSTER, "managedNodeGroups.1.tags"))
def empty_gpu_group_with_eksctls_taint_tag_and_no_efa_tag(world):
    _autoscaler_policy_by_arn(world)  # the Auto Scaling group's tags are all it has
    tags = world.gpu_group["tags"]
    tags[f"{NODE_TEMPLATE}/taint/nvidia.com/gpu"] = "true"  # as eksctl's propagateASGTags writes it
    del tags[f"{NODE_TEMPLATE}/resources/vpc.amazonaws.com/efa"]


@case("gpu-group-cannot-scale-from-zero", FAIL, (CLUSTER, "managedNodeGroups.1.propagateASGTags"))
def managed_group_without_propagation(world):
    _autoscaler_policy_by_arn(world)
    world.gpu_group["propagateASGTags"] = False


@case("gpu-group-cannot-scale-from-zero", FAIL, (CLUSTER, "managedNodeGroups.1.tags"))
def efa_tag_missing_where_the_autoscaler_reads_the_group_from_eks(world):
    world.gpu_group["propagateASGTags"] = False
    del world.gpu_group["tags"][f"{NODE_TEMPLATE}/resources/vpc.amazonaws.com/efa"]


@case("gpu-group-cannot-scale-from-zero", FAIL, (CLUSTER, "nodeGroups.0.labels"))
def empty_gpu_group_whose_labels_the_autoscaler_cannot_see(world):
    group = world.gpu_group
    world.cluster["managedNodeGroups"].remove(group)
    world.cluster["nodeGroups"] = [group]  # self-managed: nothing is read from EKS
    group["propagateASGTags"] = False
    group["iam"] = {"withAddonPolicies": {"autoScaler": True}}  # eksctl tags it for the autoscaler's discovery
    del group["tags"][f"{NODE_TEMPLATE}/label/role"]


@case("gpu-group-cannot-scale-from-zero", PASS)
def gpu_group_that_never_goes_to_zero(world):
    world.remove("HelmRelease", "cluster-autoscaler")
    world.gpu_group.update(minSize=2, desiredCapacity=2)
    del world.gpu_group["tags"]


@case("gpu-group-cannot-scale-from-zero", PASS)
def labels_propagated_by_eksctl(world):
    _autoscaler_policy_by_arn(world)
    for key in ("role", "nvidia.com/gpu.present"):
        del world.gpu_group["tags"][f"{NODE_TEMPLATE}/label/{key}"]


def _autoscaler_deployment(*arguments: str) -> dict:
    """Cluster Autoscaler as plain manifests (or a rendered chart): its command line says which groups it takes."""
    container = {
        "name": "cluster-autoscaler",
        "image": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.34.2",
        "command": ["./cluster-autoscaler", "--cloud-provider=aws", *arguments],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "cluster-autoscaler", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "cluster-autoscaler"}},
            "template": {"metadata": {"labels": {"app": "cluster-autoscaler"}}, "spec": {"containers": [container]}},
        },
    }


@case("gpu-group-cannot-scale-from-zero", FAIL, (CLUSTER, "managedNodeGroups.1.tags"))
def efa_tag_missing_under_an_autoscaler_deployment(world):
    world.remove("HelmRelease", "cluster-autoscaler")
    tags = "k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/horovod-training-prod"
    world.add("infrastructure", _autoscaler_deployment(f"--node-group-auto-discovery=asg:tag={tags}"))
    del world.gpu_group["tags"][f"{NODE_TEMPLATE}/resources/vpc.amazonaws.com/efa"]


@case("gpu-group-cannot-scale-from-zero", PASS)
@case("gpu-group-node-template-incomplete", PASS)
def efa_tag_missing_under_an_autoscaler_of_named_groups(world):
    """--nodes names Auto Scaling groups, whose generated names validate cannot match to the node groups."""
    world.remove("HelmRelease", "cluster-autoscaler")
    world.add("infrastructure", _autoscaler_deployment("--nodes=0:2:eks-gpu-0123"))
    del world.gpu_group["tags"][f"{NODE_TEMPLATE}/resources/vpc.amazonaws.com/efa"]


@case("gpu-group-node-template-incomplete", FAIL, (CLUSTER, "managedNodeGroups.1.tags"))
def efa_tag_missing_where_no_visible_job_requests_efa(world):
    """Only a ClusterConfig and the jobs of a folder: the ClusterConfig's autoscaler identity says one runs."""
    world.remove("HelmRelease", "cluster-autoscaler")
    world.complete = world.flux = False
    for role in ("Launcher", "Worker"):
        world.container(role)["resources"].get("limits", {}).pop("vpc.amazonaws.com/efa", None)
        world.container(role)["resources"].get("requests", {}).pop("vpc.amazonaws.com/efa", None)
    del world.gpu_group["tags"][f"{NODE_TEMPLATE}/resources/vpc.amazonaws.com/efa"]


@case("gpu-group-node-template-incomplete", PASS)
def template_tags_complete(world):
    pass


def _autoscaler_inline_policy(world, statements: list) -> None:
    """The autoscaler's Pod Identity with an inline policy of `statements`, on a group that is read from EKS or
    not at all: propagateASGTags false, no template tags for its labels and taint."""
    for association in world.cluster["iam"]["podIdentityAssociations"]:
        if association["serviceAccountName"] == "cluster-autoscaler":
            del association["wellKnownPolicies"]
            association["permissionPolicy"] = {"Version": "2012-10-17", "Statement": statements}
    world.gpu_group["propagateASGTags"] = False
    for key in ("label/role", "label/nvidia.com/gpu.present", "taint/nvidia.com/gpu"):
        del world.gpu_group["tags"][f"{NODE_TEMPLATE}/{key}"]


@case("gpu-group-cannot-scale-from-zero", PASS)
def labels_and_taint_read_from_eks_by_an_inline_policy(world):
    _autoscaler_inline_policy(world, [{"Effect": "Allow", "Action": ["eks:DescribeNodegroup"], "Resource": "*"}])


@case("gpu-group-cannot-scale-from-zero", PASS)
def inline_policy_with_a_statement_that_is_no_mapping(world):
    # A statement "x" allows nothing (it stopped the rule with an AttributeError); the next one allows the call.
    _autoscaler_inline_policy(world, ["x", {"Effect": "Allow", "Action": "eks:DescribeNodegroup", "Resource": "*"}])


@case("gpu-group-cannot-scale-from-zero", FAIL, (CLUSTER, "managedNodeGroups.1.propagateASGTags"))
def inline_policy_whose_action_is_a_number(world):
    # Action 5 names no action (it stopped the rule with a TypeError): nothing lets the autoscaler read the group.
    _autoscaler_inline_policy(world, [{"Effect": "Allow", "Action": 5, "Resource": "*"}])


QUEUE = "ClusterQueue/training"


def _gpu_flavor_quota(world, resource: str) -> dict:
    flavors = world.find("ClusterQueue")["spec"]["resourceGroups"][0]["flavors"]
    gpu = next(f for f in flavors if f["name"] == "gpu")
    return next(r for r in gpu["resources"] if r["name"] == resource)


def _second_job(world, name: str, labels: dict | None) -> dict:
    job = copy.deepcopy(world.mpijob)
    job["metadata"]["name"] = name
    if labels is None:
        job["metadata"].pop("labels", None)
    else:
        job["metadata"]["labels"] = labels
    return job


@case("queue-quota-exceeded", FAIL, (JOB, "spec.mpiReplicaSpecs.Worker.replicas"))
def job_larger_than_the_quota(world):
    _gpu_flavor_quota(world, "nvidia.com/gpu")["nominalQuota"] = 8


@case("queue-quota-exceeded", FAIL, (JOB, "metadata.labels.kueue.x-k8s.io/queue-name"))
def job_in_a_queue_that_does_not_exist(world):
    world.mpijob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "research"


@case("queue-quota-exceeded", FAIL, (JOB, "spec.mpiReplicaSpecs.Worker.template.spec"))
def job_requesting_a_resource_the_queue_does_not_cover(world):
    world.find("ClusterQueue")["spec"]["resourceGroups"][0]["coveredResources"].remove("vpc.amazonaws.com/efa")
    for flavor in world.find("ClusterQueue")["spec"]["resourceGroups"][0]["flavors"]:
        flavor["resources"] = [r for r in flavor["resources"] if r["name"] != "vpc.amazonaws.com/efa"]


@case("queue-quota-exceeded", FAIL, (JOB, "metadata.labels.kueue.x-k8s.io/queue-name"))
def job_in_a_namespace_the_cluster_queue_does_not_take(world):
    selector = {"matchLabels": {"kubernetes.io/metadata.name": "research"}}
    world.find("ClusterQueue")["spec"]["namespaceSelector"] = selector


@case("queue-quota-exceeded", PASS)
def job_larger_than_the_quota_of_a_queue_that_borrows(world):
    """A ClusterQueue in a cohort may borrow its neighbours' unused quota: its own says nothing alone."""
    _gpu_flavor_quota(world, "nvidia.com/gpu")["nominalQuota"] = 8
    world.find("ClusterQueue")["spec"]["cohortName"] = "research"


@case("queue-quota-exceeded", FAIL, ("MPIJob/training/adhoc", "metadata"))
def unlabelled_job_filed_under_a_default_queue_that_points_nowhere(world):
    """Kueue gives a job without a queue label the namespace's LocalQueue named default."""
    queue = copy.deepcopy(world.find("LocalQueue"))
    queue["metadata"]["name"] = "default"
    queue["spec"]["clusterQueue"] = "research"
    world.add("training", queue, _second_job(world, "adhoc", None))


@case("queue-quota-exceeded", PASS)
def cluster_queue_for_every_namespace(world):
    world.find("ClusterQueue")["spec"]["namespaceSelector"] = {}


@case("queue-quota-exceeded", PASS)
def job_exactly_at_the_quota(world):
    _gpu_flavor_quota(world, "nvidia.com/gpu")["nominalQuota"] = 16
    _gpu_flavor_quota(world, "memory")["nominalQuota"] = "1728Gi"  # 2 x 864Gi


@case("queue-quota-exceeds-capacity", FAIL, (QUEUE, "spec.resourceGroups.0.flavors.1.resources.2.nominalQuota"))
def quota_for_more_gpus_than_max_size(world):
    _gpu_flavor_quota(world, "nvidia.com/gpu")["nominalQuota"] = 24


@case("queue-quota-exceeds-capacity", PASS)
def quota_raised_with_max_size(world):
    _gpu_flavor_quota(world, "nvidia.com/gpu")["nominalQuota"] = 24
    _gpu_flavor_quota(world, "cpu")["nominalQuota"] = 288
    world.gpu_group["maxSize"] = 3


@case("mpijob-without-queue", FAIL, ("MPIJob/training/adhoc", "metadata"))
def job_outside_the_queue(world):
    world.add("training", _second_job(world, "adhoc", None))


@case("mpijob-without-queue", PASS)
def unlabelled_job_beside_a_default_local_queue(world):
    """Kueue v0.19.2 files a job without a queue label under the namespace's LocalQueue named default."""
    queue = copy.deepcopy(world.find("LocalQueue"))
    queue["metadata"]["name"] = "default"
    world.add("training", queue, _second_job(world, "adhoc", None))


@case("mpijob-without-queue", PASS)
def no_queue_in_the_namespace(world):
    _without_queue(world)
    del world.mpijob["metadata"]["labels"]


@case("gpu-jobs-exceed-capacity", FAIL, (JOB, "metadata.name"), ("MPIJob/training/adhoc", "metadata.name"))
def two_unqueued_jobs_that_cannot_run_together(world):
    _without_queue(world)
    del world.mpijob["metadata"]["labels"]
    world.add("training", _second_job(world, "adhoc", None))


@case("gpu-jobs-exceed-capacity", FAIL, ("MPIJob/default/adhoc", "metadata.name"))
def unqueued_job_beside_a_full_quota(world):
    job = _second_job(world, "adhoc", None)
    job["metadata"]["namespace"] = "default"  # no LocalQueue there, so mpijob-without-queue is silent
    world.add("training", job)


@case("gpu-jobs-exceed-capacity", PASS)
def two_queued_jobs_take_turns(world):
    world.add("training", _second_job(world, "second", {"kueue.x-k8s.io/queue-name": "training"}))


def _kueue_from_release_manifests(world, configuration: str | None) -> None:
    """Kueue installed from its release manifests instead of its chart: the ConfigMap kueue-manager-config
    (v0.19.2 config/components/manager, namePrefix kueue-) holds the manager's Configuration, or (None) nothing
    of Kueue's but its queues is visible."""
    world.remove("HelmRelease", "kueue")
    world.remove("OCIRepository", "kueue")
    if configuration is not None:
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": configuration},
        }
        world.add("infrastructure", config_map)


_KUEUE_CONFIGURATION = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
_MANAGES_UNLABELLED = _KUEUE_CONFIGURATION + "manageJobsWithoutQueueName: true\n"


def _kueue_chart_configuration(world, configuration: str) -> None:
    values = world.find("HelmRelease", "kueue")["spec"].setdefault("values", {})
    values["managerConfig"] = {"controllerManagerConfigYaml": configuration}


@case("mpijob-without-queue", FAIL, ("MPIJob/training/adhoc", "metadata"))
def job_outside_the_queue_of_kueue_from_its_release_manifests(world):
    _kueue_from_release_manifests(world, _KUEUE_CONFIGURATION)
    world.add("training", _second_job(world, "adhoc", None))


@case("mpijob-without-queue", PASS)
def unlabelled_job_kueue_manages_by_its_release_manifests(world):
    _kueue_from_release_manifests(world, _MANAGES_UNLABELLED)
    world.add("training", _second_job(world, "adhoc", None))


@case("mpijob-without-queue", PASS)
@case("gpu-jobs-exceed-capacity", PASS)
def unlabelled_job_where_kueues_configuration_is_not_visible(world):
    """Kueue's queues without its chart or its ConfigMap: whether it manages the job is not known."""
    _kueue_from_release_manifests(world, None)
    job = _second_job(world, "adhoc", None)
    world.add("training", job, {**job, "metadata": {**job["metadata"], "namespace": "default"}})


@case("mpijob-without-queue", PASS)
def unlabelled_job_beside_a_kueue_configuration_nested_too_deep(world):
    # yaml.safe_load of it stopped the rule with a RecursionError; the bounded loader refuses it: not known.
    _kueue_chart_configuration(world, "[" * 5000 + "]" * 5000)
    world.add("training", _second_job(world, "adhoc", None))


@case("gpu-jobs-exceed-capacity", PASS)
def unlabelled_job_kueue_manages_beside_a_full_quota(world):
    # Kueue suspends the job until admitted (manageJobsWithoutQueueName): it takes no GPU outside the quota.
    _kueue_chart_configuration(world, _MANAGES_UNLABELLED)
    unqueued_job_beside_a_full_quota(world)


@case("gpu-jobs-exceed-capacity", FAIL, ("MPIJob/default/adhoc", "metadata.name"))
def unlabelled_job_beside_a_full_quota_of_kueue_from_its_release_manifests(world):
    _kueue_from_release_manifests(world, _KUEUE_CONFIGURATION)
    unqueued_job_beside_a_full_quota(world)


RESERVATION = {"capacityReservationTarget": {"capacityReservationID": "cr-0123456789abcdef0"}}


@case("reserved-capacity-invalid", FAIL, (CLUSTER, "managedNodeGroups.1.instanceMarketOptions"))
@case("reserved-capacity-at-risk", FAIL, (CLUSTER, "managedNodeGroups.1.maxSize"))
def capacity_block_without_its_id_and_too_large(world):
    world.gpu_group["instanceMarketOptions"] = {"marketType": "capacity-block"}
    world.gpu_group["capacityReservation"] = {"capacityReservationPreference": "open"}
    world.gpu_group["maxSize"] = 65


@case("reserved-capacity-invalid", FAIL, (CLUSTER, "managedNodeGroups.1.capacityReservation"))
def reservation_id_that_is_not_one(world):
    world.gpu_group["capacityReservation"] = {"capacityReservationTarget": {"capacityReservationID": "cr-p4d-block"}}
    world.gpu_group["efaEnabled"] = False


@case("reserved-capacity-at-risk", FAIL, (CLUSTER, "managedNodeGroups.1.availabilityZones"))
def reservation_across_two_zones(world):
    world.gpu_group["capacityReservation"] = RESERVATION
    world.gpu_group["efaEnabled"] = False
    world.gpu_group["availabilityZones"] = ["us-west-2a", "us-west-2b"]


@case("reserved-capacity-at-risk", FAIL, (CLUSTER, "managedNodeGroups.1.availabilityZones"))
def capacity_block_in_the_clusters_two_zones(world):
    world.gpu_group["capacityReservation"] = RESERVATION
    world.gpu_group["instanceMarketOptions"] = {"marketType": "capacity-block"}
    del world.gpu_group["availabilityZones"]


@case("reserved-capacity-invalid", FAIL, (CLUSTER, "managedNodeGroups.1.instanceTypes"))
def reservation_for_two_instance_types(world):
    world.gpu_group["capacityReservation"] = RESERVATION
    world.gpu_group["efaEnabled"] = False
    del world.gpu_group["instanceType"]
    world.gpu_group["instanceTypes"] = ["p4d.24xlarge", "p5.48xlarge"]


@case("reserved-capacity-at-risk", FAIL, (CLUSTER, "managedNodeGroups.1.minSize"))
def capacity_block_that_keeps_a_node(world):
    world.gpu_group["capacityReservation"] = RESERVATION
    world.gpu_group["instanceMarketOptions"] = {"marketType": "capacity-block"}
    world.gpu_group["minSize"] = 1


@case("reserved-capacity-invalid", PASS)
def reservation_id_still_to_fill_in(world):
    # cr-xxxxxxxxxxxxxxxxx is what AWS's reference configurations ship: placeholder-value warns about it.
    world.gpu_group["efaEnabled"] = False
    world.gpu_group["capacityReservation"] = {"capacityReservationTarget": {"capacityReservationID": "cr-xxxxxxxxxxxx"}}


@case("reserved-capacity-invalid", PASS)
def capacity_block_with_a_node_while_it_runs(world):
    """The issue's false alarm: a desired size of 1 is valid while the block is active (a warning says when not)."""
    world.gpu_group["capacityReservation"] = RESERVATION
    world.gpu_group["instanceMarketOptions"] = {"marketType": "capacity-block"}
    world.gpu_group["desiredCapacity"] = 1


@case("reserved-capacity-at-risk", FAIL, (CLUSTER, "managedNodeGroups.1.spot"))
def spot_on_efa_gpus(world):
    world.gpu_group["spot"] = True


@case("reserved-capacity-invalid", FAIL, (CLUSTER, "managedNodeGroups.1.spot"))
def spot_into_an_on_demand_reservation(world):
    world.gpu_group.update(spot=True, efaEnabled=False, capacityReservation=RESERVATION)


@case("efa-reservation-without-placement-group", FAIL, (CLUSTER, "managedNodeGroups.1.capacityReservation"))
def on_demand_reservation_for_efa_nodes_without_a_placement_group(world):
    world.gpu_group["capacityReservation"] = RESERVATION


@case("efa-reservation-without-placement-group", PASS)
@case("reserved-capacity-invalid", PASS)
@case("reserved-capacity-at-risk", PASS)
def capacity_block_as_aws_documents_it(world):
    world.gpu_group["capacityReservation"] = RESERVATION
    world.gpu_group["instanceMarketOptions"] = {"marketType": "capacity-block"}


@case("reserved-capacity-at-risk", PASS)
def spot_in_dev_without_efa(world):
    world.env = "dev"
    world.gpu_group.update(spot=True, efaEnabled=False)


# Node group sizes eksctl, EKS and EC2 Auto Scaling take (facts/limits.py).
GPU_GROUP = "managedNodeGroups.1"


@case("node-group-size-invalid", FAIL, (CLUSTER, f"{GPU_GROUP}.desiredCapacity"))
def desired_capacity_above_max_size(world):
    world.gpu_group["desiredCapacity"] = 3


@case("node-group-size-invalid", FAIL, (CLUSTER, f"{GPU_GROUP}.desiredCapacity"))
def desired_capacity_below_min_size(world):
    world.gpu_group.update(minSize=2, desiredCapacity=1)


@case("node-group-size-invalid", FAIL, (CLUSTER, f"{GPU_GROUP}.maxSize"))
def min_size_above_max_size(world):
    del world.gpu_group["desiredCapacity"]
    world.gpu_group.update(minSize=3, maxSize=2)


@case("node-group-size-invalid", FAIL, (CLUSTER, f"{GPU_GROUP}.maxSize"))
def max_size_below_the_min_size_eksctl_fills_in(world):
    del world.gpu_group["desiredCapacity"], world.gpu_group["minSize"]
    world.gpu_group["maxSize"] = 1  # eksctl makes minSize 2 (DefaultNodeCount)


@case("node-group-size-invalid", FAIL, (CLUSTER, f"{GPU_GROUP}.maxSize"))
def managed_group_that_can_never_hold_a_node(world):
    world.gpu_group["maxSize"] = 0


@case("node-group-size-invalid", FAIL, (CLUSTER, f"{GPU_GROUP}.minSize"), (CLUSTER, f"{GPU_GROUP}.maxSize"))
def negative_and_beyond_32_bit_sizes(world):
    world.gpu_group.update(minSize=-1, maxSize=2**31)


@case("node-group-size-invalid", PASS)
def gpu_group_that_starts_empty_at_the_eks_quota(world):
    del world.gpu_group["minSize"]
    world.gpu_group.update(desiredCapacity=0, maxSize=450)


@case("node-group-size-invalid", PASS)
def unmanaged_group_scaled_to_zero(world):
    world.cluster["nodeGroups"] = [
        {"name": "spare", "instanceType": "m6i.xlarge", "minSize": 0, "desiredCapacity": 0, "maxSize": 0}
    ]


@case("node-group-above-eks-quota", FAIL, (CLUSTER, f"{GPU_GROUP}.maxSize"))
def a_billion_gpu_nodes(world):
    world.gpu_group["maxSize"] = 1_000_000_000


@case("node-group-above-eks-quota", PASS)
def as_many_nodes_as_the_default_quota(world):
    world.gpu_group["maxSize"] = 450
    world.cluster["nodeGroups"] = [{"name": "big", "instanceType": "m6i.xlarge", "minSize": 0, "maxSize": 1000}]


@case("efa-not-used-by-nccl", PASS)
def efa_job_without_the_net_pin(world):
    # The rule's old false alarm (AWS's p5 nccl-tests jobs): NCCL loads aws-ofi-nccl as libnccl-net.so by itself.
    for setting in ("NCCL_NET=Libfabric", "FI_PROVIDER=efa"):
        at = world.launcher_command.index(setting)
        del world.launcher_command[at - 1 : at + 1]


@case("efa-not-used-by-nccl", FAIL, (JOB, f"{LAUNCHER}.containers.0.command.17"))
def efa_job_on_tcp_sockets(world):
    world.launcher_command[world.launcher_command.index("NCCL_NET=Libfabric")] = "NCCL_NET=Socket"


@case("efa-not-used-by-nccl", FAIL, (JOB, f"{LAUNCHER}.containers.0.env.1.value"))
def efa_job_without_a_network_plugin(world):
    world.launcher_command[world.launcher_command.index("NCCL_NET=Libfabric")] = "NCCL_NET_PLUGIN"
    world.container("Launcher")["env"].append({"name": "NCCL_NET_PLUGIN", "value": "none"})


@case("efa-not-used-by-nccl", FAIL, (JOB, f"{LAUNCHER}.containers.0.args.0"))
def efa_job_in_a_shell_script_with_the_wrong_provider(world):
    launcher = world.container("Launcher")
    launcher["command"] = ["/bin/sh", "-c"]
    launcher["args"] = ["mpirun -np 16 -x FI_PROVIDER=tcp -x NCCL_NET=Libfabric python -m horovod_trainer.train"]


@case("efa-not-used-by-nccl", PASS)
def efa_environment_from_the_launcher_env(world):
    command = world.launcher_command
    command[command.index("FI_PROVIDER=efa")] = "FI_PROVIDER"
    command[command.index("NCCL_NET=Libfabric")] = "NCCL_NET"
    world.container("Launcher")["env"] += [
        {"name": "FI_PROVIDER", "value": "efa"},
        {"name": "NCCL_NET", "value": "Libfabric"},
    ]


@case("efa-not-used-by-nccl", PASS)
def job_without_efa_needs_no_efa_environment(world):
    for section in ("requests", "limits"):
        del world.worker_resources[section]["vpc.amazonaws.com/efa"]
    at = world.launcher_command.index("FI_PROVIDER=efa")
    del world.launcher_command[at - 1 : at + 1]


@case("efa-not-used-by-nccl", FAIL, (JOB, f"{LAUNCHER}.containers.0.env.2.value"))
def efa_job_without_a_network_plugin_after_an_env_entry_that_is_no_mapping(world):
    # The entry's own index (2): it was counted among the mappings alone (1).
    efa_job_without_a_network_plugin(world)
    world.container("Launcher")["env"].insert(0, "NCCL_DEBUG=WARN")


@case("nccl-network-unavailable", FAIL, (JOB, f"{LAUNCHER}.containers.0.command.17"))
@case("efa-not-used-by-nccl", PASS)
def efa_job_on_nccls_infiniband_transport(world):
    # NCCL's IB transport finds no device on EC2 and NCCL_NET lets it try no other: NCCL stops (it was a warning).
    world.launcher_command[world.launcher_command.index("NCCL_NET=Libfabric")] = "NCCL_NET=ib"


@case("nccl-network-unavailable", FAIL, (JOB, f"{LAUNCHER}.containers.0.command.17"))
def efa_job_naming_the_plugin_it_does_not_load(world):
    world.launcher_command.extend(["-x", "NCCL_NET_PLUGIN=none"])


@case("nccl-network-unavailable", PASS)
def efa_job_on_tcp_sockets_runs(world):
    efa_job_on_tcp_sockets(world)
    world.launcher_command.extend(["-x", "NCCL_NET_PLUGIN=none"])


@case("nccl-network-unavailable", PASS)
def efa_job_on_the_plugin_it_loads(world):
    pass


@case("efa-node-group-not-single-az", FAIL, (CLUSTER, "managedNodeGroups.1.availabilityZones"))
def efa_in_two_zones(world):
    world.gpu_group["availabilityZones"] = ["us-west-2a", "us-west-2b"]


@case("efa-node-group-not-single-az", FAIL, (CLUSTER, "managedNodeGroups.1.subnets"))
def efa_in_two_subnets(world):
    del world.gpu_group["availabilityZones"]
    world.gpu_group["subnets"] = ["subnet-0a1b2c3d4e5f60718", "subnet-0a1b2c3d4e5f60719"]


@case("efa-node-group-not-single-az", FAIL, (CLUSTER, "managedNodeGroups.1"))
def efa_in_no_zone(world):
    # eksctl accepts it, then spreads the group and its cluster placement group over every zone of the cluster.
    del world.gpu_group["availabilityZones"]


@case("efa-node-group-not-single-az", PASS)
def efa_on_a_capacity_block(world):
    # The reservation fixes the zone (and eksctl adds no placement group for it).
    del world.gpu_group["availabilityZones"]
    target = {"capacityReservationID": "cr-0123456789abcdef0"}
    world.gpu_group["capacityReservation"] = {"capacityReservationTarget": target}
    world.gpu_group["instanceMarketOptions"] = {"marketType": "capacity-block"}


@case("efa-node-group-not-single-az", FAIL, (CLUSTER, "managedNodeGroups.1.availabilityZones"))
@case("reserved-capacity-at-risk", PASS)
def efa_reservation_in_two_zones(world):
    # One cause, one finding: eksctl refuses the EFA group's two zones (an error); the reservation's spread over
    # them (a warning of reserved-capacity-at-risk otherwise) is not reported again.
    world.gpu_group["capacityReservation"] = RESERVATION
    world.gpu_group["availabilityZones"] = ["us-west-2a", "us-west-2b"]


@case("efa-node-group-not-single-az", PASS)
def efa_in_no_zone_with_an_open_reservation_preference(world):
    # eksctl gives a managed group with any capacityReservation no placement group (eksctl#8220).
    del world.gpu_group["availabilityZones"]
    world.gpu_group["capacityReservation"] = {"capacityReservationPreference": "open"}


@case("efa-node-group-not-single-az", PASS)
def efa_in_no_zone_in_a_placement_group_of_its_own(world):
    # The user's placement group, whose strategy (cluster, partition, spread) is not visible.
    del world.gpu_group["availabilityZones"]
    world.gpu_group["placement"] = {"groupName": "training"}


@case("efa-node-group-not-single-az", PASS)
def self_managed_efa_group_in_no_zone(world):
    # No EKS node group, so nothing refuses its updates; EC2 refuses launches outside the placement group's zone
    # and the Auto Scaling group retries in it.
    group = world.gpu_group
    world.cluster["managedNodeGroups"].remove(group)
    world.cluster["nodeGroups"] = [group]
    del group["availabilityZones"]


@case("efa-node-group-not-single-az", PASS)
def efa_in_one_zone(world):
    pass


@case("efa-node-group-not-single-az", PASS)
def efa_in_one_subnet(world):
    del world.gpu_group["availabilityZones"]
    world.gpu_group["subnets"] = ["subnet-0a1b2c3d4e5f60718"]


@case("efa-instance-type-unsupported", FAIL, (CLUSTER, "managedNodeGroups.1.efaEnabled"))
def efa_on_small_g5(world):
    world.gpu_group["instanceType"] = "g5.xlarge"


@case("efa-instance-type-unsupported", PASS)
def efa_on_g5_8xlarge(world):
    world.gpu_group["instanceType"] = "g5.8xlarge"


@case("efa-huge-pages-unset", FAIL, (JOB, f"{WORKER}.containers.0.resources"))
def efa_without_huge_page_setting(world):
    index = world.launcher_command.index("FI_EFA_USE_HUGE_PAGE=0")
    del world.launcher_command[index - 1 : index + 1]


@case("efa-huge-pages-unset", PASS)
def efa_with_huge_pages(world):
    efa_without_huge_page_setting(world)
    for section in ("requests", "limits"):
        world.worker_resources[section]["hugepages-2Mi"] = "5120Mi"


@case("efa-huge-pages-unset", PASS)
def huge_pages_off_in_worker_env(world):
    efa_without_huge_page_setting(world)
    world.container("Worker")["env"] = [{"name": "FI_EFA_USE_HUGE_PAGE", "value": "0"}]


# --- FSx ----------------------------------------------------------------------------------


@case("storage-class-missing", FAIL, (CLAIM, "spec.storageClassName"))
def claim_names_unknown_class(world):
    world.claim["spec"]["storageClassName"] = "fsx-lustre-fast"


@case("storage-class-missing", PASS)
def claim_bound_to_a_static_volume_of_its_class(world):
    """Static provisioning: the claim and its PersistentVolume share a class name no StorageClass defines."""
    world.claim["spec"]["storageClassName"] = "fsx-static"
    volume = _persistent_volume("Retain")
    volume["spec"]["storageClassName"] = "fsx-static"
    world.add("infrastructure", volume)


@case("storage-class-missing", PASS)
def claim_of_an_unknown_class_in_a_folder(world):
    world.claim["spec"]["storageClassName"] = "fsx-lustre-fast"
    world.complete = False


@case("storage-class-missing", PASS)
def claim_on_eks_gp2(world):
    world.claim["spec"]["storageClassName"] = "gp2"


@case("fsx-storage-class-invalid", FAIL, (FSX_CLASS, "parameters.subnetId"))
def no_subnet(world):
    del world.storage_class["parameters"]["subnetId"]


@case("fsx-storage-class-invalid", FAIL, (FSX_CLASS, "parameters.subnetId"))
def two_subnets(world):
    world.storage_class["parameters"]["subnetId"] = "subnet-0a1b2c3d4e5f60718,subnet-0a1b2c3d4e5f60719"


@case(
    "fsx-storage-class-invalid", FAIL, (FSX_CLASS, "parameters.storageType"), (FSX_CLASS, "parameters.driveCacheType")
)
def hdd_on_scratch(world):
    world.storage_class["parameters"]["storageType"] = "HDD"


@case("fsx-storage-class-invalid", PASS)
def hdd_on_persistent_1(world):
    world.storage_class["parameters"].update(
        deploymentType="PERSISTENT_1", storageType="HDD", driveCacheType="READ", perUnitStorageThroughput="40"
    )


@case("fsx-storage-class-invalid", FAIL, (FSX_CLASS, "parameters.fileSystemTypeVersion"))
def lustre_2_10_on_persistent_2(world):
    world.storage_class["parameters"].update(
        deploymentType="PERSISTENT_2", perUnitStorageThroughput="250", fileSystemTypeVersion="2.10"
    )


@case("fsx-storage-class-invalid", FAIL, (FSX_CLASS, "parameters.efaEnabled"), (FSX_CLASS, "parameters.efaEnabled"))
def efa_file_system_on_scratch(world):
    world.storage_class["parameters"]["efaEnabled"] = "true"


@case("fsx-storage-class-invalid", PASS)
def efa_file_system_on_persistent_2_with_metadata(world):
    world.storage_class["parameters"].update(
        deploymentType="PERSISTENT_2",
        perUnitStorageThroughput="1000",
        efaEnabled="true",
        metadataConfigurationMode="AUTOMATIC",
    )


# The environment's name is no premise any more (was fsx-reclaim-delete-in-production, silent outside prod): a
# repository turns the rule off where file systems go with their claims, in its validate configuration.
@case("fsx-reclaim-delete", FAIL, (FSX_CLASS, "reclaimPolicy"))
def file_system_deleted_with_its_claim(world):
    world.storage_class["reclaimPolicy"] = "Delete"


@case("fsx-reclaim-delete", FAIL, (FSX_CLASS, ""))
def reclaim_policy_left_to_the_default(world):
    world.env = "dev"
    del world.storage_class["reclaimPolicy"]


@case("fsx-reclaim-delete", PASS)
def file_system_retained(world):
    world.storage_class["reclaimPolicy"] = "Retain"


@case("fsx-throughput-invalid", FAIL, (FSX_CLASS, "parameters.perUnitStorageThroughput"))
def throughput_on_scratch(world):
    world.storage_class["parameters"]["perUnitStorageThroughput"] = "200"


@case("fsx-throughput-invalid", FAIL, (FSX_CLASS, "parameters.perUnitStorageThroughput"))
def persistent_1_throughput_on_persistent_2(world):
    world.storage_class["parameters"].update(deploymentType="PERSISTENT_2", perUnitStorageThroughput="200")


@case("fsx-throughput-invalid", FAIL, (FSX_CLASS, "parameters.perUnitStorageThroughput"))
def persistent_without_throughput(world):
    world.storage_class["parameters"]["deploymentType"] = "PERSISTENT_1"


@case("fsx-throughput-invalid", PASS)
def persistent_2_at_250(world):
    world.storage_class["parameters"].update(deploymentType="PERSISTENT_2", perUnitStorageThroughput="250")


@case("fsx-s3-link-invalid", FAIL, (FSX_CLASS, "parameters.s3ImportPath"))
def s3_import_on_persistent_2(world):
    world.storage_class["parameters"].update(
        deploymentType="PERSISTENT_2", perUnitStorageThroughput="250", s3ImportPath="s3://training-data"
    )


@case("fsx-s3-link-invalid", FAIL, (FSX_CLASS, "parameters.s3ExportPath"))
def export_without_import(world):
    world.storage_class["parameters"]["s3ExportPath"] = "s3://training-data/export"


@case("fsx-s3-link-invalid", FAIL, (FSX_CLASS, "parameters.s3ExportPath"))
def export_to_another_bucket(world):
    world.storage_class["parameters"].update(s3ImportPath="s3://training-data", s3ExportPath="s3://results/out")


@case("fsx-s3-link-invalid", PASS)
def import_and_export_in_one_bucket(world):
    world.storage_class["parameters"].update(
        s3ImportPath="s3://training-data/in", s3ExportPath="s3://training-data/out", autoImportPolicy="NEW_CHANGED"
    )


# Sizes the driver rounds up were warnings of fsx-capacity-invalid; they are fsx-capacity-rounded-up's now.
@case("fsx-capacity-rounded-up", FAIL, (CLAIM, "spec.resources.requests.storage"))
def size_rounded_up(world):
    world.claim["spec"]["resources"]["requests"]["storage"] = "1000Gi"


@case("fsx-capacity-rounded-up", FAIL, (CLAIM, "spec.resources.requests.storage"))
def scratch_2_off_step(world):
    world.claim["spec"]["resources"]["requests"]["storage"] = "3600Gi"


@case("fsx-capacity-invalid", FAIL, (CLAIM, "spec.resources"))
def claim_without_a_size(world):
    del world.claim["spec"]["resources"]


@case("fsx-capacity-invalid", FAIL, (CLAIM, "spec.resources.requests.storage"))
def size_not_a_quantity(world):
    world.claim["spec"]["resources"]["requests"]["storage"] = "1.2TB-ish"


@case("fsx-capacity-rounded-up", FAIL, (CLAIM, "spec.resources.requests.storage"))
def hdd_size_rounded_to_the_throughputs_unit(world):
    world.storage_class["parameters"].update(
        {"deploymentType": "PERSISTENT_1", "storageType": "HDD", "perUnitStorageThroughput": "12"}
    )
    world.claim["spec"]["resources"]["requests"]["storage"] = "1800Gi"


@case("fsx-capacity-invalid", PASS)
@case("fsx-capacity-rounded-up", PASS)
def scratch_2_two_steps(world):
    world.claim["spec"]["resources"]["requests"]["storage"] = "4800Gi"


@case("fsx-capacity-rounded-up", PASS)
def scratch_1_third_step(world):
    world.storage_class["parameters"]["deploymentType"] = "SCRATCH_1"
    world.claim["spec"]["resources"]["requests"]["storage"] = "3600Gi"


@case("fsx-capacity-rounded-up", PASS)
def hdd_at_forty_in_units_of_1800(world):
    world.storage_class["parameters"].update(
        {"deploymentType": "PERSISTENT_1", "storageType": "HDD", "perUnitStorageThroughput": "40"}
    )
    world.claim["spec"]["resources"]["requests"]["storage"] = "3600Gi"


def _persistent_volume(policy: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "fsx-static"},
        "spec": {
            "capacity": {"storage": "1200Gi"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": policy,
            "csi": {"driver": "fsx.csi.aws.com", "volumeHandle": "fs-0123456789abcdef0"},
        },
    }


@case("reclaim-policy-recycle", FAIL, (FSX_CLASS, "reclaimPolicy"))
def storage_class_recycles(world):
    world.storage_class["reclaimPolicy"] = "Recycle"


# The API server takes Recycle on a PersistentVolume (only a StorageClass's is refused), so it is no error now.
@case("reclaim-policy-recycle", PASS)
def static_volume_recycles(world):
    world.add("infrastructure", _persistent_volume("Recycle"))


@case("reclaim-policy-recycle", PASS)
def static_volume_retained(world):
    world.storage_class["reclaimPolicy"] = "Retain"
    world.add("infrastructure", _persistent_volume("Retain"))


@case("claim-not-read-write-many", FAIL, (CLAIM, "spec.accessModes"))
def ebs_claim_shared_by_workers_on_two_nodes(world):
    world.claim["spec"]["storageClassName"] = "gp2"
    world.claim["spec"]["accessModes"] = ["ReadWriteOnce"]


@case("claim-not-read-write-many", PASS)
def ebs_claim_of_pods_the_largest_node_of_their_group_holds(world):
    # One 8-GPU worker and its launcher fit one p4d.24xlarge, the group's largest type (it was compared with the
    # g5.12xlarge's 4 GPUs).
    ebs_claim_shared_by_workers_on_two_nodes(world)
    world.replica("Worker")["replicas"] = 1
    del world.gpu_group["instanceType"]
    world.gpu_group["instanceTypes"] = ["g5.12xlarge", "p4d.24xlarge"]


@case("claim-not-read-write-many", PASS)
def ebs_claim_where_karpenter_adds_nodes(world):
    ebs_claim_shared_by_workers_on_two_nodes(world)
    world.cluster["karpenter"] = {"version": "1.8.1"}


@case("claim-not-read-write-many", FAIL, (CLAIM, "spec.accessModes"))
def shared_claim_read_write_once_pod(world):
    world.claim["spec"]["accessModes"] = ["ReadWriteOncePod"]


# Was the failing case: the FSx driver attaches nothing (attachRequired: false), so a ReadWriteOnce claim of it
# mounts on every node.
@case("claim-not-read-write-many", PASS)
def fsx_claim_read_write_once(world):
    world.claim["spec"]["accessModes"] = ["ReadWriteOnce"]


@case("claim-not-read-write-many", PASS)
def claim_read_write_many(world):
    pass


@case(
    "claim-not-in-pod-namespace",
    FAIL,
    (JOB, f"{LAUNCHER}.volumes.0.persistentVolumeClaim.claimName"),
    (JOB, f"{WORKER}.volumes.0.persistentVolumeClaim.claimName"),
)
def claim_in_other_namespace(world):
    world.claim["metadata"]["namespace"] = "data"


@case(
    "claim-not-in-pod-namespace",
    FAIL,
    (JOB, f"{LAUNCHER}.volumes.0.persistentVolumeClaim.claimName"),
    (JOB, f"{WORKER}.volumes.0.persistentVolumeClaim.claimName"),
)
def claim_missing(world):
    world.claim["metadata"]["name"] = "fsx-scratch"


@case("claim-not-in-pod-namespace", PASS)
def claim_absent_from_partial_inputs(world):
    world.remove("PersistentVolumeClaim")
    world.complete = False


@case("claim-not-in-pod-namespace", PASS)
def claim_elsewhere_in_partial_inputs(world):
    """Outside a whole environment a claim of the pods' namespace may exist in the cluster (it was reported)."""
    world.claim["metadata"]["namespace"] = "data"
    world.complete = False


# --- ordering -----------------------------------------------------------------------------


@case("flux-path-missing", FAIL, ("Kustomization/flux-system/training", "spec.path"))
def training_path_missing(world):
    world.unrendered.add("training")


@case("flux-path-missing", PASS)
def every_path_renders(world):
    pass


@case("dependency-missing", FAIL, ("Kustomization/flux-system/training", "spec.dependsOn.0"))
def depends_on_misspelt(world):
    world.kustomization("training")["spec"]["dependsOn"] = [{"name": "infra"}]


@case("dependency-missing", PASS)
def depends_on_nested_kustomization(world):
    world.kustomization("training")["spec"]["dependsOn"] = [{"name": "mpi-operator"}, {"name": "infrastructure"}]


@case("dependency-cycle", FAIL, ("Kustomization/flux-system/infrastructure", "spec.dependsOn"))
def infrastructure_depends_on_training(world):
    world.kustomization("infrastructure")["spec"]["dependsOn"] = [{"name": "training"}]


@case("dependency-cycle", PASS)
def chain(world):
    pass


@case("crd-not-installed", FAIL, (JOB, "apiVersion"))
def no_mpi_operator(world):
    world.remove("Kustomization", "mpi-operator")
    world.remove("GitRepository", "mpi-operator")


@case("crd-not-installed", PASS)
def eni_config_of_the_vpc_cni(world):
    """EKS's VPC CNI installs the ENIConfig CRD on every cluster."""
    eni = {
        "apiVersion": "crd.k8s.amazonaws.com/v1alpha1",
        "kind": "ENIConfig",
        "metadata": {"name": "us-west-2a"},
        "spec": {"subnet": "subnet-0a1b2c3d4e5f60718"},
    }
    world.add("infrastructure", eni)


@case("crd-not-installed", PASS)
def mpi_operator_over_ssh(world):
    world.find("GitRepository", "mpi-operator")["spec"]["url"] = "ssh://git@github.com/kubeflow/mpi-operator.git"


def _without_queue(world) -> None:
    """The environment without Kueue's objects, for cases about the MPIJob alone."""
    for kind, name in (("ResourceFlavor", "system"), ("ResourceFlavor", "gpu"), ("ClusterQueue", None)):
        world.remove(kind, name)
    world.remove("LocalQueue")


@case("custom-resource-before-crd", FAIL, (JOB, "apiVersion"))
def training_without_depends_on(world):
    _without_queue(world)
    del world.kustomization("training")["spec"]["dependsOn"]


@case("custom-resource-before-crd", FAIL, (JOB, "apiVersion"))
def mpijob_next_to_nested_operator(world):
    world.move("MPIJob", "infrastructure")


@case("custom-resource-before-crd", PASS)
def crd_in_same_kustomization(world):
    _without_queue(world)
    del world.kustomization("training")["spec"]["dependsOn"]
    world.remove("Kustomization", "mpi-operator")
    world.remove("GitRepository", "mpi-operator")
    crd = _custom_resource_definition("kubeflow.org", "MPIJob", "mpijobs")
    world.add("training", crd)


@case("crd-dependency-deadlock", FAIL, (JOB, "apiVersion"))
@case("custom-resource-before-crd", PASS)
def operator_waits_for_the_training_it_serves(world):
    _without_queue(world)
    del world.kustomization("training")["spec"]["dependsOn"]
    world.kustomization("infrastructure")["spec"]["dependsOn"] = [{"name": "training"}]


@case("crd-dependency-deadlock", PASS)
def training_waits_for_the_operator(world):
    pass


@case("crd-provider-not-waited", FAIL, ("Kustomization/flux-system/infrastructure", "spec"))
def infrastructure_does_not_wait(world):
    world.kustomization("infrastructure")["spec"]["wait"] = False


@case("crd-provider-not-waited", PASS)
def depends_directly_on_nested(world):
    world.kustomization("infrastructure")["spec"]["wait"] = False
    world.kustomization("training")["spec"]["dependsOn"] = [{"name": "mpi-operator"}]


@case("flux-source-missing", FAIL, ("HelmRelease/flux-system/aws-fsx-csi-driver", "spec.chart.spec.sourceRef"))
def helm_repository_missing(world):
    world.remove("HelmRepository", "aws-fsx-csi-driver")


@case("flux-source-missing", PASS)
def chart_from_oci_repository(world):
    world.remove("HelmRepository", "aws-fsx-csi-driver")
    release = world.find("HelmRelease", "aws-fsx-csi-driver")
    del release["spec"]["chart"]
    release["spec"]["chartRef"] = {"kind": "OCIRepository", "name": "fsx-chart"}
    world.add(
        "infrastructure",
        {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "OCIRepository",
            "metadata": {"name": "fsx-chart", "namespace": "flux-system"},
            "spec": {"interval": "12h", "url": "oci://public.ecr.aws/example/fsx", "ref": {"tag": "1.17.0"}},
        },
    )


# Flux's sources beyond GitRepository and HelmRepository (model/flux_sources.py): an ExternalArtifact that an
# ArtifactGenerator makes (source-watcher, Flux 2.7 and later), an OCIRepository, a Bucket, a HelmChart.
def _artifact_generator(*artifacts: str, sources: list[dict] | None = None, **spec) -> dict:
    return {
        "apiVersion": "source.extensions.fluxcd.io/v1beta1",
        "kind": "ArtifactGenerator",
        "metadata": {"name": "platform", "namespace": "flux-system"},
        "spec": {
            "sources": sources or [{"alias": "repo", "kind": "GitRepository", "name": "flux-system"}],
            "artifacts": [{"name": a, "copy": [{"from": f"@repo/{a}/**", "to": "@artifact/"}]} for a in artifacts],
            **spec,
        },
    }


def _reading(name: str, kind: str, source: str) -> dict:
    """A Flux Kustomization named `name` that builds from the source `kind`/`source`."""
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {"interval": "1h", "path": "./", "prune": True, "sourceRef": {"kind": kind, "name": source}},
    }


@case("flux-source-missing", PASS)
def kustomization_from_an_external_artifact_a_generator_makes(world):
    world.add("infrastructure", _artifact_generator("apps", "infra"), _reading("apps", "ExternalArtifact", "apps"))


@case("flux-source-missing", PASS)
def external_artifact_named_by_a_path_pattern(world):
    generator = _artifact_generator("{app}-manifests", pathPattern="@repo/apps/{app}")
    world.add("infrastructure", generator, _reading("podinfo", "ExternalArtifact", "podinfo-manifests"))


@case("flux-source-missing", PASS)
def kustomizations_from_a_bucket_and_an_oci_repository_and_a_chart_from_a_helm_chart(world):
    bucket = {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "Bucket",
        "metadata": {"name": "manifests", "namespace": "flux-system"},
        "spec": {"interval": "5m", "bucketName": "manifests", "endpoint": "s3.amazonaws.com"},
    }
    oci = copy.deepcopy(world.find("OCIRepository", "kueue"))
    oci["metadata"]["name"] = "platform"
    chart = {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "HelmChart",
        "metadata": {"name": "fsx-chart", "namespace": "flux-system"},
        "spec": {"chart": "aws-fsx-csi-driver", "sourceRef": {"kind": "HelmRepository", "name": "aws-fsx-csi-driver"}},
    }
    world.add(
        "infrastructure",
        bucket,
        oci,
        chart,
        _reading("a", "Bucket", "manifests"),
        _reading("b", "OCIRepository", "platform"),
    )
    release = world.find("HelmRelease", "aws-fsx-csi-driver")
    del release["spec"]["chart"]
    release["spec"]["chartRef"] = {"kind": "HelmChart", "name": "fsx-chart"}


@case("flux-source-missing", FAIL, ("Kustomization/flux-system/apps", "spec.sourceRef"))
def external_artifact_no_generator_makes(world):
    world.add("infrastructure", _artifact_generator("app"), _reading("apps", "ExternalArtifact", "apps"))


@case("flux-source-missing", FAIL, ("ArtifactGenerator/flux-system/platform", "spec.sources.0"))
def artifact_generator_reading_a_missing_git_repository(world):
    sources = [{"alias": "repo", "kind": "GitRepository", "name": "monorepo"}]
    world.add(
        "infrastructure", _artifact_generator("apps", sources=sources), _reading("apps", "ExternalArtifact", "apps")
    )


# --- APIs and versions --------------------------------------------------------------------


@case("removed-api", FAIL, ("HorizontalPodAutoscaler/training/scale", "apiVersion"))
def hpa_v2beta2_on_1_34(world):
    world.add("training", _hpa("autoscaling/v2beta2", "cpu"))


@case("removed-api", FAIL, (JOB, "apiVersion"))
def old_mpijob_version(world):
    world.mpijob["apiVersion"] = "kubeflow.org/v1alpha2"


@case("removed-api", PASS)
def old_mpijob_version_served_by_the_environments_own_crd(world):
    crd = _custom_resource_definition("kubeflow.org", "MPIJob", "mpijobs")
    crd["spec"]["versions"][0].update(name="v1alpha2", schema={"openAPIV3Schema": {"type": "object"}})
    world.add("infrastructure", crd)
    world.mpijob["apiVersion"] = "kubeflow.org/v1alpha2"


@case("removed-api", PASS)
def hpa_v2beta2_on_1_25(world):
    world.cluster["metadata"]["version"] = "1.25"
    world.add("training", _hpa("autoscaling/v2beta2", "cpu"))


# Flux v2.9.5 serves each of its kinds at one version (facts/flux.py); an environment that applies an older Flux's
# CRDs (its gotk-components.yaml) is served what those CRDs serve.
def _older_flux_git_repository_crd() -> dict:
    crd = _custom_resource_definition("source.toolkit.fluxcd.io", "GitRepository", "gitrepositories")
    beta = copy.deepcopy(crd["spec"]["versions"][0])
    beta.update(name="v1beta2", storage=False, deprecated=True)
    beta["deprecationWarning"] = "v1beta2 GitRepository is deprecated, upgrade to v1"
    crd["spec"]["versions"].append(beta)
    return crd


@case("removed-api", FAIL, ("GitRepository/flux-system/mpi-operator", "apiVersion"))
def git_repository_v1beta2_on_flux_2_9(world):
    world.find("GitRepository", "mpi-operator")["apiVersion"] = "source.toolkit.fluxcd.io/v1beta2"


@case("removed-api", FAIL, ("HelmRelease/flux-system/aws-fsx-csi-driver", "apiVersion"))
def helm_release_v2beta2_on_flux_2_9(world):
    world.find("HelmRelease", "aws-fsx-csi-driver")["apiVersion"] = "helm.toolkit.fluxcd.io/v2beta2"


@case("removed-api", FAIL, ("ArtifactGenerator/flux-system/platform", "apiVersion"))
def artifact_generator_at_a_version_source_watcher_does_not_serve(world):
    generator = _artifact_generator("apps")
    generator["apiVersion"] = "source.extensions.fluxcd.io/v1alpha1"
    world.add("infrastructure", generator)


@case("removed-api", PASS)
def git_repository_v1beta2_served_by_the_environments_own_flux_crd(world):
    world.add("infrastructure", _older_flux_git_repository_crd())
    world.find("GitRepository", "mpi-operator")["apiVersion"] = "source.toolkit.fluxcd.io/v1beta2"


def _alert_v1beta2_served_by_the_environments_own_crd(world) -> dict:
    crd = _custom_resource_definition("notification.toolkit.fluxcd.io", "Alert", "alerts")
    crd["spec"]["versions"][0]["name"] = "v1beta2"
    alert = {
        "apiVersion": "notification.toolkit.fluxcd.io/v1beta2",
        "kind": "Alert",
        "metadata": {"name": "on-call", "namespace": "flux-system"},
        "spec": {"size": "three", "colour": "red"},
    }
    world.add("infrastructure", crd, alert)
    return alert


# The environment's own CRD serves the version, so the schema stage checks the object against it (removed-api,
# which the stage would leave the object to, says nothing).
@case("schema-invalid", FAIL, ("Alert/flux-system/on-call", "spec"), ("Alert/flux-system/on-call", "spec.size"))
def alert_at_a_version_its_own_crd_serves_with_a_misspelt_field_and_a_wrong_type(world):
    _alert_v1beta2_served_by_the_environments_own_crd(world)


@case("removed-api", PASS)
def alert_v1beta2_served_by_the_environments_own_crd(world):
    _alert_v1beta2_served_by_the_environments_own_crd(world)


@case("flux-api-deprecated", FAIL, ("GitRepository/flux-system/mpi-operator", "apiVersion"))
def git_repository_v1beta2_deprecated_by_the_environments_own_flux_crd(world):
    git_repository_v1beta2_served_by_the_environments_own_flux_crd(world)


@case("flux-api-deprecated", PASS)
def latest_flux_versions_next_to_an_older_fluxs_crd(world):
    world.add("infrastructure", _older_flux_git_repository_crd())


@case("eks-version-unsupported", FAIL, (CLUSTER, "metadata.version"))
def kubernetes_1_29(world):
    world.cluster["metadata"]["version"] = "1.29"


@case("eks-version-unsupported", PASS)
def kubernetes_1_35(world):
    world.cluster["metadata"]["version"] = "1.35"


@case("ami-family-unsupported", FAIL, (CLUSTER, "managedNodeGroups.1.amiFamily"))
def al2_on_1_34(world):
    world.gpu_group["amiFamily"] = "AmazonLinux2"


@case("ami-family-unsupported", PASS)
def al2_on_1_32(world):
    world.gpu_group["amiFamily"] = "AmazonLinux2"
    world.cluster["metadata"]["version"] = "1.32"


@case("ami-family-unsupported", PASS)
def al2_managed_group_with_its_own_ami(world):
    """eksctl v0.230.0 (defaults.go) leaves the AMI family of a managed group's custom AMI to the user."""
    world.gpu_group["amiFamily"] = "AmazonLinux2"
    world.gpu_group["ami"] = "ami-0123456789abcdef0"


# --- hygiene and security -----------------------------------------------------------------


@case("image-tag-latest", FAIL, (JOB, f"{WORKER}.containers.0.image"))
def worker_on_latest(world):
    world.container("Worker")["image"] = "ghcr.io/example-org/trainer:latest"


@case("image-tag-latest", FAIL, (NVIDIA_PLUGIN, "spec.template.spec.containers.0.image"))
def plugin_untagged(world):
    world.daemonset("nvidia")["spec"]["template"]["spec"]["containers"][0]["image"] = "nvcr.io/nvidia/k8s-device-plugin"


@case("image-tag-latest", PASS)
def pinned_by_digest_and_registry_port(world):
    world.container("Worker")["image"] = "registry.example.com:5000/trainer@sha256:" + "a" * 64
    world.container("Launcher")["image"] = "registry.example.com:5000/trainer:0.1.0"


@case("image-reference-invalid", FAIL, (JOB, f"{WORKER}.containers.0.image"))
def image_with_a_shell_command(world):
    world.container("Worker")["image"] = "bad image $(id)"


@case(
    "image-reference-invalid",
    FAIL,
    (JOB, f"{LAUNCHER}.containers.0.image"),
    (JOB, f"{LAUNCHER}.initContainers.0.image"),
    (NVIDIA_PLUGIN, "spec.template.spec.containers.0.image"),
)
def uppercase_repository_newline_and_short_digest(world):
    world.container("Launcher")["image"] = "ghcr.io/Example-Org/trainer:0.1.0"
    world.pod("Launcher")["initContainers"][0]["image"] = "ghcr.io/example-org/trainer:0.1.0\n"
    plugin = world.daemonset("nvidia")["spec"]["template"]["spec"]["containers"][0]
    plugin["image"] = "nvcr.io/nvidia/k8s-device-plugin@sha256:" + "a" * 63


@case("image-reference-invalid", PASS)
def images_still_to_fill_in(world):
    # Placeholders of templates people copy (placeholder-value warns about them): not yet wrong.
    world.container("Worker")["image"] = "<account>.dkr.ecr.<region>.amazonaws.com/<image>:<tag>"
    world.container("Launcher")["image"] = "<DOCKER_REGISTRY>trainer:0.1.0"


@case("image-reference-invalid", PASS)
def familiar_names_ports_digests_and_flux_variables(world):
    world.container("Worker")["image"] = "registry.example.com:5000/trainer:0.1.0@sha256:" + "a" * 64
    world.container("Launcher")["image"] = "ubuntu:22.04"
    world.pod("Launcher")["initContainers"][0]["image"] = "ghcr.io/example-org/trainer:${TRAINER_TAG}"


@case("env-literal-credential", FAIL, (JOB, f"{LAUNCHER}.containers.0.env.0.value"))
def aws_secret_in_env(world):
    world.container("Launcher")["env"] = [{"name": "AWS_SECRET_ACCESS_KEY", "value": "wJalrXUtnFEMI/K7MDENG"}]


@case("env-literal-credential", FAIL, (JOB, f"{WORKER}.containers.0.env.0.value"))
def access_key_id_value(world):
    world.container("Worker")["env"] = [{"name": "S3_USER", "value": "AKIAIOSFODNN7EXAMPLE"}]


@case("env-literal-credential", PASS)
def secret_reference_and_token_file(world):
    world.container("Worker")["env"] = [
        {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}},
        {"name": "AWS_WEB_IDENTITY_TOKEN_FILE", "value": "/var/run/secrets/eks.amazonaws.com/token"},
        {"name": "NCCL_DEBUG", "value": "WARN"},
    ]


@case("env-literal-credential", PASS)
def settings_that_only_mention_tokens_or_secrets(world):
    world.container("Worker")["env"] = [
        {"name": "TOKENIZERS_PARALLELISM", "value": "false"},
        {"name": "MAX_TOKENS", "value": "2048"},
        {"name": "USE_SECRETS_MANAGER", "value": "true"},
    ]


@case("env-literal-credential", FAIL, (JOB, f"{WORKER}.containers.0.env.0.value"))
def token_as_a_word(world):
    world.container("Worker")["env"] = [{"name": "HF_TOKEN", "value": "hf_abcdefghijklmnop"}]


@case("secret-data-committed", FAIL, ("Secret/training/wandb", "stringData"))
def plain_secret(world):
    world.add(
        "training",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "wandb", "namespace": "training"},
            "stringData": {"api-key": "0123456789abcdef"},
        },
    )


@case("secret-data-committed", PASS)
def sops_secret(world):
    world.add(
        "training",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "wandb", "namespace": "training"},
            "data": {"api-key": "ENC[AES256_GCM,data:abc,type:str]"},
            "sops": {"version": "3.9.0", "age": []},
        },
    )


@case("job-mpirun-not-mpijob", FAIL, ("Job/training/train", "spec.parallelism"))
def parallel_job_runs_mpirun(world):
    world.add("training", _job(4, ["mpirun", "-np", "4", "python", "-m", "horovod_trainer.train"]))


@case("job-mpirun-not-mpijob", PASS)
def single_pod_job_runs_horovodrun(world):
    world.add("training", _job(1, ["horovodrun", "-np", "2", "-H", "localhost:2", "python", "train.py"]))


@case("hpa-on-gpu", FAIL, ("HorizontalPodAutoscaler/training/scale", "spec.metrics.0"))
def hpa_on_gpus(world):
    world.add("training", _hpa("autoscaling/v2", "nvidia.com/gpu"))


FLUX_INFRASTRUCTURE = "Kustomization/flux-system/infrastructure"


def _service(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "training"},
        "spec": {"clusterIP": "None", "selector": {"app": "trainer"}, "ports": [{"port": 22}]},
    }


def _config_map(name: str, data: dict) -> dict:
    metadata = {"name": name, "namespace": "flux-system"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


@case("flux-variable-unset", FAIL, (FSX_CLASS, "parameters.subnetId"))
def variable_the_cluster_settings_do_not_hold(world):
    world.storage_class["parameters"]["subnetId"] = "${FSX_SUBNET}"


@case("flux-variable-unset", FAIL, (JOB, f"{LAUNCHER}.containers.0.args.0"))
def shell_variable_flux_would_empty(world):
    world.kustomization("training")["spec"]["postBuild"] = {"substitute": {"CLUSTER": "prod"}}
    launcher = world.container("Launcher")
    launcher["command"] = ["/bin/sh", "-c"]
    launcher["args"] = ["cd ${HOME} && mpirun -np 16 python -m horovod_trainer.train --run=${CLUSTER}"]


@case("flux-variable-unset", FAIL, (FSX_CLASS, "parameters.securityGroupIds"), (FSX_CLASS, "parameters.subnetId"))
def cluster_variables_without_post_build(world):
    del world.kustomization("infrastructure")["spec"]["postBuild"]


@case("flux-variable-unset", FAIL, (JOB, f"{LAUNCHER}.containers.0.args.0"))
def variable_after_an_escaped_dollar(world):
    world.kustomization("training")["spec"]["postBuild"] = {"substitute": {"CLUSTER": "prod"}}
    world.container("Launcher")["command"] = ["/bin/sh", "-c"]
    world.container("Launcher")["args"] = ["echo $$${HOME} && mpirun -np 16 python -m horovod_trainer.train"]


@case("flux-variable-unset", PASS)
def shell_variables_escaped_defaulted_or_disabled(world):
    world.kustomization("training")["spec"]["postBuild"] = {"substitute": {"CLUSTER": "prod"}}
    launcher = world.container("Launcher")
    launcher["command"] = ["/bin/sh", "-c"]
    launcher["args"] = [
        "cd $${HOME} ${TMPDIR:=/tmp} ${RUN:-a} && mpirun -np 16 python -m horovod_trainer.train --run=${CLUSTER}"
    ]
    world.storage_class["metadata"]["annotations"] = {"kustomize.toolkit.fluxcd.io/substitute": "disabled"}
    world.storage_class["parameters"]["subnetId"] = "${SUBNET_OF_ANOTHER_TOOL}"
    world.storage_class["parameters"]["securityGroupIds"] = "sg-0123456789abcdef0"


@case("flux-variable-unset", FAIL, (FSX_CLASS, "parameters.securityGroupIds"), (FSX_CLASS, "parameters.subnetId"))
def cluster_variables_where_substitution_is_disabled(world):
    world.storage_class["metadata"]["labels"] = {"kustomize.toolkit.fluxcd.io/substitute": "disabled"}


@case("flux-variable-unset", FAIL, (JOB, f"{LAUNCHER}.containers.0.args.0"))
def defaulted_variable_where_post_build_gives_no_variable(world):
    world.kustomization("training")["spec"]["postBuild"] = {
        "substituteFrom": [{"kind": "ConfigMap", "name": "optional-values", "optional": True}]
    }
    world.container("Launcher")["command"] = ["/bin/sh", "-c"]
    world.container("Launcher")["args"] = ["mpirun -np ${NP:=16} python -m horovod_trainer.train"]


@case("flux-variable-unset", PASS)
def variable_from_a_config_map_an_earlier_kustomization_applies(world):
    world.add("infrastructure", _config_map("run-values", {"RUN_NAME": "nightly"}))
    world.kustomization("training")["spec"]["postBuild"] = {
        "substituteFrom": [{"kind": "ConfigMap", "name": "run-values"}]
    }
    world.launcher_args.append("--run=${RUN_NAME}")


@case("flux-variable-unset", PASS)
def shell_variables_where_flux_substitutes_nothing(world):
    world.container("Launcher")["command"] = ["/bin/sh", "-c"]
    world.container("Launcher")["args"] = ["cd ${HOME} && mpirun -np 16 python -m horovod_trainer.train"]


@case("flux-substitution-invalid", FAIL, (FSX_CLASS, "parameters.subnetId"))
def default_without_a_colon(world):
    world.storage_class["parameters"]["subnetId"] = "${FSX_SUBNET_ID-subnet-0a1b2c3d4e5f60718}"


@case("flux-substitution-invalid", FAIL, (FLUX_INFRASTRUCTURE, "spec.postBuild.substituteFrom.1"))
def substitution_source_applied_by_the_same_kustomization(world):
    world.kustomization("infrastructure")["spec"]["postBuild"]["substituteFrom"].append(
        {"kind": "ConfigMap", "name": "fsx-values"}
    )
    world.add("infrastructure", _config_map("fsx-values", {"FSX_SUBNET": "subnet-0a1b2c3d4e5f60718"}))
    world.storage_class["parameters"]["subnetId"] = "${FSX_SUBNET}"


@case("flux-substitution-invalid", PASS)
def optional_substitution_source_applied_by_the_same_kustomization(world):
    """kustomize-controller reads an optional source that does not exist yet as empty (fluxcd/pkg/kustomize)."""
    substitution_source_applied_by_the_same_kustomization(world)
    world.kustomization("infrastructure")["spec"]["postBuild"]["substituteFrom"][1]["optional"] = True
    world.storage_class["parameters"]["subnetId"] = "${FSX_SUBNET:=subnet-0a1b2c3d4e5f60718}"


@case("flux-substitution-invalid", FAIL, (FLUX_INFRASTRUCTURE, "spec.postBuild.substitute.fsx.subnet"))
def variable_name_flux_refuses(world):
    world.kustomization("infrastructure")["spec"]["postBuild"]["substitute"] = {"fsx.subnet": "subnet-0a1b2c3d"}


@case("flux-substitution-invalid", FAIL, (FSX_CLASS, ""))
def value_that_breaks_the_yaml(world):
    world.kustomization("infrastructure")["spec"]["postBuild"]["substitute"] = {"SUBNET_NOTE": "zone: a"}
    world.storage_class["parameters"]["subnetNote"] = "${SUBNET_NOTE}"


@case("flux-substitution-invalid", PASS)
def every_form_flux_reads(world):
    parameters = world.storage_class["parameters"]
    parameters["subnetId"] = "${FSX_SUBNET_ID:=subnet-0a1b2c3d4e5f60718}"
    parameters["securityGroupIds"] = "${FSX_SECURITY_GROUP_ID:-sg-0123456789abcdef0}$${literal} ${#FSX_SUBNET_ID}"


@case("hpa-on-gpu", PASS)
def hpa_on_cpu(world):
    world.add("training", _hpa("autoscaling/v2", "cpu"))


@case("placeholder-value", FAIL, (FSX_CLASS, "parameters.subnetId"))
def subnet_placeholder(world):
    world.storage_class["parameters"]["subnetId"] = "subnet-REPLACE-ME"


@case("placeholder-value", PASS)
def real_subnet(world):
    pass


@case(
    "placeholder-value",
    FAIL,
    (JOB, f"{WORKER}.containers.0.env.0.value"),
    (JOB, f"{WORKER}.containers.0.env.1.value"),
    (JOB, f"{WORKER}.containers.0.env.2.value"),
    (JOB, f"{WORKER}.containers.0.env.3.value"),
    (JOB, f"{WORKER}.containers.0.env.4.value"),
    (FSX_CLASS, "parameters.securityGroupIds"),
)
def placeholders_of_other_spellings(world):
    world.container("Worker")["env"] = [
        {"name": "ROLE_ARN", "value": "arn:aws:iam::<account-id>:role/trainer"},
        {"name": "BUCKET", "value": "PLACEHOLDER_BUCKET"},
        {"name": "KMS_KEY", "value": "arn:aws:kms:us-west-2:xxxxxxxxxxxx:key/abc"},
        {"name": "RUN_NAME", "value": "changeme"},
        {"name": "WANDB_PROJECT", "value": "TODO"},
    ]
    world.storage_class["parameters"]["securityGroupIds"] = "sg-CHANGE_ME"


@case("placeholder-value", PASS)
def values_that_only_look_like_placeholders(world):
    world.container("Worker")["env"] = [
        {"name": "IMAGE_TAG", "value": "v1.2"},
        {"name": "HOST", "value": "boxxx.example.com"},
        {"name": "APP", "value": "todo-app"},
        {"name": "MAX", "value": "xxx"},
        {"name": "SHELL_REDIRECT", "value": "cat <<EOF > out.txt"},
        {"name": "EXPLAIN", "value": "use replacement text, not placeholders"},
    ]
    sops_secret(world)
    world.find("Secret", "wandb")["data"]["api-key"] = "ENC[AES256_GCM,data:a/xxxx+TODO,type:str]"


@case("placeholder-value", PASS)
def field_documentation_of_a_crd(world):
    # As in Flux's gotk-components.yaml: the schema documents a format with angle-bracket words.
    crd = _custom_resource_definition("example.com", "Widget", "widgets")
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"]["properties"]["size"]["description"] = "In the form of '<algorithm>:<checksum>'."
    world.add("infrastructure", crd)


@case("placeholder-value", FAIL, ("CustomResourceDefinition/widgets.example.com", "metadata.labels.owner"))
def placeholder_in_a_crd_outside_its_schema(world):
    crd = _custom_resource_definition("example.com", "Widget", "widgets")
    crd["metadata"]["labels"] = {"owner": "REPLACE-ME"}
    world.add("infrastructure", crd)


def _restricted_pods(world) -> None:
    """The training namespace enforces restricted, and both MPIJob pods meet it."""
    world.find("Namespace", "training")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "restricted"
    for role in ("Launcher", "Worker"):
        pod = world.pod(role)
        pod["securityContext"] = {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}
        for container in pod["containers"] + pod.get("initContainers", []):
            container["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


@case(
    "pod-security-violation",
    FAIL,
    (JOB, f"{WORKER}.containers.0.securityContext.capabilities.add"),
    (JOB, f"{WORKER}.volumes.2.hostPath"),
)
def efa_worker_adds_ipc_lock_and_mounts_the_host_under_baseline(world):
    world.container("Worker")["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    world.pod("Worker")["volumes"].append({"name": "nccl-logs", "hostPath": {"path": "/var/log/nccl"}})


@case(
    "pod-security-violation",
    FAIL,
    (JOB, f"{WORKER}.containers.0.securityContext.runAsUser"),
    (JOB, f"{LAUNCHER}.securityContext.seccompProfile"),
)
def root_worker_and_launcher_without_seccomp_under_restricted(world):
    _restricted_pods(world)
    world.container("Worker")["securityContext"]["runAsUser"] = 0
    del world.pod("Launcher")["securityContext"]["seccompProfile"]


@case("pod-security-violation", PASS)
def hardened_pods_under_restricted(world):
    _restricted_pods(world)


@case("pod-security-violation", PASS)
def privileged_pod_where_nothing_is_enforced(world):
    del world.find("Namespace", "training")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    world.container("Worker")["securityContext"] = {"privileged": True}


def _data(name: str, data: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "training"}, "data": data}


@case("object-name-invalid", FAIL, ("ConfigMap/training/Run_Settings", "metadata.name"))
def config_map_with_upper_case_and_underscore(world):
    world.add("training", _data("Run_Settings", {"mode": "fast"}))


@case(
    "object-name-invalid",
    FAIL,
    ("Namespace/ml.training", "metadata.name"),
    ("Service/training/1st-workers", "metadata.name"),
)
def namespace_with_a_dot_and_service_starting_with_a_digit(world):
    world.add("training", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml.training"}})
    world.add("training", _service("1st-workers"))


@case("object-name-invalid", FAIL, ("StorageClass/2024", "metadata.name"))
def name_that_yaml_reads_as_a_number(world):
    world.storage_class["metadata"]["name"] = 2024


@case("object-name-invalid", PASS)
def dotted_names_where_subdomains_are_allowed(world):
    world.add("training", _data("run.settings-v1", {"mode": "fast"}), _service("workers-1st"))
    world.add(
        "training",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "system:training:reader"},
            "rules": [],
        },
    )


@case("object-too-large", FAIL, ("ConfigMap/training/dataset", "data"))
def config_map_of_two_mib(world):
    world.add("training", _data("dataset", {"rows.csv": "1,2,3\n" * (2 * 2**20 // 6)}))


@case("object-too-large", FAIL, ("CustomResourceDefinition/widgets.example.com", ""))
def custom_resource_definition_of_two_mib(world):
    crd = _custom_resource_definition("example.com", "Widget", "widgets")
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "A widget. " * (2 * 2**20 // 10)
    world.add("infrastructure", crd)


@case("object-too-large", PASS)
def config_map_just_under_one_mib(world):
    world.add("training", _data("dataset", {"rows.csv": "1,2,3\n" * (2**20 // 6 - 100)}))


@case("suppression-invalid", FAIL, (JOB, "metadata.annotations.validate.gitops/ignore-gpu-slots-mismatch"))
def suppression_without_reason(world):
    world.mpijob["metadata"]["annotations"] = {"validate.gitops/ignore-gpu-slots-mismatch": " "}


@case("suppression-invalid", FAIL, (JOB, "metadata.annotations.validate.gitops/ignore-gpu-slot-mismatch"))
def suppression_of_unknown_rule(world):
    world.mpijob["metadata"]["annotations"] = {"validate.gitops/ignore-gpu-slot-mismatch": "typo"}


@case("suppression-invalid", PASS)
def suppression_with_reason(world):
    world.mpijob["metadata"]["annotations"] = {"validate.gitops/ignore-gpu-slots-mismatch": "benchmark of 4 ranks"}


# --- Flux pruning (helper A) ---


@case("flux-prune-disabled-with-state", FAIL, ("Kustomization/flux-system/training", "spec.prune"))
def training_not_pruned(world):
    world.kustomization("training")["spec"]["prune"] = False


@case("flux-prune-disabled-with-state", PASS)
def only_jobs_are_not_pruned(world):
    world.kustomization("training")["spec"]["prune"] = False
    world.move("Namespace", "infrastructure")
    world.move("PersistentVolumeClaim", "infrastructure")


# --- node health: node auto repair and the EKS node monitoring agent ---

MONITORING_AGENT = "eks-node-monitoring-agent"


def _without_monitoring_agent(world) -> None:
    world.cluster["addons"] = [a for a in world.cluster["addons"] if a["name"] != MONITORING_AGENT]


def _monitoring_agent(world) -> dict:
    return next(a for a in world.cluster["addons"] if a["name"] == MONITORING_AGENT)


@case("node-repair-without-monitoring-agent", FAIL, (CLUSTER, "managedNodeGroups.1.nodeRepairConfig.enabled"))
def repair_on_and_no_agent(world):
    _without_monitoring_agent(world)


@case("node-repair-without-monitoring-agent", PASS)
def repair_on_and_the_agent_from_its_chart(world):
    _without_monitoring_agent(world)
    world.add("infrastructure", _helm_release(MONITORING_AGENT, MONITORING_AGENT))


@case("node-repair-without-monitoring-agent", PASS)
def repair_off_and_no_agent(world):
    _without_monitoring_agent(world)
    world.gpu_group["nodeRepairConfig"]["enabled"] = False


@case("node-repair-without-monitoring-agent", PASS)
def repair_on_in_a_folder_of_manifests(world):
    """Only part of the environment is visible: the agent may come from elsewhere."""
    _without_monitoring_agent(world)
    world.complete = world.flux = False


@case("node-repair-without-monitoring-agent", PASS)
def repair_on_under_auto_mode(world):
    _without_monitoring_agent(world)
    world.cluster["autoModeConfig"] = {"enabled": True}


@case("node-monitoring-gpu-taint-not-tolerated", FAIL, (CLUSTER, "addons.4"))
def monitoring_agent_with_its_chart_defaults(world):
    del _monitoring_agent(world)["configurationValues"]


@case("node-monitoring-gpu-taint-not-tolerated", FAIL, (CLUSTER, "addons.4.configurationValues"))
def monitoring_agent_tolerating_another_key_in_yaml(world):
    _monitoring_agent(world)["configurationValues"] = (
        "dcgmAgent:\n  tolerations:\n    - {key: aws.amazon.com/efa, operator: Exists, effect: NoSchedule}\n"
    )


@case("node-monitoring-gpu-taint-not-tolerated", PASS)
def monitoring_agent_tolerating_everything_in_yaml(world):
    _monitoring_agent(world)["configurationValues"] = "dcgmAgent:\n  tolerations:\n    - operator: Exists\n"


@case("node-monitoring-gpu-taint-not-tolerated", PASS)
def monitoring_agent_with_unreadable_configuration(world):
    """eksctl refuses it (addon.go Validate); nothing is said about tolerations it cannot read."""
    _monitoring_agent(world)["configurationValues"] = "[not: a mapping"


@case("node-monitoring-gpu-taint-not-tolerated", PASS)
def monitoring_agent_on_an_untainted_gpu_group(world):
    del world.gpu_group["taints"]
    del _monitoring_agent(world)["configurationValues"]
