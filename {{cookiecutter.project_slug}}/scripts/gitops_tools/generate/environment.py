"""The files of one environment: its Flux entry points and its three overlays.

The template calls this for `dev` and `prod` when it generates the repository, and
`scripts/new-environment` calls it for every later environment, so all environments have the
same shape: they differ only in the values below, written as patches of overlays/base.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import catalog, eks, fsx

# Index of "python" in the base MPIJob's launcher args: mpirun options go before it.
LAUNCHER_PROGRAM_INDEX = 13
JOB = "horovod-train"


@dataclass(frozen=True)
class EnvironmentSpec:
    name: str
    cluster_prefix: str
    instance_type: str
    nodes: int
    efa: bool
    region: str
    availability_zone: str
    base_region: str
    fsx_deployment_type: str = "SCRATCH_2"
    fsx_capacity_gib: int = 1200
    fsx_s3_import_path: str = ""
    delete_fsx_with_claim: bool = False

    @property
    def instance(self) -> catalog.InstanceType:
        return catalog.INSTANCE_TYPES[self.instance_type]


def worker_resources(instance: catalog.InstanceType, gpus: int, efa: bool) -> dict:
    """Requests that leave room for system pods: 7/8 of the vCPUs and 3/4 of the memory."""
    memory = f"{instance.memory_gib * 3 // 4}Gi"
    requests = {"cpu": str(instance.vcpus * 7 // 8), "memory": memory, "nvidia.com/gpu": gpus}
    limits = {"memory": memory, "nvidia.com/gpu": gpus}
    if efa:
        requests["vpc.amazonaws.com/efa"] = limits["vpc.amazonaws.com/efa"] = instance.efa_interfaces
    return {"requests": requests, "limits": limits}


def shm_size(instance: catalog.InstanceType) -> str:
    return f"{min(instance.memory_gib // 8, 64)}Gi"


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


def _eksctl(spec: EnvironmentSpec) -> dict[str, str]:
    zones = [spec.availability_zone, eks.second_zone(spec.region, spec.availability_zone)]
    return {f"overlays/{spec.name}/eksctl/kustomization.yaml": f"""---
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../base/eksctl
# {spec.name}: {spec.nodes} x {spec.instance_type}, EFA {'on' if spec.efa else 'off'}. eksctl's schema is not a
# Kubernetes one, so node groups are patched by index (0 = system, 1 = gpu).
patches:
  - target:
      kind: ClusterConfig
    patch: |-
      - op: replace
        path: /metadata/name
        value: {spec.cluster_prefix}-{spec.name}
      - op: replace
        path: /metadata/region
        value: {spec.region}
      - op: replace
        path: /availabilityZones
        value: [{zones[0]}, {zones[1]}]
      - op: replace
        path: /managedNodeGroups/1/instanceType
        value: {spec.instance_type}
      - op: replace
        path: /managedNodeGroups/1/availabilityZones
        value: [{spec.availability_zone}]
      - op: replace
        path: /managedNodeGroups/1/desiredCapacity
        value: {spec.nodes}
      - op: replace
        path: /managedNodeGroups/1/maxSize
        value: {spec.nodes}
      - op: replace
        path: /managedNodeGroups/1/efaEnabled
        value: {'true' if spec.efa else 'false'}
