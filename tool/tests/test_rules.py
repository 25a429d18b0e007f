"""Every rule against its failing and passing cases, and the catalogue's own well-formedness."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from rule_cases import CASES, FAIL, PASS
from world import World

from eks_gpu_gitops import rules
from eks_gpu_gitops.render.locate import Locator
from eks_gpu_gitops.rules import registry
from eks_gpu_gitops.rules.registry import CONSEQUENCES, Finding, Rule, register
from eks_gpu_gitops.validate import pipeline


def evaluate(world: World, checker, tmp_path):
    return pipeline.evaluate([world.scope()], checker, Locator(tmp_path))


def run_case(case, checker, tmp_path):
    world = World()
    files = case.change(world)
    if files is None:
        return evaluate(world, checker, tmp_path)
    paths = []
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    return pipeline.validate(pipeline.Options(paths=paths))


def where(finding) -> tuple[str, str]:
    """(object, field path) of a finding; (\"\", file:line) for one about a file."""
    if finding.resource:
        return finding.resource, finding.path
    return "", f"{Path(finding.file).name}:{finding.line}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case, checker, tmp_path, in_repo):
    result = run_case(case, checker, tmp_path)
    fired = [f for f in result.findings if f.rule == case.rule]
    assert sorted(where(f) for f in fired) == sorted(case.expect), [(f.resource, f.path, f.message) for f in fired]
    assert all(f.message and f.remediation for f in fired)


def test_every_rule_has_failing_and_passing_cases():
    covered = {(c.rule, c.outcome) for c in CASES}
    # Runner-stage rules report a failing check function; test_a_failing_rule_fails_the_run covers them.
    catalogue = [r for r in rules.all_rules() if r.stage != "runner"]
    missing = [f"{r.id} ({outcome})" for r in catalogue for outcome in (FAIL, PASS) if (r.id, outcome) not in covered]
    assert not missing, "rules without cases: " + ", ".join(missing)
    unknown = sorted({c.rule for c in CASES} - set(rules.REGISTRY))
    assert not unknown, f"cases for unknown rules: {unknown}"


def test_fixture_environment_is_clean(checker, tmp_path):
    result = evaluate(World(), checker, tmp_path)
    assert [(f.rule, f.message) for f in result.findings] == []
    assert result.notes == []


def test_catalogue_is_well_formed():
    for rule in rules.all_rules():
        assert rule.remediation.endswith("."), rule.id
        assert "\n" not in rule.description and rule.docs, rule.id


def test_every_rule_states_its_premise_and_a_severity_its_consequence_gives():
    for rule in rules.all_rules():
        assert rule.premise.endswith("."), rule.id
        severity, _ = CONSEQUENCES[rule.consequence]
        assert rule.stage == "source" or rule.severity == severity, rule.id
    errors = {r.consequence for r in rules.all_rules() if r.severity == "error" and r.stage != "source"}
    assert errors <= {"api-server", "flux", "eksctl", "ec2", "job", "unverified"}


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"id": "NoKebab"}, "kebab-case"),
        ({"id": "gpu-slots-mismatch"}, "duplicate"),
        ({"remediation": "Do this"}, "period"),
        ({"severity": "fatal"}, "severity"),
        ({"requires": ("kubeconfig",)}, "context"),
        ({"category": "Networking"}, "category 'Networking' is not one of the catalogue's"),
        ({"premise": ""}, "premise must be one line ending with a period"),
        ({"consequence": ""}, "consequence '' is not one of the policy's"),
        ({"consequence": "cost"}, "severity error does not follow from consequence 'cost'"),
        ({"severity": "warning"}, "severity warning does not follow from consequence 'job'"),
    ],
)
def test_registry_rejects_bad_rules(change, problem):
    fields = {
        "id": "example-rule",
        "severity": "error",
        "description": "Something is off",
        "remediation": "Fix it.",
        "docs": "Why.",
        "category": "GPUs",
        "check": lambda scope: [],
        "premise": "A pod requests GPUs.",
        "consequence": "job",
    }
    with pytest.raises(ValueError, match=problem):
        register(Rule(**{**fields, **change}))


def test_latest_image_is_a_warning_in_every_environment(checker, tmp_path):
    """The catalogue no longer reads the environment's name; a repository raises the rule in its configuration."""
    severities = {}
    for env in ("prod", "production", "prod-eu", "dev", ""):
        world = World()
        world.env = env
        world.container("Worker")["image"] = "trainer:latest"
        found = [f for f in evaluate(world, checker, tmp_path).findings if f.rule == "image-tag-latest"]
        severities[env] = {f.severity for f in found}
    assert severities == dict.fromkeys(("prod", "production", "prod-eu", "dev", ""), {"warning"})


