"""The files of one environment: its Flux entry points, its settings and its three overlays.

The template calls this for `dev` and `prod` when it generates the repository, and
`scripts/new-environment` for every later environment, so all environments have one shape and
every per-environment value is written here, once: into `overlays/<env>/settings.yaml`, which the
bases' `environment` components copy into place by name (overlays/base/*/environment). The bases
carry no environment's numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from ..core.errors import InputError
from ..facts import catalog, eks, fsx
from ..model import EFA, GPU, LOCAL_CONFIG_ANNOTATION, plural
from ..model.mpi import EFA_ENVIRONMENT, mpirun_command
from ..model.nodes import NODE_TEMPLATE_TAG
from ..model.substitution import CLUSTER_SETTINGS
from .answers import parse_efa

JOB = "horovod-train"
SETTINGS_API_VERSION = "gitops.local/v1alpha1"
SETTINGS_KIND = "EnvironmentSettings"
LUSTRE_VERSION = "2.15"
# How much of a node a whole-node worker asks for, leaving room for the kubelet and DaemonSets.
CPU_SHARE = (7, 8)
MEMORY_SHARE = (3, 4)


@dataclass(frozen=True)
class EnvironmentSpec:
    name: str
    cluster_prefix: str
    instance_type: str
    nodes: int
    efa: bool
    region: str
    availability_zone: str
    fsx_deployment_type: str = "SCRATCH_2"
    fsx_capacity_gib: int = 1200
    fsx_s3_import_path: str = ""
    delete_fsx_with_claim: bool = False
    capacity_reservation: str = ""  # cr-...: the GPU nodes launch into this reservation
    capacity_block: bool = False  # the reservation is a Capacity Block for ML
    spot: bool = False  # Spot instances (dev only; never with EFA)

    @classmethod
    def from_answers(
        cls, name: str, answers: dict, cluster_prefix: str, delete_fsx_with_claim: bool = False
    ) -> EnvironmentSpec:
        """An environment from the answers to the template's environment questions (keyed by question,
        checked by answers.check_environment_answers): prod's, or new-environment's options."""
        return cls(
            name=name,
            cluster_prefix=cluster_prefix,
            instance_type=answers["gpu_instance_type"],
            nodes=int(answers["gpu_node_count"]),
            efa=bool(parse_efa(answers["efa"], answers["gpu_instance_type"])[0]),
            region=answers["aws_region"],
            availability_zone=answers["availability_zone"],
            fsx_deployment_type=answers["fsx_deployment_type"],
            fsx_capacity_gib=int(answers["fsx_capacity_gib"]),
            fsx_s3_import_path=answers["fsx_s3_import_path"],
            delete_fsx_with_claim=delete_fsx_with_claim,
            capacity_reservation=answers.get("gpu_capacity_reservation", ""),
            capacity_block=answers.get("gpu_capacity_block", "no") == "yes",
            spot=bool(answers.get("spot", False)),
        )

    @property
    def instance(self) -> catalog.InstanceType:
        return catalog.INSTANCE_TYPES[self.instance_type]

    @property
    def cluster_name(self) -> str:
        return f"{self.cluster_prefix}-{self.name}"

    @property
    def processes(self) -> int:
        return self.nodes * self.instance.gpus


# --- what the MPIJobs of an environment ask for (the job generator uses these too) ---------------


def worker_resources(instance: catalog.InstanceType, gpus: int, efa: bool) -> dict:
    """Requests that leave room for system pods: 7/8 of the vCPUs and 3/4 of the memory."""
    memory = f"{instance.memory_gib * MEMORY_SHARE[0] // MEMORY_SHARE[1]}Gi"
    requests = {"cpu": str(instance.vcpus * CPU_SHARE[0] // CPU_SHARE[1]), "memory": memory, "nvidia.com/gpu": gpus}
    limits = {"memory": memory, "nvidia.com/gpu": gpus}
    if efa:
        requests["vpc.amazonaws.com/efa"] = limits["vpc.amazonaws.com/efa"] = instance.efa_interfaces
    return {"requests": requests, "limits": limits}


def shm_size(instance: catalog.InstanceType) -> str:
    return f"{min(instance.memory_gib // 8, 64)}Gi"


def launcher_exports(efa: bool) -> list[str]:
    """What mpirun passes to every rank: NCCL_DEBUG from the launcher's env (settings training.ncclDebug),
    the image's paths, and with EFA the EFA environment and no huge pages (none are reserved on the
    nodes, and libfabric would ask for them)."""
    exports = ["NCCL_DEBUG", "LD_LIBRARY_PATH", "PATH"]
    if efa:
        exports += [f"{name}={value}" for name, value in EFA_ENVIRONMENT.items()]
        exports.append("FI_EFA_USE_HUGE_PAGE=0")
    return exports


# --- the settings ---------------------------------------------------------------------------------


def fsx_parameters(spec: EnvironmentSpec) -> dict:
    """The fsx-lustre StorageClass's parameters (all strings, as the CSI driver reads them)."""
    parameters = {
        "subnetId": "${FSX_SUBNET_ID}",
        "securityGroupIds": "${FSX_SECURITY_GROUP_ID}",
        "deploymentType": spec.fsx_deployment_type,
        "fileSystemTypeVersion": LUSTRE_VERSION,
    }
    throughput = fsx.DEFAULT_THROUGHPUT.get(spec.fsx_deployment_type)
    if throughput:
        parameters["perUnitStorageThroughput"] = str(throughput)
    if spec.fsx_s3_import_path:
        parameters["s3ImportPath"] = spec.fsx_s3_import_path
        parameters["autoImportPolicy"] = "NEW_CHANGED"
    return parameters


