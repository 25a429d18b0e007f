"""Shared fixtures: bake the template once per named option set, render it once. REPO is the default bake,
made when the tests start, for the tests of what every bake holds (its workflows). Bakes run the tool this
environment has installed (the working copy of tool/, editable), as scripts/tool finds it through
EKS_GPU_GITOPS."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cookiecutter.main import cookiecutter

from eks_gpu_gitops.render import platform
from eks_gpu_gitops.render import repository as render
from eks_gpu_gitops.schemas import checker as schemas

TEMPLATE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TEMPLATE / "tools"))
from committed import committed_copy  # noqa: E402

TOOL = Path(sys.executable).with_name("eks-gpu-gitops")
os.environ["EKS_GPU_GITOPS"] = str(TOOL)

# Renders here, and the generated tools these tests run, use a render cache of this session's own.
RENDER_CACHE = tempfile.mkdtemp(prefix="gitops-template-test-render-cache-")
os.environ["GITOPS_RENDER_CACHE"] = RENDER_CACHE

SCHEMA_DIR = Path(os.environ.get("GITOPS_SCHEMA_DIR") or TEMPLATE.parent / "shared" / "schemas")


TOOLS_CACHE = Path(os.environ.get("TOOLS_CACHE") or Path.home() / ".cache" / "gitops-template")
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@x",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@x",
}


def git(folder: Path, *args: str) -> str:
    environment = {**os.environ, **GIT_IDENTITY}
    return subprocess.run(
        ["git", *args], cwd=folder, check=True, capture_output=True, text=True, env=environment
    ).stdout


def pytest_unconfigure(config):
    shutil.rmtree(RENDER_CACHE, ignore_errors=True)


def pytest_configure(config):
    if not (SCHEMA_DIR / "eksctl" / "schema.json").is_file():
        raise pytest.UsageError(f"no upstream schemas at {SCHEMA_DIR}; set GITOPS_SCHEMA_DIR")


_SCRATCH = Path(tempfile.mkdtemp(prefix="gitops-template-tests-"))
atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)
# The template as committed, and its default bake (what every test of a bake's fixed files reads).
TEMPLATE_COPY = committed_copy(TEMPLATE, _SCRATCH / "template")
REPO = Path(cookiecutter(str(TEMPLATE_COPY), no_input=True, output_dir=str(_SCRATCH / "default")))


@pytest.fixture(scope="session")
def template() -> Path:
    return TEMPLATE_COPY


@pytest.fixture(scope="session")
def template_repo(tmp_path_factory, template) -> Path:
    """The template as a Git repository, the way users reach it (cruft clones it)."""
    repo = tmp_path_factory.mktemp("template-repo") / "template"
    shutil.copytree(template, repo)
    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "the template")
    return repo


class Bake:
    """One generated repository and its rendered environments."""

    def __init__(self, path: Path, context: dict):
        self.path = path
        self.context = context
        self._environments = None

    @property
    def environments(self):
        if self._environments is None:
            self._environments = {e.name: e for e in render.render_repository(self.path)}
        return self._environments

    def objects(self, env: str, kind: str) -> list[dict]:
        return [m.doc for m in self.environments[env].objects if m.kind == kind]

    def one(self, env: str, kind: str) -> dict:
        found = self.objects(env, kind)
        assert len(found) == 1, f"{env}: expected one {kind}, found {len(found)}"
        return found[0]

    def cluster_config(self, env: str) -> dict:
        return self.environments[env].cluster_config.doc


@pytest.fixture(scope="session")
def bake_factory(tmp_path_factory, template):
    cache: dict[str, Bake] = {}

    def bake(name: str, **answers) -> Bake:
        if name not in cache:
            out = tmp_path_factory.mktemp(f"bake-{name}")
            path = Path(cookiecutter(str(template), no_input=True, output_dir=str(out), extra_context=answers))
            cache[name] = Bake(path, answers)
        return cache[name]

    return bake


@pytest.fixture(scope="session")
def schema_checker(bake_factory):
    sources = platform.schema_sources(bake_factory("default").path)
    return schemas.SchemaChecker(schemas.SchemaStore(sources, schema_dir=SCHEMA_DIR))
