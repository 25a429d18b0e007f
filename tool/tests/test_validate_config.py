"""validate's configuration file (validate/config.py): each setting where it changes the result and where it does
not, the search for the file, refusals in one line, and its place after the results cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import REPO

from eks_gpu_gitops.cli import validate
from eks_gpu_gitops.validate import config
from eks_gpu_gitops.validate.runner import Reported, Result

NAME = ".eks-gpu-gitops.yaml"


def main(*args: str, capsys) -> tuple[int, str, str]:
    code = validate.main([*args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def finding(rule="image-tag-latest", severity="warning", env="dev", file="overlays/base/training/web.yaml", **more):
    return Reported(
        rule=rule,
        severity=severity,
        env=env,
        file=file,
        line=more.pop("line", 3),
        resource=more.pop("resource", "Deployment/training/web"),
        kustomization="training",
        message=more.pop("message", "container web image busybox:latest is tagged latest"),
        remediation="Pin the image.",
        **more,
    )


def applied(text: str, *findings: Reported, skipped=(), tmp_path: Path) -> Result:
    (tmp_path / NAME).write_text(text)
    result = Result(findings=list(findings), skipped=list(skipped), notes=["dev: a note"], environments=["dev"])
    return config.load(tmp_path / NAME, tmp_path).apply(result)


def kept(result: Result) -> list[tuple[str, str, str]]:
    return [(f.rule, f.env, f.severity) for f in result.findings]


# --- each setting: a case where it changes the result, one where it does not -------------------------------


def test_a_rule_turned_off_drops_its_findings_only(tmp_path):
    other = finding(rule="worker-resources-unset")
    result = applied("rules:\n  image-tag-latest: off\n", finding(), other, tmp_path=tmp_path)
    assert kept(result) == [("worker-resources-unset", "dev", "warning")]
    assert result.notes == [
        f"configuration {NAME}: 1 rule off (image-tag-latest); in this run 1 finding not reported, "
        "0 with another severity",
        "dev: a note",
    ]
    # Quoted or not (YAML 1.1 reads a bare off as false), and for suppressed findings too.
    result = applied('rules:\n  image-tag-latest: "off"\n', skipped=[finding(reason="why")], tmp_path=tmp_path)
    assert result.skipped == []


def test_a_severity_per_rule_changes_that_rule_only(tmp_path):
    result = applied(
        "rules:\n  image-tag-latest: error\n", finding(), finding(rule="worker-resources-unset"), tmp_path=tmp_path
    )
    assert kept(result) == [("image-tag-latest", "dev", "error"), ("worker-resources-unset", "dev", "warning")]
    assert result.exit_code() == 1
    assert (
        "1 rule raised (image-tag-latest to error); in this run 0 findings not reported, 1 with another severity"
        in (result.notes[0])
    )
    lowered = applied(
        "rules:\n  object-name-invalid: warning\n",
        finding(rule="object-name-invalid", severity="error"),
        tmp_path=tmp_path,
    )
    assert kept(lowered) == [("object-name-invalid", "dev", "warning")] and lowered.exit_code() == 0
    assert "1 rule lowered (object-name-invalid to warning)" in lowered.notes[0]


def test_an_override_by_environment_applies_to_the_environments_its_globs_match(tmp_path):
    text = 'overrides:\n  - environments: ["prod", "prod-*"]\n    rules:\n      image-tag-latest: error\n'
    findings = [finding(env=env) for env in ("dev", "prod", "prod-eu", "production")]
    source = finding(rule="yaml-lint", env="", resource="", severity="warning")
    result = applied(text, *findings, source, tmp_path=tmp_path)
    assert kept(result) == [
        ("image-tag-latest", "dev", "warning"),
        ("image-tag-latest", "prod", "error"),
        ("image-tag-latest", "prod-eu", "error"),
        ("image-tag-latest", "production", "warning"),
        ("yaml-lint", "", "warning"),  # a finding of no environment matches no environment override
    ]
    assert "(image-tag-latest to error [environments prod, prod-*])" in result.notes[0]


def test_an_override_by_file_applies_to_the_files_its_patterns_match(tmp_path):
    text = "overrides:\n  - files: ['overlays/dev/**']\n    rules:\n      image-tag-latest: off\n"
    dev = finding(file="overlays/dev/training/patch.yaml")
    base = finding(file="overlays/base/training/web.yaml")
    assert [f.file for f in applied(text, dev, base, tmp_path=tmp_path).findings] == [base.file]


def test_an_override_with_files_and_environments_needs_both(tmp_path):
    text = (
        "overrides:\n  - files: ['overlays/base/']\n    environments: [prod]\n"
        "    rules:\n      image-tag-latest: error\n"
    )
    both = finding(env="prod")
    other_env = finding(env="dev")
    other_file = finding(env="prod", file="overlays/prod/x.yaml")
    assert kept(applied(text, both, other_env, other_file, tmp_path=tmp_path)) == [
        ("image-tag-latest", "prod", "error"),
        ("image-tag-latest", "dev", "warning"),
        ("image-tag-latest", "prod", "warning"),
    ]


def test_a_later_setting_wins_and_overrides_win_over_rules(tmp_path):
    text = (
        "rules:\n  image-tag-latest: off\n"
        "overrides:\n  - environments: ['prod*']\n    rules:\n      image-tag-latest: warning\n"
        "  - environments: ['prod']\n    rules:\n      image-tag-latest: error\n"
    )
    findings = [finding(env=env) for env in ("dev", "prod", "prod-eu")]
    assert kept(applied(text, *findings, tmp_path=tmp_path)) == [
        ("image-tag-latest", "prod", "error"),
        ("image-tag-latest", "prod-eu", "warning"),
    ]


def test_ignored_paths_drop_every_finding_on_them(tmp_path):
    text = "ignore:\n  - examples/\n  - '*.generated.yaml'\n"
    ignored = [finding(file="examples/job.yaml"), finding(file="apps/x/out.generated.yaml", rule="hpa-on-gpu")]
    shown = finding(file="apps/examples.yaml")
    result = applied(text, *ignored, shown, skipped=[finding(file="examples/a.yaml", reason="r")], tmp_path=tmp_path)
    assert [f.file for f in result.findings] == ["apps/examples.yaml"] and result.skipped == []
    assert "2 paths ignored (examples/, *.generated.yaml); in this run 3 findings not reported" in result.notes[0]


def test_an_empty_file_changes_nothing_but_says_it_was_read(tmp_path):
    result = applied("---\n# nothing yet\n", finding(), tmp_path=tmp_path)
    assert kept(result) == [("image-tag-latest", "dev", "warning")]
    assert result.notes[0] == (
        f"configuration {NAME}: no rule or path changed; in this run 0 findings not reported, 0 with another severity"
    )


def test_the_generated_repositorys_file_raises_the_policy_for_production_and_credentials():
    shipped = config.load(REPO / NAME, REPO)
    findings = [finding(env=env) for env in ("dev", "prod", "production", "prod-us")]
    credential = finding(rule="env-literal-credential", severity="warning", env="dev")
    secret = finding(rule="secret-data-committed", severity="warning", env="dev")
    result = shipped.apply(Result(findings=[*findings, credential, secret]))
    assert kept(result) == [
        ("image-tag-latest", "dev", "warning"),
        ("image-tag-latest", "prod", "error"),
        ("image-tag-latest", "production", "error"),
        ("image-tag-latest", "prod-us", "error"),
        ("env-literal-credential", "dev", "error"),
        ("secret-data-committed", "dev", "error"),
    ]


# --- which file --------------------------------------------------------------------------------------------


def test_the_validated_repositorys_file_wins_over_the_current_folders(tmp_path, monkeypatch):
    repository, elsewhere = tmp_path / "work" / "repo", tmp_path / "elsewhere"
    (repository / "clusters").mkdir(parents=True)
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert config.find(None, repository) is None
    (elsewhere / ".eks-gpu-gitops.yml").write_text("---\n")
    assert config.find(None, repository) == elsewhere / ".eks-gpu-gitops.yml"  # the current folder's, at last
    (tmp_path / "work" / NAME).write_text("---\n")
    assert config.find(None, repository) == tmp_path / "work" / NAME  # a parent of the repository's root
    (repository / NAME).write_text("---\n")
    assert config.find(None, repository) == repository / NAME
    assert config.find(elsewhere / "mine.yaml", repository) == elsewhere / "mine.yaml"  # --config


def test_the_search_stops_at_the_home_folder(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "repo").mkdir(parents=True)
    (tmp_path / NAME).write_text("---\n")  # above home: not read
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home / "repo")
    assert config.find(None, home / "repo") is None
    (home / NAME).write_text("---\n")
    assert config.find(None, home / "repo") == home / NAME


# --- refused in one line, exit 2, nothing done ---------------------------------------------------------------

MANIFEST = """---
apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  namespace: default
data:
  a: b
