"""Hostile input, escape and data loss: a name becomes a file name only inside the output folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hostile import SECRET, add_kustomization, last_line, outside_file
from test_cli import tool


@pytest.mark.parametrize(
    "name",
    [
        "../../../../tmp/hostile-x",
        "../../overlays/base/training/mpijob",
        "..",
        "a/b",
        "a\\b",
        "x\n::error::y",
        ".hidden",
    ],
)
def test_a_kustomization_name_that_is_no_file_name_is_refused_and_nothing_is_written(repo, tmp_path, name):
    add_kustomization(repo, name)
    source = (repo / "overlays/base/training/mpijob.yaml").read_bytes()
    out = tmp_path / "out" / "rendered"
    said = last_line(tool(repo, "render", "--out", str(out)), "render")
    assert said.startswith("prod: Flux Kustomization ") and "cannot be a file name" in said, said
    assert "\n" not in said and "::error" not in said.split("'")[0]
    assert not out.exists() and not Path("/tmp/hostile-x.yaml").exists()
    assert (repo / "overlays/base/training/mpijob.yaml").read_bytes() == source
    assert [p.name for p in (tmp_path / "out").iterdir()] == []  # no staging folder left behind


def test_two_outputs_of_one_name_are_refused(repo, tmp_path):
    add_kustomization(repo, "eksctl")  # would overwrite the eksctl overlay's eksctl.yaml
    said = last_line(tool(repo, "render", "--out", str(tmp_path / "out")), "render")
    assert said == "prod: two outputs would be written to eksctl.yaml; rename one"
    assert not (tmp_path / "out").exists()


def test_an_output_folder_keeps_its_mode(repo, tmp_path):
    out = tmp_path / "out"
    out.mkdir(mode=0o750)
    os.chmod(out, 0o750)
    assert tool(repo, "render", "--out", str(out)).returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o750
    assert tool(repo, "render", "--out", str(out)).returncode == 0  # replaced by the next render: still 0750
    assert stat.S_IMODE(out.stat().st_mode) == 0o750


@pytest.mark.parametrize(
    "files",
    [
        # a generator config file naming a file outside
        lambda outside: {
            "kustomization.yaml": "resources: [../../base/training]\ngenerators: [gen.yaml]\n",
            "gen.yaml": f"apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: leak\nfiles: [{outside}]\n",
        },
        # an inline generator
        lambda outside: {
            "kustomization.yaml": "resources: [../../base/training]\ngenerators:\n- |-\n  apiVersion: builtin\n"
            f"  kind: SecretGenerator\n  metadata:\n    name: leak\n  files: [{outside}]\n",
        },
        # a transformer config file whose patch is outside
        lambda outside: {
            "kustomization.yaml": "resources: [../../base/training]\ntransformers: [t.yaml]\n",
            "t.yaml": f"apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: leak\npath: {outside}\n",
        },
        # an inline patch transformer
        lambda outside: {
            "kustomization.yaml": "resources: [../../base/training]\ntransformers:\n- |-\n  apiVersion: builtin\n"
            f"  kind: PatchTransformer\n  metadata:\n    name: leak\n  path: {outside}\n",
        },
        # a configMapGenerator file, a plain resource, a patch: by absolute path and by ..
        lambda outside: {"kustomization.yaml": f"configMapGenerator:\n- name: leak\n  files: [{outside}]\n"},
        lambda outside: {"kustomization.yaml": f"resources: [{outside}]\n"},
        lambda outside: {"kustomization.yaml": "resources: [../../../../outside.txt]\n"},
        lambda outside: {"kustomization.yaml": f"resources: [../../base/training]\npatches:\n- path: {outside}\n"},
    ],
    ids=[
        "generator-file",
        "inline-generator",
        "transformer-file",
        "inline-transformer",
        "configmap-file",
        "resource-absolute",
        "resource-dotdot",
        "patch-file",
    ],  # fmt: skip
)
def test_no_build_reads_a_file_outside_the_repository(repo, tmp_path, files):
    outside = outside_file(repo.parent)
    folder = repo / "overlays/prod/hostile"
    folder.mkdir()
    for name, text in files(outside).items():
        (folder / name).write_text(text)
    add_kustomization(repo, "hostile", "./overlays/prod/hostile")
    result = tool(repo, "render", "--out", str(tmp_path / "out"))
    said = last_line(result, "render")
    assert SECRET not in result.stdout + result.stderr
    assert not (tmp_path / "out").exists(), said


def test_flux_components_outside_the_repository_are_refused(repo, tmp_path):
    outside_file(repo.parent)
    add_kustomization(repo, "hostile", components=["../../../outside.txt"])
    result = tool(repo, "render", "--out", str(tmp_path / "out"))
    said = last_line(result, "render")
    assert "outside" in said and SECRET not in result.stdout + result.stderr
