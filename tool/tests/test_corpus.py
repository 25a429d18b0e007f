"""validate on manifests nobody on this project wrote: the public corpus of ../shared/corpus, scored as its
README says. A good case passes with no error other than yaml-lint (upstream files need not follow a repository's
.yamllint); a bad case raises every rule EXPECTED.json names, each at its severity or above.

The corpus is read where it lies ($GITOPS_CORPUS_DIR, which `make test` sets, or ../shared/corpus beside the
checkout), never copied into the project. Each case is validated as a user linting a folder they copied would:
folder mode, from a directory with no configuration file, offline.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eks_gpu_gitops.cli import validate

CORPUS_VARIABLE = "GITOPS_CORPUS_DIR"
CORPUS = Path(os.environ.get(CORPUS_VARIABLE) or Path(__file__).resolve().parents[3] / "shared" / "corpus")
EXPECTED_FILE = CORPUS / "EXPECTED.json"


def _expected() -> dict:
    if not EXPECTED_FILE.is_file():
        return {}
    return json.loads(EXPECTED_FILE.read_text())


EXPECTED = _expected()


@pytest.fixture(autouse=True)
def _corpus_present():
    if EXPECTED:
        return
    if os.environ.get(CORPUS_VARIABLE):  # set (make test sets it) but empty: a broken setup, not a skip
        pytest.fail(f"{CORPUS_VARIABLE}={CORPUS} has no EXPECTED.json")
    pytest.skip(f"no corpus at {CORPUS} (set {CORPUS_VARIABLE})")


def _findings(case: str, tmp_path, monkeypatch, capsys) -> list[dict]:
    monkeypatch.chdir(tmp_path)  # no configuration file is found from here
    code = validate.main([str(CORPUS / case), "--format", "json", "--quiet", "--offline"])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return json.loads(out)["findings"]


def _is_error(finding: dict) -> bool:
    return finding["severity"] == "error" and finding["rule"] != "yaml-lint"


def _errors(findings: list[dict]) -> set[str]:
    return {f["rule"] for f in findings if _is_error(f)}


# Where the catalogue's severity policy parts from a corpus verdict: EXPECTED.json wants an error, the rule reports
# a warning because, by the source, nothing fails (an error means the API server, Flux, eksctl, EC2 or the job
# will fail). The test holds each such rule to exactly a warning there, so a change either way shows.
SEVERITY_DISAGREEMENTS = {
    ("bad-mpijob-launcher-gpu", "launcher-requests-gpu"): (
        "mpi-operator v0.8.2 blanks NVIDIA_VISIBLE_DEVICES on the launcher's container "
        "(pkg/controller/mpi_job_controller.go): the job runs and the GPU is billed idle, a cost; where the "
        "launcher's GPU keeps a worker off its node, gpu-capacity-exceeded is the error"
    ),
}

GOOD = sorted(case for case, entry in EXPECTED.items() if entry["verdict"] == "good")
BAD = sorted(case for case, entry in EXPECTED.items() if entry["verdict"] == "bad")


@pytest.mark.parametrize("case", GOOD)
def test_a_good_case_has_no_error(case, tmp_path, monkeypatch, capsys):
    findings = _findings(case, tmp_path, monkeypatch, capsys)
    errors = [(f["resource"], f["rule"], f["message"]) for f in findings if _is_error(f)]
    assert errors == [], f"{case}: false alarms on a correct upstream manifest"


@pytest.mark.parametrize("case", BAD)
def test_a_bad_case_is_caught_as_expected(case, tmp_path, monkeypatch, capsys):
    entry = EXPECTED[case]
    findings = _findings(case, tmp_path, monkeypatch, capsys)
    errors = _errors(findings)
    warned = {f["rule"] for f in findings if f["severity"] == "warning"}
    reported = errors | warned
    expected_errors = {rule for rule in entry["expect_error_rules"] if (case, rule) not in SEVERITY_DISAGREEMENTS}
    held_to_warning = {rule for rule in entry["expect_error_rules"] if (case, rule) in SEVERITY_DISAGREEMENTS}
    assert sorted(held_to_warning - (warned - errors)) == [], f"{case}: {SEVERITY_DISAGREEMENTS}"
    missing_errors = sorted(expected_errors - errors)
    missing_warnings = sorted(set(entry.get("expect_warning_rules", [])) - reported)
    assert (missing_errors, missing_warnings) == ([], []), f"{case}: not caught as EXPECTED.json says"


def test_each_severity_disagreement_names_an_expected_error_rule():
    for case, rule in SEVERITY_DISAGREEMENTS:
        assert rule in EXPECTED[case]["expect_error_rules"], (case, rule)


def test_every_case_folder_is_scored():
    folders = {p.name for p in CORPUS.iterdir() if p.is_dir() and p.name.startswith(("good-", "bad-"))}
    assert folders == set(EXPECTED), "a corpus folder without an EXPECTED.json entry, or the reverse"
    assert GOOD and BAD
