"""Run Kustomize: the standalone `kustomize` binary when installed, else `kubectl kustomize`."""

from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from .errors import InputError

# kustomize-controller builds with this restrictor, so a render here matches what Flux applies.
_FLAGS = ["--load-restrictor", "LoadRestrictionsNone"]


@lru_cache(maxsize=1)
def command() -> tuple[str, ...]:
    if shutil.which("kustomize"):
        return ("kustomize", "build")
    if shutil.which("kubectl"):
        return ("kubectl", "kustomize")
    raise InputError("neither kustomize nor kubectl is installed; install one of them (kubectl includes kustomize)")


def build(path: Path) -> str:
    """The rendered YAML stream of the kustomization in `path`."""
    if not (path / "kustomization.yaml").is_file() and not (path / "kustomization.yml").is_file():
        raise InputError(f"{path}: no kustomization.yaml")
    try:
        result = subprocess.run([*command(), *_FLAGS, str(path)], capture_output=True, text=True)
    except OSError as error:
        raise InputError(f"{path}: cannot run {command()[0]}: {error.strerror}") from None
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        cause = lines[-1] if lines else f"{command()[0]} exited with status {result.returncode}"
        raise InputError(f"{path}: kustomize build failed: {cause.removeprefix('Error: ')}")
    return result.stdout
