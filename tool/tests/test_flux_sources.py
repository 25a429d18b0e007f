"""Flux sources beyond the repository's own GitRepository: a Flux Kustomization that builds from an ExternalArtifact
an ArtifactGenerator makes (source-watcher, Flux 2.7 and later) is rendered from that artifact's files, and one whose
source is not this repository is left out with a note, never a false error (repositories written here, in the
layout of fluxcd's kustomize-helm example, not copied from it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from eks_gpu_gitops.render import render_cache
from eks_gpu_gitops.render.repository import environment_fingerprints, render_repository

GENERATOR = {
    "apiVersion": "source.extensions.fluxcd.io/v1beta1",
    "kind": "ArtifactGenerator",
    "metadata": {"name": "platform", "namespace": "flux-system"},
    "spec": {
        "sources": [{"alias": "repo", "kind": "GitRepository", "name": "flux-system"}],
        # The artifact's layout differs from the repository's: prod/ and base/ side by side, so prod's
        # `../base/app` resolves only in the artifact (in the repository it would be apps/base/app).
        "artifacts": [
            {
                "name": "apps",
                "copy": [
                    {"from": "@repo/apps/prod/**", "to": "@artifact/prod/"},
                    {"from": "@repo/common/**", "to": "@artifact/base/", "exclude": ["*.md"]},
                ],
            }
        ],
    },
}


def flux_kustomization(name: str, path: str, kind: str = "ExternalArtifact", source: str = "apps", **spec) -> dict:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {"interval": "1h", "path": path, "prune": True, "sourceRef": {"kind": kind, "name": source}, **spec},
    }


def config_map(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": {}}


def write(root: Path, relative: str, *docs: dict) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True))


@pytest.fixture
def fleet(tmp_path) -> Path:
    """A repository whose Flux Kustomization `apps` builds from the ExternalArtifact `apps`."""
    root = tmp_path / "fleet"
    write(root, "clusters/prod/artifacts.yaml", GENERATOR)
    shutil.copy2(REPO / ".yamllint", root / ".yamllint")
    write(root, "clusters/prod/apps.yaml", flux_kustomization("apps", "./prod", wait=True))
    write(root, "apps/prod/kustomization.yaml", {"resources": ["../base/app"], "namePrefix": "prod-"})
    write(root, "common/app/kustomization.yaml", {"resources": ["settings.yaml"]})
    write(root, "common/app/settings.yaml", config_map("settings"))
    (root / "common" / "README.md").write_text("left out of the artifact by the exclude\n")
    subprocess.run(["git", "init", "--quiet", str(root)], check=True)
    return root


def kustomizations(root: Path) -> dict:
    [environment] = render_repository(root, ["prod"], skip_missing=True)
    return {k.name: k for k in environment.kustomizations}


def validate(root: Path, monkeypatch, capsys, *args: str) -> tuple[int, dict]:
    from eks_gpu_gitops.cli import validate as command

    monkeypatch.chdir(root)
    code = command.main(["--format", "json", "--quiet", "--offline", *args])
    return code, json.loads(capsys.readouterr().out)


def errors(report: dict) -> list[tuple[str, str]]:
    return [(f["rule"], f["resource"]) for f in report["findings"] if f["severity"] == "error"]


def test_a_kustomization_builds_from_the_files_its_external_artifact_holds(fleet):
    found = kustomizations(fleet)

    assert found["apps"].artifact == "ExternalArtifact flux-system/apps (ArtifactGenerator platform)"
    assert [(m.resource, m.file) for m in found["apps"].objects] == [
        ("ConfigMap/default/prod-settings", "apps/prod")  # the folder of the repository it was copied from
    ]


def test_an_external_artifact_a_generator_makes_from_this_repository_validates_without_a_false_error(
    fleet, monkeypatch, capsys
):
    code, report = validate(fleet, monkeypatch, capsys)

    assert errors(report) == []
    assert [n for n in report["notes"] if "Kustomization apps" in n] == []
    assert code == 0


def test_a_path_the_external_artifact_does_not_hold_is_flux_path_missing(fleet, monkeypatch, capsys):
    write(fleet, "clusters/prod/apps.yaml", flux_kustomization("apps", "./apps/prod"))  # the repository's path

    code, report = validate(fleet, monkeypatch, capsys)

    assert errors(report) == [("flux-path-missing", "Kustomization/flux-system/apps")]
    assert code == 1


def test_an_external_artifact_no_generator_makes_is_flux_source_missing_and_not_built(fleet, monkeypatch, capsys):
    write(fleet, "clusters/prod/apps.yaml", flux_kustomization("apps", "./prod", source="application"))

    code, report = validate(fleet, monkeypatch, capsys)

    assert errors(report) == [("flux-source-missing", "Kustomization/flux-system/apps")]
    assert "apps" not in kustomizations(fleet)


@pytest.mark.parametrize(
    "source",
    [
        {"kind": "GitRepository", "name": "upstream"},  # another repository's GitRepository
        {"kind": "OCIRepository", "name": "upstream"},
    ],
)
def test_an_external_artifact_of_another_source_is_a_note_and_no_path_error(fleet, monkeypatch, capsys, source):
    generator = json.loads(json.dumps(GENERATOR))
    generator["spec"]["sources"] = [{"alias": "repo", **source}]
    upstream = {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": source["kind"],
        "metadata": {"name": "upstream", "namespace": "flux-system"},
        "spec": {"interval": "1h", "url": "oci://ghcr.io/example/manifests", "ref": {"tag": "1.0.0"}},
    }
    if source["kind"] == "GitRepository":
        upstream["spec"].update(url="https://github.com/example/manifests", ref={"branch": "main"})
    write(fleet, "clusters/prod/artifacts.yaml", generator, upstream)
    write(fleet, "clusters/prod/apps.yaml", flux_kustomization("apps", "./no-such-folder"))

    code, report = validate(fleet, monkeypatch, capsys)

    assert errors(report) == []
    [note] = [n for n in report["notes"] if "Kustomization apps" in n]
    assert note.startswith("prod: Flux Kustomization apps builds from ExternalArtifact flux-system/apps, which")
    assert f"copies from source {source['kind']} flux-system/upstream, which is not this repository" in note
    assert note.endswith("its spec.path './no-such-folder' is not rendered or checked")
    assert code == 0


def test_a_kustomization_of_an_oci_repository_is_a_note(fleet, monkeypatch, capsys):
    oci = {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "OCIRepository",
        "metadata": {"name": "manifests", "namespace": "flux-system"},
        "spec": {"interval": "1h", "url": "oci://ghcr.io/example/manifests", "ref": {"tag": "1.0.0"}},
    }
    write(fleet, "clusters/prod/oci.yaml", oci, flux_kustomization("remote", "./deploy", "OCIRepository", "manifests"))

    code, report = validate(fleet, monkeypatch, capsys)

    assert errors(report) == []
    assert [n for n in report["notes"] if "Kustomization remote" in n] == [
        "prod: Flux Kustomization remote builds from OCIRepository flux-system/manifests, not from this "
        "repository: its spec.path './deploy' is not rendered or checked"
    ]


def test_a_path_pattern_makes_one_artifact_per_folder(fleet):
    generator = json.loads(json.dumps(GENERATOR))
    generator["spec"]["pathPattern"] = "@repo/teams/{team}"
    generator["spec"]["artifacts"] = [
        {"name": "{team}-config", "copy": [{"from": "@repo/teams/{team}/**", "to": "@artifact/"}]}
    ]
    write(fleet, "clusters/prod/artifacts.yaml", generator)
    write(fleet, "clusters/prod/apps.yaml", flux_kustomization("red", "./", source="red-config"))
    write(fleet, "teams/Red/settings.yaml", config_map("red"))  # names are lower-cased, paths are not
    write(fleet, "teams/blue/settings.yaml", config_map("blue"))

    found = kustomizations(fleet)

    assert [(m.resource, m.file) for m in found["red"].objects] == [
        ("ConfigMap/default/red", "teams/Red/settings.yaml")
    ]


def test_the_generator_may_come_from_a_kustomization_built_later(fleet):
    (fleet / "clusters/prod/artifacts.yaml").unlink()
    write(
        fleet,
        "clusters/prod/platform.yaml",
        flux_kustomization("platform", "./platform", "GitRepository", "flux-system"),
    )
    write(fleet, "platform/generator.yaml", GENERATOR)

    found = kustomizations(fleet)

    assert [m.resource for m in found["apps"].objects] == ["ConfigMap/default/prod-settings"]


def test_what_an_external_artifact_is_made_from_is_part_of_the_environments_reads(fleet):
    assert render_cache.shared() is not None  # the tests' render cache (conftest.py)
    kustomizations(fleet)
    before = environment_fingerprints(fleet, ["prod"])["prod"]
    assert before is not None

    (fleet / "unrelated.txt").write_text("not read by any build\n")
    assert environment_fingerprints(fleet, ["prod"])["prod"] == before

    write(fleet, "common/app/settings.yaml", config_map("renamed"))  # read only through the artifact
    assert environment_fingerprints(fleet, ["prod"])["prod"] is None
    assert [m.name for m in kustomizations(fleet)["apps"].objects] == ["prod-renamed"]


def test_folder_mode_reads_the_generator_and_its_kustomizations_without_a_false_error(fleet, monkeypatch, capsys):
    # apps/prod builds only inside the artifact (its ../base is the artifact's), so it is not named here.
    code, report = validate(fleet, monkeypatch, capsys, "clusters", "common")

    assert errors(report) == []
    assert code == 0


@pytest.mark.parametrize(
    ("copy", "files"),
    [
        # a folder without glob: copied as a folder of its name (cp -r)
        ({"from": "@repo/common/app", "to": "@artifact/"}, ["app/kustomization.yaml", "app/settings.yaml"]),
        # a file to a file name
        ({"from": "@repo/common/app/settings.yaml", "to": "@artifact/x.yaml"}, ["x.yaml"]),
        # a glob that does not end with /**: each match keeps its whole path
        (
            {"from": "@repo/common/*", "to": "@artifact/c/"},
            ["c/common/README.md", "c/common/app/kustomization.yaml", "c/common/app/settings.yaml"],
        ),
        # /** strips the prefix; an exclude with ** matches at any depth
        (
            {"from": "@repo/common/**", "to": "@artifact/", "exclude": ["**/settings.yaml"]},
            ["README.md", "app/kustomization.yaml"],
        ),
    ],
)
def test_copy_operations_place_files_as_source_watcher_does(fleet, copy, files):
    from eks_gpu_gitops.model import Manifest
    from eks_gpu_gitops.model.flux_sources import outputs
    from eks_gpu_gitops.render.external_artifact import stage

    generator = json.loads(json.dumps(GENERATOR))
    generator["spec"]["artifacts"] = [{"name": "apps", "copy": [copy]}]
    [output] = outputs([Manifest(generator, "clusters/prod/artifacts.yaml")])

    staged = stage(output, "apps", fleet)
    try:
        found = sorted(p.relative_to(staged.path).as_posix() for p in staged.path.rglob("*") if p.is_file())
    finally:
        staged.close()

    assert found == files


FLUX = os.environ.get("GITOPS_FLUX") or shutil.which("flux")
OLDER_VERSIONS = {  # versions earlier Flux releases served, with the kinds they had
    "source.toolkit.fluxcd.io": ["v1beta1", "v1beta2"],
    "kustomize.toolkit.fluxcd.io": ["v1beta1", "v1beta2"],
    "helm.toolkit.fluxcd.io": ["v2beta1", "v2beta2"],
    "notification.toolkit.fluxcd.io": ["v1beta1", "v1beta2", "v1"],
    "image.toolkit.fluxcd.io": ["v1beta1", "v1beta2"],
    "source.extensions.fluxcd.io": ["v1alpha1"],
}


@pytest.mark.skipif(not FLUX, reason="no Flux CLI (set GITOPS_FLUX or put flux on PATH)")
def test_the_flux_versions_known_are_those_flux_migrate_of_the_pinned_release_moves_to(tmp_path):
    from eks_gpu_gitops.facts import flux
    from eks_gpu_gitops.model.kinds import flux_removal

    docs = [
        {"apiVersion": f"{group}/{version}", "kind": kind, "metadata": {"name": "x"}}
        for (group, kind), served in sorted(flux.SERVED.items())
        for version in [served, *OLDER_VERSIONS[group]]
    ]
    write(tmp_path, "objects.yaml", *docs)
    result = subprocess.run(
        [FLUX, "migrate", "-f", "objects.yaml", "--dry-run"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    # "✚ objects.yaml:12: GitRepository v1beta2 -> v1" for each object it would rewrite.
    theirs = sorted(
        tuple(line.split(": ", 1)[1].replace(" -> ", " ").split())
        for line in result.stderr.splitlines()
        if " -> " in line
    )

    ours = []
    for doc in docs:
        found = flux_removal(doc["apiVersion"], doc["kind"])
        if found:
            ours.append((doc["kind"], doc["apiVersion"].rpartition("/")[2], found[1].rpartition("/")[2]))
    assert sorted(ours) == theirs


def git_repository(name: str, namespace: str, url: str) -> dict:
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"interval": "1h", "url": url, "ref": {"branch": "main"}},
    }


def test_a_generator_in_another_namespace_reads_that_namespaces_source_not_this_repository(fleet):
    # team/flux-system is another repository's GitRepository: the team generator's `repo` alias names it.
    team = json.loads(json.dumps(GENERATOR))
    team["metadata"]["namespace"] = "team"
    other = git_repository("flux-system", "team", "https://github.com/example/other")
    write(fleet, "clusters/prod/artifacts.yaml", GENERATOR, team, other)
    team_apps = flux_kustomization("team-apps", "./prod")
    team_apps["metadata"]["namespace"] = "team"
    write(fleet, "clusters/prod/team.yaml", team_apps)

    found = kustomizations(fleet)

    assert [m.resource for m in found["apps"].objects] == ["ConfigMap/default/prod-settings"]
    assert "team-apps" not in found  # not built from this repository's files


def test_an_artifact_staged_for_one_environment_is_described_by_the_generator_of_another(fleet):
    other = json.loads(json.dumps(GENERATOR))
    other["metadata"]["name"] = "platform-staging"  # the same spec, another name
    write(fleet, "clusters/staging/artifacts.yaml", other)
    write(fleet, "clusters/staging/apps.yaml", flux_kustomization("apps", "./prod"))

    environments = render_repository(fleet, ["prod", "staging"], skip_missing=True)

    assert [next(k.artifact for k in e.kustomizations if k.name == "apps") for e in environments] == [
        "ExternalArtifact flux-system/apps (ArtifactGenerator platform)",
        "ExternalArtifact flux-system/apps (ArtifactGenerator platform-staging)",
    ]


def _generator(copy: list[dict], **spec) -> dict:
    generator = json.loads(json.dumps(GENERATOR))
    generator["spec"]["artifacts"] = [{"name": "apps", "copy": copy}]
    generator["spec"].update(spec)
    return generator


@pytest.mark.parametrize(
    ("generator", "path", "added"),
    [
        # a folder copied by name
        (_generator([{"from": "@repo/later/app", "to": "@artifact/"}]), "./app", "later/app/settings.yaml"),
        # a file: whether it is a folder stays false, whether it exists does not
        (_generator([{"from": "@repo/later.yaml", "to": "@artifact/app/"}]), "./app", "later.yaml"),
        # a glob that matches nothing
        (_generator([{"from": "@repo/later/**", "to": "@artifact/"}]), "./", "later/settings.yaml"),
        # a pathPattern no folder matches (the walk of the folders is a read)
        (
            {
                **GENERATOR,
                "spec": {
                    **GENERATOR["spec"],
                    "pathPattern": "@repo/teams/{team}",
                    "artifacts": [{"name": "{team}", "copy": [{"from": "@repo/teams/{team}/**", "to": "@artifact/"}]}],
                },
            },
            "./",
            "teams/apps/settings.yaml",
        ),
    ],
)
def test_what_a_failed_staging_read_is_part_of_the_environments_reads(fleet, generator, path, added):
    write(fleet, "clusters/prod/artifacts.yaml", generator)
    write(fleet, "clusters/prod/apps.yaml", flux_kustomization("apps", path))
    assert "apps" not in kustomizations(fleet)
    before = environment_fingerprints(fleet, ["prod"])["prod"]
    assert before is not None

    write(fleet, added, config_map("later"))

    assert environment_fingerprints(fleet, ["prod"])["prod"] is None
    assert [m.name for m in kustomizations(fleet)["apps"].objects] == ["later"]


def unmade_note(root: Path, monkeypatch, capsys) -> str:
    code, report = validate(root, monkeypatch, capsys)
    assert code == 0
    [note] = [n for n in report["notes"] if "Kustomization apps" in n]
    return note


def test_a_copy_pattern_of_many_segments_is_a_note_not_a_crash(fleet, monkeypatch, capsys):
    pattern = "@repo/" + "*/" * 1100 + "x"
    write(fleet, "clusters/prod/artifacts.yaml", _generator([{"from": pattern, "to": "@artifact/"}]))

    note = unmade_note(fleet, monkeypatch, capsys)

    assert "its copy source is longer than the 1024 characters the ArtifactGenerator CRD allows" in note


def test_a_glob_of_many_segments_is_matched_segment_by_segment(fleet):
    from eks_gpu_gitops.model import Manifest
    from eks_gpu_gitops.model.flux_sources import outputs
    from eks_gpu_gitops.render import external_artifact

    deep = "/".join(["d"] * 300)
    write(fleet, f"{deep}/x.yaml", config_map("deep"))
    write(fleet, f"{deep}/y.yaml", config_map("other"))
    pattern = "@repo/" + "*/" * 300 + "x.yaml"  # within the CRD's 1024 characters
    [output] = outputs([Manifest(_generator([{"from": pattern, "to": "@artifact/"}]), "clusters/prod/artifacts.yaml")])

    staged = external_artifact.stage(output, "apps", fleet)
    try:
        assert [p.relative_to(staged.path).as_posix() for p in staged.path.rglob("*.yaml")] == [f"{deep}/x.yaml"]
    finally:
        staged.close()


@pytest.mark.parametrize(
    ("limit", "value", "copy", "why"),
    [
        (
            "MAX_COPY_OPERATIONS",
            2,
            [{"from": "@repo/common/app", "to": f"@artifact/{n}/"} for n in range(3)],
            "it has 3 copy operations, more than the 2 staged here",
        ),
        (
            "MAX_ARTIFACT_FILES",
            1,
            [{"from": "@repo/common/**", "to": "@artifact/"}],
            "its files are more than the 1 staged here per artifact",
        ),
        (
            "MAX_ARTIFACT_BYTES",
            100,
            [{"from": "@repo/common/**", "to": "@artifact/"}],
            "its files hold more than the 100 bytes staged here per artifact",
        ),
        (
            "MAX_STAGED_FILES",
            1,
            [{"from": "@repo/common/**", "to": "@artifact/"}],
            "the artifacts of this render hold more than the 1 files staged here per run",
        ),
    ],
)
def test_staging_is_bounded_with_a_note(fleet, monkeypatch, limit, value, copy, why):
    from eks_gpu_gitops.render import external_artifact

    monkeypatch.setattr(external_artifact, limit, value)
    write(fleet, "clusters/prod/artifacts.yaml", _generator(copy))

    # Rendered, not validated: validate's results of an alike repository are kept by what it read, not by limits.
    [environment] = render_repository(fleet, ["prod"], skip_missing=True)

    assert environment.unmade == {
        ("flux-system", "apps"): "ArtifactGenerator flux-system/platform (clusters/prod/artifacts.yaml) makes it, "
        f"but {why}; it is not rendered here"
    }
