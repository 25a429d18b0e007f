"""validate keeps each environment's results by a hash of what they depend on: an unchanged environment is
neither rendered nor checked again, and what is printed is what a run that checks everything prints."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml
from conftest import SCHEMA_DIR
from test_validate_cli import GPU_HPA, add_resource

from eks_gpu_gitops.cli import validate
from eks_gpu_gitops.core import credentials
from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.render import flux_build, platform, render_cache
from eks_gpu_gitops.render import repository as render
from eks_gpu_gitops.schemas.store import SchemaStore
from eks_gpu_gitops.validate import results_cache
from eks_gpu_gitops.validate.runner import Reported, Result


@pytest.fixture
def fleet(repo_copy, render_cache_dir, monkeypatch) -> dict:
    """The repository copy as the working folder, and the environments each validate run renders."""
    monkeypatch.chdir(repo_copy)
    rendered: list[str] = []
    original = flux_build.build

    def counting(workspace, rel_path, spec, env, source, reads=None):
        rendered.append(env)
        return original(workspace, rel_path, spec, env, source, reads)

    monkeypatch.setattr(flux_build, "build", counting)
    render_cache._SHARED.clear()
    return {"root": repo_copy, "rendered": rendered}


def run(fleet: dict, capsys, *args: str) -> tuple[dict, str, set[str]]:
    """(the JSON report, stderr, the environments rendered) of one validate run."""
    fleet["rendered"].clear()
    code = validate.main(["--format", "json", *args])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    return json.loads(captured.out), captured.err, set(fleet["rendered"])


def test_a_second_run_prints_the_same_without_rendering(fleet, capsys):
    environments = set(render.environment_names(fleet["root"]))
    first, err, rendered = run(fleet, capsys)
    assert rendered == environments and "from the cache" not in err
    second, err, rendered = run(fleet, capsys)
    assert rendered == set()
    assert f"results of {len(environments)} unchanged environments from the cache" in err
    assert second == first
    assert second["summary"]["objects"] == first["summary"]["objects"] > 0


def test_a_change_to_one_environment_checks_that_one_again_and_reports_as_a_full_run(fleet, capsys, monkeypatch):
    run(fleet, capsys)
    add_resource(fleet["root"] / "overlays" / "dev" / "training", "hpa.yaml", GPU_HPA)
    changed, err, rendered = run(fleet, capsys)
    assert rendered == {"dev"}
    assert "results of 1 unchanged environment from the cache" in err
    hpa = [f for f in changed["findings"] if f["rule"] == "hpa-on-gpu"]
    assert [(f["env"], f["resource"]) for f in hpa] == [("dev", "HorizontalPodAutoscaler/training/scale-on-gpus")]
    monkeypatch.setenv("GITOPS_RENDER_CACHE", "off")
    everything, _, rendered = run(fleet, capsys)
    assert rendered == set(render.environment_names(fleet["root"]))
    assert changed == everything


@pytest.mark.parametrize("change", ["platform.yaml", "kubernetes-version", "schema-file", "tools"])
def test_what_checking_reads_besides_the_render_is_part_of_the_key(fleet, capsys, monkeypatch, tmp_path, change):
    schemas = tmp_path / "schemas"
    shutil.copytree(SCHEMA_DIR, schemas)
    args = ["--schema-dir", str(schemas)]
    run(fleet, capsys, *args)
    _, _, rendered = run(fleet, capsys, *args)
    assert rendered == set()
    if change == "platform.yaml":
        settings = fleet["root"] / "platform.yaml"
        settings.write_text(settings.read_text() + "# a comment changes the key\n")
    elif change == "kubernetes-version":
        args += ["--kubernetes-version", "1.33"]
    elif change == "schema-file":
        store = SchemaStore(platform.schema_sources(fleet["root"]), schema_dir=schemas)
        read = results_cache.schema_files(store)[0]  # one the schema stage reads
        read.write_text(read.read_text() + "\n")
    else:
        monkeypatch.setattr(results_cache, "_tools_digest", lambda: "another copy of the tools")
    _, _, rendered = run(fleet, capsys, *args)
    assert rendered == set(render.environment_names(fleet["root"]))


def test_off_keeps_no_results(fleet, capsys, monkeypatch):
    monkeypatch.setenv("GITOPS_RENDER_CACHE", "off")
    run(fleet, capsys)
    _, err, rendered = run(fleet, capsys)
    assert rendered == set(render.environment_names(fleet["root"]))
    assert "from the cache" not in err


def test_a_kept_result_shows_no_secret_even_when_the_run_reading_it_knows_none(fleet, monkeypatch):
    secret = "s3cr3t-from-a-substituted-secret"
    monkeypatch.setattr(credentials, "_SUBSTITUTED_SECRETS", {secret})
    render.render_repository(fleet["root"], ["dev"])
    cache = results_cache.ResultsCache(fleet["root"], SchemaStore({}, schema_dir=SCHEMA_DIR), None)
    key = cache.keys(["dev"])["dev"]
    assert key is not None
    finding = Reported("placeholder-value", "warning", "dev", "f.yaml", 1, "ConfigMap/x/y", "training",
                       f"value {secret} looks like a placeholder", "fill it in")  # fmt: skip
    cache.put(key, results_cache.Part("dev", [finding], [], {"load": [f"dev: {secret}"], "schemas": [], "rules": []}))
    monkeypatch.setattr(credentials, "_SUBSTITUTED_SECRETS", set())  # a later run: no Secret was read
    kept = cache.get(key)
    assert kept is not None and kept.findings[0].rule == "placeholder-value"
    assert secret not in kept.findings[0].message and secret not in kept.notes["load"][0]
    assert secret not in render_cache.shared().read(key)


def test_a_damaged_entry_is_checked_again(fleet, capsys):
    first, _, _ = run(fleet, capsys)
    store = render_cache.shared()
    for entry in store.folder.rglob("*.yaml"):
        text = entry.read_text()
        if '"findings"' in text:
            header, _, body = text.partition("\n")
            entry.write_text(header + "\n" + body[:-5])  # its hash no longer matches
    again, _, rendered = run(fleet, capsys)
    assert rendered == set(render.environment_names(fleet["root"]))
    assert again == first


def test_an_environment_fingerprint_follows_the_components_a_flux_kustomization_adds(repo_copy, render_cache_dir):
    component = repo_copy / "overlays" / "dev" / "extra"
    component.mkdir()
    (component / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncommonLabels:\n  team: a\n"
    )
    entry = repo_copy / "clusters" / "dev" / "training.yaml"
    entry.write_text(entry.read_text() + "  components:\n    - ../extra\n")

    def fingerprint() -> str | None:
        return render.environment_fingerprints(repo_copy, ["dev"])["dev"]

    render.render_repository(repo_copy, ["dev"])
    assert fingerprint() is not None
    (component / "kustomization.yaml").write_text((component / "kustomization.yaml").read_text().replace("a", "b"))
    assert fingerprint() is None


def test_an_environment_reading_outside_the_repository_is_refused_and_never_kept(repo_copy, tmp_path, render_cache_dir):
    render.render_repository(repo_copy, ["prod"])
    outside = tmp_path / "outside.yaml"
    outside.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: outside\n")
    kustomization = repo_copy / "overlays" / "dev" / "training" / "kustomization.yaml"
    listed = kustomization.read_text().replace("  - ../settings.yaml\n", f"  - ../settings.yaml\n  - {outside}\n")
    kustomization.write_text(listed)
    with pytest.raises(InputError, match="outside"):
        render.render_repository(repo_copy, ["dev"])
    found = render.environment_fingerprints(repo_copy, ["dev", "prod"])
    assert found["dev"] is None and found["prod"] is not None


def test_merge_keeps_the_stage_order_of_notes():
    parts = [
        results_cache.Part("a", notes={"load": ["a: load"], "schemas": ["a: schemas"], "rules": ["a: rules"]}),
        results_cache.Part("b", notes={"load": ["b: load"], "schemas": [], "rules": ["b: rules"]}),
    ]
    merged = results_cache.merge(parts, Result(notes=["lint"]))
    assert merged.notes == ["lint", "a: load", "b: load", "a: schemas", "a: rules", "b: rules"]
    assert merged.environments == ["a", "b"]


def test_a_file_git_ignores_is_not_in_the_key_the_render_does_not_see_it(repo, render_cache_dir, monkeypatch, capsys):
    """.git/info/exclude changes what the render copies, not the files: the key follows git's view."""
    monkeypatch.chdir(repo)
    broken = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
    (repo / "clusters" / "dev" / "extra.yaml").write_text(yaml.safe_dump({**broken, "data": 5}))
    exclude = repo / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    exclude.write_text("clusters/dev/extra.yaml\n")

    def invalid() -> list[str]:
        assert validate.main(["--format", "json", "--quiet"]) in (0, 1)
        report = json.loads(capsys.readouterr().out)
        return [f["resource"] for f in report["findings"] if f["rule"] == "schema-invalid"]

    assert invalid() == []  # git ignores it: Flux never sees it
    exclude.write_text("")
    assert invalid() == ["ConfigMap/default/c"]


def test_an_ignore_file_that_is_a_link_or_a_device_is_never_read(repo_copy, render_cache_dir):
    os.symlink("/dev/zero", repo_copy / ".gitignore")
    os.symlink("/dev/zero", repo_copy / "clusters" / ".sourceignore")
    render.render_repository(repo_copy, ["dev"])  # returns
    cache = results_cache.ResultsCache(repo_copy, SchemaStore({}, schema_dir=SCHEMA_DIR), None)
    assert cache.keys(["dev"])["dev"] is not None


def test_an_environment_fingerprint_does_not_follow_a_link_out_of_the_repository(repo_copy, tmp_path, render_cache_dir):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kustomization.yaml").write_text("resources: []\n")
    os.symlink(outside, repo_copy / "overlays" / "dev" / "training" / "ext")
    kustomization = repo_copy / "overlays" / "dev" / "training" / "kustomization.yaml"
    listed = kustomization.read_text().replace("  - ../settings.yaml\n", "  - ../settings.yaml\n  - ext\n")
    kustomization.write_text(listed)
    with pytest.raises(InputError):
        render.render_repository(repo_copy, ["dev"])
    assert render.environment_fingerprints(repo_copy, ["dev"]) == {"dev": None}
