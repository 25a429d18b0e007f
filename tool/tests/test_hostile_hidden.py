"""Hostile input, a change that stays hidden: a build is reused only while everything it read reads the same.

The render cache keeps a build with the reads the helper reports (render_cache.py), so a file named only inside
another file kustomize reads (a generator's or a transformer's configuration, a replacement's source) is an input
like any other. Each case is the CI sequence: main is validated and rendered (its cache kept, as CI restores it
for a pull request), then the pull request changes that one file, and render, diff and validate must all see it.
"""

from __future__ import annotations

import subprocess

import pytest
from test_cli import environment, tool

TRAINING = "overlays/prod/training"
NAMESPACE_PATCH = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: training\n  labels:\n    patched: {}\n"
CASES = {
    # kustomization.yaml gets `extra`; `files` are written relative to it, the one named inside another in a folder
    # of its own (a file beside the kustomization was always an input); `changed` is the one file the change touches.
    "generator-file": {
        "extra": "generators:\n  - gen.yaml\n",
        "files": {
            "gen.yaml": "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: hidden\n"
            "  namespace: training\nfiles:\n  - ../shared/data.txt\noptions:\n  disableNameSuffixHash: true\n",
            "../shared/data.txt": "first-{}\n",
        },
        "changed": "../shared/data.txt",
    },
    "inline-generator": {
        "extra": "generators:\n  - |-\n    apiVersion: builtin\n    kind: ConfigMapGenerator\n    metadata:\n"
        "      name: hidden\n      namespace: training\n    envs:\n      - ../shared/vars.env\n",
        "files": {"../shared/vars.env": "MODE=first-{}\n"},
        "changed": "../shared/vars.env",
    },
    "transformer-file": {
        "extra": "transformers:\n  - t.yaml\n",
        "files": {
            "t.yaml": "apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: hidden\n"
            "path: ../shared/patch.yaml\n",
            "../shared/patch.yaml": NAMESPACE_PATCH.format("first-{}"),
        },
        "changed": "../shared/patch.yaml",
    },
    "inline-transformer": {
        "extra": "transformers:\n  - |-\n    apiVersion: builtin\n    kind: PatchTransformer\n    metadata:\n"
        "      name: hidden\n    path: ../shared/patch.yaml\n",
        "files": {"../shared/patch.yaml": NAMESPACE_PATCH.format("first-{}")},
        "changed": "../shared/patch.yaml",
    },
    "replacement-file": {
        "extra": "configMapGenerator:\n  - name: source\n    namespace: training\n    literals: [value=copied]\n"
        "    options:\n      disableNameSuffixHash: true\nreplacements:\n  - path: ../shared/replacement.yaml\n",
        "files": {
            "../shared/replacement.yaml": "source:\n  kind: ConfigMap\n  name: source\n  fieldPath: data.value\n"
            "targets:\n"
            "  - select:\n      kind: Namespace\n      name: training\n    fieldPaths:\n"
            "      - metadata.labels.first-{}\n"
            "    options:\n      create: true\n",
        },
        "changed": "../shared/replacement.yaml",
    },
}


def git(repo, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def rendered(repo, out, env) -> str:
    result = tool(repo, "render", "--env", "prod", "--out", str(out), env=env)
    assert result.returncode == 0, result.stderr
    return "".join(p.read_text() for p in sorted(out.rglob("*.yaml")))


@pytest.mark.parametrize("case", CASES)
def test_a_file_named_only_inside_another_is_an_input_of_render_diff_and_validate(repo, tmp_path, case):
    spec = CASES[case]
    folder = repo / TRAINING
    (folder / "kustomization.yaml").write_text((folder / "kustomization.yaml").read_text() + spec["extra"])
    for name, text in spec["files"].items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text.replace("{}", "0a1"))
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "main")
    env = environment(GITOPS_RENDER_CACHE=str(tmp_path / "cache"))  # one cache: main's, restored for the PR
    validated = tool(repo, "validate", "--env", "prod", env=env)
    assert validated.returncode in (0, 1), validated.stderr
    before = rendered(repo, tmp_path / "main", env)
    assert "first-0a1" in before

    changed = folder / spec["changed"]
    changed.write_text(changed.read_text().replace("first-0a1", "second-9z8"))

    after = rendered(repo, tmp_path / "pull-request", env)
    assert "second-9z8" in after and "first-0a1" not in after
    assert after == rendered(repo, tmp_path / "uncached", environment(GITOPS_RENDER_CACHE="off"))
    diff = tool(repo, "diff", "--base", "main", "--env", "prod", env=env)
    assert diff.returncode == 0, diff.stderr
    assert "No changes in the rendered manifests" not in diff.stdout and "second-9z8" in diff.stdout, diff.stdout
    again = tool(repo, "validate", "--env", "prod", env=env)
    assert again.returncode in (0, 1) and "from the cache" not in again.stderr, again.stderr
    kept = tool(repo, "validate", "--env", "prod", env=env)  # nothing changed since: now the results are kept
    assert "results of 1 unchanged environment from the cache" in kept.stderr, kept.stderr
