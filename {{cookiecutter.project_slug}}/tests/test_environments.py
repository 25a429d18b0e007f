"""Every environment renders and validates without an error, as CI checks it on each pull request."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, environments, run


@pytest.mark.parametrize("env", environments())
def test_validates_without_errors(env):
    result = run(ROOT, "validate", "--env", env, "--format", "json", "--quiet")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    errors = [f for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]
    assert errors == []


def test_every_environment_renders_its_flux_entry_points_and_cluster(tmp_path):
    result = run(ROOT, "render", "--out", str(tmp_path / "rendered"))
    assert result.returncode == 0, result.stderr[-4000:]
    for env in environments():
        assert (tmp_path / "rendered" / env / "eksctl.yaml").stat().st_size > 0, env
