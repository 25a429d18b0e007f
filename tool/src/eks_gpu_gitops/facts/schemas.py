"""The upstream schemas validate checks objects against, pinned: the CRDs of the MPI operator, Flux's
controllers and Kueue, and eksctl's ClusterConfig schema, at the releases the template deploys. A repository's
platform.yaml may pin others under `schemas:` (the template writes its own pins there); these are what validate
uses for the kinds it does not pin, and everywhere outside such a repository."""

from .flux import CONTROLLERS

MPI_OPERATOR = "v0.8.2"
# The controllers' releases Flux v2.9.5 installs (facts/flux.py): their CRDs are what the cluster serves.
KUSTOMIZE_CONTROLLER = CONTROLLERS["kustomize-controller"]
SOURCE_CONTROLLER = CONTROLLERS["source-controller"]
HELM_CONTROLLER = CONTROLLERS["helm-controller"]
KUEUE = "0.19.2"
EKSCTL = "v0.230.0"

_GITHUB = "https://raw.githubusercontent.com"
_SOURCE_CRDS = f"{_GITHUB}/fluxcd/source-controller/{SOURCE_CONTROLLER}/config/crd/bases/source.toolkit.fluxcd.io"
_KUEUE_CRDS = f"{_GITHUB}/kubernetes-sigs/kueue/v{KUEUE}/config/components/crd/bases/kueue.x-k8s.io"

SCHEMAS = {
    "kubeflow.org/MPIJob": f"{_GITHUB}/kubeflow/mpi-operator/{MPI_OPERATOR}/manifests/base/kubeflow.org_mpijobs.yaml",
    "kustomize.toolkit.fluxcd.io/Kustomization": (
        f"{_GITHUB}/fluxcd/kustomize-controller/{KUSTOMIZE_CONTROLLER}/config/crd/bases/"
        "kustomize.toolkit.fluxcd.io_kustomizations.yaml"
    ),
    "source.toolkit.fluxcd.io/GitRepository": f"{_SOURCE_CRDS}_gitrepositories.yaml",
    "source.toolkit.fluxcd.io/HelmRepository": f"{_SOURCE_CRDS}_helmrepositories.yaml",
    "source.toolkit.fluxcd.io/OCIRepository": f"{_SOURCE_CRDS}_ocirepositories.yaml",
    "source.toolkit.fluxcd.io/HelmChart": f"{_SOURCE_CRDS}_helmcharts.yaml",
    "source.toolkit.fluxcd.io/Bucket": f"{_SOURCE_CRDS}_buckets.yaml",
    "helm.toolkit.fluxcd.io/HelmRelease": (
        f"{_GITHUB}/fluxcd/helm-controller/{HELM_CONTROLLER}/config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml"
    ),
    "kueue.x-k8s.io/ResourceFlavor": f"{_KUEUE_CRDS}_resourceflavors.yaml",
    "kueue.x-k8s.io/ClusterQueue": f"{_KUEUE_CRDS}_clusterqueues.yaml",
    "kueue.x-k8s.io/LocalQueue": f"{_KUEUE_CRDS}_localqueues.yaml",
    "eksctl.io/ClusterConfig": f"{_GITHUB}/eksctl-io/eksctl/{EKSCTL}/pkg/apis/eksctl.io/v1alpha5/assets/schema.json",
}
