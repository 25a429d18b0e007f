"""Fixtures of the repository's own tests: they check what this repository owns (its environments, its
workflows), with the pinned tool run as a person runs it (scripts/<verb>)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def environments() -> list[str]:
    """Every environment of the repository: a folder of Flux entry points under clusters/."""
    return sorted(p.name for p in (ROOT / "clusters").iterdir() if p.is_dir() and any(p.glob("*.yaml")))


def settings(env: str) -> dict:
    return yaml.safe_load((ROOT / "overlays" / env / "settings.yaml").read_text())


def run(root: Path, verb: str, *args: str) -> subprocess.CompletedProcess:
    """scripts/<verb> in `root`, as a person runs it."""
    return subprocess.run([str(root / "scripts" / verb), *args], cwd=root, capture_output=True, text=True, timeout=600)


@pytest.fixture
def copy(tmp_path) -> Path:
    """What the tool reads of this repository, copied so that a test can add to it."""
    target = tmp_path / "repository"
    for name in ("clusters", "overlays", "scripts", "trainer"):
        shutil.copytree(
            ROOT / name, target / name, ignore=shutil.ignore_patterns(".venv", "data", "runs", "__pycache__")
        )
    for name in ("platform.yaml", ".yamllint", ".gitignore", ".sourceignore", "README.md"):
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target / name)
    if (ROOT / ".venv").is_dir():  # the copy's scripts run the same pinned tool
        (target / ".venv").symlink_to(ROOT / ".venv")
    return target
