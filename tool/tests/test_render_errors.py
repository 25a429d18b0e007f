"""render on broken input: exit 2, one line naming the folder and the cause."""

from __future__ import annotations

import os
import shutil
import subprocess

from conftest import REPO


def render(project, *args, path=None, **extra):
    env = dict(os.environ, **extra)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [str(project / "scripts" / "render"), *args], cwd=project, env=env, capture_output=True, text=True
    )


def test_broken_overlay_named_in_one_line(tmp_path):
    project = REPO
    broken = tmp_path / "broken"
    subprocess.run(["cp", "-r", str(project), str(broken)], check=True)
    (broken / "overlays/dev/training/kustomization.yaml").write_text("resources:\n  - ../../base/missing\n")
    result = render(broken)
    assert result.returncode == 2
    lines = [
        line
        for line in result.stderr.splitlines()
        if not line.startswith("render: dev/") and not line.startswith("render: prod/")
    ]
    assert len(lines) == 1 and "overlays/dev/training" in lines[0] and "Traceback" not in result.stderr
    assert not (broken / "rendered").exists(), "nothing half-written"


def test_unknown_environment():
    result = render(REPO, "--env", "staging")
    assert result.returncode == 2
    assert result.stderr.strip() == "render: unknown environment 'staging'; known: dev, prod"


def test_no_helper_is_one_line_and_nothing_else_is_needed(tmp_path):
    bin_dir = tmp_path / "bin"  # the shim's own needs, and nothing else: no kustomize, no kubectl
    bin_dir.mkdir()
    for tool in ("bash", "dirname"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    project = REPO
    missing = tmp_path / "no-helper"
    result = render(project, "--out", str(tmp_path / "off"), path=str(bin_dir), GITOPS_HELPER=str(missing))
    assert (result.returncode, result.stderr.strip()) == (
        2,
        f"render: GITOPS_HELPER={missing}: no such executable; unset it to use the tool's own",
    )
    assert not (tmp_path / "off").exists()
    result = render(project, "--out", str(tmp_path / "own"), path=str(bin_dir))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "own" / "prod" / "training.yaml").stat().st_size > 0
