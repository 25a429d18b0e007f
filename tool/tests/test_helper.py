"""The helper (tool/helper): many builds in one process, the same bytes as a kustomize process per build,
errors in one line, nothing read outside its root, no state carried from one build to the next."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.render import helper

# kustomize-controller builds with this restrictor and without sorting (its krusty options leave Reorder
# unset), which is what these flags ask of `kubectl kustomize`, the reference here.
KUBECTL_FLAGS = ["--load-restrictor", "LoadRestrictionsNone", "--reorder", "none"]


def process_build(folder: Path) -> str:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: no reference kustomize to compare with")
    return subprocess.run(
        ["kubectl", "kustomize", *KUBECTL_FLAGS, str(folder)], capture_output=True, text=True, check=True
    ).stdout


CONFIG_MAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: b\n"


def overlays() -> list[Path]:
    return sorted(p.parent for p in (REPO / "overlays").glob("*/*/kustomization.yaml") if p.parts[-3] != "base")


def test_every_overlay_builds_to_the_same_bytes_as_a_kustomize_process():
    folders = overlays()
    assert len(folders) >= 6  # dev and prod: eksctl, infrastructure, training
    for folder in folders:
        assert helper.build(folder, REPO) == process_build(folder), folder


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_a_failed_build_is_one_line_naming_the_missing_file(tmp_path):
    folder = write(tmp_path / "app", {"kustomization.yaml": "resources:\n  - missing.yaml\n"})
    with pytest.raises(InputError) as raised:
        helper.build(folder, tmp_path)
    message = str(raised.value)
    assert message.startswith(f"{folder}: kustomize build failed: ")
    assert "missing.yaml" in message and "\n" not in message


def test_nothing_outside_the_root_is_read(tmp_path):
    write(tmp_path, {"outside.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: outside\n"})
    folder = write(tmp_path / "root" / "app", {"kustomization.yaml": "resources:\n  - ../../outside.yaml\n"})
    with pytest.raises(InputError) as raised:
        helper.build(folder, tmp_path / "root")
    assert "outside.yaml" in str(raised.value) and "name: outside" not in str(raised.value)
    assert "kind: ConfigMap" in helper.build(folder, tmp_path)  # inside the root it builds


THING_HEADER = "apiVersion: example.io/v1\nkind: Thing\nmetadata:\n  name: t\nspec:\n  items:\n"
THING = THING_HEADER + '    - id: a\n      value: "1"\n    - id: b\n      value: "1"\n'
PATCH = THING_HEADER + '    - id: a\n      value: "2"\n'
# A kustomization's own schema (its `openapi:` field): Thing's items merge by id. kyaml keeps it globally; a
# kustomization without one must see the built-in schema, which knows no Thing, so its patch replaces the list.
CUSTOM_SCHEMA = json.dumps(
    {
        "definitions": {
            "io.example.v1.Thing": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "properties": {
                            "items": {
                                "type": "array",
                                "items": {"type": "object"},
                                "x-kubernetes-patch-merge-key": "id",
                                "x-kubernetes-patch-strategy": "merge",
                            }
                        },
                    }
                },
                "x-kubernetes-group-version-kind": [{"group": "example.io", "kind": "Thing", "version": "v1"}],
            }
        }
    }
)


def test_a_custom_openapi_schema_does_not_reach_the_next_build(tmp_path):
    files = {"thing.yaml": THING, "patch.yaml": PATCH}
    listed = "resources:\n  - thing.yaml\npatches:\n  - path: patch.yaml\n"
    custom = write(
        tmp_path / "custom",
        {**files, "schema.json": CUSTOM_SCHEMA, "kustomization.yaml": "openapi:\n  path: schema.json\n" + listed},
    )
    plain = write(tmp_path / "plain", {**files, "kustomization.yaml": listed})
    merged, replaced = process_build(custom), process_build(plain)
    assert "id: b" in merged and "id: b" not in replaced
    for _ in range(3):
        assert helper.build(custom, tmp_path) == merged
        assert helper.build(plain, tmp_path) == replaced  # not merged by the schema of the build before


def test_a_helper_that_stops_answering_is_one_line(tmp_path, monkeypatch):
    stops = tmp_path / "stops"
    stops.write_text("#!/bin/sh\nexit 3\n")
    stops.chmod(0o755)
    monkeypatch.setenv(helper.HELPER_VARIABLE, str(stops))
    folder = write(tmp_path / "app", {"kustomization.yaml": "resources: []\n"})
    with pytest.raises(InputError) as raised:
        helper.build(folder, tmp_path)
    assert str(raised.value) == f"{folder}: stops stopped answering (exit status 3)"


def test_a_configured_helper_that_does_not_exist_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(helper.HELPER_VARIABLE, str(tmp_path / "nowhere"))
    with pytest.raises(InputError, match="no such executable"):
        helper.binary()


def test_the_render_cache_key_names_the_helper_by_content(tmp_path, monkeypatch):
    own = helper.builder()
    copy = tmp_path / "copy"
    shutil.copy2(helper.binary(), copy)
    monkeypatch.setenv(helper.HELPER_VARIABLE, str(copy))
    assert helper.builder().split(" ")[1] == own.split(" ")[1]  # the same bytes elsewhere: the same key
    with copy.open("ab") as file:
        file.write(b"\0")
    assert helper.builder() != own


def test_a_helper_process_that_ended_while_idle_is_replaced(tmp_path):
    folder = write(tmp_path / "app", {"kustomization.yaml": "resources:\n  - cm.yaml\n", "cm.yaml": CONFIG_MAP})
    first = helper.build(folder, tmp_path)
    for process in list(helper._POOLS[helper.binary()].started):
        process.kill()
        process.wait()
    assert helper.build(folder, tmp_path) == first


# --- what a build read (helper/deps.go), and what it gives now ---------------------------------------------------


def flux_request(root: Path, path: str) -> dict:
    kustomization = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "spec": {}}
    return {"op": "flux", "root": str(root), "path": path, "kustomization": kustomization}


def observed(root: Path, reads: list) -> list[str]:
    reply = helper.ask({"op": "observe", "root": str(root), "reads": [r[:2] for r in reads]}, "test")
    assert "error" not in reply, reply
    return reply["values"]


def test_every_read_a_build_reports_is_observed_again_as_it_was_and_each_kind_changes_with_its_input(tmp_path):
    app = tmp_path / "app"
    (app / "sub").mkdir(parents=True)
    (app / "sub" / "kustomization.yaml").write_text(
        "resources: [cm.yaml]\nconfigMapGenerator:\n- name: g\n  files: [data.txt]\n"
    )
    (app / "sub" / "cm.yaml").write_text(CONFIG_MAP)
    (app / "sub" / "data.txt").write_text("one\n")
    (app / "plain.yaml").write_text(CONFIG_MAP.replace("name: c", "name: plain"))
    reply = helper.ask(flux_request(tmp_path, "app"), "test")
    reads = reply["reads"]
    kinds = {kind for kind, _, _ in reads}
    assert {"file", "exists", "tree", "abs"} <= kinds, kinds
    assert ["file", "app/sub/data.txt", observed(tmp_path, [["file", "app/sub/data.txt"]])[0]] in reads
    assert observed(tmp_path, reads) == [value for _, _, value in reads]  # nothing changed: every read holds

    def changed() -> set[tuple[str, str]]:
        return {(k, p) for (k, p, v), now in zip(reads, observed(tmp_path, reads), strict=True) if v != now}

    (app / "sub" / "data.txt").write_text("two\n")  # a file named only inside a generator
    assert changed() == {("file", "app/sub/data.txt")}
    (app / "sub" / "data.txt").write_text("one\n")
    (app / "new.yaml").write_text(CONFIG_MAP.replace("name: c", "name: new"))  # a manifest Flux would list
    assert changed() == {("tree", "app")}
    (app / "new.yaml").unlink()
    (app / "kustomization.yaml").write_text("resources: [plain.yaml]\n")  # a kustomization where none was
    assert ("exists", "app/kustomization.yaml") in changed()


def test_a_build_reading_a_file_whose_aliases_expand_past_the_limits_is_refused_naming_it(tmp_path):
    # One 100 KB string aliased 1,000 times: far below the node limit, 100 MB of text once kustomize expands it.
    big = "x" * 100_000
    text = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lol\ndata:\n  a: &a {big}\n" + "".join(
        f"  k{i}: *a\n" for i in range(1000)
    )
    (tmp_path / "lol.yaml").write_text(text)
    (tmp_path / "kustomization.yaml").write_text("resources: [lol.yaml]\n")
    reply = helper.ask({"op": "build", "root": str(tmp_path), "path": str(tmp_path)}, "test")
    assert reply == {"refused": "lol.yaml: its aliases expand to more than 64 MiB of text (an alias bomb?); refused"}
    (tmp_path / "lol.yaml").write_text(text.replace("k999: *a", "k999: b").replace("*a", "b"))  # no aliases: builds
    assert "yaml" in helper.ask({"op": "build", "root": str(tmp_path), "path": str(tmp_path)}, "test")
