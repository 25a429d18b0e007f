"""Shared fixtures for the repository's own tests.

Schemas: GITOPS_SCHEMA_DIR (a local copy laid out like the upstream files) when set, otherwise
the pinned upstream files, downloaded once into the user cache, as `scripts/validate` does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "scripts"
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gitops_tools import platform  # noqa: E402
from gitops_tools.schemas import SCHEMA_DIR_VARIABLE, SchemaChecker, SchemaStore  # noqa: E402

SCHEMA_DIR = Path(os.environ[SCHEMA_DIR_VARIABLE]) if os.environ.get(SCHEMA_DIR_VARIABLE) else None

# Rules that fail on malformed input must fail the test, not become a note.
os.environ["GITOPS_DEBUG"] = "1"


@pytest.fixture(scope="session")
def checker() -> SchemaChecker:
    return SchemaChecker(SchemaStore(platform.load(REPO)["schemas"], schema_dir=SCHEMA_DIR))


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


def run_validate(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """scripts/validate as a user runs it, with this interpreter as the tooling environment."""
    environment = {**os.environ, "GITOPS_PYTHON": sys.executable, **(env or {})}
    environment.pop("GITOPS_DEBUG", None)
    return subprocess.run(
        [str(cwd / "scripts" / "validate"), *args], cwd=cwd, env=environment, capture_output=True, text=True
    )
