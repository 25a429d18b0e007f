"""FSx for Lustre and volume rules: StorageClass parameters, claim sizes, who mounts what."""

from __future__ import annotations

import math
import re

from ..facts import fsx
from ..model import GPU, Scope, mapping, plural, quantity, selects, sequence, untolerated
from ..model.fields import text
from ..model.placement import largest, other_capacity
from ..model.plugins import FSX_CSI_DRIVER, gpu_groups, plugin_daemonsets
from .registry import Finding, category

rule = category("FSx for Lustre")

PROVISIONER = "fsx.csi.aws.com"
# StorageClasses an EKS cluster has without GitOps, and their provisioners.
_CLUSTER_STORAGE_CLASSES = {"gp2": "kubernetes.io/aws-ebs"}
# Drivers whose volumes attach to one node at a time (their CSIDriver has attachRequired: true): the EBS CSI driver,
# which serves the in-tree EBS provisioner through CSI migration. The FSx and EFS drivers attach nothing
# (aws-fsx-csi-driver chart 1.17.0, templates/csidriver.yaml: attachRequired: false), so every node mounts them.
_ATTACHING_PROVISIONERS = ("ebs.csi.aws.com", "kubernetes.io/aws-ebs")


def storage_classes(scope: Scope) -> dict[str, object]:
    return {m.name: m for m in scope.of("StorageClass", "storage.k8s.io")}


def fsx_classes(scope: Scope):
    return [m for m in storage_classes(scope).values() if m.doc.get("provisioner") == PROVISIONER]


def parameters(storage_class) -> dict:
    return {str(k): ("" if v is None else str(v)) for k, v in mapping(storage_class.doc, "parameters").items()}


def claims(scope: Scope):
    return scope.of("PersistentVolumeClaim", "")


def _deployment_type(params: dict) -> str:
    return params.get("deploymentType") or "SCRATCH_1"  # the FSx API's default


_WHOLE = re.compile(r"[0-9]{1,18}")  # ASCII only: str.isdigit() takes '²', which int() refuses


def _throughput(params: dict) -> int | None:
    """perUnitStorageThroughput as a number; None when unset or not a whole number."""
    value = params.get("perUnitStorageThroughput", "")
    return int(value) if _WHOLE.fullmatch(value) else None


@rule(
    "storage-class-missing",
    "error",
    requires=("environment",),
    premise="The whole environment is visible, and a PersistentVolumeClaim names a StorageClass that neither it nor "
    "EKS defines and that no PersistentVolume of the environment carries.",
    consequence="job",
    description="A PersistentVolumeClaim names a StorageClass the environment does not define",
    remediation="Define the StorageClass in the environment's infrastructure overlay, or fix storageClassName.",
    docs="""A claim whose StorageClass does not exist is never provisioned: it stays Pending, and so do the pods
      that mount it. EKS itself only provides `gp2`. A claim bound to a PersistentVolume written beside it
      (static provisioning) needs only the class name they share, not a StorageClass object. Outside a whole
      environment the class may exist in the cluster, so nothing is said.""",
)
def storage_class_missing(scope: Scope):
    known = set(storage_classes(scope)) | set(_CLUSTER_STORAGE_CLASSES)
    known |= {text(v.doc, "spec", "storageClassName") for v in scope.of("PersistentVolume", "")}
    for claim in claims(scope):
        name = text(claim.doc, "spec", "storageClassName")
        if name and name not in known:
            yield Finding(
                claim, f"StorageClass {name!r} is not defined in this environment", ("spec", "storageClassName")
            )