def capacity_options(spec: EnvironmentSpec) -> dict:
    """The gpu group's purchasing options, eksctl v0.230.0's fields (pkg/apis/eksctl.io/v1alpha5, the
    ManagedNodeGroup's capacityReservation, instanceMarketOptions and spot). A reservation lives in
    one zone and has the instance type it was bought for."""
    options = {}
    if spec.capacity_reservation:
        target = {"capacityReservationID": spec.capacity_reservation}
        options["capacityReservation"] = {"capacityReservationTarget": target}
    if spec.capacity_block:
        options["instanceMarketOptions"] = {"marketType": "capacity-block"}
    if spec.spot:
        options["spot"] = True
    return options


def autoscaler_tags(instance: catalog.InstanceType, efa: bool) -> dict[str, str]:
    """The gpu group's node-template tags, so Cluster Autoscaler can scale it up from zero: its labels
    and taint as overlays/base/eksctl gives them (eksctl propagates the taint without its effect, which
    the autoscaler ignores), and the EFA interfaces, which it cannot know from the instance type."""
    tags = {
        f"{NODE_TEMPLATE_TAG}/label/role": "gpu",
        f"{NODE_TEMPLATE_TAG}/label/nvidia.com/gpu.present": "true",
        f"{NODE_TEMPLATE_TAG}/label/k8s.amazonaws.com/accelerator": "nvidia",
        f"{NODE_TEMPLATE_TAG}/taint/nvidia.com/gpu": "true:NoSchedule",
    }
    if efa:
        tags[f"{NODE_TEMPLATE_TAG}/resources/{EFA}"] = str(instance.efa_interfaces)
    return tags


# The queue's system flavor holds launchers (500m and 1Gi each, overlays/base/training/mpijob.yaml):
# room for 16 at once, well inside the system node group.
LAUNCHER_QUOTA = {"cpu": 8, "memory": "16Gi"}


def queue_resource_groups(spec: EnvironmentSpec) -> list[dict]:
    """The ClusterQueue's quota: launchers on the system flavor, and on the gpu flavor everything the
    gpu group holds at maxSize, so a job is admitted only when its nodes can all exist."""
    instance = spec.instance
    gpu_quota = {
        "cpu": instance.vcpus * spec.nodes,
        "memory": f"{instance.memory_gib * spec.nodes}Gi",
        GPU: instance.gpus * spec.nodes,
    }
    if spec.efa:
        gpu_quota[EFA] = instance.efa_interfaces * spec.nodes
    system_quota = {name: LAUNCHER_QUOTA.get(name, 0) for name in gpu_quota}

    def resources(quota: dict) -> list[dict]:
        return [{"name": name, "nominalQuota": value} for name, value in quota.items()]

    return [
        {
            "coveredResources": list(gpu_quota),
            "flavors": [
                {"name": "system", "resources": resources(system_quota)},
                {"name": "gpu", "resources": resources(gpu_quota)},
            ],
        }
    ]