def test_suppression_with_reason_reports_skipped(checker, tmp_path):
    world = World()
    world.mpijob["spec"]["slotsPerWorker"] = 16  # two ranks per GPU
    world.launcher_command[world.launcher_command.index("-np") + 1] = "32"
    world.mpijob["metadata"]["annotations"] = {"validate.gitops/ignore-gpu-slots-mismatch": "benchmark of 4 ranks"}
    result = evaluate(world, checker, tmp_path)
    assert not [f for f in result.findings if f.rule == "gpu-slots-mismatch"]
    assert [(f.rule, f.reason) for f in result.skipped] == [("gpu-slots-mismatch", "benchmark of 4 ranks")]
    assert result.exit_code() == 0


def test_suppression_without_reason_suppresses_nothing(checker, tmp_path):
    world = World()
    world.mpijob["spec"]["slotsPerWorker"] = 16
    world.mpijob["metadata"]["annotations"] = {"validate.gitops/ignore-gpu-slots-mismatch": ""}
    result = evaluate(world, checker, tmp_path)
    assert {"gpu-slots-mismatch", "suppression-invalid"} <= {f.rule for f in result.findings}
    assert result.skipped == []


def test_rules_needing_absent_context_are_skipped_and_named(checker, tmp_path):
    world = World()
    world.cluster, world.complete, world.flux = None, False, False
    result = evaluate(world, checker, tmp_path)
    notes = "\n".join(result.notes)
    for rule in rules.all_rules():
        if rule.requires:
            assert rule.id in notes, rule.id
    assert "--cluster-config" in notes


def test_newer_kubernetes_than_known_is_a_warning(checker, tmp_path):
    world = World()
    world.cluster["metadata"]["version"] = "1.40"
    found = [f for f in evaluate(world, checker, tmp_path).findings if f.rule == "eks-version-unsupported"]
    assert [f.severity for f in found] == ["warning"]


def test_schemas_follow_the_cluster_version(checker, tmp_path):
    """A field added in a later Kubernetes release is unknown to the earlier schema."""
    world = World()
    plugin = world.daemonset("nvidia")["spec"]["template"]["spec"]
    plugin["hostnameOverride"] = "plugin"  # a PodSpec field new in Kubernetes 1.34
    new = {f.rule for f in evaluate(world, checker, tmp_path).findings}
    world.cluster["metadata"]["version"] = "1.33"
    old = [f for f in evaluate(world, checker, tmp_path).findings if f.rule == "schema-invalid"]
    assert "schema-invalid" not in new
    assert old and "hostnameOverride" in old[0].message


def test_a_failing_rule_fails_the_run(checker, tmp_path, monkeypatch):
    """Outside tests (no GITOPS_DEBUG) a rule that raises becomes a rule-failed error, never a pass."""
    monkeypatch.delenv("GITOPS_DEBUG")
    clean = evaluate(World(), checker, tmp_path)
    assert "rule-failed" not in {f.rule for f in clean.findings} and clean.exit_code() == 0

    def broken(scope):
        raise KeyError("spec")
        yield  # a generator, like the real checks

    monkeypatch.setitem(
        rules.REGISTRY, "gpu-slots-mismatch", dataclasses.replace(rules.REGISTRY["gpu-slots-mismatch"], check=broken)
    )
    result = evaluate(World(), checker, tmp_path)
    failed = [f for f in result.findings if f.rule == "rule-failed"]
    assert len(failed) == 1 and "gpu-slots-mismatch" in failed[0].message and result.exit_code() == 1
    assert any("gpu-slots-mismatch could not finish" in note for note in result.notes)


def test_a_category_decorator_for_an_unknown_category_fails_at_import():
    with pytest.raises(ValueError, match="category 'Networking' is not one of the catalogue's"):
        registry.category("Networking")


def test_the_registry_stamps_each_finding_with_its_rules_id(checker, tmp_path):
    """Checks yield findings without an id; what reaches the report carries the rule's."""
    world = World()
    world.mpijob["spec"]["slotsPerWorker"] = 16
    rule = rules.REGISTRY["gpu-slots-mismatch"]
    raw = list(rule.check(world.scope()))
    assert [f.rule for f in raw] == [""]
    assert [f.rule for f in rule.run(world.scope())] == ["gpu-slots-mismatch"]
    assert rules.REGISTRY["yaml-lint"].finding(None, "x", file="a.yaml", line=3) == Finding(
        None, "x", (), None, "a.yaml", 3
    )


