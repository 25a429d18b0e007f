"""docs/rules.md is generated from the rule registry; this fails when the two drift apart."""

from __future__ import annotations

from conftest import REPO

from gitops_tools import rules  # noqa: F401  (registers the catalogue)
from gitops_tools.rules import docs
from gitops_tools.validate import pipeline  # noqa: F401  (registers the stages' rules)

DOCUMENT = REPO / "docs" / "rules.md"
REGENERATE = "scripts/validate --list-rules --format markdown > docs/rules.md"


def test_rules_document_is_up_to_date():
    assert DOCUMENT.read_text() == docs.document("markdown"), f"docs/rules.md is stale; run: {REGENERATE}"


def test_every_rule_has_an_entry():
    text = DOCUMENT.read_text()
    for rule in rules.all_rules():
        assert f"\n### {rule.id}\n" in text and f"(#{rule.id})" in text, rule.id
