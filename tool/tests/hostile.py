"""What every hostile-input test shares (test_hostile_*.py, one file per class of attack; the threat model is in
docs/validate-and-diff.md, "What a pull request controls"). Every case asserts the output: the exit status, the one
line said, nothing written outside the output folder, no source changed, no content of a file outside the
repository shown, no workflow command or markup, no secret."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

SECRET = "outside-s3cr3t-4b9e"


def last_line(result: subprocess.CompletedProcess, verb: str, code: int = 2) -> str:
    """The line a failed verb ends with (after its progress lines), with no traceback."""
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"{verb}: "), line
    return line.removeprefix(f"{verb}: ")


def add_kustomization(repo: Path, name, path: str = "./overlays/prod/training", **spec) -> None:
    doc = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {
            "interval": "1h",
            "path": path,
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
            **spec,
        },
    }
    (repo / "clusters/prod/hostile.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def outside_file(tmp_path: Path) -> Path:
    secret = tmp_path / "outside.txt"
    secret.write_text(f"password={SECRET}\n")
    return secret
