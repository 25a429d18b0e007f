"""Every environment renders and validates without an error, as CI checks it on each pull request, and the README's
table of environments says what their settings say."""

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


@pytest.mark.parametrize(
    "env", [env for env in environments() if (ROOT / "overlays" / env / "settings.yaml").is_file()]
)
def test_readme_row_is_what_the_settings_say(env):
    """A hand edit of overlays/<env>/settings.yaml that leaves the README's row behind fails here; the tool's
    message names the `scripts/scale` command that writes the row and every figure that follows from the node
    group."""
    result = run(ROOT, "scale", env, "--check")
    assert result.returncode == 0, result.stderr[-2000:]
