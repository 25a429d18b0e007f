"""Shared fixtures of the tool's tests. The repository they read is the template's default bake (REPO): the
repository the tool is made for, baked once per test process from this checkout, as a user's is.

Schemas: GITOPS_SCHEMA_DIR (a local copy laid out like the upstream files) when set, otherwise
the pinned upstream files, downloaded once into the user cache, as `validate` does.
"""

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

from eks_gpu_gitops.live.cluster import wait_established
from eks_gpu_gitops.render import platform
from eks_gpu_gitops.schemas.checker import SCHEMA_DIR_VARIABLE, SchemaChecker, SchemaStore

TESTS = Path(__file__).resolve().parent
TEMPLATE = TESTS.parent.parent
sys.path.insert(0, str(TEMPLATE / "tools"))
from committed import committed_copy  # noqa: E402  (the template as it would be committed)

# The tool as a user's scripts/<verb> runs it (scripts/tool): this environment's console command.
TOOL = Path(sys.executable).with_name("eks-gpu-gitops")
os.environ["EKS_GPU_GITOPS"] = str(TOOL)


def _bake() -> Path:
    """The template's default project, baked from what git would commit of this checkout, into a folder removed
    when the tests end."""
    where = Path(tempfile.mkdtemp(prefix="eks-gpu-gitops-tests-"))
    atexit.register(shutil.rmtree, where, ignore_errors=True)
    template = committed_copy(TEMPLATE, where / "template")
    return Path(cookiecutter(str(template), no_input=True, output_dir=str(where / "bake")))


REPO = _bake()
SCHEMA_DIR = Path(os.environ[SCHEMA_DIR_VARIABLE]) if os.environ.get(SCHEMA_DIR_VARIABLE) else None

# Rules that fail on malformed input must fail the test, not become a note.
os.environ["GITOPS_DEBUG"] = "1"
# No test reaches the network: the bake's charts are on the internet, so their HelmReleases are notes here. The
# tests of HelmRelease rendering serve charts on loopback and allow that (test_helm_release.py).
os.environ["GITOPS_OFFLINE"] = "1"
# A render cache of this test session's own (scripts run by the tests inherit it): tests never read
# or fill the user's cache, and a test that counts builds sets one of its own (render_cache_dir).
RENDER_CACHE = tempfile.mkdtemp(prefix="gitops-test-render-cache-")
os.environ["GITOPS_RENDER_CACHE"] = RENDER_CACHE


@pytest.fixture(scope="session", autouse=True)
def _session_render_cache():
    yield
    shutil.rmtree(RENDER_CACHE, ignore_errors=True)


@pytest.fixture()
def render_cache_dir(tmp_path, monkeypatch) -> Path:
    """An empty render cache for one test (its process-wide cache object is new too)."""
    folder = tmp_path / "render-cache"
    monkeypatch.setenv("GITOPS_RENDER_CACHE", str(folder))
    return folder


@pytest.fixture(scope="session")
def checker() -> SchemaChecker:
    return SchemaChecker(SchemaStore(platform.schema_sources(REPO), schema_dir=SCHEMA_DIR))


@pytest.fixture()
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)
    return REPO


@pytest.fixture()
def repo_copy(tmp_path) -> Path:
    """The parts of this repository validate reads, copied so a test can change them."""
    copy = tmp_path / "repo"
    for name in ("clusters", "overlays", "scripts"):
        shutil.copytree(REPO / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("platform.yaml", ".yamllint"):
        shutil.copy2(REPO / name, copy / name)
    return copy


GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}
# What the tool reads and writes, without what `make setup` and the trainer leave behind.
COMMITTED = ("clusters", "overlays", "scripts", "trainer", "platform.yaml", ".yamllint", ".gitignore", "README.md")
NOT_COMMITTED = shutil.ignore_patterns("flux-system", "__pycache__", ".venv", "data", "runs")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, env={**os.environ, **GIT_IDENTITY}
    ).stdout


