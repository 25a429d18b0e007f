"""eks-gpu-gitops: render, validate and diff the manifests of a GPU training platform on Amazon EKS before
Flux applies them, and check them against the live cluster. The version is set here, and only here."""

__version__ = "0.6.0"