@rule(
    "fsx-storage-class-invalid",
    "error",
    premise="A StorageClass of the FSx for Lustre CSI driver (provisioner fsx.csi.aws.com) is visible.",
    consequence="job",
    description="An FSx for Lustre StorageClass lacks a subnet or security groups, or sets invalid types",
    remediation="Set parameters.subnetId (one subnet in the GPU nodes' zone), parameters.securityGroupIds "
    "(allowing TCP 988 and 1018-1023) and a valid deploymentType and storageType.",
    docs="""The FSx CSI driver creates the file system in exactly one subnet with the given security groups
      (aws-fsx-csi-driver chart 1.17.0, pkg/cloud/cloud.go CreateFileSystem refuses no subnetId): with no subnet,
      or more than one, creation fails and the claim stays Pending; with no security group FSx takes the VPC's
      default one, which admits only its own members, so the nodes cannot mount it. deploymentType
      is one of SCRATCH_1, SCRATCH_2, PERSISTENT_1, PERSISTENT_2; HDD storage needs PERSISTENT_1 and a
      driveCacheType; Lustre 2.10 (`fileSystemTypeVersion`) is not offered for PERSISTENT_2; an EFA-enabled
      file system (`efaEnabled`) must be PERSISTENT_2 with a `metadataConfigurationMode`.""",
)
def fsx_storage_class_invalid(scope: Scope):
    for storage_class in fsx_classes(scope):
        params = parameters(storage_class)
        problems = []
        subnet = params.get("subnetId", "").strip()
        if not subnet:
            problems.append(("subnetId", "no subnetId"))
        elif "," in subnet:
            problems.append(("subnetId", f"subnetId lists several subnets ({subnet}); FSx takes one"))
        if not params.get("securityGroupIds", "").strip():
            problems.append(("securityGroupIds", "no securityGroupIds"))
        deployment = _deployment_type(params)
        if deployment not in fsx.DEPLOYMENT_TYPES:
            problems.append(
                ("deploymentType", f"deploymentType {deployment} is not one of {', '.join(fsx.DEPLOYMENT_TYPES)}")
            )
        storage = params.get("storageType", "SSD")
        if storage not in fsx.STORAGE_TYPES:
            problems.append(("storageType", f"storageType {storage} is not one of {', '.join(fsx.STORAGE_TYPES)}"))
        if storage == "HDD" and deployment != "PERSISTENT_1":
            problems.append(("storageType", f"HDD storage needs PERSISTENT_1, not {deployment}"))
        if storage == "HDD" and params.get("driveCacheType") not in ("NONE", "READ"):
            problems.append(("driveCacheType", "HDD storage needs driveCacheType NONE or READ"))
        problems.extend(_lustre_version_problems(params, deployment))
        for key, message in problems:
            yield Finding(storage_class, message, ("parameters", key))


def _lustre_version_problems(params: dict, deployment: str) -> list[tuple[str, str]]:
    """Lustre 2.10 predates PERSISTENT_2; an EFA-enabled file system is PERSISTENT_2 with a metadata configuration."""
    problems = []
    if params.get("fileSystemTypeVersion") == "2.10" and deployment == "PERSISTENT_2":
        problems.append(("fileSystemTypeVersion", "fileSystemTypeVersion 2.10 does not exist for PERSISTENT_2"))
    if params.get("efaEnabled", "").lower() == "true":
        if deployment != "PERSISTENT_2":
            problems.append(("efaEnabled", f"efaEnabled needs PERSISTENT_2, not {deployment}"))
        if not params.get("metadataConfigurationMode"):
            problems.append(
                ("efaEnabled", "efaEnabled needs metadataConfigurationMode (AUTOMATIC or USER_PROVISIONED)")
            )
    return problems


@rule(
    "fsx-throughput-invalid",
    "error",
    premise="A StorageClass of the FSx for Lustre CSI driver is visible.",
    consequence="job",
    description="perUnitStorageThroughput does not fit the FSx deployment and storage type",
    remediation="Use 125, 250, 500 or 1000 for PERSISTENT_2, 50, 100 or 200 for PERSISTENT_1 SSD, 12 or 40 for "
    "PERSISTENT_1 HDD, and none for SCRATCH types.",
    docs="""FSx requires a per-unit throughput (MB/s per TiB) for persistent file systems, from a fixed list
      per type, and refuses one on scratch file systems. The driver passes the parameter through, so a wrong
      value fails at creation, after the sync.""",
)
def fsx_throughput_invalid(scope: Scope):
    for storage_class in fsx_classes(scope):
        params = parameters(storage_class)
        deployment = _deployment_type(params)
        if deployment not in fsx.DEPLOYMENT_TYPES:
            continue
        storage = params.get("storageType", "SSD")
        value = params.get("perUnitStorageThroughput", "")
        allowed = fsx.valid_throughputs(deployment, storage)
        if deployment in fsx.SCRATCH_TYPES:
            message = f"{deployment} takes no perUnitStorageThroughput (set to {value})" if value else None
        elif not value:
            message = f"{deployment} needs perUnitStorageThroughput, one of {', '.join(map(str, allowed))}"
        elif _throughput(params) not in allowed:
            message = (
                f"perUnitStorageThroughput {value} is not valid for {deployment} {storage}; "
                f"use one of {', '.join(map(str, allowed)) or 'none'}"
            )
        else:
            message = None
        if message:
            yield Finding(storage_class, message, ("parameters", "perUnitStorageThroughput"))


