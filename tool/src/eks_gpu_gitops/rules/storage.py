"""FSx for Lustre and volume rules: StorageClass parameters, claim sizes, who mounts what."""

from __future__ import annotations

import math

from ..facts import fsx
from ..model import GPU, Scope, mapping, plural, quantity, selects, sequence, untolerated
from ..model.fields import text
from ..model.plugins import FSX_CSI_DRIVER, gpu_groups, plugin_daemonsets
from .registry import Finding, category

rule = category("FSx for Lustre")

PROVISIONER = "fsx.csi.aws.com"
# StorageClasses an EKS cluster has without GitOps.
_CLUSTER_STORAGE_CLASSES = ("gp2",)


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


@rule(
    "storage-class-missing",
    "error",
    requires=("environment",),
    description="A PersistentVolumeClaim names a StorageClass the environment does not define",
    remediation="Define the StorageClass in the environment's infrastructure overlay, or fix storageClassName.",
    docs="""A claim whose StorageClass does not exist stays Pending, and so do the pods that mount it. EKS
      itself only provides `gp2`.""",
)
def storage_class_missing(scope: Scope):
    known = storage_classes(scope)
    for claim in claims(scope):
        name = text(claim.doc, "spec", "storageClassName")
        if name and name not in known and name not in _CLUSTER_STORAGE_CLASSES:
            yield Finding(
                claim, f"StorageClass {name!r} is not defined in this environment", ("spec", "storageClassName")
            )