"""


@pytest.mark.parametrize(
    "text, expected",
    [
        ("rule:\n  image-tag-latest: off\n", "rule: unknown key; allowed: rules, overrides, ignore"),
        (
            "overrides:\n  - env: [prod]\n    rules: {image-tag-latest: error}\n",
            "overrides[0].env: unknown key; allowed: files, environments, rules",
        ),
        (
            "rules:\n  image-tag-lates: error\n",
            "rules.image-tag-lates: unknown rule; did you mean image-tag-latest? `validate --list-rules` lists them",
        ),
        ("rules:\n  image-tag-latest: fatal\n", "rules.image-tag-latest: 'fatal' is not a level; allowed: error, "),
        ("rules:\n  image-tag-latest: yes\n", "rules.image-tag-latest: True is not a level; allowed: error, warning"),
        (
            "overrides:\n  - environments: [prod]\n    rules:\n      image-tag-latest: info\n",
            "overrides[0].rules.image-tag-latest: 'info' is not a level; allowed: error, warning, off",
        ),
        (
            "overrides:\n  - rules: {image-tag-latest: error}\n",
            "overrides[0]: needs rules, and files or environments (or both) to say where they apply",
        ),
        (
            "overrides:\n  - environments: [Prod]\n    rules: {image-tag-latest: error}\n",
            "overrides[0].environments[0]: 'Prod' is not a glob of environment names",
        ),
        ("ignore:\n  - '**a/a**a/a***b'\n", "ignore[0]: pattern '**a/a**a/a***b': more than 3 wildcards"),
        ("ignore: 3\n", "ignore: expected a list of strings"),
        ("rules:\n  suppression-invalid: off\n", "rules.suppression-invalid: cannot be lowered or turned off"),
        ("rules:\n  rule-failed: warning\n", "rules.rule-failed: cannot be lowered or turned off"),
        ("rules:\n  a-b: off\n  a-b: error\n", "not YAML: key 'a-b' given twice"),
        ("? [a, b]\n: x\n", "not YAML: while constructing a mapping"),
        ("rules:\n  ? {a: 1}\n  : error\n", "not YAML: while constructing a mapping"),
        ("rules: [\n", "not YAML: "),
        ("- rules\n", "the file: expected a mapping of rules, overrides, ignore, not list"),
    ],
)
def test_a_configuration_not_of_the_documented_shape_is_refused_in_one_line(text, expected, tmp_path, capsys):
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "cm.yaml").write_text(MANIFEST)
    (tmp_path / "settings.yaml").write_text(text)
    sarif = tmp_path / "report.sarif"
    code, out, err = main(
        str(tmp_path / "manifests"), "--config", str(tmp_path / "settings.yaml"), "--sarif", str(sarif), capsys=capsys
    )
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and not sarif.exists()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"validate: {tmp_path / 'settings.yaml'}: {expected}"), lines[0]


def test_a_missing_or_oversized_file_is_refused(tmp_path, capsys):
    (tmp_path / "cm.yaml").write_text(MANIFEST)
    code, _, err = main(str(tmp_path / "cm.yaml"), "--config", str(tmp_path / "none.yaml"), "--quiet", capsys=capsys)
    assert code == 2 and "none.yaml: cannot read the configuration: No such file or directory" in err
    (tmp_path / "big.yaml").write_text("# " + "x" * config.MAX_CONFIG_BYTES + "\n")
    code, _, err = main(str(tmp_path / "cm.yaml"), "--config", str(tmp_path / "big.yaml"), "--quiet", capsys=capsys)
    assert code == 2 and "big.yaml: cannot read the configuration: larger than 64 KiB" in err


# --- through the command line: folder mode, and the repository after the results cache ------------------------

NOT_YAML = "apiVersion: v1\nkind: ConfigMap\ndata: [1, 2\n"


def test_ignored_files_are_not_read_outside_a_repository(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "manifests"
    (folder / "drafts").mkdir(parents=True)
    (folder / "cm.yaml").write_text(MANIFEST)
    (folder / "drafts" / "broken.yaml").write_text(NOT_YAML)
    monkeypatch.chdir(tmp_path)
    code, _, err = main("manifests", "--quiet", capsys=capsys)
    assert code == 2 and "broken.yaml" in err  # read: a file that is not YAML stops the run
    (tmp_path / NAME).write_text("ignore:\n  - drafts/\n")
    code, out, err = main("manifests", "--quiet", "--format", "json", capsys=capsys)
    assert code == 0, err
    report = json.loads(out)
    assert report["summary"]["objects"] == 1
    assert report["notes"][0].startswith(f"configuration {NAME}: 1 path ignored (drafts/)")
    (tmp_path / NAME).write_text("ignore:\n  - manifests/\n")
    code, _, err = main("manifests", "--quiet", capsys=capsys)
    assert code == 2 and err.strip() == (
        f"validate: {NAME}: its ignore patterns leave nothing of the paths given to validate"
    )


WEB = """---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: training
spec:
  replicas: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: busybox:latest
          resources:
            requests:
              cpu: 100m
              memory: 64Mi
            limits:
              memory: 64Mi