def imports(module: Path) -> set[str]:
    """What a module of eks_gpu_gitops imports from the package, as dotted names relative to it."""
    import ast

    package = module.parent.relative_to(Path(rules.__file__).parents[1]).parts
    found = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(package[: len(package) - node.level + 1])
            if node.module:
                found.add(".".join([*base, node.module]))
            else:
                found.update(".".join([*base, alias.name]) for alias in node.names)
    return found


FACTS = {"facts", "facts.catalog", "facts.eks", "facts.fsx"}  # tables of AWS facts every layer may read


def test_rule_modules_import_only_the_model_the_registry_and_the_facts():
    """The layering the catalogue relies on: a rule module imports the model, the registry and the facts
    tables, never another rule module; the runner and the report import no rule module."""
    package = Path(rules.__file__).parent
    for module in sorted(package.glob("*.py")):
        if module.name == "__init__.py":
            continue
        for name in imports(module):
            allowed = (
                name == "model"
                or name.startswith("model.")
                or name in FACTS
                or name == "rules.registry"
                or name == "core.errors"
            )
            assert allowed, f"rules/{module.name} imports {name}"
    for name in ("runner.py", "report.py"):
        found = {n for n in imports(package.parent / "validate" / name) if n.startswith("rules")}
        assert found <= {"rules.registry"}, (name, found)


@pytest.mark.parametrize(
    "storage, rule, severity, message",
    [
        ("1000Gi", "fsx-capacity-rounded-up", "warning", "creates (and bills) 1200 GiB"),
        ("3600Gi", "fsx-capacity-rounded-up", "warning", "creates (and bills) 4800 GiB"),
        ("2500G", "fsx-capacity-rounded-up", "warning", "creates (and bills) 2400 GiB"),
        ("1.2TB-ish", "fsx-capacity-invalid", "error", "not a positive size"),
    ],
)
def test_fsx_size_the_driver_rounds_up_is_a_warning_naming_its_size(
    checker, tmp_path, storage, rule, severity, message
):
    """A size the driver rounds up (a warning of its own rule since the severity policy) and one the API server
    refuses (an error)."""
    world = World()
    world.claim["spec"]["resources"]["requests"]["storage"] = storage
    found = [f for f in evaluate(world, checker, tmp_path).findings if f.rule.startswith("fsx-capacity")]
    assert [(f.rule, f.severity) for f in found] == [(rule, severity)]
    assert message in found[0].message


def test_custom_resource_without_a_schema_is_a_warning(checker, tmp_path):
    from rule_cases import _widget

    world = World()
    widget = _widget()
    widget["metadata"]["annotations"] = {"validate.gitops/ignore-crd-not-installed": "the widget chart installs it"}
    world.add("training", widget)
    result = evaluate(world, checker, tmp_path)
    found = [f for f in result.findings if f.rule == "schema-missing"]
    assert [(f.resource, f.severity) for f in found] == [("Widget/training/w", "warning")]
    assert result.exit_code() == 0 and result.exit_code(strict=True) == 1


_TRAILING_SPACES = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast   \n"


def _repository(at: Path, yamllint: str) -> Path:
    """A repository made by the template, as far as validate tells: clusters/, overlays/, its .yamllint."""
    for folder in ("clusters", "overlays"):
        (at / folder).mkdir(parents=True)
    (at / ".yamllint").write_text(yamllint)
    (at / "overlays" / "settings.yaml").write_text(_TRAILING_SPACES)
    return at / "overlays" / "settings.yaml"


def _lint_findings(path: Path) -> list[tuple[str, int, str]]:
    result = pipeline.validate(pipeline.Options(paths=[path]))
    return [(Path(f.file).name, f.line, f.severity) for f in result.findings if f.rule == "yaml-lint"]


@pytest.mark.parametrize("where", ["repository", "other repository", "outside"])
def test_yamllint_uses_the_config_of_the_files_own_repository_wherever_validate_runs(tmp_path, monkeypatch, where):
    strict = _repository(tmp_path / "strict", "extends: default\n")
    lenient = _repository(tmp_path / "lenient", "extends: default\nrules:\n  trailing-spaces: disable\n")
    (tmp_path / "elsewhere").mkdir()
    cwd = {"repository": strict.parents[1], "other repository": lenient.parents[1], "outside": tmp_path / "elsewhere"}
    monkeypatch.chdir(cwd[where])
    assert _lint_findings(strict) == [("settings.yaml", 7, "error")]
    assert _lint_findings(lenient) == []


def test_yamllint_outside_a_repository_counts_no_style_even_inside_one(tmp_path, in_repo):
    loose = tmp_path / "settings.yaml"
    loose.write_text(_TRAILING_SPACES)
    assert _lint_findings(loose) == []
    loose.write_text(_TRAILING_SPACES + "  mode: slow\n")
    assert _lint_findings(loose) == [("settings.yaml", 8, "error")]