def s3_list_policy(s3_path: str) -> dict:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [f"arn:aws:s3:::{fsx.s3_bucket(s3_path)}"]}
        ],
    }


def settings(spec: EnvironmentSpec) -> dict:
    """The EnvironmentSettings object: every value that makes this environment differ from the bases."""
    instance = spec.instance
    zones = [spec.availability_zone, eks.second_zone(spec.region, spec.availability_zone)]
    storage = {
        "parameters": fsx_parameters(spec),
        "reclaimPolicy": "Delete" if spec.delete_fsx_with_claim else "Retain",
        "storage": f"{spec.fsx_capacity_gib}Gi",
    }
    if spec.fsx_s3_import_path:
        storage["controllerPolicy"] = s3_list_policy(spec.fsx_s3_import_path)
    return {
        "apiVersion": SETTINGS_API_VERSION,
        "kind": SETTINGS_KIND,
        "metadata": {"name": spec.name, "annotations": {LOCAL_CONFIG_ANNOTATION: "true"}},
        "cluster": {
            "name": spec.cluster_name,
            "region": spec.region,
            "availabilityZones": zones,
            "eksImageRegistry": eks.eks_image_registry(spec.region),
        },
        "gpuNodeGroup": {
            "instanceType": spec.instance_type,
            "availabilityZones": [spec.availability_zone],
            "desiredCapacity": 0,
            "maxSize": spec.nodes,
            "efaEnabled": spec.efa,
            "tags": autoscaler_tags(instance, spec.efa),
            **capacity_options(spec),
        },
        "fsx": storage,
        "queue": {"resourceGroups": queue_resource_groups(spec)},
        "training": {
            "workers": spec.nodes,
            "slotsPerWorker": instance.gpus,
            "launcherCommand": mpirun_command(spec.processes, launcher_exports(spec.efa)),
            "ncclDebug": "WARN",
            "workerResources": worker_resources(instance, instance.gpus, spec.efa),
            "sharedMemory": shm_size(instance),
        },
    }


class _Dumper(yaml.SafeDumper):
    """Block style with sequences indented under their key, like the repository's other files."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def _dump(value: dict) -> str:
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)


def settings_text(spec: EnvironmentSpec) -> str:
    document = settings(spec)
    instance = spec.instance
    efa = f"EFA on ({instance.efa_interfaces} per node)" if spec.efa else "EFA off"
    sections = {
        "cluster": (
            "# eksctl ClusterConfig. The control plane needs two zones; GPU nodes and FSx live in the first.\n"
            "# eksImageRegistry: Amazon EKS's image registry in the region (the EFA device plugin's image)."
        ),
        "gpuNodeGroup": (
            "# The managed node group gpu: one MPI worker per node. It starts empty and Cluster Autoscaler\n"
            "# grows it to at most maxSize while jobs wait (tags: what the autoscaler needs to know about\n"
            "# its nodes then). With efaEnabled eksctl also makes a cluster placement group, which is why\n"
            "# the group stays in one zone."
        ),
        "fsx": (
            "# FSx for Lustre: StorageClass fsx-lustre and claim fsx-training. Flux fills in the subnet (in\n"
            f"# {spec.availability_zone}) and the security group from the cluster's {CLUSTER_SETTINGS} ConfigMap,\n"
            f"# which `scripts/cluster-settings --env {spec.name}` writes after `eksctl create cluster`\n"
            "# (docs/operations.md). The parameters cannot change once the class exists."
        ),
        "queue": (
            "# Kueue's ClusterQueue training: launchers on the system nodes, and what the gpu group holds at\n"
            "# maxSize on the GPU nodes. A job waits until all its pods fit; keep it in step with gpuNodeGroup."
        ),
        "training": (
            f"# MPIJob {JOB}: -np = workers x slotsPerWorker; launcherCommand is mpirun with its options\n"
            "# (the job's args are the program and its flags, in overlays/base/training). ncclDebug: NCCL's\n"
            "# log level in every job; INFO for a first run shows which network NCCL uses (docs/operations.md)."
        ),
    }
    header = (
        f"---\n# {spec.name}: {spec.nodes} x {spec.instance_type} ({plural(instance.gpus, 'GPU')} each), {efa}, "
        f"FSx {spec.fsx_deployment_type} {spec.fsx_capacity_gib} GiB.\n"
        "# Every value that makes this environment differ from overlays/base. Kustomize reads this file but\n"
        "# never emits it (local-config); the bases' environment components copy each value into place by\n"
        "# name. scripts/new-environment writes it; change it by pull request like any manifest.\n"
    )
    identity = {key: document[key] for key in ("apiVersion", "kind", "metadata")}
    text = header + _dump(identity)
    for key, comment in sections.items():
        text += comment + "\n" + _dump({key: document[key]})
    return text


# --- the files ------------------------------------------------------------------------------------


def _flux_entry_points(spec: EnvironmentSpec) -> dict[str, str]:
    return {
        f"clusters/{spec.name}/infrastructure.yaml": f"""---