def copy_repository(root: Path) -> Path:
    """The baked repository's committed files, copied into the new folder `root`."""
    root.mkdir()
    for name in COMMITTED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=NOT_COMMITTED)
        elif source.is_file():
            shutil.copy2(source, root / name)
    return root


@pytest.fixture
def repo(tmp_path) -> Path:
    """A copy of this repository in git, committed as generated, for tools that write to it."""
    root = copy_repository(tmp_path / "repo")
    git(root, "init", "--quiet", "--initial-branch=main")
    git(root, "add", "-A")
    git(root, "commit", "--quiet", "-m", "as generated")
    return root


def broken_tool(folder: Path) -> Path:
    """The tool as an install that lost its dependencies leaves it: its own code only, in a virtual environment
    without packages (what a `make setup` whose pip failed half-way, or a --no-deps install, leaves behind)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "broken")], check=True)
    site = next((folder / "broken" / "lib").glob("python*/site-packages"))
    (site / "eks_gpu_gitops.pth").write_text(str(Path(__import__("eks_gpu_gitops").__file__).parents[1]) + "\n")
    command = folder / "broken" / "bin" / "eks-gpu-gitops"
    command.write_text(f"#!{folder / 'broken' / 'bin' / 'python'}\nfrom eks_gpu_gitops.cli.main import main\nmain()\n")
    command.chmod(0o755)
    return command


def run_validate(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """scripts/validate as a user runs it, with this environment's tool."""
    environment = {**os.environ, **(env or {})}
    environment.pop("GITOPS_DEBUG", None)
    return subprocess.run(
        [str(cwd / "scripts" / "validate"), *args], cwd=cwd, env=environment, capture_output=True, text=True
    )


# --- the local control plane (tests of status, validate --server, diff --live, simulate) ---------------------

CONTROL_PLANE_REQUIRED = bool(os.environ.get("GITOPS_REQUIRE_CONTROL_PLANE"))


def need_binaries(components) -> None:
    """Skip the test without the control plane's binaries, unless GITOPS_REQUIRE_CONTROL_PLANE is set
    (the template's `make test` sets it, after building them)."""
    from eks_gpu_gitops.core.errors import InputError
    from eks_gpu_gitops.live.control_plane import find_binary

    try:
        for name in components:
            find_binary(name)
    except InputError as error:
        if CONTROL_PLANE_REQUIRED:
            raise
        pytest.skip(str(error))


def _control_plane(components):
    """A started control plane with the pinned CRDs installed (skipped as need_binaries says)."""
    from eks_gpu_gitops.live.control_plane import ControlPlane

    need_binaries(components)
    plane = ControlPlane(components=components)
    plane.start()
    if SCHEMA_DIR is not None:
        install_crds(plane, sorted((SCHEMA_DIR / "crds").glob("*.yaml")))
    return plane


def install_crds(plane, files) -> None:
    """Create each CRD through the API and wait until it is served."""
    import yaml
    from kubernetes import client, utils, watch  # noqa: F401
    from kubernetes.config import new_client_from_config

    api = new_client_from_config(str(plane.kubeconfig))
    extensions = client.ApiextensionsV1Api(api)
    names = []
    for file in files:
        for doc in yaml.safe_load_all(file.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                doc.pop("status", None)
                extensions.create_custom_resource_definition(doc)
                names.append(doc["metadata"]["name"])
    wait_established(extensions, names, 60)


@pytest.fixture(scope="session")
def control_plane():
    """etcd and kube-apiserver on loopback, once per test run, with the pinned CRDs."""
    from eks_gpu_gitops.live.control_plane import CORE

    plane = _control_plane(CORE)
    yield plane
    plane.stop()


@pytest.fixture(scope="module")
def own_control_plane():
    """A control plane for one test module alone (about 6 s to start), for tests that change
    cluster-wide things (nodes, CRDs) or read the whole cluster."""
    from eks_gpu_gitops.live.control_plane import CORE

    plane = _control_plane(CORE)
    yield plane
    plane.stop()
