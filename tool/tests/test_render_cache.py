"""What a build reads (the helper reports it), the build cache that keeps builds by it, and the environment
fingerprints made of it."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # diff_fixtures sits next to this file
from diff_fixtures import GitRepo, environments  # noqa: E402

from eks_gpu_gitops import model  # noqa: E402
from eks_gpu_gitops.diff import sides  # noqa: E402
from eks_gpu_gitops.render import (
    helper,  # noqa: E402
    render_cache,  # noqa: E402
)
from eks_gpu_gitops.render import repository as render  # noqa: E402


def test_a_build_reports_what_it_read_its_overlay_the_bases_and_its_settings_not_another_environments(repo_copy):
    from eks_gpu_gitops.render import flux_build

    workspace = flux_build.Workspace(repo_copy)
    try:
        reads: set = set()
        flux_build.build(workspace, "overlays/prod/training", {}, "prod", "training", reads)
    finally:
        workspace.close()
    files = {path for kind, path, value in reads if kind == "file" and value != "error"}
    assert {"overlays/prod/training/kustomization.yaml", "overlays/prod/settings.yaml"} <= files
    assert "overlays/base/training/mpijob.yaml" in files
    assert not [path for _, path, _ in reads if path.startswith("overlays/dev/")]
    # Where kustomize looked for a kustomization file and found none is a read too: adding one changes the build.
    assert ("file", "overlays/prod/training/kustomization.yml", "error") in reads


def test_an_environments_fingerprint_holds_while_its_own_reads_do(repo_copy, render_cache_dir):
    def prints():
        return render.environment_fingerprints(repo_copy, ["dev", "prod"])

    assert prints() == {"dev": None, "prod": None}  # never rendered: nothing to go by
    render.render_repository(repo_copy)
    before = prints()
    assert before["dev"] and before["prod"] and before["dev"] != before["prod"]
    assert prints() == before  # stable
    settings = repo_copy / "overlays/dev/settings.yaml"
    settings.write_text(settings.read_text() + "\n# a comment is an input too\n")
    assert prints() == {"dev": None, "prod": before["prod"]}
    render.render_repository(repo_copy)
    after = prints()
    assert after["dev"] not in (None, before["dev"]) and after["prod"] == before["prod"]
    base = repo_copy / "overlays/base/training/mpijob.yaml"
    base.write_text(base.read_text() + "\n")
    assert prints() == {"dev": None, "prod": None}
    settings.write_text(settings.read_text().replace("\n# a comment is an input too\n", ""))
    base.write_text(base.read_text()[:-1])
    assert prints() == before  # back as it was: the first render's reads hold again


def test_a_new_manifest_in_a_folder_flux_lists_itself_is_a_change(repo_copy, render_cache_dir):
    render.render_repository(repo_copy, ["dev"])
    before = render.environment_fingerprints(repo_copy, ["dev"])["dev"]
    assert before is not None
    (repo_copy / "clusters/dev/extra.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: extra\n")
    assert render.environment_fingerprints(repo_copy, ["dev"]) == {"dev": None}
    (repo_copy / "clusters/dev/extra.yaml").unlink()
    assert render.environment_fingerprints(repo_copy, ["dev"]) == {"dev": before}


def test_a_build_runs_once_per_key_in_memory_and_across_runs_on_disk(tmp_path):
    calls = []

    def build():
        calls.append(1)
        return "kind: ConfigMap\n"

    cache = render_cache.BuildCache(tmp_path / "cache")
    assert cache.get_or_build("ab" * 32, build) == "kind: ConfigMap\n"
    assert cache.get_or_build("ab" * 32, build) == "kind: ConfigMap\n"
    assert len(calls) == 1 and (cache.builds, cache.hits) == (1, 1)
    again = render_cache.BuildCache(tmp_path / "cache")  # a later run
    assert again.get_or_build("ab" * 32, build) == "kind: ConfigMap\n"
    assert len(calls) == 1 and (again.builds, again.hits) == (0, 1)
    assert again.get_or_build(None, build) == "kind: ConfigMap\n"  # no key: always built
    assert len(calls) == 2
    assert not list((tmp_path / "cache").rglob("*.part"))


def test_two_threads_asking_for_one_build_at_once_run_it_once(tmp_path):
    calls = []

    def slow_build():
        calls.append(1)
        time.sleep(0.3)
        return "x"

    cache = render_cache.BuildCache(tmp_path / "cache", disk=False)
    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get_or_build("cd" * 32, slow_build))) for _ in "12"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["x", "x"] and len(calls) == 1


def test_a_failed_build_is_not_remembered(tmp_path):
    cache = render_cache.BuildCache(tmp_path / "cache")

    def failing():
        raise RuntimeError("kustomize failed")

    for _ in range(2):
        with pytest.raises(RuntimeError):
            cache.get_or_build("ef" * 32, failing)
    assert not list((tmp_path / "cache").rglob("*.yaml"))
    assert cache.get_or_build("ef" * 32, lambda: "fixed") == "fixed"
    assert len(list((tmp_path / "cache").rglob("*.yaml"))) == 1


# --- The cache in renders: what is built again, and what is read back ---


def dumped(environments) -> dict[str, str]:
    return {e.name: model.dump([*e.objects, *([e.cluster_config] if e.cluster_config else [])]) for e in environments}


def uncached(root, monkeypatch) -> dict[str, str]:
    with monkeypatch.context() as patched:
        patched.setenv("GITOPS_RENDER_CACHE", "off")
        return dumped(render.render_repository(root))


def builds_of(root) -> tuple[int, int]:
    """(kustomize builds run, builds read from the cache) by one render of `root`."""
    cache = render_cache.shared()
    before = cache.builds, cache.hits
    render.render_repository(root)
    return cache.builds - before[0], cache.hits - before[1]


def append(path, text: str) -> None:
    path.write_text(path.read_text() + text)


# dev and prod: clusters/<env>, training, infrastructure and eksctl each.
BUILDS = 8


def test_an_unchanged_render_runs_no_kustomize_and_reads_the_same_objects(repo_copy, render_cache_dir, monkeypatch):
    assert builds_of(repo_copy) == (BUILDS, 0)
    assert builds_of(repo_copy) == (0, BUILDS)  # this process's memory
    render_cache._SHARED.clear()  # a later run: only the disk remains
    first = dumped(render.render_repository(repo_copy))
    assert (render_cache.shared().builds, render_cache.shared().hits) == (0, BUILDS)
    assert len(outputs(render_cache_dir)) == BUILDS
    assert first == uncached(repo_copy, monkeypatch)


def test_each_kind_of_input_builds_again_only_the_overlays_that_read_it(repo_copy, render_cache_dir, monkeypatch):
    training = repo_copy / "overlays/dev/training"
    (training / "patch.yaml").write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: training\n  labels:\n    patched: one\n"
    )
    (training / "data.txt").write_text("one\n")
    append(
        training / "kustomization.yaml",
        "patches:\n  - path: patch.yaml\nconfigMapGenerator:\n  - name: extra\n    namespace: training\n"
        "    files:\n      - data.txt\n",
    )
    assert builds_of(repo_copy) == (BUILDS, 0)
    (training / "patch.yaml").write_text((training / "patch.yaml").read_text().replace("one", "two"))
    assert builds_of(repo_copy) == (1, BUILDS - 1)  # a patch file
    (training / "data.txt").write_text("two\n")
    assert builds_of(repo_copy) == (1, BUILDS - 1)  # a generator's file
    append(repo_copy / "overlays/base/training/environment/kustomization.yaml", "# a component\n")
    assert builds_of(repo_copy) == (2, BUILDS - 2)  # a component both training overlays use
    flux = repo_copy / "clusters/dev/training.yaml"
    flux.write_text(
        flux.read_text().replace("  path: ./overlays/dev/training", "  path: ./overlays/dev/training\n  namePrefix: x-")
    )
    assert builds_of(repo_copy) == (2, BUILDS - 2)  # a Flux-side transform, and clusters/dev, which holds it
    assert builds_of(repo_copy) == (0, BUILDS)
    rendered = dumped(render.render_repository(repo_copy))
    assert "name: x-horovod-train" in rendered["dev"] and "patched: two" in rendered["dev"]
    assert rendered == uncached(repo_copy, monkeypatch)


def outputs(folder) -> list:
    """The cache's entries that hold a build's output (the others list each build's reads, or an environment's)."""
    return sorted(e for e in folder.rglob("*.yaml") if e.read_bytes().split(b"\n", 1)[1][:5] in (b"json ", b"yaml "))


def test_a_damaged_or_half_written_entry_is_never_read(repo_copy, render_cache_dir, monkeypatch):
    render.render_repository(repo_copy)
    entries = outputs(render_cache_dir)
    assert len(entries) == BUILDS
    half = entries[0].read_bytes()
    entries[0].write_bytes(half[: len(half) // 2])  # cut short
    changed = entries[1].read_bytes().replace(b'"kind"', b'"kinb"', 1)
    assert changed != entries[1].read_bytes()
    entries[1].write_bytes(changed)  # changed in place
    entries[2].write_bytes(b"")
    render_cache._SHARED.clear()
    assert builds_of(repo_copy) == (3, BUILDS - 3)
    assert dumped(render.render_repository(repo_copy)) == uncached(repo_copy, monkeypatch)


def test_off_builds_every_time(repo_copy, monkeypatch):
    monkeypatch.setenv("GITOPS_RENDER_CACHE", "off")
    assert render_cache.shared() is None
    calls = []
    original = helper.ask

    def ask(request, about):
        if request["op"] in ("flux", "build"):
            calls.append(about)
        return original(request, about)

    monkeypatch.setattr(helper, "ask", ask)
    render.render_repository(repo_copy)
    render.render_repository(repo_copy)
    assert len(calls) == 2 * BUILDS


# --- diff: an environment whose inputs are the same on both sides is not rendered ---


def test_a_one_environment_change_renders_that_environment_only_and_diffs_as_a_full_render(
    tmp_path, render_cache_dir, monkeypatch
):
    repo = GitRepo.create(tmp_path / "repo")
    settings = repo.path("overlays/dev/settings.yaml")
    settings.write_text(settings.read_text().replace("  workers: 2\n", "  workers: 3\n", 1))
    base, head = sides.side("main", repo.root), sides.side(None, repo.root)
    first = sides.render_sides(base, head, repo.root, None)  # no render known yet: both sides render all
    assert [e.name for e in first.head] == ["dev", "prod"] and first.unchanged == []
    rendered = sides.render_sides(base, head, repo.root, None)
    assert [e.name for e in rendered.base] == [e.name for e in rendered.head] == ["dev"]
    assert rendered.unchanged == ["prod"]

    cached = environments(repo.diff("--base", "main", "--format", "json"))
    monkeypatch.setenv("GITOPS_RENDER_CACHE", "off")
    full = environments(repo.diff("--base", "main", "--format", "json"))
    assert cached["dev"] == full["dev"] and cached["dev"]["counts"]["changed"] == 1
    assert cached["prod"]["status"] == full["prod"]["status"] == "unchanged"
    assert cached["prod"]["objects"] == full["prod"]["objects"] == []
    assert cached["prod"]["mpijob_gpus"]["after"] is None and full["prod"]["mpijob_gpus"]["after"] == 16


def test_a_change_to_a_shared_base_renders_every_environment(tmp_path, render_cache_dir):
    repo = GitRepo.create(tmp_path / "repo")
    render.render_repository(repo.root)  # main's renders are known
    append(repo.path("overlays/base/training/pvc.yaml"), "# shared\n")
    rendered = sides.render_sides(sides.side("main", repo.root), sides.side(None, repo.root), repo.root, None)
    assert [e.name for e in rendered.head] == ["dev", "prod"] and rendered.unchanged == []


def test_yamllint_results_are_kept_by_text_and_configuration(repo_copy, render_cache_dir):
    from eks_gpu_gitops.validate.lint import lint

    extra = repo_copy / "overlays/dev/extra.yaml"
    extra.write_text("---\na:  1\n")

    def findings():
        return [(f.file, f.line, f.message, f.severity) for f in lint([extra], repo_copy, lambda line: None)]

    first = findings()
    assert first == [("overlays/dev/extra.yaml", 2, "too many spaces after colon (colons)", "error")]
    assert (render_cache.shared().builds, render_cache.shared().hits) == (1, 0)
    render_cache._SHARED.clear()  # a later run
    assert findings() == first
    assert (render_cache.shared().builds, render_cache.shared().hits) == (0, 1)
    config = repo_copy / ".yamllint"
    config.write_text(config.read_text() + "  colons: disable\n")
    assert findings() == []  # another configuration: linted again
    assert render_cache.shared().builds == 1
    extra.write_text("---\nb:  1\n")
    config.write_text(config.read_text().replace("  colons: disable\n", ""))
    assert findings() == [("overlays/dev/extra.yaml", 2, "too many spaces after colon (colons)", "error")]
    assert render_cache.shared().builds == 2  # another text: linted again


def test_an_entry_is_json_only_when_json_gives_the_documents_back_exactly():
    from eks_gpu_gitops.render import flux_build

    plain = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  n: '1'\n"
    entry = flux_build._entry(plain, True, "x")
    assert entry.startswith("json 1\n")
    assert flux_build._from_entry(entry, "x") == ([yaml.safe_load(plain)], True)
    for odd in ("when: 2024-01-01\n", "1: one\n", "b: !!binary aGk=\n"):
        text = f"apiVersion: v1\nkind: Thing\nmetadata:\n  name: a\nspec:\n  {odd}"
        entry = flux_build._entry(text, False, "x")
        assert entry.startswith("yaml 0\n"), odd
        assert flux_build._from_entry(entry, "x") == ([yaml.safe_load(text)], False), odd