# Controllers and cluster-wide objects: device plugins, the FSx CSI driver and its
# StorageClass, the MPI operator. wait: Ready only when all of them are healthy.
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: infrastructure
  namespace: flux-system
spec:
  interval: 1h
  retryInterval: 2m
  timeout: 15m
  sourceRef:
    kind: GitRepository
    name: flux-system
  path: ./overlays/{spec.name}/infrastructure
  prune: true
  wait: true
  # Per-cluster values (the FSx subnet and security group): scripts/cluster-settings writes them.
  postBuild:
    substituteFrom:
      - kind: ConfigMap
        name: {CLUSTER_SETTINGS}
""",
        f"clusters/{spec.name}/training.yaml": f"""---
# The training namespace, its FSx claim and MPIJobs. Applied only after infrastructure is
# Ready, so the MPIJob CRD and the StorageClass exist. No wait: a training job is not a
# service that becomes Ready.
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: training
  namespace: flux-system
spec:
  dependsOn:
    - name: infrastructure
  interval: 1h
  retryInterval: 2m
  timeout: 5m
  sourceRef:
    kind: GitRepository
    name: flux-system
  path: ./overlays/{spec.name}/training
  prune: true
  wait: false
""",
    }


def _kustomization(comment: str, resources: list[str], components: list[str]) -> str:
    lines = [
        "---",
        *(f"# {line}" for line in comment.splitlines()),
        "apiVersion: kustomize.config.k8s.io/v1beta1",
        "kind: Kustomization",
        "resources:",
    ]
    lines += [f"  - {resource}" for resource in resources]
    lines += ["components:"] + [f"  - {component}" for component in components]
    return "\n".join(lines) + "\n"


def _overlays(spec: EnvironmentSpec) -> dict[str, str]:
    folder = f"overlays/{spec.name}"
    eksctl_components = ["../../base/eksctl/environment"]
    if spec.fsx_s3_import_path:
        eksctl_components.append("../../base/eksctl/fsx-s3-import")
    for option, component in (
        (spec.capacity_reservation, "capacity-reservation"),
        (spec.capacity_block, "capacity-block"),
        (spec.spot, "spot"),
    ):
        if option:
            eksctl_components.append(f"../../base/eksctl/{component}")
    plugins = ["../../base/device-plugins/nvidia"] + (["../../base/device-plugins/efa"] if spec.efa else [])
    components = [
        *(["../../base/device-plugins/efa/environment"] if spec.efa else []),
        "../../base/fsx-csi/environment",
        "../../base/cluster-autoscaler/environment",
    ]
    return {
        f"{folder}/settings.yaml": settings_text(spec),
        f"{folder}/eksctl/kustomization.yaml": _kustomization(
            "The eksctl ClusterConfig, never applied by Flux (.sourceignore keeps it out). Create the cluster with\n"
            f"  scripts/render --env {spec.name} && eksctl create cluster -f rendered/{spec.name}/eksctl.yaml",
            ["../../base/eksctl", "../settings.yaml"],
            eksctl_components,
        ),
        f"{folder}/infrastructure/kustomization.yaml": _kustomization(
            "Device plugins, the FSx CSI driver with its StorageClass, the MPI operator, Cluster Autoscaler, Kueue.",
            [
                *plugins,
                "../../base/fsx-csi",
                "../../base/mpi-operator",
                "../../base/cluster-autoscaler",
                "../../base/kueue",
                "../settings.yaml",
            ],
            components,
        ),
        f"{folder}/training/kustomization.yaml": _kustomization(
            "The training namespace, its FSx claim and MPIJobs (scripts/new-job adds more).",
            ["../../base/training", "../settings.yaml"],
            ["../../base/training/environment"],
        ),
    }


def environment_files(spec: EnvironmentSpec) -> dict[str, str]:
    return {**_flux_entry_points(spec), **_overlays(spec)}


def readme_row(spec: EnvironmentSpec) -> str:
    """The environment's row in the README's table of environments."""
    instance = spec.instance
    gpus = f"{plural(instance.gpus, 'GPU')} each"
    nodes = f"{spec.nodes} x {spec.instance_type}" + (" Spot" if spec.spot else "")
    efa = f"on ({instance.efa_interfaces} interfaces per node)" if spec.efa else "off"
    storage = f"{spec.fsx_deployment_type}, {spec.fsx_capacity_gib} GiB"
    if spec.fsx_s3_import_path:
        storage += f", imports {spec.fsx_s3_import_path}"
    storage += ", deleted with its claim" if spec.delete_fsx_with_claim else ", kept when the claim is deleted"
    return f"| `{spec.name}` | `{spec.cluster_name}` | {nodes} ({gpus}) | {efa} | {storage} |"


# --- an environment read back from its settings (scripts/scale) ------------------------------------


_KINDS = {str: "a string", int: "a whole number", bool: "true or false", list: "a list", dict: "a mapping"}


def _field(document: object, path: str, kind: type, default: object = None):
    """The value at `path` (dotted keys) of the settings, of type `kind`; `default` when it is absent and a
    default is given. InputError names the field otherwise."""
    value = document
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            if default is not None:
                return default
            raise InputError(f"{path} is missing")
        value = value[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InputError(f"{path} is {value!r}, not {_KINDS[kind]} as new-environment writes it")
    return value


def _gib(text: str, path: str) -> int:
    if not text.endswith("Gi") or not text[:-2].isascii() or not text[:-2].isdigit():
        raise InputError(f"{path} is {text!r}, not a number of Gi as new-environment writes it")
    return int(text[:-2])


def spec_from_settings(name: str, document: object) -> EnvironmentSpec:
    """The EnvironmentSpec whose settings() `document` is (an environment's settings.yaml, loaded): what
    settings() writes from each of the spec's fields, read back. InputError names a field that is missing or
    not of the shape settings() writes."""
    cluster_name = _field(document, "cluster.name", str)
    if not cluster_name.endswith(f"-{name}"):
        raise InputError(f"cluster.name is {cluster_name!r}, not <prefix>-{name} as new-environment writes it")
    zones = _field(document, "gpuNodeGroup.availabilityZones", list)
    if not zones or not isinstance(zones[0], str):
        raise InputError(f"gpuNodeGroup.availabilityZones is {zones!r}, not a list of one zone")
    market = _field(document, "gpuNodeGroup.instanceMarketOptions.marketType", str, "")
    return EnvironmentSpec(
        name=name,
        cluster_prefix=cluster_name.removesuffix(f"-{name}"),
        instance_type=_field(document, "gpuNodeGroup.instanceType", str),
        nodes=_field(document, "gpuNodeGroup.maxSize", int),
        efa=_field(document, "gpuNodeGroup.efaEnabled", bool, False),
        region=_field(document, "cluster.region", str),
        availability_zone=zones[0],
        fsx_deployment_type=_field(document, "fsx.parameters.deploymentType", str),
        fsx_capacity_gib=_gib(_field(document, "fsx.storage", str), "fsx.storage"),
        fsx_s3_import_path=_field(document, "fsx.parameters.s3ImportPath", str, ""),
        delete_fsx_with_claim=_field(document, "fsx.reclaimPolicy", str) == "Delete",
        capacity_reservation=_field(
            document, "gpuNodeGroup.capacityReservation.capacityReservationTarget.capacityReservationID", str, ""
        ),
        capacity_block=market == "capacity-block",
        spot=_field(document, "gpuNodeGroup.spot", bool, False),
    )
