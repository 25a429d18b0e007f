"""validate as a pipeline: plan, then lint while the load stage renders, then schemas and rules,
settled into one result."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import platform, rules  # noqa: F401  (importing rules registers the catalogue)
from ..errors import InputError
from ..locate import Locator
from ..model import Scope
from ..rules.registry import Finding
from ..schemas import SchemaChecker, SchemaStore
from . import runner
from .lint import lint
from .load import load
from .plan import plan
from .schemas import check_schemas

# The repository this copy of the tools belongs to: its platform.yaml pins the schemas when
# validate runs on files outside any repository.
_OWN_REPOSITORY = Path(__file__).resolve().parents[3]


@dataclass
class Options:
    paths: list[Path] = field(default_factory=list)
    envs: list[str] | None = None
    cluster_config: Path | None = None
    schema_dir: Path | None = None
    kubernetes_version: str | None = None


def _schema_sources(root: Path) -> dict:
    for candidate in (root, _OWN_REPOSITORY):
        if (candidate / platform.FILE).is_file():
            return platform.load(candidate)["schemas"]
    raise InputError(f"{root}: no {platform.FILE} with the pinned schema URLs (run validate inside the repository)")


def evaluate(
    scopes: list[Scope],
    checker: SchemaChecker,
    locator: Locator,
    notes: list[str] = (),
    lint_findings: list[Finding] = (),
    progress=lambda line: None,
) -> runner.Result:
    """Schemas and rules over loaded scopes, settled into a result."""
    schema_findings, schema_notes = check_schemas(scopes, checker, progress)
    result = runner.Result(
        notes=[*notes, *schema_notes],
        environments=[s.env or "inputs" for s in scopes],
        objects=sum(len(s.objects) + (1 if s.cluster_config else 0) for s in scopes),
    )
    runner.settle(Scope("", []), list(lint_findings), locator, result)
    for index, scope in enumerate(scopes):
        findings, rule_notes = runner.check_scope(scope)
        result.notes.extend(rule_notes)
        runner.settle(scope, schema_findings.get(index, []) + findings, locator, result)
    progress(f"rules: {len(scopes)} environment{'s' if len(scopes) != 1 else ''} checked")
    runner.sort(result)
    return result


def validate(options: Options, progress=lambda line: None) -> runner.Result:
    chosen = plan(options.paths, options.envs)
    sources = list(chosen.sources)
    if options.cluster_config is not None and options.cluster_config.is_file():
        sources.append(options.cluster_config)
    with ThreadPoolExecutor(max_workers=1) as background:
        # kustomize runs in subprocesses while this thread lints: both cores stay busy.
        loading = background.submit(load, chosen, options.cluster_config, options.kubernetes_version, progress)
        try:
            lint_findings = lint(sources, chosen.root, progress)
        except BaseException:
            loading.cancel()
            raise
        scopes, notes = loading.result()
    checker = SchemaChecker(SchemaStore(_schema_sources(chosen.root), schema_dir=options.schema_dir))
    return evaluate(scopes, checker, Locator(chosen.root), notes, lint_findings, progress)
