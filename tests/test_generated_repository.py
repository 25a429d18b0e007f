"""A user's life in a generated repository, with its own Makefile, scripts and tests: `make setup` installs the
pinned tool (offline, from the wheel `make dist` built and a folder of its dependencies, through pip's own
PIP_FIND_LINKS), `scripts/render`, `make test`; then the pull requests its README describes (scale prod's
workers, add an environment, add a job), after which its `make test` still passes; and its own tests fail on
what they are there to catch."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SCHEMA_DIR, TEMPLATE, TEMPLATE_COPY, TOOLS_CACHE, git
from eks_gpu_gitops import __version__

COOKIECUTTER = Path(sys.executable).parent / "cookiecutter"
WHEEL = f"eks_gpu_gitops-{__version__}-"
TIMEOUT = 1800  # seconds: far above the few minutes these take, against a hang only


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The folder with the tool's wheel: `make dist`'s (TOOL_DIST), or one built here the same way."""
    given = os.environ.get("TOOL_DIST")
    folder = Path(given) if given else tmp_path_factory.mktemp("dist")
    if not given:
        command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(folder)]
        subprocess.run([*command, str(TEMPLATE / "tool")], check=True, timeout=TIMEOUT)
    assert [p.name for p in folder.glob(f"{WHEEL}*.whl")], f"no wheel of eks-gpu-gitops {__version__} in {folder}"
    return folder


@pytest.fixture(scope="module")
def wheelhouse(dist, project_files) -> Path:
    """Wheels of everything the bake's requirements-dev.txt installs but the tool itself, downloaded once per
    set of requirements into the tools cache, so `make setup` can run with no index at all."""
    requirements = (project_files / "requirements-dev.txt").read_text()
    dependencies = (TEMPLATE / "tool" / "pyproject.toml").read_text()
    key = hashlib.sha256((requirements + dependencies).encode()).hexdigest()[:16]
    folder = TOOLS_CACHE / "wheelhouse" / key
    if not (folder / ".complete").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(folder), "--find-links", str(dist)]
        subprocess.run([*command, "-r", "requirements-dev.txt"], cwd=project_files, check=True, timeout=TIMEOUT)
        for wheel in folder.glob("eks_gpu_gitops-*"):
            wheel.unlink()  # the tool must come from dist/
        (folder / ".complete").touch()
    return folder


def offline(dist: Path, wheelhouse: Path) -> dict:
    """The environment of a user whose pip finds the unreleased tool in dist/ and reaches no index."""
    env = {k: v for k, v in os.environ.items() if k not in ("EKS_GPU_GITOPS", "VIRTUAL_ENV", "PYTHONPATH")}
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=f"{dist} {wheelhouse}", GITOPS_SCHEMA_DIR=str(SCHEMA_DIR))
    return env


def bake(out: Path, slug: str) -> Path:
    command = [str(COOKIECUTTER), "--no-input", str(TEMPLATE_COPY), "-o", str(out), f"project_slug={slug}"]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=300)
    return out / slug