@rule(
    "fsx-s3-link-invalid",
    "error",
    premise="A StorageClass of the FSx for Lustre CSI driver links an S3 bucket (s3ImportPath, s3ExportPath or "
    "autoImportPolicy).",
    consequence="job",
    description="The StorageClass links S3 in a way the FSx deployment type does not support",
    remediation="Use s3ImportPath only with SCRATCH_1, SCRATCH_2 or PERSISTENT_1; set it whenever s3ExportPath "
    "or autoImportPolicy is set, with the export in the same bucket.",
    docs="""PERSISTENT_2 links S3 through data repository associations, which the CSI driver does not create,
      so the FSx API rejects s3ImportPath, s3ExportPath and autoImportPolicy there. Export and auto-import
      need an import path, and the export path must be in the import path's bucket.""",
)
def fsx_s3_link_invalid(scope: Scope):
    for storage_class in fsx_classes(scope):
        params = parameters(storage_class)
        deployment = _deployment_type(params)
        linked = [k for k in ("s3ImportPath", "s3ExportPath", "autoImportPolicy") if params.get(k)]
        if not linked:
            continue
        problems = []
        if not fsx.supports_s3_import(deployment):
            problems.append((linked[0], f"{deployment} cannot link S3 ({', '.join(linked)})"))
        imported = params.get("s3ImportPath", "")
        if not imported:
            problems.append((linked[0], f"{linked[0]} needs s3ImportPath"))
        elif fsx.s3_bucket(imported) is None:
            problems.append(("s3ImportPath", f"s3ImportPath {imported} is not s3://bucket[/prefix]"))
        exported = params.get("s3ExportPath", "")
        if imported and exported and fsx.s3_bucket(imported) and fsx.s3_bucket(exported) != fsx.s3_bucket(imported):
            problems.append(
                ("s3ExportPath", f"s3ExportPath {exported} is not in the import bucket {fsx.s3_bucket(imported)}")
            )
        for key, message in problems:
            yield Finding(storage_class, message, ("parameters", key))


