"""The tool's reference documents are generated from its catalogues and parsers; this fails when one drifts
from what the installed code says (`make docs` in the template writes them again)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eks_gpu_gitops import rules
from eks_gpu_gitops.cli import reference
from eks_gpu_gitops.diff.notices import catalogue
from eks_gpu_gitops.rules import docs
from eks_gpu_gitops.validate import pipeline  # noqa: F401  (registers the stages' rules)

DOCS = Path(__file__).resolve().parent.parent / "docs"
GENERATED = {
    "rules.md": lambda: docs.document("markdown"),
    "diff-notices.md": lambda: catalogue.document("markdown"),
    "commands.md": reference.document,
}


@pytest.mark.parametrize("name", GENERATED)
def test_document_is_up_to_date(name):
    assert (DOCS / name).read_text() == GENERATED[name](), f"docs/{name} is stale; run `make docs` in the template"


def test_every_rule_has_an_entry():
    text = (DOCS / "rules.md").read_text()
    for rule in rules.all_rules():
        assert f"\n### {rule.id}\n" in text and f"(#{rule.id})" in text, rule.id


def test_every_notice_has_an_entry():
    text = (DOCS / "diff-notices.md").read_text()
    for kind in catalogue.all_kinds():
        assert f"\n## {kind.id}\n" in text and f"(#{kind.id})" in text, kind.id


def test_every_verb_has_its_section():
    text = (DOCS / "commands.md").read_text()
    for verb in reference.VERBS:
        assert f"\n## {verb}\n\n```text\nusage: eks-gpu-gitops {verb} " in text, verb
