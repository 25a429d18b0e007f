"""Hostile input, crashes: what Flux refuses is one line, never an internal error."""

from __future__ import annotations

import pytest
from hostile import add_kustomization, last_line
from test_cli import tool


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"images": ["x"]}, "unable to get images: unable to convert patch 0 to map[string]interface{}"),
        ({"patches": ["x"]}, "unable to get patches"),
        ({"components": [{"path": "x"}]}, "unable to get components"),
        ({"commonMetadata": {"labels": ["x"]}}, ""),
    ],
    ids=["images", "patches", "components", "commonMetadata"],
)
def test_a_spec_of_the_wrong_shape_is_one_line(repo, tmp_path, spec, says):
    add_kustomization(repo, "hostile", **spec)
    result = tool(repo, "render", "--out", str(tmp_path / "out"))
    if not says:  # Flux ignores a field it cannot read as a map: so does the render
        assert result.returncode == 0, result.stderr
        return
    said = last_line(result, "render")
    assert said.startswith("overlays/prod/training: kustomize build failed: ") and says in said, said
    assert "internal error" not in result.stderr and not (tmp_path / "out").exists()
