"""Hostile input, hangs: nothing read blocks or grows without bound."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml
from test_cli import environment, tool


@pytest.mark.parametrize("replacement", ["fifo", "dev-zero"])
def test_a_cache_entry_made_a_fifo_or_a_device_is_a_miss(repo, tmp_path, replacement):
    cache = tmp_path / "cache"
    env = environment(GITOPS_RENDER_CACHE=str(cache))
    assert tool(repo, "render", "--out", str(tmp_path / "first"), env=env).returncode == 0
    entries = sorted(cache.rglob("*.yaml"))
    assert entries
    for entry in entries:
        entry.unlink()
        if replacement == "fifo":
            os.mkfifo(entry)
        else:
            entry.symlink_to("/dev/zero")
    result = tool(repo, "render", "--out", str(tmp_path / "second"), env=env)  # timeout=600 in tool(): no hang
    assert result.returncode == 0, result.stderr
    first, second = (sorted((tmp_path / n).rglob("*.yaml")) for n in ("first", "second"))
    assert [p.read_text() for p in first] == [p.read_text() for p in second]


def test_a_fifo_in_the_repository_is_never_read(repo, tmp_path):
    folder = repo / "overlays/prod/training"
    os.mkfifo(folder / "pipe.yaml")
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    kustomization["resources"].append("pipe.yaml")
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    result = subprocess.run(
        [str(repo / "scripts" / "validate"), "--env", "prod", "--quiet"],
        cwd=repo,
        env=environment(GITOPS_RENDER_CACHE=str(tmp_path / "cache")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("validate: ") and "pipe.yaml" in line, line
