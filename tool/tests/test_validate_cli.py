"""scripts/validate end to end: real kustomize, real schemas, this repository and changed copies."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, run_validate

from eks_gpu_gitops.cli import validate
from eks_gpu_gitops.render import repository as render
from eks_gpu_gitops.render.output import write_rendered
from eks_gpu_gitops.rules import docs

ENVIRONMENTS = render.environment_names(REPO)
UPSTREAM_EXAMPLE = "mpi-operator-v0.8.0-horovod-tensorflow-mnist.yaml"


def main(*args: str, capsys) -> tuple[int, str, str]:
    """validate's command line in this process (no interpreter start-up per test)."""
    code = validate.main([*args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(stderr: str) -> str:
    """The whole of stderr under --quiet: one line, no traceback."""
    lines = stderr.strip().splitlines()
    assert "Traceback" not in stderr and len(lines) == 1, stderr
    assert lines[0].startswith("validate: ")
    return lines[0]


def edit_yaml(path: Path, change) -> None:
    docs = list(yaml.safe_load_all(path.read_text()))
    change(docs)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def add_resource(overlay: Path, name: str, text: str) -> None:
    (overlay / name).write_text(text)
    edit_yaml(overlay / "kustomization.yaml", lambda docs: docs[0]["resources"].append(name))


GPU_HPA = """---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: scale-on-gpus
  namespace: training
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: serve
  maxReplicas: 4
  metrics:
    - type: Resource
      resource:
        name: nvidia.com/gpu
        target:
          type: Utilization
          averageUtilization: 80
"""


# --- the repository itself ----------------------------------------------------------------


def test_repository_validates_without_errors(render_cache_dir):
    """The shim as users call it: every environment, no error (placeholders are warnings)."""
    result = run_validate("--format", "json", cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert document["summary"]["errors"] == 0
    assert sorted(document["summary"]["environments"]) == sorted(ENVIRONMENTS)
    # fsx-reclaim-delete no longer reads the environment's name: dev's FSx, deleted with its claim on purpose, is a
    # warning until the repository's configuration turns the rule off for dev.
    assert {f["rule"] for f in document["findings"]} <= {"placeholder-value", "fsx-reclaim-delete"}
    assert "validate: schemas:" in result.stderr and "Traceback" not in result.stderr


def test_findings_carry_the_contract_and_source_lines(repo_copy, capsys, monkeypatch):
    add_resource(repo_copy / "overlays" / "base" / "training", "hpa.yaml", GPU_HPA)
    monkeypatch.chdir(repo_copy)
    env = ENVIRONMENTS[0]
    code, out, _ = main("--env", env, "--format", "json", "--quiet", capsys=capsys)
    assert code == 0  # hpa-on-gpu is a warning under the severity policy (the API server takes the HPA)
    found = [f for f in json.loads(out)["findings"] if f["rule"] == "hpa-on-gpu"]
    assert [f["env"] for f in found] == [env]
    metric_line = GPU_HPA.splitlines().index("    - type: Resource") + 1
    for finding in found:
        assert {"rule", "severity", "file", "resource", "message", "env", "line", "remediation"} <= set(finding)
        assert (finding["file"], finding["line"]) == ("overlays/base/training/hpa.yaml", metric_line)
        assert finding["resource"] == "HorizontalPodAutoscaler/training/scale-on-gpus"
        assert finding["severity"] == "warning" and finding["kustomization"] == "training"

    code, out, _ = main("--env", env, "--format", "github", "--quiet", capsys=capsys)
    assert code == 0
    assert f"::warning file=overlays/base/training/hpa.yaml,line={metric_line},title=hpa-on-gpu ({env})::" in out


def test_a_value_from_the_settings_points_at_its_settings_line(repo_copy, capsys, monkeypatch):
    """-np comes from the environment's settings.yaml through a replacement: the finding names that line."""
    env = ENVIRONMENTS[-1]
    settings = repo_copy / "overlays" / env / "settings.yaml"
    lines = settings.read_text().splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if line.strip() == "- -np") + 1
    lines[at] = re.sub(r"'\d+'", "'999'", lines[at])  # more ranks than slots: mpirun refuses
    settings.write_text("".join(lines))
    monkeypatch.chdir(repo_copy)
    code, out, _ = main("--env", env, "--format", "json", "--quiet", capsys=capsys)
    found = [f for f in json.loads(out)["findings"] if f["rule"] == "mpirun-np-mismatch"]
    assert code == 1
    assert [(f["file"], f["line"]) for f in found] == [(f"overlays/{env}/settings.yaml", at + 1)]


def test_one_environment_by_path_or_option(capsys, in_repo, render_cache_dir):
    env = ENVIRONMENTS[0]
    for args, progress in (
        (["--env", env], f"validate: {env}/"),  # rendered
        ([f"clusters/{env}"], "validate: results of 1 unchanged environment from the cache"),
    ):
        code, out, err = main(*args, "--format", "json", capsys=capsys)
        assert code == 0, out
        assert json.loads(out)["summary"]["environments"] == [env]
        assert progress in err


def test_kustomization_folder_with_cluster_config(capsys, in_repo):
    env = ENVIRONMENTS[-1]
    code, out, _ = main(
        f"overlays/{env}/training",
        "--cluster-config",
        f"overlays/{env}/eksctl",
        "--format",
        "json",
        "--quiet",
        capsys=capsys,
    )
    document = json.loads(out)
    assert code == 0, out
    assert document["summary"]["environments"] == [env]
    notes = "\n".join(document["notes"])
    assert "gpu-request-exceeds-node" not in notes  # the ClusterConfig is there
    assert "custom-resource-before-crd" in notes  # the Flux graph is not


def test_folder_of_rendered_manifests_and_single_files(tmp_path, capsys, in_repo):
    write_rendered(render.render_repository(REPO, ENVIRONMENTS[:1]), tmp_path / "rendered")
    folder = tmp_path / "rendered" / ENVIRONMENTS[0]
    code, out, _ = main(str(folder), "--quiet", "--format", "json", capsys=capsys)
    assert code == 0, out
    assert json.loads(out)["summary"]["objects"] > 3
    code, out, _ = main(str(folder / "training.yaml"), str(folder / "eksctl.yaml"), "--quiet", capsys=capsys)
    assert code == 0, out


def test_upstream_example_gives_no_error(capsys, in_repo):
    folder = os.environ.get("GITOPS_UPSTREAM_EXAMPLES") or (
        os.environ.get("GITOPS_SCHEMA_DIR") and str(Path(os.environ["GITOPS_SCHEMA_DIR"]).parent / "upstream-examples")
    )
    example = Path(folder or "-") / UPSTREAM_EXAMPLE
    if not example.is_file():
        pytest.skip(f"no {UPSTREAM_EXAMPLE}: set GITOPS_UPSTREAM_EXAMPLES to the folder holding it")
    code, out, _ = main(str(example), "--format", "json", "--quiet", capsys=capsys)
    document = json.loads(out)
    assert code == 0 and document["summary"]["errors"] == 0, out
    assert any("skipped" in note and "--cluster-config" in note for note in document["notes"])


def test_strict_makes_warnings_fail_and_suppression_needs_a_reason(tmp_path, capsys, in_repo):
    job = tmp_path / "job.yaml"
    job.write_text("""---
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: smoke
  namespace: training
  annotations:
    validate.gitops/ignore-image-tag-latest: "smoke test of the newest build"
spec:
  launcherCreationPolicy: WaitForWorkersReady
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
            - name: launcher
              image: trainer:1.0
    Worker:
      replicas: 1
      template:
        spec:
          containers:
            - name: worker
              image: trainer
""")
    code, out, _ = main(str(job), "--format", "json", "--quiet", capsys=capsys)
    document = json.loads(out)
    assert code == 0
    assert [(f["rule"], f["reason"]) for f in document["skipped"]] == [
        ("image-tag-latest", "smoke test of the newest build")
    ]
    assert [f["rule"] for f in document["findings"]] == ["worker-resources-unset"]
    code, _, _ = main(str(job), "--strict", "--quiet", capsys=capsys)
    assert code == 1


def test_list_rules_writes_every_format(capsys):
    for fmt in ("text", "json", "markdown"):
        code, out, _ = main("--list-rules", "--format", fmt, capsys=capsys)
        assert code == 0 and "gpu-slots-mismatch" in out
    assert out == docs.document("markdown")


# --- bad input: exit 2, one line that names the file and the cause -------------------------


def test_invalid_yaml_file(tmp_path, capsys, in_repo):
    broken = tmp_path / "broken.yaml"
    broken.write_text("---\napiVersion: v1\nkind: ConfigMap\ndata: [1, 2\n")
    code, _, err = main(str(broken), "--quiet", capsys=capsys)
    assert code == 2
    line = one_line_error(err)
    assert "broken.yaml:" in line and "invalid YAML" in line


def test_invalid_yaml_in_the_repository(repo_copy, capsys, monkeypatch):
    entry = repo_copy / "clusters" / ENVIRONMENTS[0] / "training.yaml"
    entry.write_text(entry.read_text() + "  wait: [false\n")
    monkeypatch.chdir(repo_copy)
    code, _, err = main("--quiet", capsys=capsys)
    assert code == 2
    assert f"clusters/{ENVIRONMENTS[0]}/training.yaml" in one_line_error(err)


def test_kustomization_that_fails_to_build(repo_copy, capsys, monkeypatch):
    overlay = repo_copy / "overlays" / ENVIRONMENTS[0] / "training"
    edit_yaml(overlay / "kustomization.yaml", lambda docs: docs[0]["resources"].append("missing.yaml"))
    monkeypatch.chdir(repo_copy)
    code, _, err = main("--env", ENVIRONMENTS[0], "--quiet", capsys=capsys)
    assert code == 2
    line = one_line_error(err)
    assert (
        f"overlays/{ENVIRONMENTS[0]}/training" in line and "kustomize build failed" in line and "missing.yaml" in line
    )


def test_missing_flux_path_is_a_finding(repo_copy, capsys, monkeypatch):
    entry = repo_copy / "clusters" / ENVIRONMENTS[0] / "training.yaml"
    edit_yaml(entry, lambda docs: docs[0]["spec"].update(path="./overlays/nowhere"))
    monkeypatch.chdir(repo_copy)
    code, out, _ = main("--env", ENVIRONMENTS[0], "--format", "json", "--quiet", capsys=capsys)
    assert code == 1
    assert "flux-path-missing" in {f["rule"] for f in json.loads(out)["findings"]}


def test_flux_path_without_kustomization_file_is_read_as_flux_does(repo_copy, capsys, monkeypatch):
    """Flux generates a kustomization for such a folder: every manifest below it, recursively."""
    extra = repo_copy / "overlays" / ENVIRONMENTS[0] / "extra"
    (extra / "nested").mkdir(parents=True)
    (extra / "quota.yaml").write_text(
        "---\napiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: gpus\n"
        "  namespace: training\nspec:\n  hard:\n    requests.nvidia.com/gpu: '64'\n"
    )
    (extra / "nested" / "bad.yaml").write_text(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: training\ndatta: {}\n"
    )
    entry = repo_copy / "clusters" / ENVIRONMENTS[0] / "training.yaml"
    edit_yaml(entry, lambda docs: docs[0]["spec"].update(path=f"./overlays/{ENVIRONMENTS[0]}/extra"))
    monkeypatch.chdir(repo_copy)
    code, out, _ = main("--env", ENVIRONMENTS[0], "--format", "json", "--quiet", capsys=capsys)
    findings = json.loads(out)["findings"]
    schema = [f for f in findings if f["rule"] == "schema-invalid"]
    assert code == 1, findings
    assert [(f["file"], f["resource"]) for f in schema] == [
        (f"overlays/{ENVIRONMENTS[0]}/extra/nested/bad.yaml", "ConfigMap/training/x")
    ]


def test_no_helper(tmp_path):
    env = {**os.environ, "PATH": "", "GITOPS_HELPER": str(tmp_path / "none")}
    env.pop("GITOPS_DEBUG", None)
    result = subprocess.run(
        [sys.executable, "-m", "eks_gpu_gitops", "validate", "--quiet"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert (
        one_line_error(result.stderr)
        == f"validate: GITOPS_HELPER={tmp_path / 'none'}: no such executable; unset it to use the tool's own"
    )


@pytest.mark.parametrize("make", ["missing", "not-utf8", "no-yaml", "permission"])
def test_unreadable_paths(make, tmp_path, capsys, in_repo):
    path = tmp_path / "input.yaml"
    if make == "not-utf8":
        path.write_bytes(b"---\nkind: \xff\xfe\n")
    elif make == "no-yaml":
        path = tmp_path / "empty-folder"
        path.mkdir()
    elif make == "permission":
        if os.geteuid() == 0:
            pytest.skip("root reads files whatever their permissions")
        path.write_text("---\n")
        path.chmod(0)
    code, _, err = main(str(path), "--quiet", capsys=capsys)
    assert code == 2
    assert path.name in one_line_error(err)


@pytest.mark.parametrize(
    "metadata", ["metadata: oops", "metadata:\n  name: x\n  annotations: oops"], ids=["metadata", "annotations"]
)
def test_malformed_metadata_is_a_schema_finding_not_a_crash(metadata, tmp_path, capsys, in_repo):
    path = tmp_path / "configmap.yaml"
    path.write_text(f"---\napiVersion: v1\nkind: ConfigMap\n{metadata}\ndata:\n  a: b\n")
    code, out, err = main(str(path), "--format", "json", "--quiet", capsys=capsys)
    assert code == 1 and "Traceback" not in err
    assert {f["rule"] for f in json.loads(out)["findings"]} == {"schema-invalid"}


def test_usage_errors_exit_2_in_one_line(capsys, in_repo):
    code, _, err = main("--format", "markdown", capsys=capsys)
    assert code == 2 and one_line_error(err) == "validate: --format markdown only goes with --list-rules (see --help)"
    code, _, err = main("--no-such-option", capsys=capsys)
    assert code == 2 and one_line_error(err) == "validate: unrecognized arguments: --no-such-option (see --help)"
    code, _, err = main("--schema-dir", "/nonexistent/schemas", capsys=capsys)
    assert code == 2 and "--schema-dir" in one_line_error(err)


def test_schema_dir_option_replaces_the_variable(tmp_path, capsys, in_repo, monkeypatch):
    known = os.environ.get("GITOPS_SCHEMA_DIR")
    monkeypatch.delenv("GITOPS_SCHEMA_DIR", raising=False)
    empty = tmp_path / "schemas"
    empty.mkdir()
    code, _, err = main("--env", ENVIRONMENTS[0], "--schema-dir", str(empty), "--quiet", capsys=capsys)
    assert code == 2
    assert "schema file missing from the schema folder" in one_line_error(err)
    if known:  # the same folder through the option instead of the variable
        code, out, _ = main("--env", ENVIRONMENTS[0], "--schema-dir", known, "--quiet", capsys=capsys)
        assert code == 0, out


TOOL_CONFIG = "printWidth: 120\nrepos:\n  - repo: local\n"  # a tool's settings: YAML, no Kubernetes object
CONFIG_MAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: default\ndata:\n  a: b\n"


@pytest.mark.parametrize("name, read", [(".prettierrc.yaml", False), (".tools/lint.yaml", False), ("tools.yaml", True)])
def test_a_folder_of_manifests_leaves_its_dotfiles_alone(tmp_path, capsys, monkeypatch, name, read):
    """Dot files are not inputs at all; another YAML file with no apiVersion or kind in any document is read, found
    to be no Kubernetes manifest, and named in a note instead of reported as an invalid object."""
    folder = tmp_path / "manifests"
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(TOOL_CONFIG)
    (folder / "cm.yaml").write_text(CONFIG_MAP)
    monkeypatch.chdir(tmp_path)
    code, out, _ = main("manifests", "--format", "json", "--quiet", capsys=capsys)
    report = json.loads(out)
    assert report["summary"]["objects"] == 1
    assert [f for f in report["findings"] if f["rule"] == "schema-invalid"] == []
    assert [n for n in report["notes"] if "not Kubernetes manifests" in n] == (
        [
            "inputs: 1 YAML file with no apiVersion or kind in any document, so not Kubernetes manifests, not "
            f"checked: manifests/{name}"
        ]
        if read
        else []
    )
    assert code == 0


def test_the_repository_with_a_cluster_config_checks_every_environment(capsys, in_repo, render_cache_dir):
    config = f"overlays/{ENVIRONMENTS[0]}/eksctl"
    code, out, _ = main("--cluster-config", config, "--format", "json", "--quiet", capsys=capsys)
    summary = json.loads(out)["summary"]
    assert summary["environments"] == ENVIRONMENTS
    assert summary["objects"] > len(ENVIRONMENTS) * 5, summary
