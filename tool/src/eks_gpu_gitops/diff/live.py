"""diff --live: what applying the working tree's environments would change on the cluster. Each object's
server-side apply dry run (live/server_apply.py) is compared with the live object, and what Flux would prune
shows as removed."""

from __future__ import annotations

from pathlib import Path

from ..core.credentials import mask_text
from ..live.cluster import connect
from ..live.server_apply import comparable, dry_run, pruned
from ..model import Environment, FluxKustomization, Manifest
from ..render.repository import render_repository, repository_root
from . import impact
from .masking import mask_names
from .model import ADDED, CHANGED, REMOVED, EnvironmentDiff, Key, ObjectChange, Report, Side
from .pairing import unified


def live_report(envs: list[str] | None, context: str | None, lines: int = 3):
    """diff --live: a diff Report of each environment's dry-run results against the live objects."""
    root = repository_root(Path.cwd())
    environments = render_repository(root, envs)
    cluster = connect(context)
    report = Report(
        base=Side(label=f"cluster {cluster.context} ({cluster.server})", ref=cluster.context, commit=""),
        head=Side(label="working tree", ref="", commit=""),
        environments=[],
    )
    problems = []
    for environment in environments:
        diff, refused = environment_diff(cluster.api, environment, lines)
        report.environments.append(diff)
        problems.extend(refused)
    return mask_names(report), problems


def environment_diff(api, environment: Environment, lines: int = 3):
    """(EnvironmentDiff of the dry-run results against the live objects, lines about refused objects)."""
    run = dry_run(api, environment)
    problems = [f"{run.env}: {o.manifest.resource}: {mask_text(o.error)}" for o in run.outcomes if o.error]
    changes = []
    for outcome in run.outcomes:
        if outcome.result is None:
            continue
        before, after = comparable(outcome.live), comparable(outcome.result)
        if before == after:
            continue
        text, additions, deletions = unified(before, after, lines)
        status = ADDED if before is None else CHANGED
        changes.append(
            ObjectChange(Key.of(outcome.manifest), status, None, outcome.manifest, text, additions, deletions)
        )
    live = [Manifest(o.live, o.manifest.file, run.env, o.kustomization) for o in run.outcomes if o.live]
    for kustomization, item in pruned(api, environment):
        gone = Manifest(item, "", environment.name, kustomization)
        live.append(gone)
        text, additions, deletions = unified(comparable(item), None, lines)
        changes.append(ObjectChange(Key.of(gone), REMOVED, gone, None, text, additions, deletions))
    diff = EnvironmentDiff(environment.name, CHANGED if changes else "", changes)
    # The impact figures of the live objects against what applying leaves (refused objects as they are).
    after = [Manifest(o.result or o.live or o.sent, o.manifest.file, run.env, o.kustomization) for o in run.outcomes]
    diff.mpijob_gpus, diff.gpu_quota, diff.gpu_capacity = impact.figures(
        _holding(run.env, live, environment.cluster_config), _holding(run.env, after, environment.cluster_config)
    )
    return diff, problems


def _holding(name: str, objects: list[Manifest], cluster_config: Manifest | None) -> Environment:
    return Environment(name, [FluxKustomization(Manifest({}, "", name, ""), "", objects=objects)], cluster_config)
