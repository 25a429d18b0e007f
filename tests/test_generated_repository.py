"""A user's first steps in a generated repository, with its own Makefile and scripts:
`make setup && scripts/render`, then its linter and its own test suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SCHEMA_DIR

COOKIECUTTER = Path(sys.executable).parent / "cookiecutter"


@pytest.fixture(scope="module")
def project(tmp_path_factory, template) -> Path:
    out = tmp_path_factory.mktemp("user")
    subprocess.run(
        [str(COOKIECUTTER), "--no-input", str(template), "-o", str(out), "project_slug=x"],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return out / "x"


def run(project: Path, *command: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GITOPS_PYTHON", "VIRTUAL_ENV", "PYTHONPATH")}
    env["GITOPS_SCHEMA_DIR"] = str(SCHEMA_DIR)
    result = subprocess.run(list(command), cwd=project, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


def test_setup_then_render_both_environments(project):
    run(project, "make", "setup")
    result = run(project, "scripts/render")
    for env in ("dev", "prod"):
        for name in ("infrastructure", "training", "eksctl"):
            assert (project / "rendered" / env / f"{name}.yaml").stat().st_size > 0
        assert f"{env}: flux-system 0, infrastructure" in result.stdout  # the root sync applies only Kustomizations


def test_lint_passes(project):
    run(project, "make", "setup")
    run(project, "make", "lint")


def test_own_test_suite_passes(project):
    run(project, "make", "setup")
    run(project, "make", "test")


def test_render_refuses_without_setup(template, tmp_path):
    subprocess.run(
        [str(COOKIECUTTER), "--no-input", str(template), "-o", str(tmp_path), "project_slug=y"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    env = {k: v for k, v in os.environ.items() if k != "GITOPS_PYTHON"}
    result = subprocess.run(["scripts/render"], cwd=tmp_path / "y", env=env, capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip() == "render: no tooling environment at .venv; run 'make setup' first"
