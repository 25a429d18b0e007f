"""Assemble a Report from two renders: pair objects, then add each environment's impact."""

from __future__ import annotations

from ..model import Environment
from . import impact, notices
from .masking import mask_names
from .model import ADDED, CHANGED, REMOVED, EnvironmentDiff, Figure, Report, Side
from .notices.catalogue import CATALOGUE
from .pairing import pair


def build_report(
    base: Side,
    base_envs: list[Environment],
    head: Side,
    head_envs: list[Environment],
    context: int = 3,
    unchanged: list[str] = (),
) -> Report:
    """`unchanged`: environments not rendered, as their inputs are the same on both sides (no changes;
    their figures are not known, None)."""
    changes = pair(base_envs, head_envs, context)
    before = {e.name: e for e in base_envs}
    after = {e.name: e for e in head_envs}
    environments = []
    for name in sorted(before.keys() | after.keys() | set(unchanged)):
        if name in unchanged and name not in before and name not in after:
            unknown = (Figure(None, None), Figure(None, None), Figure(None, None))
            diff = EnvironmentDiff(name=name, status="")
            diff.mpijob_gpus, diff.gpu_quota, diff.gpu_capacity = unknown
            environments.append(diff)
            continue
        env_changes = [change for change in changes if change.key.env == name]
        status = ADDED if name not in before else REMOVED if name not in after else CHANGED if env_changes else ""
        diff = EnvironmentDiff(name=name, status=status, changes=env_changes)
        diff.mpijob_gpus, diff.gpu_quota, diff.gpu_capacity = impact.figures(before.get(name), after.get(name))
        if env_changes:
            scope = notices.Context(name, before.get(name), after.get(name), env_changes)
            diff.notices = notices.notices(scope, diff.gpu_quota, diff.gpu_capacity)
        environments.append(diff)
    _once_per_report(environments)
    return mask_names(Report(base=base, head=head, environments=environments))


def _once_per_report(environments: list[EnvironmentDiff]) -> None:
    """Keep the first notice of each once-per-report kind, naming the objects the others were about."""
    first, others = {}, {}
    for environment in environments:
        kept = []
        for notice in environment.notices:
            kind = CATALOGUE.get(notice.id)
            if kind is None or not kind.once_per_report:
                kept.append(notice)
            elif notice.id not in first:
                first[notice.id] = notice
                kept.append(notice)
            else:
                others.setdefault(notice.id, []).append(f"{notice.resource} in {environment.name}")
        environment.notices = kept
    for notice_id, also in others.items():
        notice = first[notice_id]
        notice.message += f" The same holds for {', '.join(also)} (shown once for the whole change)."