def run(project: Path, *command: str, env: dict, ok: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(list(command), cwd=project, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    if ok:
        assert result.returncode == 0, f"{' '.join(command)}:\n{result.stdout[-5000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def project_files(tmp_path_factory) -> Path:
    project = bake(tmp_path_factory.mktemp("user"), "vision")
    git(project, "init", "--quiet", "--initial-branch=main")
    git(project, "add", "-A")
    git(project, "commit", "--quiet", "-m", "as generated")
    return project


@pytest.fixture(scope="module")
def project(project_files, dist, wheelhouse) -> Path:
    """The bake after `make setup`, offline."""
    run(project_files, "make", "setup", env=offline(dist, wheelhouse))
    return project_files


def copy(project: Path, where: Path) -> Path:
    """The repository with its .venv: a second working copy of the same user's setup."""
    target = where / project.name
    shutil.copytree(project, target, symlinks=True)
    return target


def test_make_setup_installs_the_pinned_tool_with_its_helper(project, dist, wheelhouse):
    version = run(project, ".venv/bin/eks-gpu-gitops", "--version", env=offline(dist, wheelhouse)).stdout
    said = f"eks-gpu-gitops {__version__}, with its helper (kustomize-controller v1.9.5's and helm-controller v1.6.4's"
    assert version.startswith(said), version


def test_render_writes_both_environments(project, dist, wheelhouse):
    result = run(project, "scripts/render", env=offline(dist, wheelhouse))
    for env in ("dev", "prod"):
        for name in ("infrastructure", "training", "eksctl"):
            assert (project / "rendered" / env / f"{name}.yaml").stat().st_size > 0
        assert f"{env}: flux-system 0, infrastructure" in result.stdout  # the root sync applies only Kustomizations


def test_its_own_make_test_passes(project, dist, wheelhouse):
    result = run(project, "make", "test", env=offline(dist, wheelhouse))
    assert " passed" in result.stdout and " failed" not in result.stdout, result.stdout[-2000:]


def test_the_pull_requests_its_readme_describes_keep_its_make_test_passing(project, dist, wheelhouse, tmp_path):
    work = copy(project, tmp_path)
    env = offline(dist, wheelhouse)
    run(work, "scripts/scale", "prod", "--nodes", "3", env=env)  # the scaling pull request docs/ci.md describes
    run(work, "scripts/new-environment", "staging", "--instance-type", "g6.12xlarge", "--nodes", "2", env=env)
    run(work, "scripts/new-job", "resnet", "--env", "prod", "--workers", "2", env=env)
    git(work, "add", "-A")
    git(work, "commit", "--quiet", "-m", "scale prod, add staging and a job")
    result = run(work, "make", "test", env=env)
    # The parametrized tests followed the new environment.
    assert "test_validates_without_errors[staging]" not in result.stdout  # -q: no per-test lines
    listed = run(work, ".venv/bin/python", "-m", "pytest", "--collect-only", "-q", env=env).stdout
    assert "tests/test_environments.py::test_validates_without_errors[staging]" in listed
    assert "tests/test_new_environment.py::test_an_environment_like_it_is_made_and_validates[staging]" in listed
    diff = run(work, "scripts/diff", "--base", "HEAD~1", "--format", "json", env=env).stdout
    assert '"staging"' in diff and "resnet" in diff


def test_its_own_tests_fail_on_a_broken_environment_and_workflow(project, dist, wheelhouse, tmp_path):
    work = copy(project, tmp_path)
    env = offline(dist, wheelhouse)
    settings = work / "overlays" / "prod" / "settings.yaml"
    settings.write_text(settings.read_text().replace("  workers: 2\n", "  workers: 3\n"))  # -np still says 16
    workflow = work / ".github" / "workflows" / "greet.yaml"
    workflow.write_text(
        "---\nname: greet\non: push\npermissions:\n  contents: read\njobs:\n  greet:\n    runs-on: ubuntu-24.04\n"
        "    steps:\n      - run: echo $GREETING\n"
    )
    result = run(work, ".venv/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", env=env, ok=False)
    assert result.returncode == 1
    failed = sorted(line.split(" - ")[0] for line in result.stdout.splitlines() if line.startswith("FAILED "))
    assert failed == [
        "FAILED tests/test_environments.py::test_validates_without_errors[prod]",
        "FAILED tests/test_workflows.py::test_passes_actionlint_with_shellcheck[greet.yaml]",
    ], result.stdout[-3000:]
    assert "SC2086" in result.stdout


def test_scripts_without_setup_say_make_setup_in_one_line(project_files, tmp_path):
    fresh = bake(tmp_path, "y")
    env = {k: v for k, v in os.environ.items() if k != "EKS_GPU_GITOPS"}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "eks-gpu-gitops").exists())
    result = subprocess.run(["scripts/render"], cwd=fresh, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr == (
        "render: eks-gpu-gitops is not installed; run 'make setup' (it installs the version requirements.txt pins)\n"
    )
