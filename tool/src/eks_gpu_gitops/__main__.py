"""`python -m eks_gpu_gitops VERB [ARGS]`: the same as the eks-gpu-gitops command."""

from .cli.main import main

main()
