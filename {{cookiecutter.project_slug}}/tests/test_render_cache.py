"""What a build reads (render_cache.inputs), the fingerprints made of it, and the build cache."""

from __future__ import annotations

import threading
import time

import pytest

from gitops_tools import render_cache


def test_a_build_reads_its_overlay_the_bases_it_names_and_its_settings_not_another_environments(repo_copy):
    files = {str(f.relative_to(repo_copy)) for f in render_cache.inputs([repo_copy / "overlays/prod/training"])}
    assert "overlays/prod/training/kustomization.yaml" in files
    assert "overlays/prod/settings.yaml" in files
    assert "overlays/base/training/mpijob.yaml" in files
    assert not [f for f in files if f.startswith("overlays/dev/")]


def test_an_environments_fingerprint_changes_with_its_own_inputs_only(repo_copy):
    def prints():
        return {
            env: render_cache.environment_fingerprint(
                repo_copy, repo_copy / "clusters" / env, [repo_copy / "overlays" / env / "eksctl"]
            )
            for env in ("dev", "prod")
        }

    before = prints()
    assert before["dev"] and before["prod"] and before["dev"] != before["prod"]
    assert prints() == before  # stable
    settings = repo_copy / "overlays/dev/settings.yaml"
    settings.write_text(settings.read_text() + "\n# a comment is an input too\n")
    after = prints()
    assert after["dev"] != before["dev"]
    assert after["prod"] == before["prod"]
    base = repo_copy / "overlays/base/training/mpijob.yaml"
    base.write_text(base.read_text() + "\n")
    shared = prints()
    assert shared["dev"] != after["dev"] and shared["prod"] != after["prod"]


def test_a_flux_kustomization_path_is_followed_and_a_substituted_one_is_not_fingerprinted(repo_copy):
    entry = repo_copy / "clusters/dev/training.yaml"
    text = entry.read_text()
    assert "path: ./overlays/dev/training" in text
    before = render_cache.environment_fingerprint(repo_copy, repo_copy / "clusters/dev")
    (repo_copy / "overlays/dev/training/kustomization.yaml").write_text(
        (repo_copy / "overlays/dev/training/kustomization.yaml").read_text() + "\n"
    )
    assert render_cache.environment_fingerprint(repo_copy, repo_copy / "clusters/dev") != before
    entry.write_text(text.replace("path: ./overlays/dev/training", "path: ./overlays/${ENV}/training"))
    assert render_cache.environment_fingerprint(repo_copy, repo_copy / "clusters/dev") is None


def test_a_remote_base_has_no_fingerprint(repo_copy):
    folder = repo_copy / "overlays/dev/remote"
    folder.mkdir()
    (folder / "kustomization.yaml").write_text("resources:\n  - https://github.com/org/repo//base?ref=v1\n")
    assert render_cache.fingerprint(repo_copy, [folder]) is None
    assert render_cache.fingerprint(repo_copy, [repo_copy / "overlays/dev/training"]) is not None


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