"""


def test_the_configuration_applies_after_the_results_cache_to_every_format(
    repo_copy, capsys, monkeypatch, render_cache_dir
):
    """A base file both environments use: the shipped file makes its finding an error in prod only. The second run
    takes both environments' results from the cache and still applies whatever configuration it is given."""
    training = repo_copy / "overlays" / "base" / "training"
    (training / "web.yaml").write_text(WEB)
    kustomization = training / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text().replace("  - queue.yaml\n", "  - queue.yaml\n  - web.yaml\n"))
    monkeypatch.chdir(repo_copy)

    code, out, err = main("--format", "json", capsys=capsys)
    assert code == 0, out  # no configuration: the catalogue's warning in every environment
    report = json.loads(out)
    assert [(f["env"], f["severity"]) for f in report["findings"] if f["rule"] == "image-tag-latest"] == [
        ("dev", "warning"),
        ("prod", "warning"),
    ]
    assert not any(note.startswith("configuration") for note in report["notes"])

    shutil.copy2(REPO / NAME, repo_copy / NAME)
    for fmt in ("json", "text", "github", "sarif"):
        code, out, err = main("--format", fmt, capsys=capsys)
        assert code == 1, out
        assert "results of 2 unchanged environments from the cache" in err
        assert "image-tag-latest to error [environments prod, production, prod-*, production-*]" in out
    report = json.loads(main("--format", "json", "--quiet", capsys=capsys)[1])
    assert [(f["env"], f["severity"]) for f in report["findings"] if f["rule"] == "image-tag-latest"] == [
        ("dev", "warning"),
        ("prod", "error"),
    ]
    assert report["summary"]["errors"] == 1

    (repo_copy / NAME).write_text("rules:\n  image-tag-latest: off\n")
    code, out, err = main("--format", "json", capsys=capsys)
    assert code == 0 and "results of 2 unchanged environments from the cache" in err
    assert not any(f["rule"] == "image-tag-latest" for f in json.loads(out)["findings"])