"""}


def _storage_class(spec: EnvironmentSpec) -> str:
    throughput = fsx.DEFAULT_THROUGHPUT.get(spec.fsx_deployment_type)
    throughput_value = f'"{throughput}"' if throughput else "null"
    s3 = spec.fsx_s3_import_path
    lines = [
        "---",
        f"# Fill in before the first sync: a subnet of the {spec.name} cluster's VPC in",
        f"# {spec.availability_zone} and a security group that allows TCP 988 and 1018-1023 from the nodes.",
        "apiVersion: storage.k8s.io/v1",
        "kind: StorageClass",
        "metadata:",
        "  name: fsx-lustre",
        "parameters:",
        f"  subnetId: subnet-REPLACE-ME-{spec.name}",
        f"  securityGroupIds: sg-REPLACE-ME-{spec.name}",
        f"  deploymentType: {spec.fsx_deployment_type}",
        f"  perUnitStorageThroughput: {throughput_value}",
        f"  s3ImportPath: {s3 or 'null'}",
        f"  autoImportPolicy: {'NEW_CHANGED' if s3 else 'null'}",
    ]
    if spec.delete_fsx_with_claim:
        lines += ["# Throwaway environment: deleting the claim deletes the file system.", "reclaimPolicy: Delete"]
    return "\n".join(lines) + "\n"


def _infrastructure(spec: EnvironmentSpec) -> dict[str, str]:
    folder = f"overlays/{spec.name}/infrastructure"
    resources = ["../../base/device-plugins/nvidia"]
    if spec.efa:
        resources.append("../../base/device-plugins/efa")
    resources += ["../../base/fsx-csi", "../../base/mpi-operator"]
    patches = "  - path: storageclass.yaml\n"
    if spec.region != spec.base_region:
        patches += f"""  - target:
      kind: HelmRelease
      name: aws-fsx-csi-driver
    patch: |-
      - op: replace
        path: /spec/values/controller/region
        value: {spec.region}
"""
    kustomization = "---\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
    kustomization += "".join(f"  - {r}\n" for r in resources) + "patches:\n" + patches
    return {f"{folder}/kustomization.yaml": kustomization, f"{folder}/storageclass.yaml": _storage_class(spec)}


def _yaml_value(value, indent: int) -> str:
    pad = " " * indent
    if isinstance(value, dict):
        return "".join(f"\n{pad}{key}:{_yaml_value(item, indent + 2)}" for key, item in value.items())
    if isinstance(value, str) and value.isdigit():
        return f' "{value}"'
    return f" {value}"


def mpijob_patch(spec: EnvironmentSpec) -> str:
    """JSON patch of the base MPIJob: whole GPU nodes as workers, -np = workers x GPUs."""
    instance = spec.instance
    base = "/spec/mpiReplicaSpecs"
    ops = [
        "---",
        f"# {spec.name}: {spec.nodes} worker(s) x {instance.gpus} GPU(s) on {spec.instance_type}"
        + (f", {instance.efa_interfaces} EFA interface(s) each." if spec.efa else "."),
        f"- op: replace\n  path: /spec/slotsPerWorker\n  value: {instance.gpus}",
        f"- op: replace\n  path: {base}/Worker/replicas\n  value: {spec.nodes}",
        "# -np = workers x slotsPerWorker",
        f"- op: replace\n  path: {base}/Launcher/template/spec/containers/0/args/1\n"
        f"  value: \"{spec.nodes * instance.gpus}\"",
        f"- op: replace\n  path: {base}/Worker/template/spec/containers/0/resources\n  value:"
        + _yaml_value(worker_resources(instance, instance.gpus, spec.efa), 4),
        f"- op: replace\n  path: {base}/Worker/template/spec/volumes/1/emptyDir/sizeLimit\n  value: {shm_size(instance)}",
    ]
    if spec.efa:
        ops += [
            "# mpirun options go before \"python\"; without huge pages reserved on the node,",
            "# libfabric must not ask for them.",
            f"- op: add\n  path: {base}/Launcher/template/spec/containers/0/args/{LAUNCHER_PROGRAM_INDEX}\n  value: -x",
            f"- op: add\n  path: {base}/Launcher/template/spec/containers/0/args/{LAUNCHER_PROGRAM_INDEX + 1}\n"
            "  value: FI_EFA_USE_HUGE_PAGE=0",
        ]
    return "\n".join(ops) + "\n"


def _training(spec: EnvironmentSpec) -> dict[str, str]:
    folder = f"overlays/{spec.name}/training"
    return {
        f"{folder}/kustomization.yaml": f"""---
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../base/training
patches:
  - path: pvc.yaml
  - path: mpijob.yaml
    target:
      kind: MPIJob
      name: {JOB}
""",
        f"{folder}/pvc.yaml": f"""---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: fsx-training
  namespace: training
spec:
  resources:
    requests:
      storage: {spec.fsx_capacity_gib}Gi
""",
        f"{folder}/mpijob.yaml": mpijob_patch(spec),
    }


def environment_files(spec: EnvironmentSpec) -> dict[str, str]:
    return {**_flux_entry_points(spec), **_eksctl(spec), **_infrastructure(spec), **_training(spec)}
