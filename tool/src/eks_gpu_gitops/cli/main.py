"""`eks-gpu-gitops VERB [ARGS]` (or `python -m eks_gpu_gitops VERB [ARGS]`): one command, a verb per job.

A generated repository's scripts/VERB runs it from the repository's .venv. Importing a verb is the first thing
that needs the tool's dependencies, so a missing one is reported here in one line, like every
error (conventions.py).
"""

from __future__ import annotations

import importlib
import sys
from importlib import metadata

from .. import __version__
from ..core.errors import InputError
from ..render.helper import HELPER, HELPER_VARIABLE, binary
from .conventions import MISSING, PROG

# Verb -> (the module whose main(argv) runs it, what it does).
VERBS = {
    "render": ("render", "render every environment into rendered/"),
    "validate": ("validate", "lint, render, schema-check and rule-check manifests"),
    "diff": ("diff", "what a change (or applying to the cluster: --live) does to the rendered manifests"),
    "new-environment": ("new_environment", "add an environment shaped like the existing ones"),
    "new-job": ("new_job", "add a training job (an MPIJob) to an environment"),
    "cluster-settings": ("cluster_settings", "write a cluster's per-cluster values for Flux to substitute"),
    "status": ("status", "is the cluster the kubeconfig points at ready for an environment?"),
    "simulate": ("simulate", "place an environment's MPIJobs on a simulated cluster"),
    "image-repository": ("image_repository", "where the image workflow pushes the trainer image"),
}


def usage() -> str:
    width = max(map(len, VERBS))
    lines = [f"usage: {PROG} VERB [ARGS] (VERB --help for its options), or {PROG} --version", "", "verbs:"]
    lines += [f"  {verb:<{width}}  {what}" for verb, (_, what) in VERBS.items()]
    return "\n".join(lines)


def renders_with() -> str:
    """What renders: the helper the install carries, another one named, or why renders fail."""
    try:
        found = binary()
    except InputError as error:
        return f"renders fail: {error}"
    if found == HELPER:
        return "with its helper (kustomize-controller v1.9.5's and helm-controller v1.6.4's libraries)"
    return f"with the helper {HELPER_VARIABLE} names, {found}"


def version() -> str:
    """The version, what renders, and where the documentation of this version is."""
    lines = [f"{PROG} {__version__}, {renders_with()}"]
    try:
        urls = dict(url.split(", ", 1) for url in metadata.metadata(PROG).get_all("Project-URL") or [])
    except metadata.PackageNotFoundError:  # run from a source folder that is not installed
        urls = {}
    if "Source" in urls:
        lines.append(f"documentation: {urls['Source']}/tree/v{__version__}/tool/docs")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["-h"], ["--help"]):
        print(usage())
        sys.exit(0)
    if args[:1] == ["--version"]:
        print(version())
        sys.exit(0)
    if not args or args[0] not in VERBS:
        given = f"unknown verb {args[0]!r}; " if args else ""
        print(f"{PROG}: {given}name one of {', '.join(VERBS)} (see --help)", file=sys.stderr)
        sys.exit(2)
    verb = args[0]
    try:
        module = importlib.import_module(f"{__package__}.{VERBS[verb][0]}")
    except ModuleNotFoundError as error:
        print(f"{verb}: {MISSING.format(package=error.name)}", file=sys.stderr)
        sys.exit(2)
    from .conventions import exit_with

    exit_with(lambda _: module.main(args[1:]))