@rule(
    "fsx-storage-class-invalid",
    "error",
    description="An FSx for Lustre StorageClass lacks a subnet or security groups, or sets invalid types",
    remediation="Set parameters.subnetId (one subnet in the GPU nodes' zone), parameters.securityGroupIds "
    "(allowing TCP 988 and 1018-1023) and a valid deploymentType and storageType.",
    docs="""The FSx CSI driver creates the file system in exactly one subnet with the given security groups;
      without them, or with more than one subnet, creation fails and the claim stays Pending. deploymentType
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
        elif not value.isdigit() or int(value) not in allowed:
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


@rule(
    "fsx-capacity-invalid",
    "error",
    description="A claim's size is missing, or not a capacity FSx creates for its deployment type",
    remediation="Request an exact FSx size: 1200Gi, 2400Gi or a multiple of 3600Gi for SCRATCH_1; 1200Gi or a "
    "multiple of 2400Gi for SCRATCH_2 and PERSISTENT; multiples of 6000Gi or 1800Gi for HDD.",
    docs="""The CSI driver rounds a claim up to the next size FSx accepts, so 1000Gi silently buys (and bills)
      1200 GiB and 3000Gi buys 4800 GiB. A size the driver rounds up is a warning that names the capacity it
      will create (asking for that size keeps the cost visible in review); a claim without a size, or with
      one that is not a quantity, is an error (the API server refuses it).""",
)
def fsx_capacity_invalid(scope: Scope):
    classes = {c.name: c for c in fsx_classes(scope)}
    for claim in claims(scope):
        storage_class = classes.get(text(claim.doc, "spec", "storageClassName"))
        if storage_class is None:
            continue
        params = parameters(storage_class)
        requested = mapping(claim.doc, "spec", "resources", "requests").get("storage")
        path = ("spec", "resources", "requests", "storage")
        if requested is None:
            yield Finding(claim, "the claim requests no storage size", ("spec", "resources"))
            continue
        size = quantity(requested)
        if size is None or size <= 0:
            yield Finding(claim, f"storage {requested} is not a positive size", path)
            continue
        throughput = params.get("perUnitStorageThroughput", "")
        deployment, storage_type = _deployment_type(params), params.get("storageType", "SSD")
        created = provisioned_gib(
            math.ceil(size), deployment, storage_type, int(throughput) if throughput.isdigit() else None
        )
        if created * 2**30 != size:
            yield Finding(
                claim,
                f"storage {requested}: the FSx CSI driver rounds it up and creates (and bills) {created} GiB "
                f"for {deployment if storage_type != 'HDD' else 'HDD'}",
                path,
                severity="warning",
            )


def _mounting_pods(scope: Scope):
    """(namespace, claim) -> [(pod template, pods it makes or None for per node, field path)]."""
    found: dict[tuple[str, str], list] = {}
    for template in scope.pod_templates:
        for claim, path in template.claims():
            found.setdefault((scope.namespace_of(template.owner), claim), []).append((template, path))
    return found


@rule(
    "claim-not-read-write-many",
    "error",
    description="A claim that several pods mount at once is not ReadWriteMany",
    remediation="Set accessModes: [ReadWriteMany] on the claim (FSx for Lustre supports it).",
    docs="""A ReadWriteOnce volume attaches to one node; the launcher and workers of an MPIJob run on several
      nodes, so all but the first stay in ContainerCreating with a multi-attach error.""",
)
def claim_not_read_write_many(scope: Scope):
    users = _mounting_pods(scope)
    for claim in claims(scope):
        mounts = users.get((scope.namespace_of(claim), claim.name), [])
        pods = sum((t.replicas if t.replicas is not None else 2) for t, _ in mounts)
        modes = [str(m) for m in sequence(claim.doc, "spec", "accessModes")]
        if pods > 1 and "ReadWriteMany" not in modes:
            names = ", ".join(sorted({t.full_label for t, _ in mounts}))
            yield Finding(
                claim,
                f"{plural(pods, 'pod')} ({names}) mount it but accessModes is {modes or 'unset'}",
                ("spec", "accessModes"),
            )


@rule(
    "claim-not-in-pod-namespace",
    "error",
    description="A pod mounts a claim that is not in the pod's namespace",
    remediation="Create the PersistentVolumeClaim in the namespace of the pods that mount it (claims are "
    "namespaced), or move the workload.",
    docs="""A pod can only mount claims of its own namespace; otherwise it stays in ContainerCreating.
      Without the whole environment the rule only reports claims it finds in another namespace.""",
)
def claim_not_in_pod_namespace(scope: Scope):
    by_name: dict[str, list[str]] = {}
    for claim in claims(scope):
        by_name.setdefault(claim.name, []).append(scope.namespace_of(claim))
    for (namespace, name), mounts in _mounting_pods(scope).items():
        found = by_name.get(name, [])
        if namespace in found or (not found and not scope.complete):
            continue
        where = f"it is in {', '.join(sorted(found))}" if found else "no claim of that name exists"
        for template, path in mounts:
            yield Finding(
                template.owner, f"{template.label} in namespace {namespace} mounts claim {name}, but {where}", path
            )


@rule(
    "fsx-reclaim-delete-in-production",
    "warning",
    description="A production FSx StorageClass deletes the file system with its claim",
    remediation="Set reclaimPolicy: Retain on production FSx StorageClasses (and delete retained file systems "
    "deliberately), or suppress with a reason for scratch data.",
    docs="""With `reclaimPolicy: Delete`, the Kubernetes default, deleting the PersistentVolumeClaim (a
      renamed claim, a removed overlay, a pruning Flux Kustomization) deletes the FSx file system and every
      checkpoint on it, with no backup for scratch types. Reported in production environments only; dev
      file systems are meant to go with their claims.""",
)
def fsx_reclaim_delete_in_production(scope: Scope):
    if not scope.production:
        return
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
    description="A PersistentVolume or StorageClass uses the Recycle reclaim policy",
    remediation="Use Retain (keep the volume and its data after the claim goes) or Delete.",
    docs="""Recycle (scrub the volume with `rm -rf` and offer it again) is deprecated and only ever worked for
      NFS and hostPath volumes; CSI drivers, the FSx driver among them, do not implement it. The API server
      refuses a StorageClass with it (storage validation accepts only Delete and Retain), and a
      PersistentVolume with it fails its recycle and stays Failed once its claim is deleted. See
      kubernetes.io/docs/concepts/storage/persistent-volumes/#recycle.""",
)
def reclaim_policy_recycle(scope: Scope):
    for manifest, path in [
        *((m, ("reclaimPolicy",)) for m in scope.of("StorageClass", "storage.k8s.io")),
        *((m, ("spec", "persistentVolumeReclaimPolicy")) for m in scope.of("PersistentVolume", "")),
    ]:
        value = manifest.doc
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value == "Recycle":
            yield Finding(manifest, f"{manifest.kind} {manifest.name} has reclaim policy Recycle", path)


@rule(
    "fsx-node-plugin-not-on-gpu-nodes",
    "error",
    requires=("cluster",),
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
