"""Every notice of diff's catalogue against a case that gives it and one that does not; the
catalogue's own well-formedness (its document: test_docs.py)."""

from __future__ import annotations

import dataclasses

import pytest
from notice_cases import CASES, GIVES, NOT

from eks_gpu_gitops.diff.model import Side
from eks_gpu_gitops.diff.notices import catalogue
from eks_gpu_gitops.diff.report import build_report


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case):
    base, head = case.make()
    side = Side("x", "x", "x")
    report = build_report(side, base, side, head)
    given = [notice for _, notice in report.notices if notice.id == case.notice]
    assert [n.resource for n in given] == case.expect, [(n.id, n.resource, n.message) for _, n in report.notices]
    kind = catalogue.CATALOGUE[case.notice]
    assert all((n.severity, n.title) == (kind.severity, kind.title) and n.message for n in given)


def test_every_notice_has_a_case_that_gives_it_and_one_that_does_not():
    covered = {(c.notice, c.outcome) for c in CASES}
    missing = [f"{k.id} ({o})" for k in catalogue.all_kinds() for o in (GIVES, NOT) if (k.id, o) not in covered]
    assert not missing, "notices without cases: " + ", ".join(missing)
    assert {c.notice for c in CASES} <= set(catalogue.CATALOGUE), "cases for unknown notices"


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"id": "Loss"}, "kebab-case"),
        ({"id": "claim-deleted"}, "duplicate"),
        ({"severity": "error"}, "severity"),
        ({"title": "data loss."}, "title"),
        ({"description": ""}, "description"),
        ({"docs": " "}, "docs"),
    ],
)
def test_the_catalogue_rejects_bad_notices(change, problem):
    fields = {
        "id": "example-notice",
        "severity": "info",
        "title": "example",
        "description": "An example",
        "docs": "Why.",
    }
    fields.update(change)
    with pytest.raises(ValueError, match=problem):
        catalogue.notice_kind(fields.pop("id"), fields.pop("severity"), **fields)
    assert "example-notice" not in catalogue.CATALOGUE


def test_a_notice_carries_its_kinds_id_severity_and_title():
    kind = catalogue.CATALOGUE["job-stops"]
    notice = kind.notice("MPIJob t/train", "stops")
    assert dataclasses.astuple(notice) == ("warning", "MPIJob t/train", "job stops", "stops", "job-stops")
