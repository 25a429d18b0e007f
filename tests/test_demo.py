"""`make demo` on a fresh clone walks the whole loop (bake, render, validate, a pull request's diff), and a
project baked into a folder of another Git repository renders, whether that repository ignores the folder (the
template's own demo/) or not (a team's monorepo)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cookiecutter.main import cookiecutter

from conftest import SCHEMA_DIR, git

TIMEOUT = 600  # seconds: far above the few seconds these take, against a hang only


def test_the_demo_walks_the_loop_from_a_fresh_clone(template_repo, tmp_path):
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "--quiet", str(template_repo), str(clone))
    env = {**os.environ, "GITOPS_SCHEMA_DIR": str(SCHEMA_DIR)}
    command = [sys.executable, "tools/demo.py", "--out", "demo"]
    result = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    steps = [line for line in result.stdout.splitlines() if line.startswith("== ")]
    assert [s.split(" ")[1] for s in steps] == ["Bake", "Render", "Validate", "A", "What"]
    assert "  prod: flux-system 0, infrastructure 11, training 9; eksctl yes" in result.stdout
    assert "  0 errors, 0 warnings, 0 suppressed in 47 objects (dev, prod)" in result.stdout
    assert "  + MPIJob training/resnet-trial  (Kustomization training, +120 -0)" in result.stdout
    assert git(clone, "status", "--porcelain") == ""  # the demo lives in a folder the clone ignores


@pytest.mark.parametrize("ignored", [True, False], ids=["ignored-folder", "monorepo-folder"])
def test_a_bake_inside_another_repository_renders(template, tmp_path, ignored):
    outer = tmp_path / "outer"
    outer.mkdir()
    git(outer, "init", "--quiet")
    (outer / ".gitignore").write_text("generated/\n" if ignored else "")
    (outer / "README.md").write_text("another repository\n")
    git(outer, "add", "-A")
    git(outer, "commit", "--quiet", "-m", "outer")
    project = Path(cookiecutter(str(template), no_input=True, output_dir=str(outer / "generated" / "team")))
    result = subprocess.run(["scripts/render"], cwd=project, capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "prod: flux-system 0, infrastructure 11, training 9; eksctl yes" in result.stdout
