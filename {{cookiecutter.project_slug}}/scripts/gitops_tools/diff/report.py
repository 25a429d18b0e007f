"""Assemble a Report from two renders: pair objects, then add each environment's impact."""

from __future__ import annotations

from ..model import Environment
from . import impact, notices
from .model import ADDED, CHANGED, REMOVED, EnvironmentDiff, Report, Side
from .pairing import pair


def build_report(
    base: Side, base_envs: list[Environment], head: Side, head_envs: list[Environment], context: int = 3
) -> Report:
    changes = pair(base_envs, head_envs, context)
    before = {e.name: e for e in base_envs}
    after = {e.name: e for e in head_envs}
    environments = []
    for name in sorted(before.keys() | after.keys()):
        env_changes = [change for change in changes if change.key.env == name]
        status = ADDED if name not in before else REMOVED if name not in after else CHANGED if env_changes else ""
        diff = EnvironmentDiff(name=name, status=status, changes=env_changes)
        diff.mpijob_gpus, diff.gpu_quota, diff.gpu_capacity = impact.figures(before.get(name), after.get(name))
        if env_changes:
            scope = notices.Context(name, before.get(name), after.get(name), env_changes)
            diff.notices = notices.notices(scope, diff.gpu_quota, diff.gpu_capacity)
        environments.append(diff)
    return Report(base=base, head=head, environments=environments)