def provisioned_gib(size_bytes: int, deployment: str, storage_type: str, throughput: int | None) -> int:
    """The capacity the FSx CSI driver creates for a claim of `size_bytes`: it rounds up to a size FSx
    accepts and refuses none (aws-fsx-csi-driver pkg/util/util.go RoundUpVolumeSize, the driver of Helm
    chart 1.17.0: HDD in units of 6000 GiB at 12 MB/s/TiB, else 1800; SCRATCH_1 in units of 1200 GiB below
    3600, then 3600; every other SSD type in units of 1200 GiB below 2400, then 2400)."""

    def units_of(gib: int) -> int:
        return -(-size_bytes // (gib * 2**30)) * gib  # ceiling division

    if storage_type == "HDD":
        return units_of(6000 if throughput == 12 else 1800)
    if deployment == "SCRATCH_1":
        return units_of(1200) if size_bytes < 3600 * 2**30 else units_of(3600)
    return units_of(1200) if size_bytes < 2400 * 2**30 else units_of(2400)


def _fsx_claims(scope: Scope):
    """(claim, its FSx StorageClass's parameters) for every claim of an FSx StorageClass of the scope."""
    classes = {c.name: c for c in fsx_classes(scope)}
    for claim in claims(scope):
        storage_class = classes.get(text(claim.doc, "spec", "storageClassName"))
        if storage_class is not None:
            yield claim, parameters(storage_class)


_SIZE = ("spec", "resources", "requests", "storage")


@rule(
    "fsx-capacity-invalid",
    "error",
    premise="A PersistentVolumeClaim of a visible FSx for Lustre StorageClass.",
    consequence="api-server",
    description="A claim of an FSx StorageClass requests no storage size, or one that is not a positive quantity",
    remediation="Request an exact FSx size under spec.resources.requests.storage: 1200Gi, 2400Gi or a multiple of "
    "3600Gi for SCRATCH_1; 1200Gi or a multiple of 2400Gi for SCRATCH_2 and PERSISTENT; multiples of 6000Gi or "
    "1800Gi for HDD.",
    docs="""The API server refuses a PersistentVolumeClaim without `spec.resources.requests.storage`, or with one that
      is not a positive quantity (kubernetes pkg/apis/core/validation ValidatePersistentVolumeClaimSpec), so Flux's
      apply of the whole Kustomization fails. A size the driver rounds up is fsx-capacity-rounded-up's.""",
)
def fsx_capacity_invalid(scope: Scope):
    for claim, _ in _fsx_claims(scope):
        requested = mapping(claim.doc, "spec", "resources", "requests").get("storage")
        if requested is None:
            yield Finding(claim, "the claim requests no storage size", ("spec", "resources"))
            continue
        size = quantity(requested)
        if size is None or size <= 0:
            yield Finding(claim, f"storage {requested} is not a positive size", _SIZE)


@rule(
    "fsx-capacity-rounded-up",
    "warning",
    premise="A PersistentVolumeClaim of a visible FSx for Lustre StorageClass requests a positive size.",
    consequence="cost",
    description="A claim's size is not a capacity FSx creates, so the driver rounds it up and bills the larger one",
    remediation="Request an exact FSx size: 1200Gi, 2400Gi or a multiple of 3600Gi for SCRATCH_1; 1200Gi or a "
    "multiple of 2400Gi for SCRATCH_2 and PERSISTENT; multiples of 6000Gi or 1800Gi for HDD.",
    docs="""The CSI driver rounds a claim up to the next size FSx accepts, so 1000Gi silently buys (and bills)
      1200 GiB and 3000Gi buys 4800 GiB. The finding names the capacity it will create; asking for that size keeps
      the cost visible in review.""",
)
def fsx_capacity_rounded_up(scope: Scope):
    for claim, params in _fsx_claims(scope):
        requested = mapping(claim.doc, "spec", "resources", "requests").get("storage")
        size = quantity(requested) if requested is not None else None
        if size is None or size <= 0 or not math.isfinite(size):
            continue
        deployment, storage_type = _deployment_type(params), params.get("storageType", "SSD")
        created = provisioned_gib(math.ceil(size), deployment, storage_type, _throughput(params))
        if created * 2**30 != size:
            yield Finding(
                claim,
                f"storage {requested}: the FSx CSI driver rounds it up and creates (and bills) {created} GiB "
                f"for {deployment if storage_type != 'HDD' else 'HDD'}",
                _SIZE,
            )


def _mounting_pods(scope: Scope):
    """(namespace, claim) -> [(pod template, pods it makes or None for per node, field path)]."""
    found: dict[tuple[str, str], list] = {}
    for template in scope.pod_templates:
        for claim, path in template.claims():
            found.setdefault((scope.namespace_of(template.owner), claim), []).append((template, path))
    return found


def _provisioner(scope: Scope, claim) -> str | None:
    """The provisioner of the claim's StorageClass, when the class is visible (or EKS's own)."""
    name = text(claim.doc, "spec", "storageClassName")
    found = storage_classes(scope).get(name)
    if found is not None:
        return str(found.doc.get("provisioner", ""))
    return _CLUSTER_STORAGE_CLASSES.get(name)


def _spread(scope: Scope, mounts) -> tuple[float, int] | None:
    """(GPUs the mounting pods request together, most GPUs of a node that runs them) when they cannot all run on
    one node; None when they might, or when Karpenter, Fargate or EKS Auto Mode may add nodes the ClusterConfig does
    not show."""
    if other_capacity(scope):
        return None
    gpus = sum((t.replicas or 0) * t.request(GPU) for t, _ in mounts)
    most = max((largest(g, "gpus") or 0 for t, _ in mounts for g in scope.placement(t)[1]), default=0)
    return (gpus, most) if most and gpus > most else None


@rule(
    "claim-not-read-write-many",
    "error",
    premise="Several pods of the environment mount one claim, and either it is ReadWriteOncePod, or its visible "
    "StorageClass's driver attaches volumes to one node (EBS), nothing but the ClusterConfig's node groups adds "
    "nodes (no Karpenter, Fargate or Auto Mode), and the pods need more GPUs than the largest node they can run on "
    "has.",
    consequence="job",
    description="A claim that pods on several nodes mount is a volume only one node (or one pod) can use",
    remediation="Keep data that several nodes share on a ReadWriteMany file system (an FSx for Lustre claim with "
    "accessModes [ReadWriteMany]); an EBS volume attaches to one node, a ReadWriteOncePod claim to one pod.",
    docs="""An EBS volume attaches to one node (the EBS CSI driver's CSIDriver has `attachRequired: true`): when
      the pods that mount it must run on several nodes (the launcher's and workers' GPUs exceed the largest node of
      the groups they can run on; skipped where Karpenter, Fargate or EKS Auto Mode may add larger ones),
      all but those on the first node stay in ContainerCreating with a Multi-Attach error. A ReadWriteOncePod
      claim admits one pod in the whole cluster; the scheduler leaves the others Pending. An FSx for Lustre (or
      EFS) volume attaches to no node (aws-fsx-csi-driver chart 1.17.0, templates/csidriver.yaml:
      `attachRequired: false`), so its claims mount on every node whatever their accessModes.""",
)
def claim_not_read_write_many(scope: Scope):
    users = _mounting_pods(scope)
    for claim in claims(scope):
        mounts = users.get((scope.namespace_of(claim), claim.name), [])
        pods = sum((t.replicas if t.replicas is not None else 2) for t, _ in mounts)
        modes = [str(m) for m in sequence(claim.doc, "spec", "accessModes")]
        if pods < 2 or "ReadWriteMany" in modes:
            continue
        names = ", ".join(sorted({t.full_label for t, _ in mounts}))
        if modes == ["ReadWriteOncePod"]:
            yield Finding(
                claim,
                f"{plural(pods, 'pod')} ({names}) mount it but ReadWriteOncePod admits one",
                ("spec", "accessModes"),
            )
            continue
        spread = _spread(scope, mounts) if _provisioner(scope, claim) in _ATTACHING_PROVISIONERS else None
        if spread:
            yield Finding(
                claim,
                f"{plural(pods, 'pod')} ({names}) mount it and need {spread[0]:g} GPUs, more than one node's "
                f"{spread[1]}, but its volume attaches to one node (accessModes {modes or 'unset'})",
                ("spec", "accessModes"),
            )


@rule(
    "claim-not-in-pod-namespace",
    "error",
    requires=("environment",),
    premise="The whole environment is visible, and a pod mounts a claim name that no PersistentVolumeClaim of its "
    "namespace has.",
    consequence="job",
    description="A pod mounts a claim that is not in the pod's namespace",
    remediation="Create the PersistentVolumeClaim in the namespace of the pods that mount it (claims are "
    "namespaced), or move the workload.",
    docs="""A pod can only mount claims of its own namespace; without one of that name there it stays Pending.
      Outside a whole environment the claim may exist in the cluster, so nothing is said.""",
)
def claim_not_in_pod_namespace(scope: Scope):
    by_name: dict[str, list[str]] = {}
    for claim in claims(scope):
        by_name.setdefault(claim.name, []).append(scope.namespace_of(claim))
    for (namespace, name), mounts in _mounting_pods(scope).items():
        found = by_name.get(name, [])
        if namespace in found:
            continue
        where = f"it is in {', '.join(sorted(found))}" if found else "no claim of that name exists"
        for template, path in mounts:
            yield Finding(
                template.owner, f"{template.label} in namespace {namespace} mounts claim {name}, but {where}", path
            )


@rule(
    "fsx-reclaim-delete",
    "warning",
    premise="An FSx for Lustre StorageClass (provisioner fsx.csi.aws.com) has reclaimPolicy Delete, written or by "
    "default.",
    consequence="risk",
    description="An FSx StorageClass deletes the file system with its claim",
    remediation="Set reclaimPolicy: Retain where the file system holds data to keep (and delete retained file "
    "systems deliberately); where it is meant to go with its claim (a development environment), turn the rule "
    "off for it in the validate configuration.",
    docs="""With `reclaimPolicy: Delete`, the Kubernetes default, deleting the PersistentVolumeClaim (a
      renamed claim, a removed overlay, a pruning Flux Kustomization) deletes the FSx file system and every
      checkpoint on it, with no backup for scratch types. Whether that is wanted depends on the environment,
      which validate cannot tell from its name, so it is a warning everywhere; a repository keeps it off where
      file systems are meant to go with their claims (the template's configuration: its dev environments).""",
)
def fsx_reclaim_delete(scope: Scope):
    for storage_class in fsx_classes(scope):
        policy = storage_class.doc.get("reclaimPolicy") or "Delete"
        if policy == "Delete":
            yield Finding(
                storage_class,
                f"StorageClass {storage_class.name} has reclaimPolicy Delete"
                f"{'' if 'reclaimPolicy' in storage_class.doc else ' (the default)'}: deleting a claim "
                "deletes its file system",
                ("reclaimPolicy",) if "reclaimPolicy" in storage_class.doc else (),
            )


@rule(
    "reclaim-policy-recycle",
    "error",
    premise="A StorageClass of the environment sets reclaimPolicy.",
    consequence="api-server",
    description="A StorageClass uses the Recycle reclaim policy",
    remediation="Use Retain (keep the volume and its data after the claim goes) or Delete.",
    docs="""The API server refuses a StorageClass whose reclaimPolicy is not Delete or Retain (kubernetes
      pkg/apis/storage/validation validateReclaimPolicy), so Flux's apply of its Kustomization fails. Recycle
      (scrub the volume with `rm -rf` and offer it again) is deprecated; a PersistentVolume may still carry it,
      but CSI drivers, the FSx driver among them, cannot recycle.""",
)
def reclaim_policy_recycle(scope: Scope):
    for manifest in scope.of("StorageClass", "storage.k8s.io"):
        if manifest.doc.get("reclaimPolicy") == "Recycle":
            yield Finding(manifest, f"StorageClass {manifest.name} has reclaim policy Recycle", ("reclaimPolicy",))


@rule(
    "fsx-node-plugin-not-on-gpu-nodes",
    "error",
    requires=("cluster",),
    premise="Pods that run only on a tainted GPU node group mount a claim of an FSx for Lustre StorageClass, and the "
    "FSx CSI driver's node DaemonSet is rendered with selectors that admit that group.",
    consequence="job",
    description="The FSx CSI node plugin does not tolerate the taint of the GPU nodes whose pods mount FSx",
    remediation="Let the node DaemonSet tolerate the GPU node group's taints: in the aws-fsx-csi-driver chart, "
    "keep node.tolerateAllTaints: true (its default) or list the taint under node.tolerations.",
    docs="""Premise: the environment's pods that run on a tainted GPU node group (they request GPUs, or
      select only GPU nodes) mount a claim of an FSx for Lustre StorageClass, and the FSx CSI driver's node
      DaemonSet is rendered (its kustomize overlay, or the chart a HelmRelease installs) with selectors that
      admit that group. A node plugin that does not tolerate the group's taint never runs on those nodes, so
      the kubelet there cannot mount Lustre: the training pods stay ContainerCreating and the job never
      starts. The chart's default (`node.tolerateAllTaints: true`) tolerates every taint; setting it to false
      keeps only `node.tolerations`.""",
)
def fsx_node_plugin_not_on_gpu_nodes(scope: Scope):
    fsx_claims = {
        (scope.namespace_of(claim), claim.name)
        for claim in claims(scope)
        if text(claim.doc, "spec", "storageClassName") in {c.name for c in fsx_classes(scope)}
    }
    gpu = {group.name: group for group in gpu_groups(scope) if group.taints}
    mounting = {}  # GPU node group name -> a pod template there that mounts FSx
    for template in scope.pod_templates:
        namespace = scope.namespace_of(template.owner)
        if not any((namespace, name) in fsx_claims for name, _ in template.claims()):
            continue
        selected = [g for g in scope.node_groups if selects(template, g)]
        if template.request(GPU) <= 0 and any(g.name not in gpu for g in selected):
            continue  # not a pod that runs only on GPU nodes
        for group in selected:
            if group.name in gpu and not untolerated(template, group):
                mounting.setdefault(group.name, template)
    for plugin in plugin_daemonsets(scope, FSX_CSI_DRIVER):
        for name, user in mounting.items():
            group = gpu[name]
            if selects(plugin, group) and untolerated(plugin, group):
                taints = ", ".join(str(t) for t in untolerated(plugin, group))
                yield Finding(
                    plugin.owner,
                    f"FSx CSI node plugin {plugin.owner.name} does not tolerate {taints} of {group.describe()}, "
                    f"so {user.full_label} there cannot mount its FSx claim and stays ContainerCreating",
                    (*plugin.path, "tolerations"),
                )
