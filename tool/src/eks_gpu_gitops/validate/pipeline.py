"""validate as a pipeline: plan, then lint while the load stage renders, then schemas and rules,
settled into one result."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .. import rules  # noqa: F401  (importing rules registers the catalogue)
from ..core.errors import InputError
from ..model import Scope
from ..render import platform
from ..render import repository as render
from ..render.locate import Locator
from ..rules.registry import Finding
from ..schemas.store import SchemaStore
from . import config, runner
from .lint import Background
from .load import load
from .plan import plan
from .results_cache import Part, ResultsCache, merge

if TYPE_CHECKING:
    from ..schemas.checker import SchemaChecker


@dataclass
class Options:
    paths: list[Path] = field(default_factory=list)
    envs: list[str] | None = None
    cluster_config: Path | None = None
    schema_dir: Path | None = None
    kubernetes_version: str | None = None
    config: Path | None = None  # --config FILE; None: the one found as config.find says, if any


def evaluate(
    scopes: list[Scope],
    checker: SchemaChecker,
    locator: Locator,
    notes: list[list[str]] | None = None,
    lint_findings: list[Finding] = (),
    progress=lambda line: None,
) -> runner.Result:
    """Schemas and rules over loaded scopes, with the lint findings, settled into one result."""
    result = merge(check_parts(scopes, checker, locator, notes, progress), _settled_lint(lint_findings, locator))
    runner.sort(result)
    return result


def _settled_lint(lint_findings: list[Finding], locator: Locator) -> runner.Result:
    settled = runner.Result()
    runner.settle(Scope("", []), list(lint_findings), locator, settled)
    return settled


def check_parts(
    scopes: list[Scope],
    checker: SchemaChecker,
    locator: Locator,
    notes: list[list[str]] | None = None,
    progress=lambda line: None,
) -> list[Part]:
    """Schemas and rules over loaded scopes: what each environment adds to the result (`notes`: each
    scope's notes from the load stage)."""
    from .schemas import check_schemas  # jsonschema and kubernetes-validate: only when something is checked

    notes = notes or [[] for _ in scopes]
    schema_findings, schema_notes = check_schemas(scopes, checker, progress)
    parts = []
    for index, scope in enumerate(scopes):
        findings, rule_notes = runner.check_scope(scope)
        settled = runner.Result()
        runner.settle(scope, schema_findings.get(index, []) + findings, locator, settled)
        stage_notes = {"load": notes[index], "schemas": schema_notes.get(index, []), "rules": rule_notes}
        objects = len(scope.objects) + (1 if scope.cluster_config else 0)
        parts.append(Part(scope.env, settled.findings, settled.skipped, stage_notes, objects))
    progress(f"rules: {len(scopes)} environment{'s' if len(scopes) != 1 else ''} checked")
    return parts


def validate(options: Options, progress=lambda line: None) -> runner.Result:
    chosen = plan(options.paths, options.envs)
    # Read (or refused) before anything is rendered; applied to the settled result, after the results cache.
    configuration = config.configured(options.config, chosen.root)
    if configuration is not None:
        chosen = configuration.narrow(chosen)
    sources = list(chosen.sources)
    if options.cluster_config is not None and options.cluster_config.is_file():
        sources.append(options.cluster_config)
    store = SchemaStore(platform.schema_sources(chosen.root), schema_dir=options.schema_dir)
    # In a repository, an environment whose inputs did not change since a run kept its results is not
    # rendered or checked again.
    names, keys, kept, results = [], {}, {}, None
    todo = chosen
    if chosen.repository and options.cluster_config is None:
        results = ResultsCache(chosen.root, store, options.kubernetes_version)
        names = chosen.envs or render.environment_names(chosen.root)
        keys = results.keys(names)
        kept = {env: part for env in names if (part := results.get(keys[env])) is not None}
        todo = replace(chosen, envs=[env for env in names if env not in kept])
        if kept:
            progress(f"results of {len(kept)} unchanged environment{'s' if len(kept) != 1 else ''} from the cache")
    linting = Background(sources, chosen.root)  # yamllint in a forked copy while this process renders
    try:
        try:
            loaded = ([], [])
            if todo.envs != []:  # [] only when the cache kept every environment
                loaded = load(todo, options.cluster_config, options.kubernetes_version, progress)
        except InputError:
            linting.result(lambda line: None)  # a file that is not YAML at all: yamllint's line says it best
            raise
        lint_findings = linting.result(progress)
    finally:
        linting.stop()
    scopes, notes = loaded
    locator = Locator(chosen.root)
    parts = []
    if scopes:
        # The schema libraries load only when there is something to check (not when every result is kept).
        from ..schemas.checker import SchemaChecker

        parts = check_parts(scopes, SchemaChecker(store), locator, notes, progress)
    if results is not None:
        # The environments just rendered: their keys from what this render read (kept by the render).
        rendered = [scope.env for scope in scopes if keys.get(scope.env) is None]
        keys.update(results.keys(rendered) if rendered else {})
        # Not kept: an environment a chart of which could not be fetched (the next run may get it).
        unsettled = {scope.env for scope in scopes if any(release.retry for release in scope.releases)}
        for part in parts:
            if part.env not in unsettled:
                results.put(keys.get(part.env), part)
        fresh = {part.env: part for part in parts}
        parts = [kept.get(env) or fresh[env] for env in names]
    result = merge(parts, _settled_lint(lint_findings, locator))
    runner.sort(result)
    return configuration.apply(result) if configuration is not None else result
