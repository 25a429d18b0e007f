"""Objects and environments for diff's tests that need no git or kustomize: built in Python, as a
render would give them."""

from __future__ import annotations

import copy

from eks_gpu_gitops.model import Environment, FluxKustomization, Manifest


def manifest(doc: dict, env: str = "prod", source: str = "training") -> Manifest:
    return Manifest(doc=doc, file="test.yaml", env=env, source=source)


def mpijob(workers: int, gpus: int, launcher_gpus: int = 0, name: str = "train", queue: str | None = None) -> dict:
    """An MPIJob in namespace t; with `queue`, labelled for that Kueue LocalQueue."""

    def template(count):
        resources = {"limits": {"nvidia.com/gpu": count}} if count else {}
        return {"spec": {"containers": [{"name": "c", "image": "i", "resources": resources}]}}

    metadata = {"name": name, "namespace": "t"}
    if queue:
        metadata["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": metadata,
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template(launcher_gpus)},
                "Worker": {"replicas": workers, "template": template(gpus)},
            }
        },
    }


def cluster_config(max_size, instance_type: str = "p4d.24xlarge") -> dict:
    return {
        "apiVersion": "eksctl.io/v1alpha5",
        "kind": "ClusterConfig",
        "metadata": {"name": "c"},
        "managedNodeGroups": [
            {"name": "system", "instanceType": "m6i.xlarge", "maxSize": 3},
            {"name": "gpu", "instanceType": instance_type, "maxSize": max_size},
        ],
    }


def cluster_queue(gpus, name: str = "training") -> dict:
    """A Kueue ClusterQueue as the environment generator writes it: launchers on the system flavor (no
    GPUs), `gpus` on the gpu flavor."""

    def flavor(flavor_name: str, cpu, gpu_quota) -> dict:
        quota = {"cpu": cpu, "nvidia.com/gpu": gpu_quota}
        return {"name": flavor_name, "resources": [{"name": k, "nominalQuota": v} for k, v in quota.items()]}

    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "nvidia.com/gpu"],
                    "flavors": [flavor("system", 8, 0), flavor("gpu", 96, gpus)],
                }
            ]
        },
    }


def flux_kustomization(name: str, prune: bool = True, depends_on=(), force: bool = False) -> FluxKustomization:
    doc = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {"path": f"./{name}", "prune": prune, "force": force},
    }
    return FluxKustomization(manifest=manifest(doc, source=""), path=name, depends_on=list(depends_on))


def storage_class(**fields) -> dict:
    doc = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "fsx"},
        "provisioner": "fsx.csi.aws.com",
        "parameters": {"deploymentType": "SCRATCH_2"},
        "allowVolumeExpansion": True,
    }
    doc.update(fields)
    return doc


def claim(size: str = "1200Gi", storage_class_name: str = "fsx", modes=("ReadWriteMany",)) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "t"},
        "spec": {
            "accessModes": list(modes),
            "storageClassName": storage_class_name,
            "resources": {"requests": {"storage": size}},
        },
    }


def environment(
    objects: list[dict], prune: bool = True, force: bool = False, cluster: dict | None = None, name: str = "prod"
) -> Environment:
    """StorageClasses in the Flux Kustomization infrastructure, everything else in training (which
    depends on it), and `cluster` as the eksctl ClusterConfig."""
    infrastructure = flux_kustomization("infrastructure", prune, force=force)
    training = flux_kustomization("training", prune, depends_on=["infrastructure"], force=force)
    infrastructure.objects = [manifest(d, name, "infrastructure") for d in objects if d["kind"] == "StorageClass"]
    training.objects = [manifest(d, name, "training") for d in objects if d["kind"] != "StorageClass"]
    config = manifest(cluster, name, "eksctl") if cluster else None
    return Environment(name, [infrastructure, training], config)


def annotated(doc: dict, place: str = "annotations", **settings: str) -> dict:
    """A copy of `doc` with Flux settings as annotations (or labels): prune="disabled" and so on."""
    doc = copy.deepcopy(doc)
    doc["metadata"].setdefault(place, {}).update({f"kustomize.toolkit.fluxcd.io/{k}": v for k, v in settings.items()})
    return doc
